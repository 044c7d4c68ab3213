/*
 * test_trust_verbs2_batch - the life of an ibv_wr_* batch at its edges
 * (issue 10, item 11, second review).  One mode per CTest test:
 *
 *   reset    a batch opened at sq.head 0, then the QP reset and
 *            reconnected under it: ibv_wr_complete refuses it (EINVAL)
 *            and it never reaches the wire; the QP then works.
 *   abort    ibv_wr_abort drops the batch: a ibv_wr_complete after it,
 *            or after a completed batch, is EINVAL and runs nothing; an
 *            ibv_wr_abort without a batch changes nothing.
 *   thread   ibv_wr_complete and ibv_wr_abort from a thread that does not
 *            own the open batch are EINVAL and leave it to its owner.
 *   destroy  ibv_destroy_qp while a batch is open (this thread's or
 *            another's) is EBUSY and leaves the QP whole.
 *
 * Two processes: the child is the target, with one zeroed region; the
 * parent writes 8-byte slots of it with inline RDMA Writes built by
 * batches, and finally reads every slot back with a plain ibv_post_send
 * RDMA Read: a slot of a refused batch must still be zero.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "test_trust_verbs_peer.h"

#define SLOTS 64

struct target_info {
	union ibv_gid gid;
	uint32_t qpn;
	uint32_t rkey;
	uint64_t addr;
};

static const char *mode;
static struct target_info peer;
static struct ibv_mr *back_mr;
static uint64_t back[SLOTS];

/* Connect qp to the peer's QP with the PSNs both sides start from
 * (nothing sent yet, or everything sent was refused). */
static void connect_to_peer(struct ibv_qp *qp)
{
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	srn_tc_connect(qp, &peer.gid, peer.qpn, 0x100, 0x100, &o);
}

static void reset_qp(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0);
}

/* ---- target ----------------------------------------------------------- */

static int run_target(int fd)
{
	struct tv_side s;
	tv_open(&s);
	uint64_t *region = calloc(SLOTS, sizeof(uint64_t));
	CHECK(region);
	struct ibv_mr *mr = ibv_reg_mr(s.pd, region, SLOTS * sizeof(uint64_t),
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				       IBV_ACCESS_REMOTE_READ);
	CHECK(mr);
	struct ibv_qp *qp = tv_qp_ex(&s, 16, 16);
	struct target_info me = { .gid = s.gid, .qpn = qp->qp_num, .rkey = mr->rkey,
				  .addr = (uintptr_t)region };
	srn_tc_xchg(fd, &me, &peer, sizeof(me), 30000);
	connect_to_peer(qp);
	srn_tc_barrier(fd, 0x7c, 30000);
	/* The parent reads the region back itself: this side never touches
	 * the bytes its progress thread wrote. */
	srn_tc_barrier(fd, 0xd0, 60000);
	return 0;
}

/* ---- writer ----------------------------------------------------------- */

static void write_slot(struct ibv_qp_ex *x, uint64_t wr_id, int slot, uint64_t val)
{
	x->wr_id = wr_id;
	x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_rdma_write(x, peer.rkey, peer.addr + (uint64_t)slot * 8);
	ibv_wr_set_inline_data(x, &val, 8);
}

/* No completion at all arrives on cq for secs seconds. */
static void expect_quiet(struct ibv_cq *cq, double secs, const char *what)
{
	double end = srn_tc_now() + secs;
	struct ibv_wc wc;
	while (srn_tc_now() < end) {
		int n = ibv_poll_cq(cq, 1, &wc);
		CHECK(n >= 0);
		if (n) {
			fprintf(stderr, "[parent] %s: completion wr_id %llu (%s) of work that "
				"must never have run\n", what, (unsigned long long)wc.wr_id,
				ibv_wc_status_str(wc.status));
			exit(1);
		}
		usleep(1000);
	}
}

/* Read the whole target region into back[] with a plain post. */
static void read_back(struct ibv_qp *qp)
{
	memset(back, 0xee, sizeof(back));
	struct ibv_sge sg = { (uintptr_t)back, sizeof(back), back_mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 999, .sg_list = &sg, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	wr.wr.rdma.rkey = peer.rkey;
	wr.wr.rdma.remote_addr = peer.addr;
	CHECK(ibv_post_send(qp, &wr, &bad) == 0);
	tv_expect(qp->send_cq, IBV_WC_SUCCESS, 999);
}

static void expect_slot(int slot, uint64_t val)
{
	if (back[slot] != val) {
		fprintf(stderr, "[parent] %s: target slot %d holds %#llx, wanted %#llx\n", mode,
			slot, (unsigned long long)back[slot], (unsigned long long)val);
		exit(1);
	}
}

/* A verb returned r where want was due: say what and fail. */
static void expect_ret(int r, int want, const char *what)
{
	if (r != want) {
		fprintf(stderr, "[parent] %s: %d, wanted %d\n", what, r, want);
		exit(1);
	}
}

/* Item 3: a reset under the batch, detected even when sq.head is back
 * where the batch began. */
static void mode_reset(struct ibv_qp *qp)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);
	ibv_wr_start(x);                         /* fresh QP: sq.head 0 */
	write_slot(x, 11, 1, 0x1111);
	reset_qp(qp);
	connect_to_peer(qp);                     /* RTS again, sq.head 0 again */
	expect_ret(ibv_wr_complete(x), EINVAL, "wr_complete of a batch the QP was reset under");
	expect_quiet(qp->send_cq, 0.3, "batch across a reset");
	/* The reconnected QP works, from the PSN nothing used. */
	ibv_wr_start(x);
	write_slot(x, 12, 2, 0x2222);
	CHECK(ibv_wr_complete(x) == 0);
	tv_expect(qp->send_cq, IBV_WC_SUCCESS, 12);
	/* A reset alone (QP left in RESET) under a batch: refused too. */
	ibv_wr_start(x);
	write_slot(x, 13, 3, 0x3333);
	reset_qp(qp);
	CHECK(ibv_wr_complete(x) == EINVAL);
	expect_quiet(qp->send_cq, 0.1, "batch on a reset QP");
}

/* Item 4: abort really drops; complete/abort need an open batch. */
static void mode_abort(struct ibv_qp *qp)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);
	ibv_wr_start(x);
	write_slot(x, 21, 4, 0x4444);
	write_slot(x, 22, 5, 0x5555);
	ibv_wr_abort(x);
	expect_ret(ibv_wr_complete(x), EINVAL, "wr_complete after wr_abort");
	expect_quiet(qp->send_cq, 0.3, "aborted batch");
	/* A completed batch cannot be completed twice. */
	ibv_wr_start(x);
	write_slot(x, 23, 6, 0x6666);
	CHECK(ibv_wr_complete(x) == 0);
	tv_expect(qp->send_cq, IBV_WC_SUCCESS, 23);
	expect_ret(ibv_wr_complete(x), EINVAL, "second wr_complete of one batch");
	expect_quiet(qp->send_cq, 0.3, "batch completed twice");
	/* An abort with no batch open changes nothing; batches still work,
	 * and so does a plain post (the send-queue lock is free). */
	ibv_wr_abort(x);
	ibv_wr_start(x);
	write_slot(x, 24, 7, 0x7777);
	CHECK(ibv_wr_complete(x) == 0);
	tv_expect(qp->send_cq, IBV_WC_SUCCESS, 24);
}

struct intruder {
	struct ibv_qp_ex *x;
	int complete_ret;
};

static void *intruder_main(void *arg)
{
	struct intruder *in = arg;
	in->complete_ret = ibv_wr_complete(in->x);
	ibv_wr_abort(in->x);
	return NULL;
}

/* Item 4: only the thread that opened a batch ends it. */
static void mode_thread(struct ibv_qp *qp)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);
	ibv_wr_start(x);
	write_slot(x, 31, 8, 0x8888);
	struct intruder in = { .x = x, .complete_ret = -1 };
	pthread_t th;
	CHECK(pthread_create(&th, NULL, intruder_main, &in) == 0);
	CHECK(pthread_join(th, NULL) == 0);
	expect_ret(in.complete_ret, EINVAL, "wr_complete from a thread that does not own the batch");
	expect_quiet(qp->send_cq, 0.2, "batch ended by another thread");
	/* The batch is still open and still ours: it goes on and completes. */
	write_slot(x, 32, 9, 0x9999);
	CHECK(ibv_wr_complete(x) == 0);
	tv_expect(qp->send_cq, IBV_WC_SUCCESS, 31);
	tv_expect(qp->send_cq, IBV_WC_SUCCESS, 32);
}

struct holder {
	struct ibv_qp *qp;
	atomic_int opened, release;
};

static void *holder_main(void *arg)
{
	struct holder *h = arg;
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(h->qp);
	ibv_wr_start(x);
	write_slot(x, 50, 0, 0x5050);
	atomic_store(&h->opened, 1);
	double end = srn_tc_now() + 15;
	while (!atomic_load(&h->release) && srn_tc_now() < end)
		usleep(1000);
	ibv_wr_abort(x);
	return NULL;
}

/* Item 2: a QP with a batch open is not destroyed under it. */
static void mode_destroy(struct tv_side *s, struct ibv_qp *qp)
{
	/* This thread's own batch, on an unconnected QP. */
	struct ibv_qp *d = tv_qp_ex(s, 4, 4);
	struct ibv_qp_ex *dx = ibv_qp_to_qp_ex(d);
	ibv_wr_start(dx);
	write_slot(dx, 40, 0, 0x4040);
	expect_ret(ibv_destroy_qp(d), EBUSY, "ibv_destroy_qp with this thread's batch open");
	ibv_wr_abort(dx);
	CHECK(ibv_destroy_qp(d) == 0);

	/* Another thread's batch. */
	struct holder h = { .qp = tv_qp_ex(s, 4, 4) };
	pthread_t th;
	CHECK(pthread_create(&th, NULL, holder_main, &h) == 0);
	double end = srn_tc_now() + 15;
	while (!atomic_load(&h.opened) && srn_tc_now() < end)
		usleep(1000);
	CHECK(atomic_load(&h.opened));
	int r = ibv_destroy_qp(h.qp);
	atomic_store(&h.release, 1);
	CHECK(pthread_join(th, NULL) == 0);
	expect_ret(r, EBUSY, "ibv_destroy_qp with another thread's batch open");
	CHECK(ibv_destroy_qp(h.qp) == 0);

	/* A refused destroy leaves the QP whole: its batch completes. */
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);
	ibv_wr_start(x);
	write_slot(x, 41, 10, 0xaaaa);
	CHECK(ibv_destroy_qp(qp) == EBUSY);
	CHECK(ibv_wr_complete(x) == 0);
	tv_expect(qp->send_cq, IBV_WC_SUCCESS, 41);
}

static int run_writer(int fd)
{
	struct tv_side s;
	tv_open(&s);
	back_mr = ibv_reg_mr(s.pd, back, sizeof(back), IBV_ACCESS_LOCAL_WRITE);
	CHECK(back_mr);
	struct ibv_qp *qp = tv_qp_ex(&s, 16, 16);
	struct target_info me = { .gid = s.gid, .qpn = qp->qp_num };
	srn_tc_xchg(fd, &me, &peer, sizeof(me), 30000);
	connect_to_peer(qp);
	srn_tc_barrier(fd, 0x7c, 30000);

	if (!strcmp(mode, "reset")) {
		mode_reset(qp);
		/* The QP is left in RESET and the peer has taken exactly one
		 * Write (PSN 0x100): reconnect at the PSN after it to read. */
		struct srn_tc_qp_opts o = srn_tc_default_opts();
		srn_tc_connect(qp, &peer.gid, peer.qpn, 0x100, 0x101, &o);
		read_back(qp);
		expect_slot(1, 0);
		expect_slot(2, 0x2222);
		expect_slot(3, 0);
	} else if (!strcmp(mode, "abort")) {
		mode_abort(qp);
		read_back(qp);
		expect_slot(4, 0);
		expect_slot(5, 0);
		expect_slot(6, 0x6666);
		expect_slot(7, 0x7777);
	} else if (!strcmp(mode, "thread")) {
		mode_thread(qp);
		read_back(qp);
		expect_slot(8, 0x8888);
		expect_slot(9, 0x9999);
	} else if (!strcmp(mode, "destroy")) {
		mode_destroy(&s, qp);
		read_back(qp);
		expect_slot(0, 0);
		expect_slot(10, 0xaaaa);
	} else {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 1;
	}
	printf("[parent] %s: refused batches ran nothing; the rest is in place\n", mode);
	srn_tc_barrier(fd, 0xd0, 60000);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s reset|abort|thread|destroy\n", argv[0]);
		return 2;
	}
	mode = argv[1];
	return tv_main(run_target, run_writer);
}
