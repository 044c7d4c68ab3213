/*
 * completer.c - acknowledgements for our own requests.
 *
 * An ACK with PSN n acknowledges every request packet up to n (coalescing;
 * rxe check_ack): each WQE whose last PSN is <= n completes, in order.  A
 * NAK-sequence-error with PSN n acknowledges everything before n.  A NAK
 * for an invalid request, a remote access or a remote operational error
 * completes the WQE it names with the matching status and fails the QP.
 *
 * Not yet here (see docs/DESIGN.md): retransmission.  An RNR NAK or a
 * NAK-sequence-error therefore ends the QP with IBV_WC_RNR_RETRY_EXC_ERR /
 * IBV_WC_RETRY_EXC_ERR at once, as if the retry counts were 0.
 */
#include "core/nic.h"
#include "core/qp.h"
#include "transport/complete.h"
#include "transport/rx.h"
#include "transport/tx.h"
#include "wire/roce_hdr.h"

/* Complete every transmitted WQE whose last PSN is before `upto` (which
 * is one past the newest acknowledged PSN). */
static void ack_upto(struct srn_qp *qp, uint32_t upto)
{
	while (qp->sq_tail != qp->sq_cur) {
		const struct srn_swqe *w = &qp->sq[qp->sq_tail & (qp->sq_size - 1)];
		if (srn_psn_cmp(w->last_psn, upto) >= 0)
			break;
		srn_complete_send(qp, IBV_WC_SUCCESS);
	}
	if (srn_psn_cmp(upto, qp->req_una) > 0)
		qp->req_una = upto;
}

/* A PSN the requester actually sent and has not yet seen acknowledged:
 * req_una - 1 <= psn < req_psn.  Anything else is stale or bogus. */
static bool psn_in_flight(const struct srn_qp *qp, uint32_t psn)
{
	return srn_psn_cmp(psn, srn_psn_add(qp->req_una, SRN_PSN_MASK)) >= 0 &&
	       srn_psn_cmp(psn, qp->req_psn) < 0;
}

static void fail_at(struct srn_qp *qp, uint32_t psn, enum ibv_wc_status st)
{
	ack_upto(qp, psn);
	srn_count(&qp->nic->cnt, SRN_CNT_SEND_ERR, 1);
	if (qp->sq_tail != qp->sq_head) {
		if (qp->sq_tail == qp->sq_cur) {
			qp->sq_cur++;
			qp->sq_cur_started = false;
		}
		srn_complete_send(qp, st);
	}
	srn_qp_fail(qp, SRN_NO_EVENT);
}

void srn_comp_packet(struct srn_qp *qp, const struct srn_pkt *p)
{
	struct srn_nic *nic = qp->nic;
	if (!(p->info->flags & SRN_OPF_ACK) || qp->type != IBV_QPT_RC) {
		/* READ responses and atomic ACKs answer requests this
		 * version does not send. */
		srn_count(&nic->cnt, SRN_CNT_MALFORMED, 1);
		return;
	}
	if (!psn_in_flight(qp, p->psn)) {
		srn_count(&nic->cnt, SRN_CNT_DUPLICATE_REQUEST, 1);
		return;
	}
	srn_count(&nic->cnt, SRN_CNT_ACKS_RCVD, 1);
	uint8_t syn = p->aeth_syndrome;
	switch (srn_aeth_type(syn)) {
	case SRN_AETH_TYPE_ACK:
		ack_upto(qp, srn_psn_add(p->psn, 1));
		break;
	case SRN_AETH_TYPE_RNR:
		srn_count(&nic->cnt, SRN_CNT_RCVD_RNR_ERR, 1);
		fail_at(qp, p->psn, IBV_WC_RNR_RETRY_EXC_ERR);
		return;
	case SRN_AETH_TYPE_NAK:
		switch (syn) {
		case SRN_AETH_NAK_PSN_SEQ:
			srn_count(&nic->cnt, SRN_CNT_RCVD_SEQ_ERR, 1);
			fail_at(qp, p->psn, IBV_WC_RETRY_EXC_ERR);
			return;
		case SRN_AETH_NAK_REM_ACCESS:
			fail_at(qp, p->psn, IBV_WC_REM_ACCESS_ERR);
			return;
		case SRN_AETH_NAK_REM_OP:
			fail_at(qp, p->psn, IBV_WC_REM_OP_ERR);
			return;
		default:
			fail_at(qp, p->psn, IBV_WC_REM_INV_REQ_ERR);
			return;
		}
	default:
		srn_count(&nic->cnt, SRN_CNT_MALFORMED, 1);
		return;
	}
	srn_req_push(qp);
}
