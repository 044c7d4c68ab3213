/*
 * xfer.c - the rsockets data path (docs/rsocket.md, "Data").
 *
 * Sending: data goes by RDMA Write with immediate (DATA | length) into the
 * peer's receive buffer, at the SGE of the slot tslot names; the slot's
 * address moves on by what was written and when it is used up the next
 * slot (which the peer refills by a Write of its own) takes over.  Each
 * message needs a credit (sseq_no != sseq_comp: the peer has a receive
 * for it), a send-queue entry and room in sbuf, the ring our copies of
 * the data stay in until the Write completes (inline data is counted in
 * sbuf too, so the ring never holds more than its size).
 *
 * Receiving: every message, data or not, completes one of our receives
 * (they carry no buffer); the immediate says what came.  Data lengths
 * queue in rmsg; the bytes themselves are already in rbuf, in order.
 * Reading frees rbuf; when half of it is free we grant it back to the
 * peer (an SGE into its next slot) with new credits in the same Write.
 *
 * Completions arrive in order (RC), so send-side counts are returned one
 * by one from the work request id, which holds the immediate we sent.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "rsocket/rs.h"

bool srn_rs_connected(const struct srn_rs *rs)
{
	return rs->state == SRN_RS_CONNECTED;
}

bool srn_rs_ctrl_avail(const struct srn_rs *rs)
{
	return rs->ctrl_seq != rs->ctrl_max;
}

static uint32_t slot_len(const struct srn_rs *rs)
{
	/* The peer writes the slot by RDMA while we read it: the length is
	 * read once, with acquire, before the address it guards. */
	return __atomic_load_n(&rs->tslots[rs->tslot].length, __ATOMIC_ACQUIRE);
}

bool srn_rs_can_send(const struct srn_rs *rs)
{
	return rs->cq && rs->sqe_avail > 0 && rs->sbuf_avail >= SRN_RS_SNDLOWAT &&
	       rs->sseq_no != rs->sseq_comp && slot_len(rs) != 0;
}

bool srn_rs_have_data(const struct srn_rs *rs)
{
	return rs->rmsg && rs->rmsg_head != rs->rmsg_tail;
}

bool srn_rs_all_sent(const struct srn_rs *rs)
{
	return !srn_rs_connected(rs) || !rs->cq ||
	       (int)(rs->ctrl_max - rs->ctrl_seq) + rs->sqe_avail == rs->sq_size;
}

static int post(struct srn_rs *rs, struct ibv_sge *sg, int nsg, uint32_t imm, bool with_imm,
		int flags, uint64_t raddr, uint32_t rkey)
{
	struct ibv_send_wr wr = {
		.wr_id = imm,
		.sg_list = sg,
		.num_sge = nsg,
		.opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
		.send_flags = flags,
		.imm_data = htobe32(imm),
		.wr.rdma = { .remote_addr = raddr, .rkey = rkey },
	}, *bad;
	int ret = ibv_post_send(rs->id->qp, &wr, &bad);
	return ret ? -ret : 0;
}

/* Copy len bytes into the sbuf ring (two SGEs if it wraps). */
static int stage(struct srn_rs *rs, const void *buf, uint32_t len, struct ibv_sge sg[2])
{
	uint32_t room = rs->sbuf_size - rs->sbuf_head;
	uint32_t a = len < room ? len : room;
	memcpy(rs->sbuf + rs->sbuf_head, buf, a);
	sg[0] = (struct ibv_sge){ (uintptr_t)(rs->sbuf + rs->sbuf_head), a, rs->smr->lkey };
	int n = 1;
	if (a < len) {
		memcpy(rs->sbuf, (const uint8_t *)buf + a, len - a);
		sg[1] = (struct ibv_sge){ (uintptr_t)rs->sbuf, len - a, rs->smr->lkey };
		n = 2;
	}
	rs->sbuf_head = (rs->sbuf_head + len) % rs->sbuf_size;
	return n;
}

int srn_rs_post_write(struct srn_rs *rs, uint32_t imm, bool with_imm, const void *buf,
		      uint32_t len, uint64_t raddr, uint32_t rkey, bool from_sbuf)
{
	struct ibv_sge sg[2];
	int nsg, flags = 0;
	if (len <= rs->sq_inline) {
		/* Inline: the bytes are copied at post time, buf may go. */
		sg[0] = (struct ibv_sge){ (uintptr_t)buf, len, 0 };
		nsg = len ? 1 : 0;
		flags = IBV_SEND_INLINE;
	} else if (from_sbuf) {
		nsg = stage(rs, buf, len, sg);
	} else {
		return -EINVAL;
	}
	rs->sqe_avail--;
	rs->sbuf_avail -= len;
	int ret = post(rs, sg, nsg, imm, with_imm, flags, raddr, rkey);
	if (ret) {
		rs->sqe_avail++;
		rs->sbuf_avail += len;
	}
	return ret;
}

/* A control Write (credits, disconnect): one of SRN_RS_CTRL_SLOTS entries,
 * its record (if any) inline or from the control area after sbuf. */
static int post_ctrl(struct srn_rs *rs, uint32_t imm, const void *rec, uint32_t len,
		     uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sg;
	int flags = 0, nsg = 0;
	if (len && len <= rs->sq_inline) {
		sg = (struct ibv_sge){ (uintptr_t)rec, len, 0 };
		flags = IBV_SEND_INLINE;
		nsg = 1;
	} else if (len) {
		uint8_t *area = rs->sbuf + rs->sbuf_size +
				(rs->ctrl_seq % SRN_RS_CTRL_SLOTS) * sizeof(struct srn_rs_iomap);
		memcpy(area, rec, len);
		sg = (struct ibv_sge){ (uintptr_t)area, len, rs->smr->lkey };
		nsg = 1;
	}
	rs->ctrl_seq++;
	int ret = post(rs, &sg, nsg, imm, true, flags, raddr, rkey);
	if (ret)
		rs->ctrl_seq--;
	return ret;
}

int srn_rs_post_ctrl(struct srn_rs *rs, enum srn_rs_ctrl c)
{
	/* No bytes: the address is never touched; name the peer's slots so
	 * a checking responder sees a key it knows. */
	return post_ctrl(rs, srn_rs_imm(SRN_RS_OP_CTRL, c), NULL, 0, rs->peer_slots.addr,
			 rs->peer_slots.key);
}

void srn_rs_probe(struct srn_rs *rs, int64_t now_ms)
{
	if (!srn_rs_connected(rs) || !rs->cq)
		return;
	int every = rs->keepalive_time > 0 && (rs->so_opts & (1ull << SO_KEEPALIVE))
		    ? rs->keepalive_time * 1000 : SRN_RS_PROBE_MS;
	if (!rs->next_probe_ms) {
		rs->next_probe_ms = now_ms + every;
		return;
	}
	if (now_ms < rs->next_probe_ms || !srn_rs_ctrl_avail(rs))
		return;
	rs->next_probe_ms = now_ms + every;
	/* rdma-core's keepalive: a plain Write (no immediate, so no receive
	 * is used at the peer) of no bytes, counted as a control message. */
	rs->ctrl_seq++;
	if (post(rs, NULL, 0, srn_rs_imm(SRN_RS_OP_CTRL, SRN_RS_CTRL_KEEPALIVE), false, 0,
		 rs->peer_slots.addr, rs->peer_slots.key))
		rs->ctrl_seq--;
}

void srn_rs_credits(struct srn_rs *rs)
{
	uint32_t half = rs->rbuf_size / 2;
	if (!srn_rs_connected(rs) || !rs->cq || !srn_rs_ctrl_avail(rs))
		return;
	if (rs->rbuf_free < half && (int16_t)(rs->rseq_no - rs->rseq_comp) < 0)
		return;      /* nothing worth a message yet */
	uint32_t imm = srn_rs_imm(SRN_RS_OP_SGL, (uint32_t)rs->rseq_no + rs->rq_size);
	int ret;
	if (rs->rbuf_free >= half) {
		struct srn_rs_sge g = { (uintptr_t)(rs->rbuf + rs->rbuf_grant_off), rs->rmr->rkey, half };
		srn_rs_sge_for_peer(&g, rs->swap);
		ret = post_ctrl(rs, imm, &g, sizeof(g),
				rs->peer_slots.addr + (uint64_t)rs->peer_slot * SRN_RS_SGE_LEN,
				rs->peer_slots.key);
		if (!ret) {
			rs->rbuf_free -= half;
			rs->rbuf_grant_off = (rs->rbuf_grant_off + half) % rs->rbuf_size;
			rs->peer_slot = (rs->peer_slot + 1) % (int)rs->peer_slots.length;
		}
	} else {
		ret = post_ctrl(rs, imm, NULL, 0, rs->peer_slots.addr, rs->peer_slots.key);
	}
	if (!ret)
		rs->rseq_comp = (uint16_t)(rs->rseq_no + rs->rq_size / 2);
}

static void lost(struct srn_rs *rs, int err)
{
	if (rs->state == SRN_RS_CONNECTED) {
		rs->state = SRN_RS_ERROR;
		rs->err = err;
		rs->readable = rs->writable = false;
	}
}

static void on_recv(struct srn_rs *rs, const struct ibv_wc *wc)
{
	if (wc->status != IBV_WC_SUCCESS) {
		if (wc->status != IBV_WC_WR_FLUSH_ERR)
			lost(rs, ECONNRESET);
		return;
	}
	rs->recv_repost++;
	if (!(wc->wc_flags & IBV_WC_WITH_IMM))
		return;      /* a Send: rsockets' iWARP mode, which we do not speak */
	uint32_t imm = be32toh(wc->imm_data);
	uint32_t arg = srn_rs_imm_arg(imm);
	switch (srn_rs_imm_op(imm)) {
	case SRN_RS_OP_SGL:
		rs->sseq_comp = (uint16_t)arg;
		break;
	case SRN_RS_OP_CTRL:
		if (arg == SRN_RS_CTRL_DISCONNECT || (arg == SRN_RS_CTRL_SHUTDOWN && !rs->writable)) {
			if (rs->state == SRN_RS_CONNECTED)
				rs->state = SRN_RS_DISCONNECTED;
			rs->readable = rs->writable = false;
		} else if (arg == SRN_RS_CTRL_SHUTDOWN) {
			rs->readable = false;
		}
		break;
	case SRN_RS_OP_DATA: {
		/* The peer says it wrote arg bytes.  More than our buffer holds
		 * unread, or more messages than receives, is a lie. */
		unsigned next = (rs->rmsg_tail + 1) % rs->rmsg_size;
		if (arg == 0 || arg > rs->rbuf_size - rs->rbuf_queued || next == rs->rmsg_head) {
			lost(rs, EPROTO);
			break;
		}
		rs->rmsg[rs->rmsg_tail] = arg;
		rs->rmsg_tail = next;
		rs->rbuf_queued += arg;
		break;
	}
	default:
		break;       /* IOMAP_SGL: the table entry is in place; reserved ops */
	}
}

static void on_send(struct srn_rs *rs, const struct ibv_wc *wc)
{
	uint32_t imm = (uint32_t)wc->wr_id;
	switch (srn_rs_imm_op(imm)) {
	case SRN_RS_OP_SGL:
	case SRN_RS_OP_CTRL:
		rs->ctrl_max++;
		break;
	case SRN_RS_OP_IOMAP_SGL:
		rs->sqe_avail++;
		rs->sbuf_avail += sizeof(struct srn_rs_iomap);
		break;
	default:
		rs->sqe_avail++;
		rs->sbuf_avail += srn_rs_imm_arg(imm);
		break;
	}
	if (wc->status != IBV_WC_SUCCESS)
		lost(rs, ECONNRESET);   /* retries exhausted: the peer is gone */
}

void srn_rs_poll_cq(struct srn_rs *rs)
{
	struct ibv_wc wc[16];
	int n;
	if (!rs->cq)
		return;
	while ((n = ibv_poll_cq(rs->cq, 16, wc)) > 0)
		for (int i = 0; i < n; i++) {
			if (wc[i].wr_id & SRN_RS_WR_RECV)
				on_recv(rs, &wc[i]);
			else
				on_send(rs, &wc[i]);
		}
	while (srn_rs_connected(rs) && rs->recv_repost) {
		struct ibv_recv_wr wr = { .wr_id = SRN_RS_WR_RECV }, *bad;
		if (ibv_post_recv(rs->id->qp, &wr, &bad)) {
			lost(rs, EIO);
			break;
		}
		rs->recv_repost--;
	}
}
