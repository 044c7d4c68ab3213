/*
 * test_uc_faults - UC under the fault injector loses whole messages and
 * never delivers a torn one.  Two processes, one UC QP each; the sender
 * sends NMSG multi-packet SENDs (and RDMA Writes with immediate) of
 * varying size, each carrying its sequence number, length and a checksum
 * of its payload; both directions' packets are dropped, duplicated and
 * reordered (SOFTRNIC_FAULTS).  Every completion the receiver gets must
 * be a whole, intact message, in increasing sequence order; some must be
 * missing (the faults did something), most must arrive.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "common/qp_up.h"
#include "rc_test_conn.h"

#define NMSG 600
#define MAXLEN (5 * 1024 + 100)
#define NRECV 256
/* Every RDMA Write (one message in three) lands in a slot of its own, never
 * reused: UC has no flow control, so a receiver that is not scheduled for a
 * while can fall any number of messages behind, and a reused slot would be
 * overwritten by a later Write before the receiver checks the earlier one
 * (with 32 slots it once read message 110's header at message 14's
 * completion, 96 messages later: a torn message the test made itself). */
#define NWRITE (NMSG / 3 + 1)
#define WIN ((size_t)NWRITE * MAXLEN)

struct hdr {
	uint32_t seq, len, crc, pad;
};

/* UC to the peer, both directions starting at PSN 77. */
static void uc_connect(struct ibv_qp *qp, const union ibv_gid *dgid, uint32_t dqpn)
{
	struct srn_qp_up_attr a = srn_qp_up_defaults();
	a.hop_limit = 1;
	a.access = IBV_ACCESS_REMOTE_WRITE;
	const struct srn_qp_up_peer peer = { .qpn = dqpn, .psn = 77, .gid = *dgid };
	const char *step;
	int ret = srn_qp_up(qp, &a, 77, &peer, &step);
	CHECK(ret == 0, "%s: %s", step, strerror(-ret));
}

/* FNV-1a over the payload. */
static uint32_t sum(const uint8_t *p, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static uint32_t msg_len(uint32_t seq)
{
	return sizeof(struct hdr) + (seq * 2654435761u) % (MAXLEN - sizeof(struct hdr));
}

int main(void)
{
	setenv("SOFTRNIC_FAULTS", "seed=5,drop=3,dup=2,reorder=3", 0);
	setenv("SOFTRNIC_DIAG", "0", 0);
	int fd;
	pid_t pid = srn_tc_fork(&fd);
	bool sender = pid != 0;
	union ibv_gid gid, peer_gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 2 * NRECV, NULL, NULL, 0);
	uint8_t *buf = calloc(1, WIN + (size_t)NRECV * MAXLEN);
	CHECK(pd && cq && buf);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, WIN + (size_t)NRECV * MAXLEN,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UC,
		.cap = { .max_send_wr = 64, .max_recv_wr = NRECV, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	CHECK(mr && qp);
	struct { uint32_t qpn; uint64_t addr; uint32_t rkey; union ibv_gid gid; } me = {
		qp->qp_num, (uintptr_t)buf, mr->rkey, gid }, peer;
	srn_tc_xchg(fd, &me, &peer, sizeof(me), 10000);
	peer_gid = peer.gid;
	uc_connect(qp, &peer_gid, peer.qpn);

	if (!sender) {
		for (int i = 0; i < NRECV; i++) {
			struct ibv_sge s = { (uintptr_t)buf + WIN + (size_t)i * MAXLEN, MAXLEN, mr->lkey };
			struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1 }, *bad;
			CHECK(ibv_post_recv(qp, &wr, &bad) == 0);
		}
	}
	srn_tc_barrier(fd, 1, 10000);
	if (sender) {
		for (uint32_t seq = 0; seq < NMSG; seq++) {
			uint32_t len = msg_len(seq);
			uint8_t *m = buf + (seq % 32) * MAXLEN;
			for (uint32_t k = sizeof(struct hdr); k < len; k++)
				m[k] = (uint8_t)(seq * 7 + k);
			struct hdr h = { seq, len, sum(m + sizeof(h), len - sizeof(h)), 0 };
			memcpy(m, &h, sizeof(h));
			struct ibv_sge s = { (uintptr_t)m, len, mr->lkey };
			struct ibv_send_wr wr = { .wr_id = seq, .sg_list = &s, .num_sge = 1,
						  .opcode = seq % 3 == 2 ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_SEND,
						  .send_flags = IBV_SEND_SIGNALED, .imm_data = htobe32(seq) }, *bad;
			/* Writes land in a per-message slot of the peer's window
			 * and announce themselves with the immediate. */
			wr.wr.rdma.remote_addr = peer.addr + (seq / 3) * MAXLEN;
			wr.wr.rdma.rkey = peer.rkey;
			CHECK(ibv_post_send(qp, &wr, &bad) == 0);
			struct ibv_wc wc = srn_tc_poll_one(cq, 10);
			CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == seq);
			if (seq % 16 == 15)
				usleep(3000);   /* let the receiver keep up: UC has no flow control */
		}
		srn_tc_barrier(fd, 2, 30000);
		int st = srn_tc_wait_child(pid, 30);
		printf("sender: %u messages sent; receiver exit %d\n", NMSG, st);
		return st;
	}
	/* receiver */
	uint32_t got = 0, last = 0, torn = 0;
	bool any = false;
	double t0 = srn_tc_now();
	while (srn_tc_now() - t0 < 20) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(cq, 1, &wc);
		CHECK(n >= 0);
		if (n == 0) {
			if (srn_tc_peer_closed(fd) || got + 1 >= NMSG)
				break;
			/* the sender's barrier message means: all sent */
			char c;
			if (recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK) == 1 && srn_tc_now() - t0 > 1) {
				usleep(200000);
				if (ibv_poll_cq(cq, 1, &wc) == 0)
					break;
			} else {
				continue;
			}
		}
		CHECK(wc.status == IBV_WC_SUCCESS);
		const uint8_t *m;
		if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
			uint32_t seq = be32toh(wc.imm_data);
			CHECK(seq < NMSG);
			m = buf + (seq / 3) * MAXLEN;
		} else {
			CHECK(wc.opcode == IBV_WC_RECV);
			m = buf + WIN + wc.wr_id * MAXLEN;
		}
		struct hdr h;
		memcpy(&h, m, sizeof(h));
		bool ok = h.seq < NMSG && h.len == msg_len(h.seq) && wc.byte_len == h.len &&
			  h.crc == sum(m + sizeof(h), h.len - sizeof(h)) &&
			  (!any || h.seq > last);
		if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM)
			ok = ok && be32toh(wc.imm_data) == h.seq;
		if (!ok) {
			fprintf(stderr, "torn or out of order: seq %u len %u byte_len %u (last %u)\n",
				h.seq, h.len, wc.byte_len, last);
			torn++;
		}
		any = true;
		last = h.seq;
		got++;
		if (wc.opcode == IBV_WC_RECV) {
			struct ibv_sge s = { (uintptr_t)buf + WIN + wc.wr_id * MAXLEN, MAXLEN, mr->lkey };
			struct ibv_recv_wr wr = { .wr_id = wc.wr_id, .sg_list = &s, .num_sge = 1 }, *bad;
			CHECK(ibv_post_recv(qp, &wr, &bad) == 0);
		}
	}
	srn_tc_barrier(fd, 2, 30000);
	printf("receiver: %u of %u messages whole and in order, %u torn, %u lost\n", got - torn,
	       NMSG, torn, NMSG - got);
	CHECK(torn == 0);
	CHECK(got < NMSG);          /* the faults lost some */
	CHECK(got > NMSG / 2);      /* but not most */
	return 0;
}
