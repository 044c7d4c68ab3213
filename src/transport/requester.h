/*
 * requester.h - the requester stage (requester.c): turning send work
 * requests into packets within the window, numbering them, and going back
 * N when the peer or a timer says packets were lost.  Must hold nic->lock.
 */
#ifndef SRN_TRANSPORT_REQUESTER_H
#define SRN_TRANSPORT_REQUESTER_H

#include <infiniband/verbs.h>
#include <stdint.h>
#include <sys/uio.h>

struct srn_pkt;
struct srn_qp;
struct srn_swqe;

/* Transmit what the send queue and the window allow. */
void srn_req_push(struct srn_qp *qp);
/* Give a newly posted WQE its PSNs (one per packet; a READ one per
 * response packet; binds/invalidates none). */
void srn_req_number(struct srn_qp *qp, struct srn_swqe *w);
/* Bytes [off, off+len) of the buffers of WQE w (in the send queue) as up
 * to SRN_MAX_SGE iovecs into registered memory (or the inline copy).
 * -EACCES if an lkey does not resolve: a local protection error. */
int srn_req_gather(struct srn_qp *qp, const struct srn_swqe *w, uint32_t off, uint32_t len,
		   struct iovec *iov, int *niov);
/* Packet pktidx of WQE w as the requester sends it: every header field
 * in *p (its PSN first_psn + pktidx; AckReq by the rule above, `since`
 * counting the packets since the last AckReq, this one included) and its
 * payload as up to SRN_MAX_SGE iovecs into registered memory (or the
 * inline copy).  1 if it is the message's last packet, 0 if not, or
 * -errno (-EACCES: an lkey does not resolve).  Changes nothing: the
 * transmit path sends what it builds, transport/direct_trace.c only
 * records it. */
int srn_req_pkt(struct srn_qp *qp, const struct srn_swqe *w, uint32_t pktidx, uint32_t since,
		struct srn_pkt *p, struct iovec *iov, int *niov);
/* Resend everything from psn (raised to comp.una and to the tail WQE's
 * first PSN if behind them): the tail WQE restarts at that packet; a
 * partly answered READ is asked again for the remainder only. */
void srn_req_rewind(struct srn_qp *qp, uint32_t psn);
/* A retry the retry count pays for (timeout, NAK-sequence, implied NAK;
 * `cause` names which, for the QP's event log and the explanation):
 * rewind, or when the count is spent complete the oldest WQE with
 * RETRY_EXC_ERR and fail the QP. */
void srn_req_retry(struct srn_qp *qp, uint32_t psn, const char *cause);

#endif
