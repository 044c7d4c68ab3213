/*
 * complete.h - turning work requests into completions, and the error
 * state: every failed work request completes with the status a NIC would
 * give, the QP moves to ERR and everything outstanding is flushed with
 * IBV_WC_WR_FLUSH_ERR.  Must hold nic->lock.
 */
#ifndef SRN_TRANSPORT_COMPLETE_H
#define SRN_TRANSPORT_COMPLETE_H

#include <infiniband/verbs.h>
#include <stdbool.h>

struct srn_qp;
struct srn_swqe;
struct srn_rwqe;

/* Complete the oldest send WQE (sq.tail) with status; a successful
 * unsignaled one produces no CQE. */
void srn_complete_send(struct srn_qp *qp, enum ibv_wc_status status);
/* Complete the current receive WQE (qp->resp.recv). */
/* wc_flags: IBV_WC_WITH_IMM (imm_or_rkey is imm_data, network order) or
 * IBV_WC_WITH_INV (imm_or_rkey is the invalidated rkey) or 0. */
void srn_complete_recv(struct srn_qp *qp, enum ibv_wc_status status, uint32_t byte_len,
		       unsigned wc_flags, uint32_t imm_or_rkey, bool solicited,
		       enum ibv_wc_opcode op);
/* Complete the oldest receive WQE of a UD QP: GRH present, source QP
 * from the DETH. */
void srn_complete_recv_ud(struct srn_qp *qp, uint32_t byte_len, bool with_imm, uint32_t imm_be,
			  bool solicited, uint32_t src_qp);
/* Move the QP to ERR (if not already) and flush both queues.  event is the
 * asynchronous event to raise (IBV_EVENT_QP_REQ_ERR, _ACCESS_ERR, _FATAL)
 * or SRN_NO_EVENT when a completion already reports the error. */
#define SRN_NO_EVENT (-1)
void srn_qp_fail(struct srn_qp *qp, int event);
/* Flush everything outstanding with IBV_WC_WR_FLUSH_ERR (QP in ERR). */
void srn_qp_flush(struct srn_qp *qp);
/* Record why the next error completion of this QP happens. */
void srn_qp_why(struct srn_qp *qp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Raise an asynchronous event for the QP on its context. */
void srn_qp_event(struct srn_qp *qp, enum ibv_event_type type);

#endif
