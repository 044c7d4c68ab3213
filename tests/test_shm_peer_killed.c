/*
 * test_shm_peer_killed - a same-host peer killed with SIGKILL never drains
 * its inbox again (link/shm.h); its partner must still end in
 * RETRY_EXC_ERR, in bounded time, whether the dead process was reaped at
 * once or stays a zombie for a while.
 *
 * The child registers a buffer, connects its RC QP and blocks on the
 * out-of-band socket: its progress thread answers.  The parent streams
 * 64 KiB RDMA Writes at it, 32 in flight, so the ring fills and the
 * sender waits on it; 0.3 s in, it kills the child and keeps posting.
 * Expected: every Write before the kill succeeds, then one RETRY_EXC_ERR
 * (timeout 14, retry_cnt 7: under a second once the dead owner is seen)
 * within 10 s, then only flushes.
 *
 *   test_shm_peer_killed reap|zombie
 * prints "child pid N" so the calling script can check that the child's
 * inbox is gone after the next device opens (test_shm_link.sh).
 */
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "rc_test_conn.h"

#define CHUNK (64u << 10)
#define DEPTH 32
#define KILL_AT_S 0.3
#define LIMIT_S 10.0

struct info {
	union ibv_gid gid;
	uint32_t qpn, rkey;
	uint64_t addr;
};

static int child(int fd)
{
	static uint8_t target[CHUNK];
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	CHECK(pd && cq);
	struct ibv_mr *mr = ibv_reg_mr(pd, target, sizeof(target),
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr);
	struct ibv_qp *qp = srn_tc_rc_qp(pd, cq, DEPTH, 1);
	struct info me = { .gid = gid, .qpn = qp->qp_num, .rkey = mr->rkey,
			   .addr = (uintptr_t)target }, peer;
	srn_tc_xchg(fd, &me, &peer, sizeof(me), 30000);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	srn_tc_connect(qp, &peer.gid, peer.qpn, 0x100, 0x100, &o);
	srn_tc_barrier(fd, 0x6b1, 30000);
	char c;
	while (read(fd, &c, 1) > 0)     /* until the parent kills us */
		;
	return 0;
}

int main(int argc, char **argv)
{
	bool zombie = argc > 1 && !strcmp(argv[1], "zombie");
	if (argc != 2 || (!zombie && strcmp(argv[1], "reap"))) {
		fprintf(stderr, "usage: %s reap|zombie\n", argv[0]);
		return 2;
	}
	int fd;
	pid_t pid = srn_tc_fork(&fd);
	if (pid == 0)
		return child(fd);
	printf("child pid %d\n", (int)pid);
	fflush(stdout);

	static uint8_t src[CHUNK];
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 2 * DEPTH, NULL, NULL, 0);
	CHECK(pd && cq);
	struct ibv_mr *mr = ibv_reg_mr(pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	struct ibv_qp *qp = srn_tc_rc_qp(pd, cq, DEPTH, 1);
	struct info me = { .gid = gid, .qpn = qp->qp_num }, peer;
	srn_tc_xchg(fd, &me, &peer, sizeof(me), 30000);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	srn_tc_connect(qp, &peer.gid, peer.qpn, 0x100, 0x100, &o);
	srn_tc_barrier(fd, 0x6b1, 30000);

	double t0 = srn_tc_now(), killed_at = 0, failed_at = 0;
	unsigned inflight = 0, ok_before = 0, ok_after = 0, flushed = 0;
	bool dead = false, reaped = false;
	while (srn_tc_now() - t0 < KILL_AT_S + LIMIT_S && !failed_at) {
		while (inflight < DEPTH) {
			struct ibv_sge sge = { (uintptr_t)src, CHUNK, mr->lkey };
			struct ibv_send_wr wr = {
				.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				.send_flags = IBV_SEND_SIGNALED,
				.wr.rdma = { .remote_addr = peer.addr, .rkey = peer.rkey },
			}, *bad;
			if (ibv_post_send(qp, &wr, &bad))
				break;          /* the QP went to ERR */
			inflight++;
		}
		struct ibv_wc wc[DEPTH];
		int n = ibv_poll_cq(cq, DEPTH, wc);
		CHECK(n >= 0);
		for (int i = 0; i < n; i++) {
			inflight--;
			if (wc[i].status == IBV_WC_SUCCESS) {
				dead ? ok_after++ : ok_before++;
			} else if (wc[i].status == IBV_WC_RETRY_EXC_ERR && dead && !failed_at) {
				failed_at = srn_tc_now();
			} else if (wc[i].status == IBV_WC_WR_FLUSH_ERR && failed_at) {
				flushed++;
			} else {
				fprintf(stderr, "[parent] unexpected completion: %s (killed: %d)\n",
					ibv_wc_status_str(wc[i].status), dead);
				return 1;
			}
		}
		if (!dead && srn_tc_now() - t0 >= KILL_AT_S) {
			CHECK(ok_before > 0);
			CHECK(kill(pid, SIGKILL) == 0);
			killed_at = srn_tc_now();
			dead = true;
		}
		if (dead && !zombie && !reaped) {
			CHECK(waitpid(pid, NULL, 0) == pid);
			reaped = true;
		}
	}
	if (!failed_at) {
		fprintf(stderr, "[parent] no RETRY_EXC_ERR within %.0f s of the kill (%u Writes "
			"succeeded before, %u after)\n", LIMIT_S, ok_before, ok_after);
		return 1;
	}
	/* What was still posted flushes. */
	double end = srn_tc_now() + 5;
	while (inflight && srn_tc_now() < end) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(cq, 1, &wc);
		CHECK(n >= 0);
		if (n == 1) {
			CHECK(wc.status == IBV_WC_WR_FLUSH_ERR);
			inflight--;
			flushed++;
		}
	}
	CHECK(inflight == 0);
	if (!reaped)
		CHECK(waitpid(pid, NULL, 0) == pid);
	printf("ok (%s): %u Writes of 64 KiB before the kill; RETRY_EXC_ERR %.2f s after it "
	       "(%u more had succeeded), then %u flushed\n", zombie ? "zombie" : "reaped",
	       ok_before, failed_at - killed_at, ok_after, flushed);
	CHECK(ibv_destroy_qp(qp) == 0);
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	return 0;
}
