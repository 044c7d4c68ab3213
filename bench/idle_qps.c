/*
 * idle_qps.c - how much CPU an idle softrnic process burns, for
 * bench/compare.sh (issue 6 target: an idle process with connected QPs
 * uses < 1 % of a core).
 *
 * Two processes (fork before any verbs call, so each opens its own device
 * on its own 127.0.0.N), each with one RC QP connected to the other's.
 * The parent writes a few RDMA Writes into the child to prove the
 * connection and leave the NIC "warm", then both sit in sleep() for
 * --idle seconds: no verbs call at all, so whatever CPU they use is the
 * library's own background work.  Each side reads its utime + stime from
 * /proc/self/stat (clock ticks) and its CLOCK_PROCESS_CPUTIME_ID (all
 * threads, nanoseconds) around the idle period and prints one JSON line.
 *
 * Built against the system <infiniband/verbs.h> and run with softrnic's
 * build/lib first in the library path (compare.sh links it with an rpath).
 * Invariants: every wait is bounded; the child dies with the parent.
 * Exit status: 0 ok, 1 failure, 2 usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
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
#include <infiniband/verbs.h>

#define BENCH_TOOL "idle_qps"
#include "two_procs.h"

#define BUF_SIZE   4096
#define WRITES     16

static double now_s(int clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* utime + stime of this process from /proc/self/stat, in clock ticks. */
static long long proc_ticks(void)
{
	char buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f = fopen("/proc/self/stat", "r");
	size_t n;

	CHECK(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');    /* the command name may hold spaces */
	CHECK(p);
	/* After ") ": state(3) ppid pgrp session tty_nr tpgid flags minflt
	 * cminflt majflt cmajflt utime(14) stime(15). */
	CHECK(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
		     &ut, &st) == 2);
	return (long long)(ut + st);
}

static void write_and_wait(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr,
			   const struct info *peer)
{
	for (int i = 0; i < WRITES; i++) {
		struct ibv_sge sge = { (uintptr_t)mr->addr, 64, mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { peer->addr, peer->rkey },
		}, *bad;
		struct ibv_wc wc;
		double end = now_s(CLOCK_MONOTONIC) + 10;
		int n;

		memset(mr->addr, 'a' + i, 64);
		CHECK(ibv_post_send(qp, &wr, &bad) == 0);
		while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
			CHECK(now_s(CLOCK_MONOTONIC) < end);
		CHECK(n == 1 && wc.status == IBV_WC_SUCCESS);
	}
}

static int run(int fd, double idle_s, int writer)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct info me, peer;
	void *buf;
	int n, go = 1, peer_go;
	long long t0;
	double c0, w0, cpu, wall;

	list = ibv_get_device_list(&n);
	CHECK(list && n >= 1);
	ctx = ibv_open_device(list[0]);
	CHECK(ctx);
	ibv_free_device_list(list);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	buf = aligned_alloc(4096, BUF_SIZE);
	CHECK(pd && cq && buf);
	memset(buf, 0, BUF_SIZE);
	mr = ibv_reg_mr(pd, buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr);
	{
		struct ibv_qp_init_attr ia = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1,
				 .max_recv_sge = 1 },
		};
		qp = ibv_create_qp(pd, &ia);
		CHECK(qp);
	}
	memset(&me, 0, sizeof(me));
	CHECK(ibv_query_gid(ctx, 1, 0, &me.gid) == 0);
	me.qpn = qp->qp_num;
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)buf;
	xchg(fd, &me, &peer, sizeof(me));
	to_rts(qp, &peer);
	xchg(fd, &go, &peer_go, sizeof(go));      /* both sides are in RTS */
	if (writer)
		write_and_wait(qp, cq, mr, &peer);
	xchg(fd, &go, &peer_go, sizeof(go));      /* the traffic is over */
	if (!writer)
		CHECK(((char *)buf)[0] == 'a' + WRITES - 1);

	t0 = proc_ticks();
	c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
	w0 = now_s(CLOCK_MONOTONIC);
	while (now_s(CLOCK_MONOTONIC) - w0 < idle_s)
		usleep(100000);
	wall = now_s(CLOCK_MONOTONIC) - w0;
	cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
	{
		long long ticks = proc_ticks() - t0;
		double hz = (double)sysconf(_SC_CLK_TCK);

		printf("{\"tool\": \"idle_qps\", \"role\": \"%s\", \"pid\": %d, \"qps\": 1, "
		       "\"idle_s\": %.3f, \"cpu_s\": %.6f, \"cpu_pct\": %.4f, "
		       "\"proc_stat_ticks\": %lld, \"proc_stat_pct\": %.4f}\n",
		       role, (int)getpid(), wall, cpu, 100 * cpu / wall, ticks,
		       100 * ticks / hz / wall);
		fflush(stdout);
	}
	xchg(fd, &go, &peer_go, sizeof(go));      /* neither side closes early */
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	double idle_s = 5;
	int fd, status;
	pid_t pid;

	if (argc == 3 && !strcmp(argv[1], "--idle"))
		idle_s = strtod(argv[2], NULL);
	else if (argc != 1) {
		fprintf(stderr, "Usage: idle_qps [--idle SEC]   (default 5, at most 600)\n");
		return 2;
	}
	if (!(idle_s > 0 && idle_s <= 600)) {
		fprintf(stderr, "idle_qps: --idle wants 0 < SEC <= 600\n");
		return 2;
	}
	pid = fork_pair(&fd);
	if (pid == 0)
		_exit(run(fd, idle_s, 0));
	run(fd, idle_s, 1);
	CHECK(waitpid(pid, &status, 0) == pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
