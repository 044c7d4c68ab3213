/*
 * tx.c - the packet builder, coalesced ACKs and deferred transmission.
 *
 * A packet is one gathered datagram: [headers][payload pieces straight
 * from registered memory][pad + ICRC], so payload bytes are never copied
 * in user space on the way out.  Packets leave through txq.c to the
 * link's egress (link/egress.h): into a same-host ring at once, or
 * queued for the socket until the burst ends.
 *
 * The responses (ACK/NAK, ATOMIC ACKNOWLEDGE, READ RESPONSE) are built
 * here as field values from what the answering QP contributes (struct
 * srn_resp_src), so the responder sends them and the recorder of direct
 * operations (direct_trace.c) records a same-host target's with the
 * same code; srn_xmit_record puts a built packet on the trace alone.
 */
#include "transport/tx.h"

#include <errno.h>
#include <string.h>

#include "core/limits.h"
#include "core/nic.h"
#include "core/qp.h"
#include "diag/shm.h"
#include "link/udp.h"
#include "transport/requester.h"
#include "transport/responder.h"
#include "transport/txq.h"
#include "wire/icrc.h"
#include "wire/roce_hdr.h"

int srn_xmit(struct srn_qp *qp, struct srn_pkt *p, const struct iovec *pay, int npay)
{
	return srn_xmit_to(qp, (const struct sockaddr *)&qp->path.peer, qp->path.peer_len,
			   &qp->path.tx_meta, p, pay, npay);
}

/* The header bytes of p as every packet of ours carries them. */
static int build_hdr(uint8_t hdr[SRN_MAX_HDR_LEN], struct srn_pkt *p)
{
	p->pkey = SRN_DEFAULT_PKEY;
	return srn_pkt_build_hdr(hdr, p);
}

int srn_xmit_to(struct srn_qp *qp, const struct sockaddr *dst, socklen_t dstlen,
		const struct srn_ip_meta *meta, struct srn_pkt *p, const struct iovec *pay,
		int npay)
{
	uint8_t hdr[SRN_MAX_HDR_LEN];
	int hl = build_hdr(hdr, p);
	if (hl < 0)
		return hl;
	int ret = srn_txq_add(qp->nic, dst, dstlen, meta, hdr, hl, pay, npay, p->paylen);
	if (!ret) {
		srn_diag_qp_count(qp->diag, SRN_QPC_SENT_PKTS, 1);
		srn_diag_qp_count(qp->diag, SRN_QPC_SENT_BYTES,
				  (uint64_t)hl + p->paylen + srn_pad_of(p->paylen) + SRN_ICRC_LEN);
	}
	return ret;
}

void srn_xmit_record(struct srn_qp *qp, struct srn_pkt *p, const struct iovec *pay, int npay,
		     bool from_peer)
{
	uint8_t hdr[SRN_MAX_HDR_LEN];
	struct iovec v[SRN_MAX_SGE + 2];
	int hl = build_hdr(hdr, p);
	if (hl < 0 || npay > SRN_MAX_SGE)
		return;
	int n = 0;
	v[n++] = (struct iovec){ hdr, (size_t)hl };
	for (int i = 0; i < npay; i++)
		v[n++] = pay[i];
	v[n++] = (struct iovec){ NULL, 0 };     /* pad and ICRC, filled by the link */
	srn_udp_trace_synth(&qp->nic->link.udp, (const struct sockaddr *)&qp->path.peer,
			    &qp->path.tx_meta, from_peer, v, n, srn_pad_of(p->paylen),
			    qp->nic->link.udp.tos);
}

struct srn_resp_src srn_resp_src_of(const struct srn_qp *qp)
{
	return (struct srn_resp_src){
		.transport = srn_qp_transport(qp),
		.dqpn = qp->attr.dest_qp_num,
		.msn = qp->resp.msn,
	};
}

void srn_ack_pkt(const struct srn_resp_src *s, uint8_t syndrome, uint32_t psn, struct srn_pkt *p)
{
	*p = (struct srn_pkt){
		.opcode = (uint8_t)(s->transport | SRN_OP_RC_ACKNOWLEDGE),
		.dqpn = s->dqpn,
		.psn = psn,
		.aeth_syndrome = syndrome,
		.aeth_msn = s->msn,
	};
}

void srn_atomic_ack_pkt(const struct srn_resp_src *s, uint32_t psn, uint64_t orig,
			struct srn_pkt *p)
{
	*p = (struct srn_pkt){
		.opcode = (uint8_t)(s->transport | SRN_OP_RC_ATOMIC_ACKNOWLEDGE),
		.dqpn = s->dqpn,
		.psn = psn,
		.aeth_syndrome = SRN_AETH_ACK_UNLIMITED,
		.aeth_msn = s->msn,
		.atm_orig = orig,
	};
}

void srn_read_resp_pkt(const struct srn_resp_src *s, uint32_t first_psn, uint32_t idx,
		       uint32_t npkts, uint32_t len, struct srn_pkt *p)
{
	*p = (struct srn_pkt){
		.opcode = (uint8_t)(s->transport | srn_opcode_read_resp(srn_seg_of(idx, npkts))),
		.dqpn = s->dqpn,
		.psn = srn_psn_add(first_psn, idx),
		.paylen = len,
		.aeth_syndrome = SRN_AETH_ACK_UNLIMITED,
		.aeth_msn = s->msn,
	};
}

void srn_ack_schedule(struct srn_qp *qp, uint8_t syndrome, uint32_t psn)
{
	/* A later ACK or NAK-sequence supersedes an earlier one: each
	 * acknowledges everything before its PSN (coalescing, rxe check_ack).
	 * But a plain ACK that acknowledges nothing new (a duplicate's, for
	 * PSN ePSN-1) must not replace an owed NAK: the NAK acknowledges as
	 * much and also asks for the resend now (or says RNR); dropping it
	 * left the requester to its ACK timeout, a retry spent each time. */
	if (qp->resp.ack_pending && srn_aeth_type(qp->resp.ack_syndrome) != SRN_AETH_TYPE_ACK &&
	    srn_aeth_type(syndrome) == SRN_AETH_TYPE_ACK && srn_psn_cmp(psn, qp->resp.ack_psn) < 0)
		return;
	qp->resp.ack_syndrome = syndrome;
	qp->resp.ack_psn = psn;
	if (!qp->resp.ack_pending) {
		qp->resp.ack_pending = true;
		qp->resp.ack_next = qp->nic->lists.ack;
		qp->nic->lists.ack = qp;
	}
}

void srn_ack_flush_held(struct srn_nic *nic)
{
	if (nic->lists.ack)
		srn_ack_flush(nic);
}

struct srn_qp *srn_ack_take_others(struct srn_nic *nic, struct srn_qp *qp)
{
	struct srn_qp *others = NULL, **pp = &nic->lists.ack;
	while (*pp) {
		struct srn_qp *q = *pp;
		if (q != qp) {
			*pp = q->resp.ack_next;
			q->resp.ack_next = others;
			others = q;
		} else {
			pp = &q->resp.ack_next;
		}
	}
	return others;
}

void srn_ack_put_back(struct srn_nic *nic, struct srn_qp *others)
{
	while (others) {
		struct srn_qp *q = others;
		others = q->resp.ack_next;
		q->resp.ack_next = nic->lists.ack;
		nic->lists.ack = q;
	}
	srn_ack_flush(nic);
}

void srn_ack_flush(struct srn_nic *nic)
{
	/* Nothing owed, nothing held: every empty poll passes here twice,
	 * and the seq_cst store below is a full barrier.  Its writers all
	 * hold nic->lock, as we do, so a false read here stays false. */
	if (!nic->lists.ack &&
	    !atomic_load_explicit(&nic->engine.acks_deferred, memory_order_relaxed))
		return;
	struct srn_qp *keep = NULL;
	while (nic->lists.ack) {
		struct srn_qp *qp = nic->lists.ack;
		nic->lists.ack = qp->resp.ack_next;
		struct srn_resp_src src = srn_resp_src_of(qp);
		struct srn_pkt p;
		srn_ack_pkt(&src, qp->resp.ack_syndrome, qp->resp.ack_psn, &p);
		if (srn_xmit(qp, &p, NULL, 0) == -EAGAIN) {
			/* Keep it owed; the next flush retries. */
			qp->resp.ack_next = keep;
			keep = qp;
			continue;
		}
		qp->resp.ack_pending = false;
		srn_count(nic->diag.cnt, SRN_CNT_ACKS_SENT, 1);
	}
	nic->lists.ack = keep;
	/* Any kept (ring full) are retried by the next flush, as before
	 * holding existed: they are not held for a post. */
	atomic_store(&nic->engine.acks_deferred, false);
}

void srn_tx_defer(struct srn_qp *qp)
{
	if (!qp->on_tx_list) {
		qp->on_tx_list = true;
		qp->tx_next = qp->nic->lists.tx;
		qp->nic->lists.tx = qp;
	}
	srn_nic_tx_deferred(qp->nic);
}

void srn_tx_resume(struct srn_nic *nic)
{
	struct srn_qp *list = nic->lists.tx;
	nic->lists.tx = NULL;
	while (list) {
		struct srn_qp *qp = list;
		list = qp->tx_next;
		qp->on_tx_list = false;
		qp->req.blocked = false;
		/* Responses first: the peer's requester is waiting on them. */
		if (srn_resp_push(qp))
			srn_req_push(qp);
	}
}
