/*
 * retry.h - go-back-N (requester.c).  Must hold nic->lock.
 */
#ifndef SRN_TRANSPORT_RETRY_H
#define SRN_TRANSPORT_RETRY_H

#include <infiniband/verbs.h>
#include <stdint.h>

struct srn_qp;

/* Resend everything from psn (the oldest unacknowledged PSN): the WQE
 * holding it restarts at that packet; a partly answered READ is asked
 * again for the remainder only. */
void srn_req_rewind(struct srn_qp *qp, uint32_t psn);
/* A retry the retry count pays for (timeout, NAK-sequence, implied NAK;
 * `cause` names which, for the QP's event log and the explanation):
 * rewind, or when the count is spent complete the oldest WQE with
 * RETRY_EXC_ERR and fail the QP. */
/* Give a newly posted WQE its PSNs (one per packet; a READ one per
 * response packet; binds/invalidates none).  Must hold nic->lock. */
struct srn_swqe;
void srn_req_number(struct srn_qp *qp, struct srn_swqe *w);
void srn_req_retry(struct srn_qp *qp, uint32_t psn, const char *cause);

#endif
