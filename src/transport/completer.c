/*
 * completer.c - what comes back for our own requests: ACKs, NAKs, READ
 * responses and atomic acknowledgements.
 *
 * Everything is matched in order from sq.tail.  An ACK with PSN n
 * acknowledges every request packet up to n (coalescing; rxe check_ack),
 * and so does a READ response or atomic ACK for everything before it.  If
 * such an acknowledgement passes a READ or atomic whose response never
 * came, that response was lost: an implied NAK, resend from there.
 *
 * NAKs: sequence error → go back to its PSN (paid from retry_cnt); RNR →
 * wait the responder's timer, then go back (paid from rnr_retry, 7 =
 * forever); invalid request / remote access / remote operational error →
 * complete the named WQE with that status and fail the QP.
 */
#include <string.h>

#include "core/mr.h"
#include "core/nic.h"
#include "core/qp.h"
#include "diag/names.h"
#include "diag/shm.h"
#include "transport/complete.h"
#include "transport/completer.h"
#include "transport/qp_count.h"
#include "transport/requester.h"
#include "transport/timers.h"
#include "transport/tx.h"
#include "wire/roce_hdr.h"

static struct srn_swqe *tail_wqe(struct srn_qp *qp)
{
	return &qp->sq.wqe[qp->sq.tail & (qp->sq.size - 1)];
}

/* After completions: the requester never stands on (or resends) a WQE
 * that is already complete, nor behind what is acknowledged.  Go-back-N
 * may have put req.cur/req.psn there just before the acknowledgement came. */
static void catch_up(struct srn_qp *qp)
{
	bool moved = false;
	if ((int32_t)(qp->sq.tail - qp->req.cur) > 0) {
		qp->req.cur = qp->sq.tail;
		moved = true;
	}
	if (moved || srn_psn_cmp(qp->req.psn, qp->comp.una) < 0) {
		/* Resume at the oldest unacknowledged PSN.  A WQE sent before
		 * keeps the PSNs it had (the peer may hold part of it): never
		 * let it be numbered afresh. */
		qp->req.psn = qp->comp.una;
		qp->req.cur_started = qp->req.cur != qp->sq.head &&
				     (int32_t)(qp->req.sent_end - qp->req.cur) > 0;
	}
}

static void complete_tail(struct srn_qp *qp, enum ibv_wc_status st)
{
	if (srn_wr_is_rd_atomic(tail_wqe(qp)->opcode) && qp->req.rd_atomic_inflight)
		qp->req.rd_atomic_inflight--;
	srn_complete_send(qp, st);
	catch_up(qp);
}

/* Acknowledge everything before `upto`: complete the SEND/WRITE WQEs that
 * end before it.  Returns false (implied NAK) if a READ/atomic that ends
 * before it is still waiting for its response. */
static bool ack_before(struct srn_qp *qp, uint32_t upto)
{
	/* Every WQE ever started may be acknowledged, also those past req.cur
	 * that go-back-N is about to resend. */
	while ((int32_t)(qp->req.sent_end - qp->sq.tail) > 0) {
		const struct srn_swqe *w = tail_wqe(qp);
		if (srn_psn_cmp(w->last_psn, upto) >= 0) {
			/* A READ/atomic's PSNs are acknowledged only by its own
			 * responses, one by one (on_response): an acknowledgement
			 * of what came before it must not carry comp.una into it,
			 * or a lost response would be skipped. */
			if (srn_wr_is_rd_atomic(w->opcode) && srn_psn_cmp(upto, w->first_psn) > 0)
				upto = w->first_psn;
			break;
		}
		if (srn_wr_is_rd_atomic(w->opcode)) {
			/* Its response was lost (implied NAK); what came before
			 * it is acknowledged all the same. */
			if (srn_psn_cmp(w->first_psn, qp->comp.una) > 0) {
				qp->comp.una = w->first_psn;
				srn_timer_progress(qp);
			}
			catch_up(qp);
			return false;
		}
		complete_tail(qp, IBV_WC_SUCCESS);
	}
	if (srn_psn_cmp(upto, qp->comp.una) > 0) {
		qp->comp.una = upto;
		srn_timer_progress(qp);
	}
	catch_up(qp);
	return true;
}

/* Acknowledgement covering a PSN that an unanswered READ/atomic owns, or
 * a response beyond the one expected.  Once per gap: after going back,
 * later packets of the old stream change nothing until one lands. */
static void implied_nak(struct srn_qp *qp)
{
	if (qp->comp.rewound && qp->comp.rewound_psn == qp->comp.una)
		return;
	srn_count(qp->nic->diag.cnt, SRN_CNT_IMPLIED_NAK, 1);
	srn_req_retry(qp, qp->comp.una, "implied NAK");
}

static void fail_at(struct srn_qp *qp, uint32_t psn, enum ibv_wc_status st)
{
	if (!qp->err_why[0]) {
		char syn[48];
		srn_diag_syndrome_str(qp->comp.ack_from_peer, syn, sizeof(syn));
		srn_qp_why(qp, "the responder answered PSN 0x%06x with %s", psn, syn);
	}
	ack_before(qp, psn);
	srn_count(qp->nic->diag.cnt, SRN_CNT_SEND_ERR, 1);
	if (qp->sq.tail != qp->sq.head) {
		if (qp->sq.tail == qp->req.cur) {
			qp->req.cur++;
			qp->req.cur_started = false;
		}
		complete_tail(qp, st);
	}
	srn_timer_stop(qp);
	srn_qp_fail(qp, SRN_NO_EVENT);
}

/* Copy response bytes [off, off+len) into the WQE's local buffers. */
static int scatter(struct srn_qp *qp, const struct srn_swqe *w, uint32_t off,
		   const uint8_t *src, uint32_t len)
{
	uint32_t idx = qp->sq.tail & (qp->sq.size - 1);
	return srn_sge_copy_in(qp->nic, qp->pd, qp->qpn,
			       qp->sq.sge + (size_t)idx * qp->cap.max_send_sge, w->num_sge, off, src,
			       len);
}

static void on_ack(struct srn_qp *qp, const struct srn_pkt *p)
{
	struct srn_nic *nic = qp->nic;
	uint8_t syn = p->aeth_syndrome;

	/* A NAK names a packet that is not yet acknowledged; one naming an
	 * acknowledged PSN is stale (it was overtaken on the wire by the ACK
	 * for a later attempt) and must not send us back. */
	if (srn_aeth_type(syn) != SRN_AETH_TYPE_ACK && srn_psn_cmp(p->psn, qp->comp.una) < 0) {
		srn_qp_count(qp, SRN_CNT_DUPLICATE_REQUEST, SRN_QPC_DUPLICATE_REQUEST, 1);
		return;
	}
	switch (srn_aeth_type(syn)) {
	case SRN_AETH_TYPE_ACK:
		if (!ack_before(qp, srn_psn_add(p->psn, 1)))
			implied_nak(qp);
		return;
	case SRN_AETH_TYPE_RNR:
		srn_qp_count(qp, SRN_CNT_RCVD_RNR_ERR, SRN_QPC_RCVD_RNR_ERR, 1);
		if (!ack_before(qp, p->psn)) {
			implied_nak(qp);
			return;
		}
		if (qp->comp.rnr_left == 0) {
			srn_qp_why(qp, "RNR NAK for PSN 0x%06x with rnr_retry %u spent: the peer had no "
				   "receive posted (its RNR timer %u us)", p->psn, qp->attr.rnr_retry,
				   srn_rnr_timer_usec(syn & SRN_AETH_VALUE_MASK));
			srn_count(nic->diag.cnt, SRN_CNT_RNR_RETRY_EXCEEDED, 1);
			fail_at(qp, p->psn, IBV_WC_RNR_RETRY_EXC_ERR);
			return;
		}
		if (qp->comp.rnr_left != SRN_RNR_RETRY_INFINITE)
			qp->comp.rnr_left--;
		srn_diag_log(qp->diag, SRN_LOG_INFO, "RNR NAK for PSN 0x%06x: waiting %u us",
			     p->psn, srn_rnr_timer_usec(syn & SRN_AETH_VALUE_MASK));
		srn_timer_rnr(qp, p->psn, syn & SRN_AETH_VALUE_MASK);
		return;
	default:
		break;
	}
	switch (syn) {
	case SRN_AETH_NAK_PSN_SEQ:
		srn_qp_count(qp, SRN_CNT_RCVD_SEQ_ERR, SRN_QPC_RCVD_SEQ_ERR, 1);
		if (!ack_before(qp, p->psn)) {
			implied_nak(qp);
			return;
		}
		if (qp->comp.rewound && qp->comp.rewound_psn == p->psn)
			return;     /* already going back there */
		srn_req_retry(qp, p->psn, "NAK sequence error");
		return;
	case SRN_AETH_NAK_REM_ACCESS:
		srn_count(qp->nic->diag.cnt, SRN_CNT_REQ_REMOTE_ACCESS_ERR, 1);
		srn_diag_qp_count(qp->diag, SRN_QPC_REMOTE_NAKS, 1);
		fail_at(qp, p->psn, IBV_WC_REM_ACCESS_ERR);
		return;
	case SRN_AETH_NAK_REM_OP:
		srn_diag_qp_count(qp->diag, SRN_QPC_REMOTE_NAKS, 1);
		fail_at(qp, p->psn, IBV_WC_REM_OP_ERR);
		return;
	default:
		srn_count(qp->nic->diag.cnt, SRN_CNT_REQ_REMOTE_INVALID_REQ, 1);
		srn_diag_qp_count(qp->diag, SRN_QPC_REMOTE_NAKS, 1);
		fail_at(qp, p->psn, IBV_WC_REM_INV_REQ_ERR);
		return;
	}
}

/* READ response or atomic ACK with PSN p->psn: it must belong to the
 * tail WQE (after the implicit acknowledgements) and be the next one it
 * expects; a later one means responses were lost. */
static void on_response(struct srn_qp *qp, const struct srn_pkt *p)
{
	uint16_t f = p->info->flags;
	if (!ack_before(qp, p->psn)) {
		implied_nak(qp);
		return;
	}
	/* Nothing ever sent owns it.  (Not "sq.tail == req.cur": going back
	 * puts req.cur on the tail while its request is still answered.) */
	if ((int32_t)(qp->req.sent_end - qp->sq.tail) <= 0)
		return;
	if (srn_psn_cmp(p->psn, qp->comp.una) < 0)
		return;                         /* a duplicate of one already taken */
	struct srn_swqe *w = tail_wqe(qp);
	bool is_read = f & SRN_OPF_READ_RESP;
	if (is_read != (w->opcode == IBV_WR_RDMA_READ) ||
	    (!is_read && !srn_wr_is_rd_atomic(w->opcode))) {
		srn_qp_why(qp, "%s answered a request of another kind", srn_opcode_name(p->opcode));
		fail_at(qp, p->psn, IBV_WC_BAD_RESP_ERR);
		return;
	}
	if (p->psn != qp->comp.una) {
		/* A gap in the responses (the expected one was lost). */
		if (srn_psn_cmp(p->psn, qp->comp.una) > 0)
			implied_nak(qp);
		return;
	}
	if ((p->info->hdr_mask & SRN_HDR_AETH) &&
	    srn_aeth_type(p->aeth_syndrome) != SRN_AETH_TYPE_ACK) {
		srn_qp_why(qp, "READ response carrying a NAK syndrome 0x%02x", p->aeth_syndrome);
		fail_at(qp, p->psn, IBV_WC_BAD_RESP_ERR);   /* NAKs come as ACKNOWLEDGE */
		return;
	}
	if (!is_read) {
		uint64_t orig = p->atm_orig;
		int r = scatter(qp, w, 0, (const uint8_t *)&orig, w->length < 8 ? w->length : 8);
		qp->comp.una = srn_psn_add(p->psn, 1);
		srn_timer_progress(qp);
		catch_up(qp);
		complete_tail(qp, r ? IBV_WC_LOC_PROT_ERR : IBV_WC_SUCCESS);
		if (r)
			srn_qp_fail(qp, SRN_NO_EVENT);
		return;
	}
	uint32_t pktidx = srn_psn_diff(p->psn, w->first_psn);
	uint32_t off = pktidx * qp->path.mtu;
	bool last = f & (SRN_OPF_LAST | SRN_OPF_ONLY);
	uint32_t want = w->length - off < qp->path.mtu ? w->length - off : qp->path.mtu;
	/* The response must carry exactly the bytes this PSN stands for. */
	if (off > w->length || p->paylen != want || last != (p->psn == w->last_psn)) {
		srn_qp_why(qp, "READ response PSN 0x%06x carries %u bytes, %u expected", p->psn,
			   p->paylen, want);
		fail_at(qp, p->psn, IBV_WC_BAD_RESP_ERR);
		return;
	}
	if (scatter(qp, w, off, p->payload, p->paylen)) {
		srn_qp_why(qp, "READ response could not be placed: a local buffer's lkey no longer "
			   "resolves with local write");
		fail_at(qp, p->psn, IBV_WC_LOC_PROT_ERR);
		return;
	}
	qp->comp.una = srn_psn_add(p->psn, 1);
	srn_timer_progress(qp);
	if (last)
		complete_tail(qp, IBV_WC_SUCCESS);
	else
		catch_up(qp);
}

/* A PSN the requester actually sent and has not yet seen acknowledged:
 * comp.una - 1 <= psn < req.psn_max.  Anything else is stale or bogus.
 * (req.psn_max, not req.psn: after going back, ACKs for what the peer
 * received before are still news.) */
static bool psn_in_flight(const struct srn_qp *qp, uint32_t psn)
{
	return srn_psn_cmp(psn, srn_psn_add(qp->comp.una, SRN_PSN_MASK)) >= 0 &&
	       srn_psn_cmp(psn, qp->req.psn_max) < 0;
}

void srn_comp_packet(struct srn_qp *qp, const struct srn_pkt *p)
{
	struct srn_nic *nic = qp->nic;
	if (!srn_qp_reliable(qp)) {
		srn_count(nic->diag.cnt, SRN_CNT_MALFORMED, 1);
		return;
	}
	if (!psn_in_flight(qp, p->psn)) {
		srn_qp_count(qp, SRN_CNT_DUPLICATE_REQUEST, SRN_QPC_DUPLICATE_REQUEST, 1);
		return;
	}
	srn_count(nic->diag.cnt, SRN_CNT_ACKS_RCVD, 1);
	if (p->info->hdr_mask & SRN_HDR_AETH) {
		qp->comp.ack_from_peer = p->aeth_syndrome;
		qp->comp.msn_from_peer = p->aeth_msn;
		srn_diag_qp_peer_said(qp->diag, p->aeth_syndrome, p->psn, srn_now_ns());
	}
	if ((p->opcode & SRN_OPCODE_OP_MASK) == SRN_OP_RC_ACKNOWLEDGE)
		on_ack(qp, p);
	else
		on_response(qp, p);
	/* A bind/invalidate right after what just completed completes too. */
	if (qp->state != IBV_QPS_ERR)
		ack_before(qp, qp->comp.una);
	if (qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_SQD)
		srn_req_push(qp);
}
