/*
 * tx.c - the packet builder, coalesced ACKs and deferred transmission.
 *
 * A packet is one gathered datagram: [headers][payload pieces straight
 * from registered memory][pad + ICRC], so payload bytes are never copied
 * in user space on the way out.  Packets leave through txq.c to the
 * link's egress (link/egress.h): into a same-host ring at once, or
 * queued for the socket until the burst ends.
 */
#include "transport/tx.h"

#include <errno.h>
#include <string.h>

#include "core/limits.h"
#include "core/nic.h"
#include "core/qp.h"
#include "diag/shm.h"
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

int srn_xmit_to(struct srn_qp *qp, const struct sockaddr *dst, socklen_t dstlen,
		const struct srn_ip_meta *meta, struct srn_pkt *p, const struct iovec *pay,
		int npay)
{
	uint8_t hdr[SRN_MAX_HDR_LEN];
	p->pkey = SRN_DEFAULT_PKEY;
	int hl = srn_pkt_build_hdr(hdr, p);
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

void srn_ack_flush(struct srn_nic *nic)
{
	struct srn_qp *keep = NULL;
	while (nic->lists.ack) {
		struct srn_qp *qp = nic->lists.ack;
		nic->lists.ack = qp->resp.ack_next;
		struct srn_pkt p = {
			.opcode = (uint8_t)(srn_qp_transport(qp) | SRN_OP_RC_ACKNOWLEDGE),
			.dqpn = qp->attr.dest_qp_num,
			.psn = qp->resp.ack_psn,
			.aeth_syndrome = qp->resp.ack_syndrome,
			.aeth_msn = qp->resp.msn,
		};
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
