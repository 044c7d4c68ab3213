/*
 * test_ud_mcast - UD multicast between processes: one sender, three
 * receiving processes attached to one multicast GID, each with its own
 * device address.  Every message must reach every receiver intact; after
 * ibv_detach_mcast no more may arrive.  Also the argument checks of
 * attach/detach (RC QP, unicast GID: EINVAL).
 *
 * Across hosts: with SRN_MCAST_NS_SEND / SRN_MCAST_NS_RECV (network
 * namespace names) and SRN_MCAST_ADDR_SEND / SRN_MCAST_ADDR_RECV0..2 the
 * sender and each receiver enter their namespace and pin their device to
 * that address before opening it (test_ud_mcast_netns.sh sets this up).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "common/qp_up.h"

/* Each process stops at its first failed check, named by its pid. */
static const char *pid_tag(void)
{
	static char b[16];
	snprintf(b, sizeof(b), "%d", (int)getpid());
	return b;
}
#define SRN_CHECK_FATAL
#define SRN_CHECK_TAG pid_tag()
#include "check.h"
#include "diag/clock.h"
#define NRECV 3
#define NMSG 200
#define NLATE 50
#define MSGLEN 512
#define QKEY 0x11111111u
/* Flow control of the test's own: a receiver reports every CREDIT_EVERY
 * messages it has taken (a byte with its index on the credit pipe), and the
 * sender runs at most WINDOW messages ahead of the slowest.  UD has none,
 * and the socket of a receiver that is not scheduled overflows: a fixed
 * pause every 16 sends still lost 18 and 34 of 200 on a loaded machine.
 * WINDOW datagrams (about 2 KiB of socket buffer each) fit in the default
 * 208 KiB with room to spare. */
#define CREDIT_EVERY 16
#define WINDOW 48
#define CREDIT_WAIT_S 10.0

struct ep {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
};

/* Optionally move this (single-threaded) process into a namespace and pin
 * its device to an address, before the device is opened. */
static void place(const char *ns_env, const char *addr_env)
{
	const char *ns = getenv(ns_env), *addr = getenv(addr_env);
	if (!ns || !addr)
		return;
	char path[256], dev[256];
	snprintf(path, sizeof(path), "/var/run/netns/%s", ns);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0 && setns(fd, CLONE_NEWNET) == 0);
	close(fd);
	snprintf(dev, sizeof(dev), "name=softrnic0,addr=%s", addr);
	CHECK(setenv("SOFTRNIC_DEVICES", dev, 1) == 0);
}

static void ep_close(struct ep *e)
{
	CHECK(ibv_destroy_qp(e->qp) == 0);
	CHECK(ibv_dereg_mr(e->mr) == 0);
	CHECK(ibv_destroy_cq(e->cq) == 0);
	CHECK(ibv_dealloc_pd(e->pd) == 0);
	CHECK(ibv_close_device(e->ctx) == 0);
	free(e->buf);
}

static void ep_open(struct ep *e, size_t bufsz)
{
	int n;
	struct ibv_device **l = ibv_get_device_list(&n);
	CHECK(l && n > 0);
	e->ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	CHECK(e->ctx);
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, 1024, NULL, NULL, 0);
	e->buf = calloc(1, bufsz);
	CHECK(e->pd && e->cq && e->buf);
	e->mr = ibv_reg_mr(e->pd, e->buf, bufsz, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp_init_attr ia = { .send_cq = e->cq, .recv_cq = e->cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 64, .max_recv_wr = 512, .max_send_sge = 1, .max_recv_sge = 1 } };
	e->qp = ibv_create_qp(e->pd, &ia);
	CHECK(e->mr && e->qp);
	struct srn_qp_up_attr a = srn_qp_up_defaults();
	a.qkey = QKEY;
	const char *step;
	int ret = srn_qp_up(e->qp, &a, 0, NULL, &step);
	CHECK(ret == 0, "%s: %s", step, strerror(-ret));
}

static void post_recvs(struct ep *e, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge s = { (uintptr_t)e->buf + (size_t)i * (MSGLEN + 40), MSGLEN + 40, e->mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1 }, *bad;
		CHECK(ibv_post_recv(e->qp, &wr, &bad) == 0);
	}
}

/* Count received messages until `want` arrive or `secs` pass; check each.
 * With credit_fd >= 0, write idx there after every CREDIT_EVERY. */
static int receive(struct ep *e, int want, double secs, uint8_t *seen, int credit_fd, int idx)
{
	int got = 0;
	double t0 = (srn_now_ns() / 1e9);
	while (got < want && (srn_now_ns() / 1e9) - t0 < secs) {
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(e->cq, 16, wc);
		CHECK(n >= 0);
		for (int i = 0; i < n; i++) {
			CHECK(wc[i].status == IBV_WC_SUCCESS && wc[i].opcode == IBV_WC_RECV);
			CHECK(wc[i].byte_len == MSGLEN + 40 && (wc[i].wc_flags & IBV_WC_GRH));
			/* sl names the header in the GRH area, as mlx5's does
			 * (UCX's ud_verbs finds the destination by it):
			 * 2 = IPv4 header in bytes 20..39, 1 = IPv6 header. */
			const uint8_t *grh = e->buf + wc[i].wr_id * (MSGLEN + 40);
			CHECK(wc[i].sl == 2 ? grh[20] == 0x45 : wc[i].sl == 1 && grh[0] >> 4 == 6);
			const uint8_t *m = e->buf + wc[i].wr_id * (MSGLEN + 40) + 40;
			uint32_t seq;
			memcpy(&seq, m, 4);
			CHECK(seq < NMSG + NLATE);
			for (int k = 4; k < MSGLEN; k++)
				CHECK(m[k] == (uint8_t)(seq + k));
			CHECK(!seen[seq]);
			seen[seq] = 1;
			got++;
			if (credit_fd >= 0 && got % CREDIT_EVERY == 0) {
				uint8_t b = (uint8_t)idx;
				CHECK(write(credit_fd, &b, 1) == 1);
			}
			/* put the buffer back */
			struct ibv_sge s = { (uintptr_t)e->buf + wc[i].wr_id * (MSGLEN + 40), MSGLEN + 40, e->mr->lkey };
			struct ibv_recv_wr wr = { .wr_id = wc[i].wr_id, .sg_list = &s, .num_sge = 1 }, *bad;
			CHECK(ibv_post_recv(e->qp, &wr, &bad) == 0);
		}
	}
	return got;
}

static void receiver(int idx, union ibv_gid grp, int ready_fd, int go_fd, int result_fd,
		     int credit_fd)
{
	char addr_env[32];
	snprintf(addr_env, sizeof(addr_env), "SRN_MCAST_ADDR_RECV%d", idx);
	place("SRN_MCAST_NS_RECV", addr_env);
	struct ep e;
	ep_open(&e, 512 * (MSGLEN + 40));
	post_recvs(&e, 512);
	CHECK(ibv_attach_mcast(e.qp, &grp, 0) == 0);
	CHECK(ibv_attach_mcast(e.qp, &grp, 0) == 0);   /* twice is fine */
	char c = 'r';
	CHECK(write(ready_fd, &c, 1) == 1);
	uint8_t seen[NMSG + NLATE] = { 0 };
	int got = receive(&e, NMSG, 15.0, seen, credit_fd, idx);
	CHECK(ibv_detach_mcast(e.qp, &grp, 0) == 0);
	CHECK(ibv_detach_mcast(e.qp, &grp, 0) == EINVAL);   /* not attached any more */
	CHECK(write(ready_fd, &c, 1) == 1);
	CHECK(read(go_fd, &c, 1) == 1);                     /* sender sent the late ones */
	int late = receive(&e, NLATE, 0.3, seen, -1, idx);
	int res[2] = { got, late };
	CHECK(write(result_fd, res, sizeof(res)) == sizeof(res));
	ep_close(&e);
	exit(0);
}

/* Wait until every receiver has reported at least `need` messages, or
 * CREDIT_WAIT_S pass: a receiver that lost a datagram never reports it,
 * and then the sender goes on and the count at the end fails the test. */
static void wait_credit(int fd, int *taken, int need)
{
	double t0 = (srn_now_ns() / 1e9);
	for (;;) {
		int low = taken[0];
		for (int i = 1; i < NRECV; i++)
			low = taken[i] < low ? taken[i] : low;
		if (low >= need)
			return;
		double left = CREDIT_WAIT_S - ((srn_now_ns() / 1e9) - t0);
		if (left <= 0) {
			fprintf(stderr, "sender: a receiver reported only %d of %d messages in %.0f s; "
				"going on\n", low, need, CREDIT_WAIT_S);
			return;
		}
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int r = poll(&p, 1, (int)(left * 1000) + 1);
		CHECK(r >= 0);
		uint8_t b;
		if (r == 1) {
			CHECK(read(fd, &b, 1) == 1 && b < NRECV);
			taken[b] += CREDIT_EVERY;
		}
	}
}

int main(void)
{
	srand((unsigned)time(NULL) ^ (unsigned)getpid());
	/* A group per run (239.77.x.y) so parallel runs do not mix. */
	union ibv_gid grp = { .raw = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 77,
				       (uint8_t)(rand() & 0xff), (uint8_t)(1 + rand() % 254) } };
	int ready[2], go[2], result[2], credit[2];
	CHECK(pipe(ready) == 0 && pipe(go) == 0 && pipe(result) == 0 && pipe(credit) == 0);
	pid_t kids[NRECV];
	for (int i = 0; i < NRECV; i++) {
		kids[i] = fork();
		CHECK(kids[i] >= 0);
		if (kids[i] == 0)
			receiver(i, grp, ready[1], go[0], result[1], credit[1]);
	}
	place("SRN_MCAST_NS_SEND", "SRN_MCAST_ADDR_SEND");
	struct ep s;
	ep_open(&s, 64 * MSGLEN);

	/* attach/detach argument checks */
	union ibv_gid uni;
	CHECK(ibv_query_gid(s.ctx, 1, 0, &uni) == 0);
	CHECK(ibv_attach_mcast(s.qp, &uni, 0) == EINVAL);
	struct ibv_qp_init_attr ia = { .send_cq = s.cq, .recv_cq = s.cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *rc = ibv_create_qp(s.pd, &ia);
	CHECK(rc && ibv_attach_mcast(rc, &grp, 0) == EINVAL);
	CHECK(ibv_destroy_qp(rc) == 0);

	char c;
	for (int i = 0; i < NRECV; i++)
		CHECK(read(ready[0], &c, 1) == 1);
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1, .grh = { .dgid = grp, .hop_limit = 1 } };
	struct ibv_ah *ah = ibv_create_ah(s.pd, &aa);
	CHECK(ah);
	int taken[NRECV] = { 0 };       /* messages each receiver reported */
	for (uint32_t seq = 0; seq < NMSG + NLATE; seq++) {
		if (seq < NMSG)
			wait_credit(credit[0], taken, (int)seq - WINDOW);
		if (seq == NMSG) {
			for (int i = 0; i < NRECV; i++)   /* every receiver detached */
				CHECK(read(ready[0], &c, 1) == 1);
		}
		uint8_t *m = s.buf + (seq % 64) * MSGLEN;
		memcpy(m, &seq, 4);
		for (int k = 4; k < MSGLEN; k++)
			m[k] = (uint8_t)(seq + k);
		struct ibv_sge sg = { (uintptr_t)m, MSGLEN, s.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = seq, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = 0xffffff;
		wr.wr.ud.remote_qkey = QKEY;
		CHECK(ibv_post_send(s.qp, &wr, &bad) == 0);
		struct ibv_wc wc;
		double t0 = (srn_now_ns() / 1e9);
		int n;
		while ((n = ibv_poll_cq(s.cq, 1, &wc)) == 0)
			CHECK((srn_now_ns() / 1e9) - t0 < 5);
		CHECK(n == 1 && wc.status == IBV_WC_SUCCESS);
	}
	for (int i = 0; i < NRECV; i++) {
		c = 'g';
		CHECK(write(go[1], &c, 1) == 1);
	}
	int bad_rc = 0;
	for (int i = 0; i < NRECV; i++) {
		int res[2];
		CHECK(read(result[0], res, sizeof(res)) == sizeof(res));
		printf("receiver: %d of %d while attached, %d after detach\n", res[0], NMSG, res[1]);
		if (res[0] != NMSG || res[1] != 0)
			bad_rc = 1;
	}
	for (int i = 0; i < NRECV; i++) {
		int st;
		CHECK(waitpid(kids[i], &st, 0) == kids[i]);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad_rc = 1;
	}
	CHECK(ibv_destroy_ah(ah) == 0);
	ep_close(&s);
	CHECK(bad_rc == 0);
	printf("ok\n");
	return 0;
}
