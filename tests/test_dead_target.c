/*
 * test_dead_target.c - a target SIGKILLed mid-stream stops answering at
 * once (issue 27 item 4): no RDMA Write posted more than 1 ms after its
 * death completes with success, on whichever same-host path the
 * environment picks (test_dead_target.sh: the mapped copy, the
 * process_vm_writev copy, the rings).
 *
 *   test_dead_target [RUNS]      (default 20)
 *
 * Each run has three processes.  The coordinator (this process's main,
 * which never opens a device) forks a target T and a requester R joined
 * by a socketpair.  T registers a 1 MiB region with remote write, connects
 * and waits (only its progress thread runs).  R streams 64 KiB Writes
 * into it, 16 in flight, reading CLOCK_MONOTONIC just before each post.
 * Once R has 64 successes the coordinator waits a random 0-3 ms, sends
 * SIGKILL to T, waits in waitpid until T is reaped, and only then reads
 * the clock: that is the kill time K.  T's death happened before K, and
 * every post time R records was read before its post, so "post time >
 * K + 1 ms" implies "posted more than 1 ms after the death" whatever the
 * scheduler does: a busy machine can only make fewer Writes qualify,
 * never make a good run fail.  The only timing in the verdict is that
 * rule itself.
 *
 * R stops posting at its first error completion, or at K + window
 * (SRN_DEAD_WINDOW_MS, default 40) once it posted a Write after K, drains every Write (the QP's retries run
 * out: timeout 4 ms, retry_cnt 3), and reports through shared memory:
 * successes posted after K + 1 ms (must be 0), the latest successful
 * post and completion relative to K (for measurement), and its first
 * error status, which must be IBV_WC_RETRY_EXC_ERR, as for a responder
 * that vanished.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "diag/clock.h"
#include "rc_test_conn.h"

#define REGION (1u << 20)
#define MSG (64u << 10)
#define DEPTH 16
#define TMO 20000                  /* ms, any out-of-band wait */
#define WARMUP 64                  /* successes before the kill may come */

struct info {
	union ibv_gid gid;
	uint32_t qpn, rkey;
	uint64_t addr;
};

/* The coordinator and R, in a MAP_SHARED page. */
struct shared {
	_Atomic int streaming;         /* R: WARMUP successes done */
	_Atomic uint64_t kill_ns;      /* coordinator: T reaped at this time */
	/* R's verdict, written before it exits. */
	uint64_t ok_total, ok_after_kill, ok_after_1ms;
	int64_t last_ok_post_ns, last_ok_done_ns;   /* relative to kill_ns */
	int first_err;                 /* enum ibv_wc_status, -1 none */
	uint64_t posted_after_1ms;
};

static struct shared *sh;

static void connect_qp(struct ibv_qp *qp, int fd, struct info *me, struct info *peer)
{
	me->qpn = qp->qp_num;
	srn_tc_xchg(fd, me, peer, sizeof(*me), TMO);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	/* After the death the retries must run out soon: 4 ms, 3 retries. */
	o.timeout = 10;
	o.retry_cnt = 3;
	srn_tc_connect(qp, &peer->gid, peer->qpn, 0x100, 0x100, &o);
	srn_tc_barrier(fd, 0xd7, TMO);
}

/* T: a 1 MiB region of private anonymous memory (the mapped path moves
 * such a region onto a memfd), connected, then nothing until SIGKILL. */
static void target(int fd)
{
	struct info me = { 0 }, peer;
	struct ibv_context *ctx = srn_tc_open(&me.gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	uint8_t *buf = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			    -1, 0);
	CHECK(buf != MAP_FAILED);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, REGION,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr);
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)buf;
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(cq);
	connect_qp(srn_tc_rc_qp(pd, cq, 64, 1), fd, &me, &peer);
	for (;;)
		pause();
}

/* R's record of one Write: its post time, by wr_id (in order, at most
 * DEPTH outstanding). */
static uint64_t post_ns[1024];

/* Successful Writes' post and completion times, judged once K is known
 * (a completion can come before R learns K). */
struct ok_rec {
	uint64_t post, done;
};

static void judge(const struct ok_rec *ok, size_t n, uint64_t k)
{
	sh->ok_total = n;
	sh->last_ok_post_ns = sh->last_ok_done_ns = INT64_MIN;
	for (size_t i = 0; i < n; i++) {
		if (ok[i].post > k)
			sh->ok_after_kill++;
		if (ok[i].post > k + 1000000ull)
			sh->ok_after_1ms++;
		if ((int64_t)(ok[i].post - k) > sh->last_ok_post_ns)
			sh->last_ok_post_ns = (int64_t)(ok[i].post - k);
		if ((int64_t)(ok[i].done - k) > sh->last_ok_done_ns)
			sh->last_ok_done_ns = (int64_t)(ok[i].done - k);
	}
}

static int requester(int fd)
{
	struct info me = { 0 }, peer;
	struct ibv_context *ctx = srn_tc_open(&me.gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	static uint8_t src[MSG];
	memset(src, 0x5a, sizeof(src));
	struct ibv_mr *mr = ibv_reg_mr(pd, src, MSG, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	struct ibv_cq *cq = ibv_create_cq(ctx, 128, NULL, NULL, 0);
	CHECK(cq);
	struct ibv_qp *qp = srn_tc_rc_qp(pd, cq, 64, 1);
	connect_qp(qp, fd, &me, &peer);

	uint64_t window = srn_tc_env_ul("SRN_DEAD_WINDOW_MS", 40) * 1000000ull;
	size_t cap = 1u << 16, nok = 0;
	struct ok_rec *ok = malloc(cap * sizeof(*ok));
	CHECK(ok);
	uint64_t n = 0, inflight = 0, posted_after_k = 0, deadline = srn_now_ns() + 15000000000ull;
	bool posting = true;
	sh->first_err = -1;
	while (posting || inflight) {
		uint64_t now = srn_now_ns();
		CHECK(now < deadline, "posting %d, %lu in flight", posting, (unsigned long)inflight);
		uint64_t k = atomic_load(&sh->kill_ns);
		/* At least one Write posted after K, so the QP meets the
		 * death even when this process was not scheduled until the
		 * window had passed. */
		if (posting && k && now > k + window && posted_after_k)
			posting = false;
		if (posting && inflight < DEPTH) {
			struct ibv_sge sge = { (uintptr_t)src, MSG, mr->lkey };
			struct ibv_send_wr wr = {
				.wr_id = n, .sg_list = &sge, .num_sge = 1,
				.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
				.wr.rdma = { .remote_addr = peer.addr + (n % (REGION / MSG)) * MSG,
					     .rkey = peer.rkey },
			}, *bad;
			/* Read before the post: the Write cannot have been
			 * posted earlier than this. */
			post_ns[n % 1024] = srn_now_ns();
			if (k && post_ns[n % 1024] > k) {
				posted_after_k++;
				if (post_ns[n % 1024] > k + 1000000ull)
					sh->posted_after_1ms++;
			}
			int ret = ibv_post_send(qp, &wr, &bad);
			CHECK(ret == 0, "post: %s", strerror(ret));
			n++;
			inflight++;
		}
		struct ibv_wc wc[DEPTH];
		int got = ibv_poll_cq(cq, DEPTH, wc);
		CHECK(got >= 0);
		uint64_t done = got ? srn_now_ns() : 0;
		for (int i = 0; i < got; i++) {
			inflight--;
			if (wc[i].status != IBV_WC_SUCCESS) {
				if (sh->first_err < 0)
					sh->first_err = wc[i].status;
				posting = false;
				continue;
			}
			if (nok == cap) {
				cap *= 2;
				ok = realloc(ok, cap * sizeof(*ok));
				CHECK(ok);
			}
			ok[nok++] = (struct ok_rec){ post_ns[wc[i].wr_id % 1024], done };
			if (nok == WARMUP)
				atomic_store(&sh->streaming, 1);
		}
	}
	/* Every Write is complete; K is known (posting stopped after it, or
	 * at an error that only the death can cause: wait for K then). */
	while (!atomic_load(&sh->kill_ns)) {
		CHECK(srn_now_ns() < deadline, "no kill time");
		usleep(1000);
	}
	judge(ok, nok, atomic_load(&sh->kill_ns));
	free(ok);
	CHECK(ibv_destroy_qp(qp) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	return 0;
}

static pid_t spawn(int fd, int other_fd, const char *role, int (*fn)(int))
{
	fflush(NULL);
	pid_t parent = getpid();
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid)
		return pid;
	srn_tc_role = role;
	/* A coordinator that failed and exited must not leave us behind. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	close(other_fd);
	_exit(fn(fd));
}

static int target_fn(int fd)
{
	target(fd);
	return 1;
}

/* One run; returns the number of bad completions (successes of Writes
 * posted more than 1 ms after the death). */
static uint64_t run(unsigned i, unsigned *not_retry_exc)
{
	memset(sh, 0, sizeof(*sh));
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	pid_t t = spawn(sv[1], sv[0], "target", target_fn);
	pid_t r = spawn(sv[0], sv[1], "requester", requester);
	close(sv[0]);
	close(sv[1]);

	uint64_t end = srn_now_ns() + (uint64_t)TMO * 1000000ull;
	while (!atomic_load(&sh->streaming)) {
		if (srn_now_ns() > end || waitpid(r, NULL, WNOHANG) == r) {
			kill(t, SIGKILL);
			kill(r, SIGKILL);
			CHECK(0, "run %u: the requester never streamed", i);
		}
		usleep(200);
	}
	usleep((useconds_t)(((uint64_t)i * 2654435761u) % 3000));
	CHECK(kill(t, SIGKILL) == 0);
	/* SRN_DEAD_K_AT_KILL=1, for measurement only: K when kill()
	 * returns, before T has died (the verdict is then unfair). */
	if (getenv("SRN_DEAD_K_AT_KILL"))
		atomic_store(&sh->kill_ns, srn_now_ns());
	CHECK(waitpid(t, NULL, 0) == t);
	/* After waitpid: T is certainly dead by now. */
	if (!atomic_load(&sh->kill_ns))
		atomic_store(&sh->kill_ns, srn_now_ns());
	int st = srn_tc_wait_child(r, 30);
	CHECK(st == 0, "run %u: requester exit %d", i, st);
	printf("run %2u: %6lu ok, %5lu posted after K+1ms, %4lu ok posted after K "
	       "(%lu after K+1ms), last ok posted at K%+.3f ms, completed at K%+.3f ms; "
	       "first error %s\n", i, (unsigned long)sh->ok_total,
	       (unsigned long)sh->posted_after_1ms, (unsigned long)sh->ok_after_kill,
	       (unsigned long)sh->ok_after_1ms, (double)sh->last_ok_post_ns / 1e6,
	       (double)sh->last_ok_done_ns / 1e6,
	       sh->first_err < 0 ? "none" : ibv_wc_status_str(sh->first_err));
	/* Judged in main after every run (a failed CHECK here would end
	 * the test at the first bad run). */
	if (sh->first_err != IBV_WC_RETRY_EXC_ERR)
		(*not_retry_exc)++;
	return sh->ok_after_1ms;
}

int main(int argc, char **argv)
{
	unsigned runs = argc > 1 ? (unsigned)atoi(argv[1]) : 20;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	uint64_t bad = 0;
	unsigned not_retry_exc = 0;
	for (unsigned i = 0; i < runs; i++)
		bad += run(i, &not_retry_exc);
	printf("%s: %u runs, %lu successes posted more than 1 ms after the death, "
	       "%u runs whose first error was not RETRY_EXC_ERR\n",
	       bad || not_retry_exc ? "FAIL" : "ok", runs, (unsigned long)bad, not_retry_exc);
	CHECK(bad == 0, "Writes posted more than 1 ms after the target's death succeeded");
	CHECK(not_retry_exc == 0, "the QP did not end in RETRY_EXC_ERR");
	return srn_check_result();
}
