/*
 * steer.h - MADs of the other processes behind a shared device address
 * (link/udp_group.h) go to their CM (steer.c).  Must hold srn_cm.lock.
 */
#ifndef SRN_CM_STEER_H
#define SRN_CM_STEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cm/qp1.h"

void srn_cm_steer_open(void);
void srn_cm_steer_close(void);
bool srn_cm_steer_mad(struct srn_cm_dev *d, const uint8_t *mad, size_t len,
		      const uint8_t src_gid[16]);
/* An epoll event's pointer: if it is one of our sockets, hand what other
 * CMs passed to us to deliver and return true. */
bool srn_cm_steer_fired(void *ptr, srn_cm_mad_fn *deliver);

#endif
