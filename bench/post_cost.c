/*
 * post_cost.c - what one small RDMA Write costs the thread that posts it,
 * for issue 29 ("small operations at the speed of shared memory").
 *
 * A ping-pong's half round trip (`softrnic perf`, ib_write_lat) is the
 * poster's path, the crossing of a cache line between two CPUs and the
 * peer's look, and on a shared VM it moves by 30 % from one minute to the
 * next.  This times the poster's two calls alone, with the time-stamp
 * counter, per call: ibv_post_send of one signaled 8-byte RDMA Write and
 * the ibv_poll_cq that takes its completion.  Percentiles of 200000 calls
 * barely move with the load, so two builds can be told apart by a few
 * nanoseconds.
 *
 * Two processes (fork before any verbs call, so each opens its own
 * device); the child is the target.  With --spin it spins on the byte
 * the Writes change, as ib_write_lat's peer does, so every store of the
 * poster has to take the line from the other CPU first; without, it
 * sleeps in poll() on the control socket.
 *
 * Built against the system <infiniband/verbs.h> with softrnic's lib first
 * in the library path, like idle_qps.c:
 *   cc -std=gnu11 -O2 -o post_cost bench/post_cost.c tools/common/qp_up.c \
 *      -Itools -Lbuild/lib -l:libibverbs.so.1 -Wl,-rpath,$PWD/build/lib
 * Output: one JSON line, nanoseconds.  x86-64 only (rdtscp).
 * Invariants: every wait is bounded; the child dies with the parent.
 * Exit status: 0 ok, 1 failure, 2 usage error.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>
#include <infiniband/verbs.h>

#define BENCH_TOOL "post_cost"
#include "two_procs.h"

#define BUF_SIZE 4096
#define MAX_ITERS 2000000


struct verbs {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	uint8_t *buf;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t tsc(void)
{
	unsigned aux;

	return __rdtscp(&aux);
}

/* Time-stamp counter ticks per nanosecond, over 50 ms of the clock. */
static double tsc_per_ns(void)
{
	uint64_t t0 = now_ns(), c0 = tsc(), t1;

	while ((t1 = now_ns()) - t0 < 50000000u)
		;
	return (double)(tsc() - c0) / (double)(t1 - t0);
}

static void open_verbs(struct verbs *v, struct info *me)
{
	struct ibv_device **list;
	int n;

	list = ibv_get_device_list(&n);
	CHECK(list && n >= 1);
	v->ctx = ibv_open_device(list[0]);
	CHECK(v->ctx);
	ibv_free_device_list(list);
	v->pd = ibv_alloc_pd(v->ctx);
	v->cq = ibv_create_cq(v->ctx, 256, NULL, NULL, 0);
	v->buf = aligned_alloc(4096, BUF_SIZE);
	CHECK(v->pd && v->cq && v->buf);
	memset(v->buf, 0, BUF_SIZE);
	v->mr = ibv_reg_mr(v->pd, v->buf, BUF_SIZE,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(v->mr);
	struct ibv_qp_init_attr ia = {
		.send_cq = v->cq, .recv_cq = v->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 128, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	v->qp = ibv_create_qp(v->pd, &ia);
	CHECK(v->qp);
	memset(me, 0, sizeof(*me));
	CHECK(ibv_query_gid(v->ctx, 1, 0, &me->gid) == 0);
	me->qpn = v->qp->qp_num;
	me->rkey = v->mr->rkey;
	me->addr = (uintptr_t)v->buf;
}

static void close_verbs(struct verbs *v)
{
	ibv_destroy_qp(v->qp);
	ibv_dereg_mr(v->mr);
	ibv_destroy_cq(v->cq);
	ibv_dealloc_pd(v->pd);
	ibv_close_device(v->ctx);
	free(v->buf);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static double pct(uint32_t *s, uint64_t n, double p, double per_ns)
{
	return s[(uint64_t)(p * (double)(n - 1))] / per_ns;
}

/* The poster: iters Writes of 8 bytes, one post and one poll each, each
 * call timed on its own.  The byte at offset 7 counts 1..255 so a
 * spinning target sees every Write. */
static void post_loop(struct verbs *v, const struct info *peer, uint64_t iters,
		      uint32_t *t_post, uint32_t *t_poll)
{
	struct ibv_sge sge = { (uintptr_t)v->buf, 8, v->mr->lkey };

	for (uint64_t i = 0; i < iters; i++) {
		struct ibv_send_wr wr = {
			.wr_id = i, .sg_list = &sge, .num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { peer->addr, peer->rkey },
		}, *bad;
		struct ibv_wc wc;
		uint64_t end = now_ns() + 5000000000u;
		int n;

		v->buf[7] = (uint8_t)(1 + i % 255);
		uint64_t c0 = tsc();
		CHECK(ibv_post_send(v->qp, &wr, &bad) == 0);
		uint64_t c1 = tsc();
		while ((n = ibv_poll_cq(v->cq, 1, &wc)) == 0)
			CHECK(now_ns() < end);
		uint64_t c2 = tsc();
		CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == i);
		t_post[i] = (uint32_t)(c1 - c0 < UINT32_MAX ? c1 - c0 : UINT32_MAX);
		t_poll[i] = (uint32_t)(c2 - c1 < UINT32_MAX ? c2 - c1 : UINT32_MAX);
	}
}

/* The target with --spin: look at the last byte until the parent writes
 * to the control socket. */
static void spin_until(int fd, volatile const uint8_t *b)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint64_t end = now_ns() + 600000000000u;
	unsigned k = 0;
	uint8_t seen = 0;

	for (;;) {
		seen ^= *b;
		if (++k % 4096 == 0 && (poll(&p, 1, 0) == 1 || now_ns() > end))
			break;
	}
	(void)seen;
}

/* The mean of the middle 80 %: finer than one step of the counter, which
 * on a VM may count in steps of tens of ticks. */
static double trimmed_mean(const uint32_t *s, uint64_t n, double per_ns)
{
	uint64_t lo = n / 10, hi = n - n / 10;
	double sum = 0;

	for (uint64_t i = lo; i < hi; i++)
		sum += s[i];
	return sum / (double)(hi - lo) / per_ns;
}

static void report(uint32_t *post, uint32_t *poll_, uint64_t n, int spin, double per_ns)
{
	qsort(post, n, sizeof(*post), cmp_u32);
	qsort(poll_, n, sizeof(*poll_), cmp_u32);
	printf("{\"tool\": \"post_cost\", \"op\": \"rdma_write\", \"bytes\": 8, \"iters\": %llu, "
	       "\"target\": \"%s\", \"tsc_per_ns\": %.3f, "
	       "\"post_ns\": {\"min\": %.1f, \"p10\": %.1f, \"p50\": %.1f, \"p90\": %.1f, "
	       "\"mean10_90\": %.1f}, "
	       "\"poll_ns\": {\"min\": %.1f, \"p10\": %.1f, \"p50\": %.1f, \"p90\": %.1f, "
	       "\"mean10_90\": %.1f}}\n",
	       (unsigned long long)n, spin ? "spins on the byte" : "sleeps", per_ns,
	       pct(post, n, 0, per_ns), pct(post, n, 0.1, per_ns), pct(post, n, 0.5, per_ns),
	       pct(post, n, 0.9, per_ns), trimmed_mean(post, n, per_ns), pct(poll_, n, 0, per_ns),
	       pct(poll_, n, 0.1, per_ns), pct(poll_, n, 0.5, per_ns), pct(poll_, n, 0.9, per_ns),
	       trimmed_mean(poll_, n, per_ns));
}

static int run(int fd, uint64_t iters, int spin, int poster)
{
	struct verbs v;
	struct info me, peer;
	int go = 1, peer_go;

	open_verbs(&v, &me);
	xchg(fd, &me, &peer, sizeof(me));
	to_rts(v.qp, &peer);
	xchg(fd, &go, &peer_go, sizeof(go));      /* both sides are in RTS */
	if (poster) {
		uint32_t *t_post = malloc(iters * sizeof(uint32_t));
		uint32_t *t_poll = malloc(iters * sizeof(uint32_t));
		CHECK(t_post && t_poll);
		double per_ns = tsc_per_ns();
		post_loop(&v, &peer, iters, t_post, t_poll);
		CHECK(write(fd, &go, sizeof(go)) == sizeof(go));
		report(t_post, t_poll, iters, spin, per_ns);
		free(t_post);
		free(t_poll);
	} else if (spin) {
		spin_until(fd, v.buf + 7);
	}
	if (!poster) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		CHECK(poll(&p, 1, 600000) == 1);
		CHECK(read(fd, &peer_go, sizeof(peer_go)) == sizeof(peer_go));
		CHECK(v.buf[7] != 0);
	}
	xchg(fd, &go, &peer_go, sizeof(go));      /* neither side closes early */
	close_verbs(&v);
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t iters = 200000;
	int spin = 0, fd, status;
	pid_t pid;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--spin")) {
			spin = 1;
		} else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
			iters = strtoull(argv[++i], NULL, 10);
		} else {
			fprintf(stderr, "Usage: post_cost [--spin] [-n ITERS]   (default 200000, "
				"at most %d)\n", MAX_ITERS);
			return 2;
		}
	}
	if (iters < 100 || iters > MAX_ITERS) {
		fprintf(stderr, "post_cost: -n wants 100 .. %d\n", MAX_ITERS);
		return 2;
	}
	pid = fork_pair(&fd);
	if (pid == 0)
		_exit(run(fd, iters, spin, 0));
	run(fd, iters, spin, 1);
	CHECK(waitpid(pid, &status, 0) == pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
