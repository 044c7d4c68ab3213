/*
 * test_rereg_recv.c - rdma-core's tests/test_mr.py rereg sequences, which
 * every provider must pass (issue 27 item 5):
 *
 *   rereg_pd    test_mr_rereg_pd: traffic, then the server's region moves
 *               to a new PD (keys kept, as rxe and mlx5 do) and the next
 *               round's Send lands in a receive that names it through a
 *               QP of the old PD;
 *   rereg_addr  test_mr_rereg_addr: a receive is posted, then the region
 *               gets a new translation (new keys), and the client's Send
 *               lands in that receive.
 *
 *   nak_lost    rereg_addr's failing round with the NAK lost on the link
 *               (run with SOFTRNIC_FAULTS=tx.drop=100,opcode=0x11, which
 *               drops every ACKNOWLEDGE, and the round has one): the
 *               server went to Error with its NAK and answers none of
 *               the client's retries (IBTA: a QP in Error drops what
 *               arrives; rxe does too), so the client's Send ends in
 *               RETRY_EXC_ERR after its whole retry budget.  The CI
 *               failure of rereg_addr had exactly this signature (0.57 s,
 *               the first completion RETRY_EXC_ERR): one lost packet is
 *               enough, which is why the test keeps an address of its
 *               own (tests/peer.cmake).
 *
 * Each as rdma-core's u.traffic runs it: client and server are two RC QPs
 * of one process on one device, opened once per side as pyverbs does,
 * each with one CQ for its sends and receives, a receive posted on both
 * before the client's Send.  Checked:
 *  - the client's first completion is its Send, IBV_WC_REM_OP_ERR (the
 *    responder's NAK remote operational error), before the flush of its
 *    own receives;
 *  - the server's first completion is that receive, IBV_WC_LOC_PROT_ERR
 *    (mlx5's status; rxe says LOC_QP_OP_ERR, DESIGN "Deviations from
 *    rxe"), and both QPs are in ERR;
 *  - then, as rdma-core does, the flushed completions left unread on
 *    both CQs, both QPs restated (RESET .. RTS) and the region put back:
 *    traffic succeeds.  This is what failed: RESET left those flushes in
 *    the CQs and the next round's first poll found WR_FLUSH_ERR (libmlx5
 *    removes a QP's completions from its CQs at RESET).
 *
 *   test_rereg_recv [rereg_pd|rereg_addr|nak_lost]
 *                                   (default: rereg_pd and rereg_addr)
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rc_test_conn.h"

#define MSG 1024
#define PSN 0x1234

struct player {
	struct ibv_context *ctx;       /* pyverbs opens the device per side */
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint8_t *buf;
};

static union ibv_gid gid;

static void make_player(struct player *p)
{
	p->ctx = srn_tc_open(&gid);
	p->pd = ibv_alloc_pd(p->ctx);
	CHECK(p->pd);
	CHECK(posix_memalign((void **)&p->buf, 4096, MSG) == 0);
	memset(p->buf, 0, MSG);
	p->mr = ibv_reg_mr(p->pd, p->buf, MSG, IBV_ACCESS_LOCAL_WRITE);
	CHECK(p->mr);
	p->cq = ibv_create_cq(p->ctx, 64, NULL, NULL, 0);
	CHECK(p->cq);
	struct ibv_qp_init_attr ia = {
		.send_cq = p->cq, .recv_cq = p->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	p->qp = ibv_create_qp(p->pd, &ia);
	CHECK(p->qp);
}

static void free_player(struct player *p)
{
	CHECK(ibv_destroy_qp(p->qp) == 0);
	CHECK(ibv_destroy_cq(p->cq) == 0);
	CHECK(ibv_dereg_mr(p->mr) == 0);
	CHECK(ibv_dealloc_pd(p->pd) == 0);
	CHECK(ibv_close_device(p->ctx) == 0);
	free(p->buf);
}

/* RESET (if asked) .. RTS towards the other QP: rdma-core's to_rts. */
static void to_rts(struct player *p, const struct player *peer, int reset)
{
	if (reset) {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };
		CHECK(ibv_modify_qp(p->qp, &a, IBV_QP_STATE) == 0);
	}
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	o.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	o.timeout = 14;
	srn_tc_connect(p->qp, &gid, peer->qp->qp_num, PSN, PSN, &o);
}

static void post_recv(struct player *p, uint64_t id)
{
	struct ibv_sge s = { (uintptr_t)p->mr->addr, MSG, p->mr->lkey };
	struct ibv_recv_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1 }, *bad;
	CHECK(ibv_post_recv(p->qp, &w, &bad) == 0);
}

static void post_send(struct player *p, uint64_t id)
{
	memset(p->mr->addr, 's', MSG);
	struct ibv_sge s = { (uintptr_t)p->mr->addr, MSG, p->mr->lkey };
	struct ibv_send_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1,
				 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
	CHECK(ibv_post_send(p->qp, &w, &bad) == 0);
}

/* The next completion of p's CQ (rdma-core's poll: the first one is the
 * one it judges). */
static struct ibv_wc next(struct player *p)
{
	return srn_tc_poll_one(p->cq, 10);
}

static enum ibv_qp_state state_of(struct player *p)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	CHECK(ibv_query_qp(p->qp, &a, IBV_QP_STATE, &ia) == 0);
	return a.qp_state;
}

/* rdma-core's u.traffic, `iters` rounds; every completion must succeed. */
static void traffic_ok(struct player *c, struct player *s, int iters)
{
	post_recv(c, 100);
	post_recv(s, 200);
	for (int i = 0; i < iters; i++) {
		post_send(c, 1);
		struct ibv_wc wc = next(c);
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND, "client: %s",
		      ibv_wc_status_str(wc.status));
		wc = next(s);
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV, "server: %s",
		      ibv_wc_status_str(wc.status));
		post_recv(s, 200);
		post_send(s, 2);
		wc = next(s);
		CHECK(wc.status == IBV_WC_SUCCESS, "server send: %s", ibv_wc_status_str(wc.status));
		wc = next(c);
		CHECK(wc.status == IBV_WC_SUCCESS, "client recv: %s", ibv_wc_status_str(wc.status));
		post_recv(c, 100);
	}
}

/* One round of u.traffic that must fail as rdma-core expects; the receive
 * the Send lands in was posted by the caller (rereg_addr) or here.  The
 * client's Send ends in client_st: the server's NAK (REM_OP_ERR), or, with
 * that NAK lost, its retries unanswered (RETRY_EXC_ERR). */
static void traffic_fails(struct player *c, struct player *s, int post_server_recv,
			  enum ibv_wc_status client_st)
{
	post_recv(c, 100);
	if (post_server_recv)
		post_recv(s, 200);
	post_send(c, 1);
	struct ibv_wc wc = next(c);
	printf("client's first completion: wr_id %llu %s\n", (unsigned long long)wc.wr_id,
	       ibv_wc_status_str(wc.status));
	CHECK(wc.wr_id == 1 && wc.status == client_st, "client: wr_id %llu, %s%s",
	      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status),
	      wc.status == IBV_WC_RETRY_EXC_ERR && client_st != wc.status
		      ? " (the server's NAK never arrived: a QP in Error answers no retry, "
			"so one lost NAK ends so; see the counters)" : "");
	wc = next(s);
	printf("server's first completion: wr_id %llu %s\n", (unsigned long long)wc.wr_id,
	       ibv_wc_status_str(wc.status));
	CHECK(wc.wr_id == 200 && wc.status == IBV_WC_LOC_PROT_ERR, "server: wr_id %llu, %s",
	      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
	CHECK(state_of(s) == IBV_QPS_ERR);
	CHECK(state_of(c) == IBV_QPS_ERR);
	/* The flushed receives stay on both CQs, unread, as rdma-core's
	 * traffic leaves them when its poll raises. */
}

static void rereg_pd(void)
{
	struct player c, s;
	make_player(&c);
	make_player(&s);
	to_rts(&c, &s, 0);
	to_rts(&s, &c, 0);
	/* Its traffic ends with a receive posted on each side: the server's
	 * is the one the failing Send lands in. */
	traffic_ok(&c, &s, 10);
	struct ibv_pd *new_pd = ibv_alloc_pd(s.ctx);
	CHECK(new_pd);
	CHECK(ibv_rereg_mr(s.mr, IBV_REREG_MR_CHANGE_PD, new_pd, NULL, 0, 0) == 0);
	traffic_fails(&c, &s, 1, IBV_WC_REM_OP_ERR);
	to_rts(&s, &c, 1);
	to_rts(&c, &s, 1);
	CHECK(ibv_rereg_mr(s.mr, IBV_REREG_MR_CHANGE_PD, s.pd, NULL, 0, 0) == 0);
	traffic_ok(&c, &s, 10);
	/* Back to the new PD: destroying it with the region on it is EBUSY,
	 * dereg first (rdma-core leaves it to the objects' close order). */
	CHECK(ibv_rereg_mr(s.mr, IBV_REREG_MR_CHANGE_PD, new_pd, NULL, 0, 0) == 0);
	free_player(&c);
	CHECK(ibv_destroy_qp(s.qp) == 0);
	CHECK(ibv_destroy_cq(s.cq) == 0);
	CHECK(ibv_dereg_mr(s.mr) == 0);
	CHECK(ibv_dealloc_pd(s.pd) == 0);
	CHECK(ibv_dealloc_pd(new_pd) == 0);
	CHECK(ibv_close_device(s.ctx) == 0);
	free(s.buf);
	printf("ok: rereg_pd\n");
}

/* rereg_addr; with nak_lost, its failing round under a fault injector that
 * drops the server's NAK: the retries into a server in Error go
 * unanswered, and the restate is not tried (the injector would drop the
 * ACKs of the next traffic too). */
static void rereg_addr(bool nak_lost)
{
	if (nak_lost) {
		const char *f = getenv("SOFTRNIC_FAULTS");
		if (!f || !strstr(f, "opcode=0x11")) {
			printf("skip: nak_lost wants SOFTRNIC_FAULTS=tx.drop=100,opcode=0x11\n");
			exit(77);
		}
	}
	struct player c, s;
	make_player(&c);
	make_player(&s);
	to_rts(&c, &s, 0);
	to_rts(&s, &c, 0);
	/* A receive on the old translation, then the region moves. */
	post_recv(&s, 200);
	uint8_t *other;
	CHECK(posix_memalign((void **)&other, 4096, MSG) == 0);
	CHECK(ibv_rereg_mr(s.mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, other, MSG, 0) == 0);
	traffic_fails(&c, &s, 0, nak_lost ? IBV_WC_RETRY_EXC_ERR : IBV_WC_REM_OP_ERR);
	if (!nak_lost) {
		to_rts(&s, &c, 1);
		to_rts(&c, &s, 1);
		traffic_ok(&c, &s, 10);
	}
	free_player(&c);
	free_player(&s);
	free(other);
	printf("ok: %s\n", nak_lost ? "nak_lost" : "rereg_addr");
}

int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : NULL;
	if (!only || !strcmp(only, "rereg_pd"))
		rereg_pd();
	if (!only || !strcmp(only, "rereg_addr"))
		rereg_addr(false);
	if (only && !strcmp(only, "nak_lost"))
		rereg_addr(true);
	return srn_check_result();
}
