/*
 * direct.h - the requester as the same-host target's NIC: RDMA Write,
 * Read and atomics executed directly in the peer process's registered memory
 * (direct.c; the table it reads is link/direct.h).  Must hold nic->lock.
 */
#ifndef SRN_TRANSPORT_DIRECT_H
#define SRN_TRANSPORT_DIRECT_H

#include <stdbool.h>

struct srn_qp;
struct srn_swqe;

/* Execute the WQE at req.cur directly if it may be (RC, RDMA Write, Read
 * or atomic, a same-host peer whose table says every responder check
 * passes, nothing before it outstanding).  True: done and completed, it
 * took no PSN.  False: send it as packets; either nothing happened, or
 * (Write-with-immediate) its data was placed and w->placed now makes it
 * one zero-payload packet in one PSN that carries the immediate. */
bool srn_direct_try(struct srn_qp *qp, struct srn_swqe *w);

#endif
