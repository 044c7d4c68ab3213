/*
 * direct_trace.c - the packet trace of same-host direct operations
 * (direct_trace.h): the packets the UDP link would have carried for a
 * Write, Read or atomic that direct.c executed without any.
 *
 * Each packet is built by the code that would have sent it: requests by
 * the requester's own builder (srn_req_pkt: opcodes, path-MTU split,
 * RETH/AtomicETH, AckReq), responses by the responder's (tx.c
 * srn_ack_pkt, srn_read_resp_pkt, srn_atomic_ack_pkt) with what the
 * target's QP would have put in them, and recorded by the link as the
 * ring's packets are (srn_xmit_record: our address to the peer's,
 * responses the other way, the ICRC computed for the record).
 *
 * What the record cannot know and how it is derived:
 *  - PSNs: those the WQE held when it was executed (first_psn ..
 *    last_psn, before direct.c gives them back), so the next real
 *    packet reuses them.  Every packet carries SRN_BTH_PLACED, which
 *    tells a reader of the trace that it never crossed a link.
 *  - The target's MSN: the last one its AETHs brought us
 *    (comp.msn_from_peer), which counts every message before, since
 *    nothing was outstanding; each recorded message then raises it where
 *    the responder would (C9-148: a Write at its last packet, a READ or
 *    atomic on acceptance).  The target's real MSN never counts direct
 *    operations, so like their PSNs, the next real message's MSN
 *    repeats theirs.
 *  - ACKs: one per request packet with AckReq, for its PSN, as the
 *    responder schedules them; how many a real receive batch would have
 *    coalesced depends on timing that never happened.
 *  - READ responses are split at our path MTU (the target's is the one
 *    it was connected with, normally the same) and carry the bytes that
 *    were read, from our buffers, where they now are.
 */
#include "transport/direct_trace.h"

#include "core/limits.h"
#include "core/qp.h"
#include "transport/requester.h"
#include "transport/tx.h"
#include "wire/roce_hdr.h"

/* The ACK the target's responder owes for request packet psn. */
static void record_ack(struct srn_qp *qp, const struct srn_resp_src *peer, uint32_t psn)
{
	struct srn_pkt a;
	srn_ack_pkt(peer, SRN_AETH_ACK_UNLIMITED, psn, &a);
	a.placed = true;
	srn_xmit_record(qp, &a, NULL, 0, true);
}

/* The request packets of w, each answered as the responder answers it
 * (responses: for a READ its data, for an atomic the original value).
 * *since: packets since the last AckReq, as the requester counts. */
static void record_wqe(struct srn_qp *qp, const struct srn_swqe *w, struct srn_resp_src *peer,
		       uint32_t *since, uint64_t orig)
{
	bool rd = w->opcode == IBV_WR_RDMA_READ;
	bool atomic = srn_wr_is_rd_atomic(w->opcode) && !rd;
	uint32_t n = srn_psn_diff(w->last_psn, w->first_psn) + 1;
	/* A READ request stands for all its response PSNs: one packet. */
	uint32_t nreq = srn_wr_is_rd_atomic(w->opcode) ? 1 : n;
	for (uint32_t k = 0; k < nreq; k++) {
		struct srn_pkt p;
		struct iovec iov[SRN_MAX_SGE];
		int niov;
		int last = srn_req_pkt(qp, w, k, *since + 1, &p, iov, &niov);
		if (last < 0)
			return;         /* cannot happen: direct.c resolved every lkey */
		p.placed = true;
		srn_xmit_record(qp, &p, iov, niov, false);
		(*since)++;
		if (!p.ackreq)
			continue;
		*since = 0;
		if (last)
			peer->msn = (peer->msn + 1) & SRN_MSN_MASK;
		if (!srn_wr_is_rd_atomic(w->opcode))
			record_ack(qp, peer, p.psn);
	}
	if (atomic) {
		struct srn_pkt a;
		srn_atomic_ack_pkt(peer, w->first_psn, orig, &a);
		a.placed = true;
		srn_xmit_record(qp, &a, NULL, 0, true);
	} else if (rd) {
		for (uint32_t k = 0; k < n; k++) {
			uint32_t off = k * qp->path.mtu;
			uint32_t len = w->length - off < qp->path.mtu ? w->length - off : qp->path.mtu;
			struct srn_pkt r;
			struct iovec iov[SRN_MAX_SGE];
			int niov;
			if (srn_req_gather(qp, w, off, len, iov, &niov))
				return;
			srn_read_resp_pkt(peer, w->first_psn, k, n, len, &r);
			r.placed = true;
			srn_xmit_record(qp, &r, iov, niov, true);
		}
	}
}

void srn_direct_trace(struct srn_qp *qp, unsigned count, uint64_t orig)
{
	/* The target's QP answers us: its responses go to our QPN. */
	struct srn_resp_src peer = {
		.transport = srn_qp_transport(qp),
		.dqpn = qp->qpn,
		.msn = qp->comp.msn_from_peer,
	};
	/* A copy: nothing was sent, so the requester's own count of packets
	 * since the last AckReq stays as it is. */
	uint32_t since = qp->req.pkts_since_ackreq;
	for (unsigned i = 0; i < count; i++)
		record_wqe(qp, &qp->sq.wqe[(qp->req.cur + i) & (qp->sq.size - 1)], &peer, &since,
			   orig);
}
