/*
 * requester.c - turning send work requests into request packets.
 *
 * One WQE at a time from sq_cur: it gets its PSN range when its first
 * packet goes out, then packets of at most the path MTU go out while the
 * window of unacknowledged PSNs allows.  The last packet of a message and
 * every SRN_ACKREQ_EVERY-th packet ask for an ACK (rxe asks every 64;
 * asking more often keeps the window moving).  A full socket buffer stops
 * the QP until the progress loop resumes it; nothing is dropped.
 */
#include <errno.h>

#include "core/limits.h"
#include "core/mr.h"
#include "core/nic.h"
#include "core/qp.h"
#include "transport/complete.h"
#include "transport/tx.h"
#include "wire/roce_hdr.h"

static uint8_t transport_of(const struct srn_qp *qp)
{
	return qp->type == IBV_QPT_UC ? SRN_TRANSPORT_UC : SRN_TRANSPORT_RC;
}

/* Payload bytes [off, off+len) of the WQE in slot idx as iovecs pointing
 * into registered memory (or the inline copy).  -EACCES if an lkey does
 * not resolve: a local protection error. */
static int gather(struct srn_qp *qp, const struct srn_swqe *w, uint32_t idx, uint32_t off,
		  uint32_t len, struct iovec *iov, int *niov)
{
	*niov = 0;
	if (len == 0)
		return 0;
	if (w->is_inline) {
		iov[0].iov_base = qp->sq_inline + (size_t)idx * qp->cap.max_inline_data + off;
		iov[0].iov_len = len;
		*niov = 1;
		return 0;
	}
	const struct ibv_sge *sge = qp->sq_sge + (size_t)idx * qp->cap.max_send_sge;
	for (uint32_t i = 0; i < w->num_sge && len; i++) {
		if (off >= sge[i].length) {
			off -= sge[i].length;
			continue;
		}
		uint32_t take = sge[i].length - off;
		if (take > len)
			take = len;
		const char *why;
		void *p = srn_mr_resolve(qp->nic, qp->pd, sge[i].lkey, sge[i].addr + off, take, 0,
					 &why);
		if (!p)
			return -EACCES;
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
	switch (w->opcode) {
	case IBV_WR_SEND:
		return srn_opcode_send(transport_of(qp), seg, false, false);
	case IBV_WR_SEND_WITH_IMM:
		return srn_opcode_send(transport_of(qp), seg, true, false);
	case IBV_WR_RDMA_WRITE:
		return srn_opcode_write(transport_of(qp), seg, false);
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return srn_opcode_write(transport_of(qp), seg, true);
	default:
		return -EOPNOTSUPP;
	}
}

/* Send the next packet of sq[sq_cur].  Returns 1 if the WQE is now fully
 * sent, 0 if more packets remain, or -errno (-EAGAIN: retry later). */
static int send_one(struct srn_qp *qp)
{
	uint32_t idx = qp->sq_cur & (qp->sq_size - 1);
	struct srn_swqe *w = &qp->sq[idx];
	uint32_t npkts = w->length ? (w->length + qp->mtu - 1) / qp->mtu : 1;

	if (!qp->sq_cur_started) {
		w->first_psn = qp->req_psn;
		w->last_psn = srn_psn_add(qp->req_psn, npkts - 1);
		qp->sq_cur_started = true;
		qp->sq_cur_off = 0;
	}
	uint32_t pktidx = srn_psn_diff(qp->req_psn, w->first_psn);
	uint32_t off = pktidx * qp->mtu;
	uint32_t len = w->length - off < qp->mtu ? w->length - off : qp->mtu;
	enum srn_seg seg = srn_seg_of(pktidx, npkts);
	bool last = seg == SRN_SEG_LAST || seg == SRN_SEG_ONLY;

	int op = opcode_for(qp, w, seg);
	if (op < 0)
		return op;
	struct srn_pkt p = {
		.opcode = (uint8_t)op,
		.dqpn = qp->attr.dest_qp_num,
		.psn = qp->req_psn,
		.paylen = len,
		.se = last && (w->send_flags & IBV_SEND_SOLICITED),
		.imm_be = w->imm_be,
		.reth_va = w->remote_addr,
		.reth_rkey = w->rkey,
		.reth_len = w->length,
	};
	qp->req_pkts_since_ackreq++;
	p.ackreq = qp->type == IBV_QPT_RC &&
		   (last || qp->req_pkts_since_ackreq >= SRN_ACKREQ_EVERY);

	struct iovec iov[SRN_MAX_SGE];
	int niov;
	if (gather(qp, w, idx, off, len, iov, &niov))
		return -EACCES;
	int ret = srn_xmit(qp, &p, iov, niov);
	if (ret)
		return ret;
	if (p.ackreq)
		qp->req_pkts_since_ackreq = 0;
	if (pktidx == 0 && (w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_IMM))
		srn_count(&qp->nic->cnt, SRN_CNT_RDMA_SENDS, 1);
	qp->req_psn = srn_psn_add(qp->req_psn, 1);
	qp->sq_cur_off = off + len;
	return last;
}

static void defer(struct srn_qp *qp)
{
	qp->req_blocked = true;
	if (!qp->on_tx_list) {
		qp->on_tx_list = true;
		qp->tx_next = qp->nic->tx_list;
		qp->nic->tx_list = qp;
	}
}

void srn_req_push(struct srn_qp *qp)
{
	if (qp->req_blocked)
		return;
	while (qp->sq_cur != qp->sq_head) {
		/* RTS sends; SQD finishes the message in progress only. */
		if (qp->state != IBV_QPS_RTS && !(qp->state == IBV_QPS_SQD && qp->sq_cur_started))
			return;
		if (qp->type == IBV_QPT_RC &&
		    srn_psn_diff(qp->req_psn, qp->req_una) >= SRN_SEND_WINDOW)
			return;
		int ret = send_one(qp);
		if (ret == -EAGAIN) {
			defer(qp);
			return;
		}
		if (ret < 0) {
			/* The WQE cannot be executed: complete it with an error
			 * after everything before it (completions stay in
			 * order), then fail the QP. */
			while (qp->sq_tail != qp->sq_cur)
				srn_complete_send(qp, IBV_WC_WR_FLUSH_ERR);
			srn_count(&qp->nic->cnt, SRN_CNT_SEND_ERR, 1);
			qp->sq_cur++;
			qp->sq_cur_started = false;
			srn_complete_send(qp, ret == -EACCES ? IBV_WC_LOC_PROT_ERR
							     : IBV_WC_LOC_QP_OP_ERR);
			srn_qp_fail(qp, SRN_NO_EVENT);
			return;
		}
		if (ret == 1) {
			qp->sq_cur++;
			qp->sq_cur_started = false;
			/* UC has no acknowledgements: done once sent. */
			if (qp->type != IBV_QPT_RC)
				while (qp->sq_tail != qp->sq_cur)
					srn_complete_send(qp, IBV_WC_SUCCESS);
		}
	}
}
