/*
 * test_rc_dereg - deregistering a region while a peer streams RDMA Writes
 * into it.
 *
 * The parent (writer) keeps NQP QPs full of signaled RDMA Writes into one
 * 1 MiB region of the child (target), each Write with different bytes so
 * the region changes all the time.  Once Writes are landing, the target
 * calls ibv_dereg_mr with Writes in flight and, as soon as it returns:
 *   mmap rounds:   snapshots the region and compares it with the snapshot
 *                  for 200 ms; any byte changed means softrnic wrote to a
 *                  region after ibv_dereg_mr returned.  Then it unmaps the
 *                  region, so a later stray access is a crash.
 *   malloc rounds: frees the region at once and waits 200 ms while the
 *                  Writes keep coming; under ASan the freed memory is
 *                  poisoned, so a stray write is a use-after-free report.
 * The target makes no verbs call in between: its progress thread handles
 * the Writes, racing with the deregistration.
 *
 * The writer checks, per QP: completions in post order, some SUCCESS,
 * then exactly one IBV_WC_REM_ACCESS_ERR, then only IBV_WC_WR_FLUSH_ERR;
 * the QP is in ERR; a WR posted after that flushes too.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>

#include "rc_test_conn.h"

#define NQP 2
#define DEPTH 64
#define REGION (1u << 20)
#define SRC_SIZE (2u << 20)
#define ROUNDS 6             /* even: mmap, odd: malloc */
#define WATCH_S 0.2
#define ROUND_S 15.0

struct tinfo {
	union ibv_gid gid;
	uint32_t qpn[NQP];
	uint32_t rkey;
	uint32_t pad;
	uint64_t addr;
};

/* What the writer saw on one QP. */
struct qp_result {
	uint32_t success, rem_access, flushed;
};

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
	while (nanosleep(&ts, &ts))
		;
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	CHECK(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) == 0);
	return a.qp_state;
}

/* ---- target ----------------------------------------------------------- */

static int target_round(int fd, int round, struct ibv_pd *pd, struct ibv_cq *cq,
			const union ibv_gid *gid)
{
	int use_mmap = round % 2 == 0;
	uint8_t *region;
	if (use_mmap) {
		region = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			      -1, 0);
		CHECK(region != MAP_FAILED);
	} else {
		region = malloc(REGION);
		CHECK(region);
	}
	memset(region, 0, REGION);
	struct ibv_mr *mr = ibv_reg_mr(pd, region, REGION,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr);
	struct ibv_qp *qp[NQP];
	struct tinfo me = { .gid = *gid, .rkey = mr->rkey, .addr = (uintptr_t)region }, peer;
	for (int i = 0; i < NQP; i++) {
		qp[i] = srn_tc_rc_qp(pd, cq, DEPTH + 1, 1);
		me.qpn[i] = qp[i]->qp_num;
	}
	srn_tc_xchg(fd, &me, &peer, sizeof(me), 30000);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	for (int i = 0; i < NQP; i++)
		srn_tc_connect(qp[i], &peer.gid, peer.qpn[i], 0x10 * (uint32_t)round,
			       0x20 * (uint32_t)round, &o);
	srn_tc_barrier(fd, 0x90 + (uint32_t)round, 30000);

	/* Wait until Writes land (the region stops being all zero), then let
	 * the stream run a little so many are in flight. */
	double end = srn_tc_now() + 10;
	int landed = 0;
	while (!landed && srn_tc_now() < end) {
		for (uint32_t i = 0; i < REGION && !landed; i += 4096)
			landed = __atomic_load_n(&region[i], __ATOMIC_RELAXED) != 0;
	}
	CHECK(landed);
	sleep_s(0.05);

	int ok = 1;
	CHECK(ibv_dereg_mr(mr) == 0);
	if (use_mmap) {
		uint8_t *snap = malloc(REGION);
		CHECK(snap);
		memcpy(snap, region, REGION);
		double t0 = srn_tc_now();
		unsigned checks = 0;
		while (srn_tc_now() - t0 < WATCH_S) {
			checks++;
			if (memcmp(snap, region, REGION)) {
				uint32_t d = 0;
				while (snap[d] == region[d])
					d++;
				fprintf(stderr, "[target] round %d: byte %u of the region changed "
					"%.1f ms after ibv_dereg_mr returned\n", round, d,
					(srn_tc_now() - t0) * 1e3);
				ok = 0;
				break;
			}
		}
		free(snap);
		CHECK(munmap(region, REGION) == 0);
		printf("[target] round %d (mmap): region unchanged over %u comparisons in "
		       "%.0f ms after dereg\n", round, checks, WATCH_S * 1e3);
	} else {
		free(region);
		sleep_s(WATCH_S);
		printf("[target] round %d (malloc): region freed right after dereg, survived "
		       "%.0f ms of incoming Writes\n", round, WATCH_S * 1e3);
	}
	srn_tc_barrier(fd, 0xa0 + (uint32_t)round, 30000);   /* writer has seen its errors */
	for (int i = 0; i < NQP; i++) {
		enum ibv_qp_state st = qp_state(qp[i]);
		if (st != IBV_QPS_ERR)
			printf("[target] note: responder QP %d is in state %d, not ERR\n", i, st);
		CHECK(ibv_destroy_qp(qp[i]) == 0);
	}
	int32_t v = ok;
	srn_tc_send(fd, &v, sizeof(v));
	return ok;
}

static int target(int fd)
{
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(pd && cq);
	int ok = 1;
	for (int r = 0; r < ROUNDS; r++)
		ok &= target_round(fd, r, pd, cq, &gid);
	struct ibv_wc wc;
	while (ibv_poll_cq(cq, 1, &wc) > 0)
		;
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	return ok ? 0 : 1;
}

/* ---- writer ----------------------------------------------------------- */

struct wq {
	struct ibv_qp *qp;
	uint32_t posted, completed;
	int errored;            /* saw REM_ACCESS_ERR */
	int probe_posted;       /* posted one WR after the error */
	struct qp_result r;
};

static void post_write(struct wq *w, int qi, struct ibv_mr *mr, uint8_t *src,
		       const struct tinfo *t)
{
	uint32_t k = w->posted;
	uint32_t len = 4096u << (k % 5);                     /* 4 .. 64 KiB */
	uint32_t dst = (k * 65537u + (uint32_t)qi * 4099u) % (REGION - len);
	uint32_t so = (k * 7919u) % (SRC_SIZE - len);
	struct ibv_sge s = { (uintptr_t)(src + so), len, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = (uint64_t)qi << 32 | k, .sg_list = &s, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.wr.rdma.remote_addr = t->addr + dst;
	wr.wr.rdma.rkey = t->rkey;
	CHECK(ibv_post_send(w->qp, &wr, &bad) == 0);
	w->posted++;
}

static void on_wc(struct wq *wq, const struct ibv_wc *wc)
{
	int qi = (int)(wc->wr_id >> 32);
	uint32_t k = (uint32_t)wc->wr_id;
	CHECK(qi >= 0 && qi < NQP);
	struct wq *w = &wq[qi];
	if (k != w->completed) {
		fprintf(stderr, "[writer] qp %d: completion for WR %u, expected %u\n", qi, k,
			w->completed);
		exit(1);
	}
	w->completed++;
	if (wc->status == IBV_WC_SUCCESS && !w->errored) {
		w->r.success++;
	} else if (wc->status == IBV_WC_REM_ACCESS_ERR && !w->errored) {
		w->errored = 1;
		w->r.rem_access++;
	} else if (wc->status == IBV_WC_WR_FLUSH_ERR && w->errored) {
		w->r.flushed++;
	} else {
		fprintf(stderr, "[writer] qp %d WR %u: status %s (%d)%s\n", qi, k,
			ibv_wc_status_str(wc->status), wc->status,
			w->errored ? " after the access error" : " before any access error");
		exit(1);
	}
}

static void writer_round(int fd, int round, struct ibv_pd *pd, struct ibv_cq *cq,
			 const union ibv_gid *gid, struct ibv_mr *mr, uint8_t *src)
{
	struct wq wq[NQP];
	struct tinfo me = { .gid = *gid }, t;
	memset(wq, 0, sizeof(wq));
	for (int i = 0; i < NQP; i++) {
		wq[i].qp = srn_tc_rc_qp(pd, cq, DEPTH + 1, 1);
		me.qpn[i] = wq[i].qp->qp_num;
	}
	srn_tc_xchg(fd, &me, &t, sizeof(me), 30000);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	for (int i = 0; i < NQP; i++)
		srn_tc_connect(wq[i].qp, &t.gid, t.qpn[i], 0x20 * (uint32_t)round,
			       0x10 * (uint32_t)round, &o);
	srn_tc_barrier(fd, 0x90 + (uint32_t)round, 30000);

	double t0 = srn_tc_now();
	for (;;) {
		int all_done = 1;
		for (int i = 0; i < NQP; i++) {
			struct wq *w = &wq[i];
			if (!w->errored) {
				while (w->posted - w->completed < DEPTH)
					post_write(w, i, mr, src, &t);
			} else if (!w->probe_posted) {
				/* After the error: the QP is in ERR and a new WR flushes. */
				CHECK(qp_state(w->qp) == IBV_QPS_ERR);
				post_write(w, i, mr, src, &t);
				w->probe_posted = 1;
			}
			if (!w->probe_posted || w->completed < w->posted)
				all_done = 0;
		}
		if (all_done)
			break;
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(cq, 16, wc);
		CHECK(n >= 0);
		for (int j = 0; j < n; j++)
			on_wc(wq, &wc[j]);
		if (srn_tc_now() - t0 > ROUND_S) {
			for (int i = 0; i < NQP; i++)
				fprintf(stderr, "[writer] round %d qp %d: posted %u completed %u, "
					"success %u access errors %u flushed %u\n", round, i,
					wq[i].posted, wq[i].completed, wq[i].r.success,
					wq[i].r.rem_access, wq[i].r.flushed);
			fprintf(stderr, "[writer] round %d: no access error within %.0f s\n",
				round, ROUND_S);
			exit(1);
		}
	}
	for (int i = 0; i < NQP; i++) {
		CHECK(wq[i].r.success > 0 && wq[i].r.rem_access == 1 && wq[i].r.flushed >= 1);
		printf("[writer] round %d qp %d: %u writes succeeded, 1 remote access error, "
		       "%u flushed\n", round, i, wq[i].r.success, wq[i].r.flushed);
	}
	srn_tc_barrier(fd, 0xa0 + (uint32_t)round, 30000);
	for (int i = 0; i < NQP; i++)
		CHECK(ibv_destroy_qp(wq[i].qp) == 0);
	int32_t v;
	srn_tc_recv(fd, &v, sizeof(v), 30000);
	if (!v) {
		fprintf(stderr, "[writer] round %d: the target saw its region change after "
			"deregistration\n", round);
		exit(1);
	}
}

static int writer(int fd, pid_t child)
{
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, NQP * (DEPTH + 1) * 2, NULL, NULL, 0);
	uint8_t *src = malloc(SRC_SIZE);
	CHECK(pd && cq && src);
	uint32_t x = 12345;
	for (uint32_t i = 0; i < SRC_SIZE; i++) {
		x = x * 1103515245u + 12345u;
		src[i] = (uint8_t)((x >> 16) | 1);   /* never 0: landing is visible */
	}
	struct ibv_mr *mr = ibv_reg_mr(pd, src, SRC_SIZE, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	for (int r = 0; r < ROUNDS; r++)
		writer_round(fd, r, pd, cq, &gid, mr, src);
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	free(src);
	return srn_tc_wait_child(child, 30);
}

int main(void)
{
	/* A lost NAK would turn the expected REM_ACCESS_ERR into a (correct)
	 * RETRY_EXC_ERR: this test wants a loss-free link. */
	unsetenv("SOFTRNIC_FAULTS");
	int fd;
	pid_t pid = srn_tc_fork(&fd);
	if (pid == 0) {
		srn_tc_role = "target";
		exit(target(fd));
	}
	srn_tc_role = "writer";
	int rc = writer(fd, pid);
	if (rc == 0)
		printf("ok\n");
	return rc ? 1 : 0;
}
