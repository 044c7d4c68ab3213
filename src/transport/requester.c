/*
 * requester.c - turning send work requests into request packets, and
 * go-back-N.
 *
 * One WQE at a time from req.cur, with the PSN range it got at post
 * (srn_req_number; a READ reserves one PSN per expected response packet
 * but sends one request): packets of at most the path MTU go out
 * while the window of unacknowledged PSNs allows.  The last packet of a
 * message and every SRN_ACKREQ_EVERY-th packet ask for an ACK (rxe asks
 * every 64; asking more often keeps the window moving).
 *
 * READ/atomic WQEs are limited to max_rd_atomic outstanding; a FENCEd WQE
 * waits until none is outstanding.  A full same-host ring refuses the
 * packet (-EAGAIN): the QP parks on nic->lists.tx until the progress loop
 * resumes it, nothing sent.  A full socket buffer does not stop us: the
 * link drops what it cannot send at the flush, a loss on the wire that
 * go-back-N repairs.
 *
 * Go-back-N: req.cur returns to sq.tail and req.psn to the PSN to resend
 * from, never before comp.una nor the tail WQE's first PSN (the callers
 * acknowledge what precedes a NAKed PSN first, so it is comp.una);
 * send_one derives the packet index from req.psn - first_psn, so the WQE
 * resumes at exactly that packet, and the WQEs after it are resent with
 * the PSNs they had.
 */
#include <errno.h>
#include <string.h>

#include "core/ah.h"
#include "core/limits.h"
#include "core/mr.h"
#include "core/mw.h"
#include "core/nic.h"
#include "core/qp.h"
#include "diag/names.h"
#include "diag/shm.h"
#include "transport/cc.h"
#include "transport/complete.h"
#include "transport/direct.h"
#include "transport/qp_count.h"
#include "transport/requester.h"
#include "transport/timers.h"
#include "transport/tx.h"
#include "wire/roce_hdr.h"

int srn_req_gather(struct srn_qp *qp, const struct srn_swqe *w, uint32_t off, uint32_t len,
		   struct iovec *iov, int *niov)
{
	uint32_t idx = (uint32_t)(w - qp->sq.wqe);
	*niov = 0;
	if (len == 0)
		return 0;
	if (w->is_inline) {
		iov[0].iov_base = qp->sq.inline_buf + (size_t)idx * qp->cap.max_inline_data + off;
		iov[0].iov_len = len;
		*niov = 1;
		return 0;
	}
	const struct ibv_sge *sge = qp->sq.sge + (size_t)idx * qp->cap.max_send_sge;
	for (uint32_t i = 0; i < w->num_sge && len; i++) {
		if (off >= sge[i].length) {
			off -= sge[i].length;
			continue;
		}
		uint32_t take = sge[i].length - off;
		if (take > len)
			take = len;
		const char *why;
		void *p = srn_mr_resolve(qp->nic, qp->pd, qp->qpn, sge[i].lkey, sge[i].addr + off, take, 0,
					 &why);
		if (!p) {
			srn_qp_why(qp, "local key 0x%x addr 0x%llx len %u: %s", sge[i].lkey,
				   (unsigned long long)(sge[i].addr + off), take, why);
			return -EACCES;
		}
		iov[*niov].iov_base = p;
		iov[*niov].iov_len = take;
		(*niov)++;
		len -= take;
		off = 0;
	}
	return 0;
}

static int opcode_for(struct srn_qp *qp, const struct srn_swqe *w, enum srn_seg seg)
{
	uint8_t tr = srn_qp_transport(qp);

	switch (w->opcode) {
	case IBV_WR_SEND:
		return srn_opcode_send(tr, seg, false, false);
	case IBV_WR_SEND_WITH_IMM:
		return srn_opcode_send(tr, seg, true, false);
	case IBV_WR_SEND_WITH_INV:
		return srn_opcode_send(tr, seg, false, true);
	case IBV_WR_RDMA_WRITE:
		return srn_opcode_write(tr, seg, false);
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return srn_opcode_write(tr, seg, true);
	case IBV_WR_RDMA_READ:
		return tr | (SRN_OP_RC_RDMA_READ_REQUEST & SRN_OPCODE_OP_MASK);
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return tr | (SRN_OP_RC_COMPARE_SWAP & SRN_OPCODE_OP_MASK);
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return tr | (SRN_OP_RC_FETCH_ADD & SRN_OPCODE_OP_MASK);
	default:
		return -EOPNOTSUPP;
	}
}

static uint32_t npkts_of(const struct srn_qp *qp, const struct srn_swqe *w)
{
	if (srn_wr_is_local(w->opcode))
		return 0;
	if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ||
	    w->placed)
		return 1;
	return w->length ? (w->length + qp->path.mtu - 1) / qp->path.mtu : 1;
}

void srn_req_number(struct srn_qp *qp, struct srn_swqe *w)
{
	uint32_t n = npkts_of(qp, w);
	w->first_psn = qp->req.next_psn;
	w->last_psn = srn_psn_add(qp->req.next_psn, n + SRN_PSN_MASK);   /* first + n - 1 */
	qp->req.next_psn = srn_psn_add(qp->req.next_psn, n);
}

int srn_req_pkt(struct srn_qp *qp, const struct srn_swqe *w, uint32_t pktidx, uint32_t since,
		struct srn_pkt *p, struct iovec *iov, int *niov)
{
	uint32_t npkts = npkts_of(qp, w);
	uint32_t off = pktidx * qp->path.mtu;
	uint32_t left = w->length - off;
	bool rd = w->opcode == IBV_WR_RDMA_READ;
	bool atomic = srn_wr_is_rd_atomic(w->opcode) && !rd;
	/* A READ request carries no data; atomics carry it in AtomicETH; a
	 * placed Write-with-immediate none (it is in the target already). */
	uint32_t len = (rd || atomic || w->placed) ? 0
						    : (left < qp->path.mtu ? left : qp->path.mtu);
	enum srn_seg seg = (rd || atomic) ? SRN_SEG_ONLY : srn_seg_of(pktidx, npkts);
	bool last = seg == SRN_SEG_LAST || seg == SRN_SEG_ONLY;

	int op = opcode_for(qp, w, seg);
	if (op < 0)
		return op;
	*p = (struct srn_pkt){
		.opcode = (uint8_t)op,
		.dqpn = qp->attr.dest_qp_num,
		.psn = srn_psn_add(w->first_psn, pktidx),
		.placed = w->placed,
		.paylen = len,
		.se = last && (w->send_flags & IBV_SEND_SOLICITED),
		.imm_be = w->imm_be,
		.ieth_rkey = w->imm_be,
		/* A resent READ asks only for what is still missing (rxe
		 * req_retry; IBTA 9.7.5.1.6). */
		.reth_va = w->remote_addr + (rd ? off : 0),
		.reth_rkey = w->rkey,
		.reth_len = rd ? left : w->length,
		.xrc_srqn = w->xrc_srqn,
		.atm_va = w->remote_addr,
		.atm_rkey = w->rkey,
	};
	if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
		p->atm_swap_add = w->swap;
		p->atm_compare = w->compare_add;
	} else if (atomic) {
		p->atm_swap_add = w->compare_add;
	}
	/* A paced QP asks on every packet: the pacer may hold the rest of
	 * the message longer than the local ACK timeout, and what was sent
	 * must be acknowledged meanwhile (the responder coalesces ACKs per
	 * receive batch, so this costs little). */
	p->ackreq = srn_qp_reliable(qp) &&
		    (last || since >= SRN_ACKREQ_EVERY || (qp->cc && qp->cc->paced));
	if (qp->type == IBV_QPT_UD) {
		/* IBTA 10.2.4: a Q_Key with the high bit set in the work
		 * request means "use the QP's own Q_Key". */
		p->dqpn = w->remote_qpn;
		p->deth_qkey = (w->remote_qkey & 0x80000000u) ? qp->attr.qkey : w->remote_qkey;
		p->deth_sqpn = qp->qpn;
	}
	if (srn_req_gather(qp, w, off, len, iov, niov))
		return -EACCES;
	return last;
}

/* Send the next packet of sq.wqe[req.cur].  Returns 1 if the WQE is now fully
 * sent, 0 if more packets remain, or -errno (-EAGAIN: retry later). */
static int send_one(struct srn_qp *qp)
{
	struct srn_swqe *w = &qp->sq.wqe[qp->req.cur & (qp->sq.size - 1)];

	if (!qp->req.cur_started) {
		/* PSNs were given at post time (srn_req_number): a WQE
		 * always goes out with the same ones, however often it is
		 * resent. */
		qp->req.psn = w->first_psn;
		qp->req.cur_started = true;
		if (qp->req.cur == qp->req.sent_end) {
			qp->req.sent_end++;
			/* Outstanding READs/atomics are counted from their first
			 * transmission to their completion, resends included. */
			if (srn_wr_is_rd_atomic(w->opcode))
				qp->req.rd_atomic_inflight++;
		}
	}
	uint32_t pktidx = srn_psn_diff(qp->req.psn, w->first_psn);
	/* For a post-mortem: its payload is read from local memory from here
	 * to the flush at unlock. */
	srn_diag_busy(qp->nic->diag.busy, SRN_DIAG_STAGE_REQUESTER, qp->qpn, w->opcode,
		      qp->req.psn, w->remote_addr, w->length);
	struct srn_pkt p;
	struct iovec iov[SRN_MAX_SGE];
	int niov;
	int last = srn_req_pkt(qp, w, pktidx, qp->req.pkts_since_ackreq + 1, &p, iov, &niov);
	if (last < 0)
		return last;
	qp->req.pkts_since_ackreq++;
	int ret;
	if (qp->type == IBV_QPT_UD)
		ret = srn_xmit_to(qp, (const struct sockaddr *)&w->ah->dst, w->ah->dstlen,
				  &w->ah->meta, &p, iov, niov);
	else
		ret = srn_xmit(qp, &p, iov, niov);
	if (ret)
		return ret;
	if (qp->cc)
		srn_cc_sent(qp, p.paylen);
	if (p.ackreq)
		qp->req.pkts_since_ackreq = 0;
	if (pktidx == 0 && (w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_IMM ||
			    w->opcode == IBV_WR_SEND_WITH_INV))
		srn_count(qp->nic->diag.cnt, SRN_CNT_RDMA_SENDS, 1);
	/* A READ request stands for all its response PSNs. */
	qp->req.psn = w->opcode == IBV_WR_RDMA_READ ? srn_psn_add(w->last_psn, 1)
						    : srn_psn_add(qp->req.psn, 1);
	if (srn_psn_cmp(qp->req.psn, qp->req.psn_max) > 0)
		qp->req.psn_max = qp->req.psn;
	qp->req.cur_off = pktidx * qp->path.mtu + p.paylen;
	if (srn_qp_reliable(qp))
		srn_timer_sent(qp);
	return last;
}

static void defer(struct srn_qp *qp)
{
	qp->req.blocked = true;
	srn_tx_defer(qp);
}

/* May sq.wqe[req.cur] start now?  (FENCE, max_rd_atomic.) */
static bool may_start(const struct srn_qp *qp, const struct srn_swqe *w)
{
	if ((w->send_flags & IBV_SEND_FENCE) && qp->req.rd_atomic_inflight)
		return false;
	if (srn_wr_is_rd_atomic(w->opcode)) {
		uint32_t max = qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1;
		if (qp->req.rd_atomic_inflight >= max)
			return false;
	}
	return true;
}

/* Execute a bind or local invalidate at its place in the send queue.  It
 * owns no PSN: its range is empty, ending just before req.psn, so the
 * acknowledgement that completes the WQE before it completes it too.
 * Returns 0 or the error status it must complete with. */
static enum ibv_wc_status run_local(struct srn_qp *qp, struct srn_swqe *w)
{
	if (qp->req.cur == qp->req.sent_end)
		qp->req.sent_end++;
	if (w->local_done)
		return IBV_WC_SUCCESS;  /* resent past by go-back-N: ran already */
	w->local_done = true;
	if (w->opcode == IBV_WR_BIND_MW) {
		int r = srn_mw_bind(qp, w->mw, w->rkey, &w->bind);
		if (!r)
			return IBV_WC_SUCCESS;
		srn_qp_why(qp, "bind of window rkey 0x%x to [0x%llx, +%llu) refused: %s", w->rkey,
			   (unsigned long long)w->bind.addr, (unsigned long long)w->bind.length,
			   r == -EPERM ? "window and QP in different PDs"
				       : "bad key, range, rights, region without MW_BIND, or type 2 still bound");
		return IBV_WC_MW_BIND_ERR;
	}
	if (!srn_mw_invalidate(qp, w->imm_be))
		return IBV_WC_SUCCESS;
	srn_qp_why(qp, "local invalidate of rkey 0x%x refused: not a type 2 window of this PD",
		   w->imm_be);
	return IBV_WC_LOC_QP_OP_ERR;
}

void srn_req_push(struct srn_qp *qp)
{
	if (qp->req.blocked || qp->comp.rnr_wait)
		return;
	while (qp->req.cur != qp->sq.head) {
		struct srn_swqe *w = &qp->sq.wqe[qp->req.cur & (qp->sq.size - 1)];
		/* RTS sends; SQD finishes the message in progress only. */
		if (qp->state != IBV_QPS_RTS && !(qp->state == IBV_QPS_SQD && qp->req.cur_started))
			return;
		if (srn_qp_reliable(qp)) {
			uint32_t out = srn_psn_diff(qp->req.psn, qp->comp.una);
			if (out >= SRN_SEND_WINDOW)
				qp->req.win_full = true;
			else if (out <= SRN_SEND_WINDOW - SRN_SEND_WINDOW_REOPEN)
				qp->req.win_full = false;
			if (qp->req.win_full)
				return;
		}
		/* FENCE and max_rd_atomic hold back new work only: a WQE
		 * being resent was admitted when it first went out. */
		if (qp->req.cur == qp->req.sent_end && !may_start(qp, w))
			return;
		/* A same-host peer's memory: placed now by us, no packet.  Not
		 * for a paced QP: its bytes must pass its pacer (cc.h). */
		if (qp->req.cur == qp->req.sent_end && !(qp->cc && qp->cc->paced) &&
		    srn_direct_try(qp, w))
			continue;
		if (srn_wr_is_local(w->opcode)) {
			enum ibv_wc_status st = run_local(qp, w);
			if (st != IBV_WC_SUCCESS) {
				while (qp->sq.tail != qp->req.cur)
					srn_complete_send(qp, IBV_WC_WR_FLUSH_ERR);
				qp->req.cur++;
				srn_complete_send(qp, st);
				srn_qp_fail(qp, SRN_NO_EVENT);
				return;
			}
			qp->req.cur++;
			/* Nothing before it outstanding: done now, in order. */
			if (qp->sq.tail + 1 == qp->req.cur)
				srn_complete_send(qp, IBV_WC_SUCCESS);
			continue;
		}
		/* Paced (DCQCN, a rate limit): wait for credit on the timer
		 * list.  One NULL test for a QP that never met either. */
		if (!srn_cc_may_send(qp))
			return;
		bool starting = !qp->req.cur_started;
		int ret = send_one(qp);
		if (ret == -EAGAIN) {
			if (starting)
				qp->req.cur_started = false;
			defer(qp);
			return;
		}
		if (ret < 0) {
			/* The WQE cannot be executed: complete it with an error
			 * after everything before it, then fail the QP. */
			while (qp->sq.tail != qp->req.cur)
				srn_complete_send(qp, IBV_WC_WR_FLUSH_ERR);
			srn_count(qp->nic->diag.cnt, SRN_CNT_SEND_ERR, 1);
			qp->req.cur++;
			qp->req.cur_started = false;
			if (ret != -EACCES)
				srn_qp_why(qp, "cannot build the packet: %s", strerror(-ret));
			srn_complete_send(qp, ret == -EACCES ? IBV_WC_LOC_PROT_ERR
							     : IBV_WC_LOC_QP_OP_ERR);
			srn_qp_fail(qp, SRN_NO_EVENT);
			return;
		}
		if (ret == 1) {
			qp->req.cur++;
			qp->req.cur_started = false;
			/* UC has no acknowledgements: done once sent. */
			if (!srn_qp_reliable(qp))
				while (qp->sq.tail != qp->req.cur)
					srn_complete_send(qp, IBV_WC_SUCCESS);
		}
	}
}

void srn_req_rewind(struct srn_qp *qp, uint32_t psn)
{
	if ((int32_t)(qp->req.sent_end - qp->sq.tail) <= 0)
		return;                 /* nothing was sent that needs resending */
	/* Never behind what is acknowledged (an RNR wait may have outlived
	 * the packet it was for), nor before the first PSN of the WQE it
	 * restarts: PSNs belong to WQEs (srn_req_number). */
	if (srn_psn_cmp(psn, qp->comp.una) < 0)
		psn = qp->comp.una;
	const struct srn_swqe *t = &qp->sq.wqe[qp->sq.tail & (qp->sq.size - 1)];
	if (srn_psn_cmp(psn, t->first_psn) < 0)
		psn = t->first_psn;
	srn_qp_count(qp, SRN_CNT_RETRANSMITS, SRN_QPC_RETRANSMITS, 1);
	qp->req.cur = qp->sq.tail;
	qp->req.cur_started = true;      /* the tail WQE keeps its PSN range */
	qp->req.psn = psn;
	qp->comp.rewound = true;
	qp->comp.rewound_psn = psn;
	qp->req.pkts_since_ackreq = 0;
	qp->comp.rnr_wait = false;
	qp->comp.ack_deadline = 0;
	srn_req_push(qp);
}

void srn_req_retry(struct srn_qp *qp, uint32_t psn, const char *cause)
{
	/* IBTA: retry_cnt counts retries after a timeout or sequence NAK;
	 * unlike rxe, 7 is not infinite (docs/DESIGN.md). */
	if (qp->comp.retry_left == 0) {
		char last[96];
		srn_diag_last_peer_str(qp->diag, last, sizeof(last));
		srn_qp_why(qp, "%u retries spent (retry_cnt %u, local ACK timeout %.1f ms) resending "
			   "from PSN 0x%06x, the last after %s; last from peer: %s", qp->attr.retry_cnt,
			   qp->attr.retry_cnt, qp->attr.timeout ? (4096ull << qp->attr.timeout) / 1e6 : 0.0,
			   psn, cause, last);
		srn_count(qp->nic->diag.cnt, SRN_CNT_RETRY_EXCEEDED, 1);
		srn_count(qp->nic->diag.cnt, SRN_CNT_SEND_ERR, 1);
		if (qp->sq.tail != qp->sq.head) {
			if (qp->sq.tail == qp->req.cur) {
				qp->req.cur++;
				qp->req.cur_started = false;
			}
			srn_complete_send(qp, IBV_WC_RETRY_EXC_ERR);
		}
		srn_timer_stop(qp);
		srn_qp_fail(qp, SRN_NO_EVENT);
		return;
	}
	qp->comp.retry_left--;
	srn_diag_log(qp->diag, SRN_LOG_INFO, "%s: go-back-N from PSN 0x%06x (%u packets), "
		     "%u retries left", cause, psn, srn_psn_diff(qp->req.psn, psn), qp->comp.retry_left);
	srn_req_rewind(qp, psn);
}
