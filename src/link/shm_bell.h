/*
 * shm_bell.h - a same-host receiver's doorbell as its eventfd
 * (shm_bell.c).
 */
#ifndef SRN_LINK_SHM_BELL_H
#define SRN_LINK_SHM_BELL_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

/* A copy of descriptor fdnum of the process behind pidfd, if it is an
 * eventfd and we may take it; else -1 (ring by datagram). */
int srn_shm_bell_take(int pidfd, int fdnum);
/* Ring it: false if the write failed (then ring by datagram). */
bool srn_shm_bell_ring(int fd);

#endif
