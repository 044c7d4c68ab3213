/*
 * test_trust_resp_read_slices - one large RDMA READ does not freeze the
 * target (issue 10, item 6).
 *
 *   initiator (parent)                     target (child)
 *   READ of SIZE bytes  ---- request --->  thread A: progress passes, each
 *   (one work request)  <--- responses --   measured under nic->lock
 *   verifies every byte                    thread B: ibv_query_qp in a loop,
 *                                           the longest call timed
 *
 * The target's whole READ response used to be produced in one progress
 * call under nic->lock: 256 MiB was 65 536 packets in one pass, and every
 * verbs call of the target waited for it (1 GiB: 9.3 s).  Responses now
 * leave in slices with the lock released between them.
 *
 * Structural check (not timing): thread A drives progress itself as an
 * application's poll does (srn_progress_poll under the lock, the progress
 * thread stands aside meanwhile) and reads the device's sent-packet counter
 * before and after each pass: no pass may send more than MAX_PER_PASS
 * packets (a slice for the READ being answered, one more for a request or
 * duplicate received in that pass, and ACKs).  The longest ibv_query_qp is
 * printed as a measurement and only held to a generous bound.
 *
 * Over UDP (SOFTRNIC_SHM=0, set by the cmake entry) or the same-host
 * rings.  SRN_READ_MB sets the size (default 256).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "core/device.h"
#include "core/nic.h"
#include "engine/nic.h"
#include "rc_test_conn.h"

#define MAX_PER_PASS 512        /* responder.c SRN_RESP_SLICE is 128 (at most) */
#define QUERY_BOUND_S 2.0       /* generous: a pass is about a millisecond */

struct info {
	struct srn_tc_qp_info qp;
	union ibv_gid gid;
	uint64_t addr, size;
	uint32_t rkey;
};

struct verdict {
	uint64_t passes, busy_passes, max_per_pass, pass_pkts, total_pkts, queries;
	double max_query_s;
};

static uint64_t pattern(uint64_t i)
{
	return (i + 1) * 0x9e3779b97f4a7c15ull;
}

static void *map(uint64_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(p != MAP_FAILED);
	return p;
}

static struct ibv_qp *query_qp_of;
static atomic_bool stop_queries;
static uint64_t queries;
static double max_query_s;

/* Thread B: what any verbs call of the target would wait. */
static void *query_loop(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop_queries)) {
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr ia;
		double t0 = srn_tc_now();
		CHECK(ibv_query_qp(query_qp_of, &a, IBV_QP_STATE, &ia) == 0);
		double d = srn_tc_now() - t0;
		if (d > max_query_s)
			max_query_s = d;
		queries++;
		usleep(200);
	}
	return NULL;
}

static int target(int fd, uint64_t size, bool passive)
{
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct srn_nic *nic = srn_ctx(ctx)->nic;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	CHECK(pd && cq);
	uint64_t *buf = map(size);
	for (uint64_t i = 0; i < size / 8; i++)
		buf[i] = pattern(i);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, size, IBV_ACCESS_LOCAL_WRITE |
				       IBV_ACCESS_REMOTE_READ);
	CHECK(mr);
	struct ibv_qp *qp = srn_tc_rc_qp(pd, cq, 4, 4);
	struct info me = { { qp->qp_num, 0x777 }, gid, (uintptr_t)buf, size, mr->rkey }, peer;
	srn_tc_xchg(fd, &me, &peer, sizeof(me), 30000);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	srn_tc_connect(qp, &peer.gid, peer.qp.qpn, peer.qp.psn, me.qp.psn, &o);

	query_qp_of = qp;
	pthread_t th;
	CHECK(pthread_create(&th, NULL, query_loop, NULL) == 0);
	srn_tc_barrier(fd, 0x5eed, 30000);

	/* Thread A: progress passes until the initiator says it is done. */
	struct verdict v = { 0 };
	uint64_t sent0 = atomic_load(&nic->diag.cnt->v[SRN_CNT_SENT_PKTS]);
	double end = srn_tc_now() + 200;
	for (;;) {
		if (passive) {
			/* The progress thread alone answers (a target that
			 * computes or sleeps): the timing only. */
			struct pollfd pf = { fd, POLLIN, 0 };
			if (poll(&pf, 1, 100) > 0)
				break;
			CHECK(srn_tc_now() < end);
			continue;
		}
		/* Polite, as the progress thread's busy poll is: a thread
		 * waiting for the lock gets it (measures a pass, not luck). */
		if (atomic_load(&nic->lock_waiters))
			sched_yield();
		srn_progress_app_active(nic);
		srn_nic_lock(nic);
		uint64_t before = atomic_load(&nic->diag.cnt->v[SRN_CNT_SENT_PKTS]);
		srn_progress_poll(nic, true);
		uint64_t n = atomic_load(&nic->diag.cnt->v[SRN_CNT_SENT_PKTS]) - before;
		srn_nic_unlock(nic);
		v.passes++;
		v.busy_passes += n != 0;
		v.pass_pkts += n;
		if (n > v.max_per_pass)
			v.max_per_pass = n;
		struct pollfd pf = { fd, POLLIN, 0 };
		if (poll(&pf, 1, 0) > 0)
			break;
		CHECK(srn_tc_now() < end);
	}
	v.total_pkts = atomic_load(&nic->diag.cnt->v[SRN_CNT_SENT_PKTS]) - sent0;
	atomic_store(&stop_queries, true);
	CHECK(pthread_join(th, NULL) == 0);
	v.queries = queries;
	v.max_query_s = max_query_s;
	uint32_t done;
	srn_tc_recv(fd, &done, sizeof(done), 30000);
	srn_tc_send(fd, &v, sizeof(v));
	srn_tc_barrier(fd, 0xe2d, 30000);
	CHECK(ibv_destroy_qp(qp) == 0);
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	return 0;
}

static int initiator(int fd, pid_t child, uint64_t size)
{
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	CHECK(pd && cq);
	uint64_t *buf = map(size);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, size, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	struct ibv_qp *qp = srn_tc_rc_qp(pd, cq, 4, 4);
	struct info me = { { qp->qp_num, 0x999 }, gid, 0, 0, 0 }, tgt;
	srn_tc_xchg(fd, &me, &tgt, sizeof(me), 30000);
	CHECK(tgt.size == size);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	srn_tc_connect(qp, &tgt.gid, tgt.qp.qpn, tgt.qp.psn, me.qp.psn, &o);
	srn_tc_barrier(fd, 0x5eed, 30000);

	double t0 = srn_tc_now();
	struct ibv_sge sge = { (uintptr_t)buf, (uint32_t)size, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { tgt.addr, tgt.rkey } }, *bad;
	CHECK(ibv_post_send(qp, &wr, &bad) == 0);
	struct ibv_wc wc = srn_tc_poll_one(cq, 180);
	double secs = srn_tc_now() - t0;
	if (wc.status != IBV_WC_SUCCESS)
		fprintf(stderr, "[initiator] READ: %s\n", ibv_wc_status_str(wc.status));
	CHECK(wc.status == IBV_WC_SUCCESS);
	uint64_t bad_words = 0;
	for (uint64_t i = 0; i < size / 8; i++)
		bad_words += buf[i] != pattern(i);

	uint32_t done = 1;
	srn_tc_send(fd, &done, sizeof(done));
	struct verdict v;
	srn_tc_recv(fd, &v, sizeof(v), 30000);
	srn_tc_barrier(fd, 0xe2d, 30000);
	uint64_t npkts = size / 4096;
	printf("READ of %llu MiB: %.2f s (%.0f MB/s), %llu words wrong\n"
	       "target: %llu passes (%llu sent packets), largest pass %llu packets (bound %d, "
	       "the READ has %llu); its own passes sent %llu of %llu packets\n"
	       "target: %llu ibv_query_qp calls, longest %.1f ms\n",
	       (unsigned long long)(size >> 20), secs, size / secs / 1e6,
	       (unsigned long long)bad_words, (unsigned long long)v.passes,
	       (unsigned long long)v.busy_passes, (unsigned long long)v.max_per_pass, MAX_PER_PASS,
	       (unsigned long long)npkts, (unsigned long long)v.pass_pkts,
	       (unsigned long long)v.total_pkts, (unsigned long long)v.queries,
	       v.max_query_s * 1e3);
	int rc = srn_tc_wait_child(child, 30);
	CHECK(rc == 0);
	CHECK(bad_words == 0);
	if (v.max_per_pass > MAX_PER_PASS) {
		fprintf(stderr, "FAIL: one progress pass of the target sent %llu packets; a READ "
			"response must leave in slices\n", (unsigned long long)v.max_per_pass);
		return 1;
	}
	CHECK(v.max_query_s < QUERY_BOUND_S);
	CHECK(ibv_destroy_qp(qp) == 0);
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t size = (uint64_t)srn_tc_env_ul("SRN_READ_MB", 256) << 20;
	bool passive = argc > 1 && !strcmp(argv[1], "passive");
	int fd;
	pid_t pid = srn_tc_fork(&fd);
	if (pid == 0) {
		srn_tc_role = "target";
		return target(fd, size, passive);
	}
	srn_tc_role = "initiator";
	return initiator(fd, pid, size);
}
