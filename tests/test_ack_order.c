/*
 * test_ack_order - an ACK held for the next post leaves before that
 * post's packets.
 *
 * A responder whose application's poll received a Send holds the plain
 * ACK so it leaves with the application's next post (DESIGN, Progress).
 * It must leave first: tgt enters full-feature phase only when the send
 * of its last login response completes, and a first command that reached
 * it before the ACK for that response made tgtd close the connection
 * (about one login in a hundred on softrnic).
 *
 * Two processes (the parent A, the child B): A sends, B polls the Send
 * in (its ACK held) and answers at once with a Send of its own.  On A's
 * one CQ the completion of A's Send (from B's ACK) must come before the
 * receive of B's answer.  Over the rings and over UDP (SOFTRNIC_SHM=0),
 * 200 rounds each (wr_id 1: a Send, 2: a receive).  Each process on an
 * address of its own (srn_tc_fork): on the shared default address a
 * datagram could go the forwarding way round and arrive after a later
 * one, or be lost with another process dying (known-issues.md).
 */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "rc_test_conn.h"

#define ROUNDS 200

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char buf[2][64];
};

static void post_recv(struct side *s)
{
	struct ibv_sge sge = { (uintptr_t)s->buf[1], sizeof(s->buf[1]), s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 }, *bad;
	CHECK(ibv_post_recv(s->qp, &wr, &bad) == 0);
}

static void post_send(struct side *s)
{
	struct ibv_sge sge = { (uintptr_t)s->buf[0], 8, s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
	CHECK(ibv_post_send(s->qp, &wr, &bad) == 0);
}

int main(void)
{
	int fd;
	pid_t pid = srn_tc_fork(&fd);
	struct side s = { 0 };
	union ibv_gid gid;
	s.ctx = srn_tc_open(&gid);
	s.pd = ibv_alloc_pd(s.ctx);
	s.cq = ibv_create_cq(s.ctx, 4 * ROUNDS, NULL, NULL, 0);
	CHECK(s.pd && s.cq);
	struct ibv_qp_init_attr qa = {
		.send_cq = s.cq, .recv_cq = s.cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	s.qp = ibv_create_qp(s.pd, &qa);
	s.mr = ibv_reg_mr(s.pd, s.buf, sizeof(s.buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(s.qp && s.mr);
	struct { struct srn_tc_qp_info qp; union ibv_gid gid; } mine = {
		{ s.qp->qp_num, pid ? 10 : 20 }, gid }, theirs;
	srn_tc_xchg(fd, &mine, &theirs, sizeof(mine), 10000);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	srn_tc_connect(s.qp, &theirs.gid, theirs.qp.qpn, mine.qp.psn, theirs.qp.psn, &o);
	post_recv(&s);
	srn_tc_barrier(fd, 1, 10000);
	unsigned wrong = 0;
	for (int i = 0; i < ROUNDS; i++) {
		if (pid) {
			post_send(&s);
			struct ibv_wc first = srn_tc_poll_one(s.cq, 10);
			struct ibv_wc second = srn_tc_poll_one(s.cq, 10);
			CHECK(first.status == IBV_WC_SUCCESS && second.status == IBV_WC_SUCCESS,
			      "round %d: wr_id %llu %s, then wr_id %llu %s", i,
			      (unsigned long long)first.wr_id, ibv_wc_status_str(first.status),
			      (unsigned long long)second.wr_id, ibv_wc_status_str(second.status));
			wrong += first.opcode != IBV_WC_SEND;
			post_recv(&s);
		} else {
			struct ibv_wc wc = srn_tc_poll_one(s.cq, 10);
			CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV,
			      "round %d: wr_id %llu %s, the receive expected", i,
			      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
			post_recv(&s);
			post_send(&s);   /* the answer, right behind the held ACK */
			wc = srn_tc_poll_one(s.cq, 10);
			CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND,
			      "round %d: wr_id %llu %s, the answer's send expected", i,
			      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
		}
		srn_tc_barrier(fd, 100 + (uint32_t)i, 10000);
	}
	if (pid) {
		CHECK(wrong == 0, "%u of %d answers arrived before the ACK they follow", wrong,
		      ROUNDS);
		printf("ack_order: %d rounds, %u answers before their ACK\n", ROUNDS, wrong);
		CHECK(srn_tc_wait_child(pid, 20) == 0);
	}
	ibv_destroy_qp(s.qp);
	ibv_dereg_mr(s.mr);
	ibv_destroy_cq(s.cq);
	ibv_dealloc_pd(s.pd);
	ibv_close_device(s.ctx);
	return srn_check_result();
}
