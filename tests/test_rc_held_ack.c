/*
 * test_rc_held_ack - an ACK held for the application's next post still
 * leaves when that post never comes.
 *
 * A receiver that polls its CQ holds the plain ACKs of what it just
 * received, so that they leave in the same system call as its answer (the
 * ping-pong fast path, engine/progress.c).  This test makes the receiver
 * (child) not answer:
 *   quiet:   it polls two receives (the first wakes its progress thread,
 *            which then leaves the polling application the work and the
 *            second's ACK is held), then blocks on the out-of-band socket
 *            and makes no verbs call; its progress thread must send it.
 *   destroy: it polls the receive, then destroys the QP and exits at once;
 *            the destroy must send the ACK.
 *   --exit:  as destroy, but it returns from main without closing anything
 *            (as many verbs programs do); the library's exit hook must
 *            send the ACK.
 * The sender (parent) connects with retry_cnt 0 and a 4.3 s ACK timeout:
 * an ACK that does not arrive before the first timeout is a
 * RETRY_EXC_ERR completion, so success means the held ACK arrived.
 *
 * Whether the receiver really held the ACKs is in its counters
 * (acks_held_for_post), which test_rc_held_ack.sh checks.
 */
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "rc_test_conn.h"

#define MSG 64
#define ROUNDS 20                 /* quiet rounds: the receiver sleeps in read() */
#define PER_ROUND 2               /* messages per round, the receiver polling */
#define NMSG ((ROUNDS + 1) * PER_ROUND)
#define SEND_SLOT NMSG
#define POLL_S 10.0

struct info {
	union ibv_gid gid;
	uint32_t qpn;
};

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t buf[MSG * (NMSG + 1)];   /* a slot per receive, then the send slot */
};

static void open_side(struct side *s, int fd)
{
	union ibv_gid gid;
	s->ctx = srn_tc_open(&gid);
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 64, NULL, NULL, 0);
	CHECK(s->pd && s->cq);
	s->mr = ibv_reg_mr(s->pd, s->buf, sizeof(s->buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(s->mr);
	struct ibv_qp_init_attr ia = {
		.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	s->qp = ibv_create_qp(s->pd, &ia);
	CHECK(s->qp);
	struct info me = { .gid = gid, .qpn = s->qp->qp_num }, peer;
	srn_tc_xchg(fd, &me, &peer, sizeof(me), 30000);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	o.timeout = 20;            /* 4.096 us << 20 = 4.3 s */
	o.retry_cnt = 0;           /* no second chance for a lost ACK */
	srn_tc_connect(s->qp, &peer.gid, peer.qpn, 0x100, 0x100, &o);
}

static void close_side(struct side *s)
{
	if (s->qp)
		CHECK(ibv_destroy_qp(s->qp) == 0);
	CHECK(ibv_dereg_mr(s->mr) == 0);
	CHECK(ibv_destroy_cq(s->cq) == 0);
	CHECK(ibv_dealloc_pd(s->pd) == 0);
	CHECK(ibv_close_device(s->ctx) == 0);
}

static void post_recv(struct side *s, uint64_t id)
{
	struct ibv_sge sge = { (uintptr_t)(s->buf + id * MSG), MSG, s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;
	CHECK(ibv_post_recv(s->qp, &wr, &bad) == 0);
}

/* Poll for the receive of round r in a tight loop: the application drives
 * progress, so the ACK is held rather than sent. */
static void recv_round(struct side *s, uint32_t r)
{
	struct ibv_wc wc = srn_tc_poll_one(s->cq, POLL_S);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV);
	CHECK(wc.wr_id == r && wc.byte_len == MSG);
	const uint8_t *p = s->buf + (size_t)r * MSG;
	CHECK(p[0] == (uint8_t)r && p[MSG - 2] == (uint8_t)r && p[MSG - 1] == (uint8_t)~r);
}

static bool exit_without_close;

static int receiver(int fd)
{
	static struct side s;          /* reachable at exit: not a leak when left open */
	open_side(&s, fd);
	uint32_t m = 0;
	for (uint32_t r = 0; r < NMSG; r++)
		post_recv(&s, r);
	for (uint32_t r = 0; r < ROUNDS; r++) {
		srn_tc_barrier(fd, 0x1000 + r, 30000);  /* the sender posts after this */
		for (int k = 0; k < PER_ROUND; k++)
			recv_round(&s, m++);
		/* Quiet: no verbs call until the sender has its completions. */
		srn_tc_barrier(fd, 0x2000 + r, 30000);
	}
	/* Last round: the second receive's ACK is held, and the receiver
	 * leaves at once. */
	srn_tc_barrier(fd, 0x3000, 30000);
	for (int k = 0; k < PER_ROUND; k++)
		recv_round(&s, m++);
	if (!exit_without_close)
		close_side(&s);        /* destroys the QP owing the ACK */
	return 0;
}

static void send_round(struct side *s, uint32_t r)
{
	uint8_t *p = s->buf + (size_t)SEND_SLOT * MSG;
	memset(p, (uint8_t)r, MSG - 1);
	p[MSG - 1] = (uint8_t)~r;
	struct ibv_sge sge = { (uintptr_t)p, MSG, s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1000 + r, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
	CHECK(ibv_post_send(s->qp, &wr, &bad) == 0);
	struct ibv_wc wc = srn_tc_poll_one(s->cq, POLL_S);
	if (wc.status != IBV_WC_SUCCESS)
		fprintf(stderr, "[%s] round %u: %s\n", srn_tc_role, r, ibv_wc_status_str(wc.status));
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 1000 + r);
}

static int sender(int fd)
{
	struct side s = { 0 };
	open_side(&s, fd);
	uint32_t m = 0;
	for (uint32_t r = 0; r < ROUNDS; r++) {
		srn_tc_barrier(fd, 0x1000 + r, 30000);
		for (int k = 0; k < PER_ROUND; k++) {
			usleep(2000);  /* the receiver is polling by now */
			send_round(&s, m++);
		}
		srn_tc_barrier(fd, 0x2000 + r, 30000);
	}
	srn_tc_barrier(fd, 0x3000, 30000);
	for (int k = 0; k < PER_ROUND; k++) {
		usleep(2000);
		send_round(&s, m++);   /* the last: acknowledged by the receiver's way out */
	}
	close_side(&s);
	return 0;
}

int main(int argc, char **argv)
{
	int fd;
	exit_without_close = argc > 1 && strcmp(argv[1], "--exit") == 0;
	pid_t child = srn_tc_fork(&fd);
	if (child == 0)
		return receiver(fd);
	int rc = sender(fd);
	int crc = srn_tc_wait_child(child, 60);
	if (rc || crc) {
		fprintf(stderr, "FAIL: sender %d, receiver %d\n", rc, crc);
		return 1;
	}
	printf("ok: %d quiet rounds of %d and one %s, every send acknowledged\n", ROUNDS,
	       PER_ROUND, exit_without_close ? "exit without close" : "destroy");
	return 0;
}
