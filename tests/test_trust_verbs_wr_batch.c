/*
 * test_trust_verbs_wr_batch - an ibv_wr_* batch holds only its QP's send
 * queue, never the device (issue 10, item 11).
 *
 * ibv_wr_start used to take the device lock until ibv_wr_complete, so any
 * other verb called inside a batch -- on the same thread it waited for
 * itself forever, on another thread it stalled until the batch ended.
 * rdma-core's tests (and mlx5/rxe) call other verbs in between.
 *
 * Two processes: the child is the target, with one 1 MiB region; the
 * parent writes into it with RDMA Writes built by ibv_wr_* batches:
 *   A  inside a batch, on the same thread: ibv_reg_mr, ibv_poll_cq,
 *      ibv_alloc_mw, ibv_query_qp, ibv_query_device, ibv_dealloc_mw; an
 *      ibv_post_send on the batch's own QP is refused with EBUSY (it
 *      would wait for itself); then 8 Writes from the new region and
 *      ibv_wr_complete.
 *   B  while the main thread holds a long batch open (64 Writes), another
 *      thread drives 40 round trips (RDMA Write + poll) on a second QP;
 *      the batch completes only after the thread is done.
 *   C  an aborted batch writes nothing; the next batch works.
 * The parent then reads the region back (RDMA Read) and checks every
 * written byte, and that the aborted range is still zero.  SIGALRM bounds the whole run: a deadlock is a failure.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "test_trust_verbs_peer.h"

#define REGION (1u << 20)
#define CHUNK 4096u
#define A_OFF 0u                  /* part A: 8 chunks */
#define A_N 8u
#define B_OFF (64u << 10)         /* part B main batch: 64 chunks */
#define B_N 64u
#define T_OFF (512u << 10)        /* part B thread: 40 chunks */
#define T_N 40u
#define ABORT_OFF (960u << 10)    /* part C: aborted, must stay zero */
#define C_OFF (1000u << 10)       /* part C: the batch after the abort */

static uint8_t pattern(uint32_t off)
{
	return (uint8_t)(off * 131u + off / CHUNK * 7u + 1u);
}

struct target_info {
	uint32_t rkey;
	uint32_t pad;
	uint64_t addr;
};

/* ---- target ----------------------------------------------------------- */

static int run_target(int fd)
{
	struct tv_side s;
	tv_open(&s);
	uint8_t *region = calloc(1, REGION);
	CHECK(region);
	struct ibv_mr *mr = ibv_reg_mr(s.pd, region, REGION, IBV_ACCESS_LOCAL_WRITE |
				       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	CHECK(mr);
	struct ibv_qp *qp[2] = { tv_qp_ex(&s, 16, 16), tv_qp_ex(&s, 16, 16) };
	tv_connect(&s, fd, qp, 2);
	struct target_info ti = { .rkey = mr->rkey, .addr = (uintptr_t)region };
	srn_tc_send(fd, &ti, sizeof(ti));
	/* The writer reads the region back itself (RDMA Read): this side
	 * never touches the bytes its progress thread wrote, so TSan sees
	 * only synchronised accesses. */
	srn_tc_barrier(fd, 0xd0, 60000);
	return 0;
}

/* ---- writer ----------------------------------------------------------- */

static struct ibv_mr *src_mr;
static uint8_t *src;
static struct target_info ti;

static void batch_write(struct ibv_qp_ex *x, uint64_t wr_id, uint32_t off, uint32_t lkey)
{
	x->wr_id = wr_id;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, ti.rkey, ti.addr + off);
	ibv_wr_set_sge(x, lkey, (uintptr_t)src + off, CHUNK);
}

/* Part B's second thread: round trips on its own QP while the main
 * thread holds a batch open. */
struct helper {
	struct ibv_qp *qp;
	atomic_int go, done;
	double took_s;
};

static void *helper_main(void *arg)
{
	struct helper *h = arg;
	double start = srn_tc_now();
	while (!atomic_load(&h->go) && srn_tc_now() - start < 15)
		usleep(100);
	CHECK(atomic_load(&h->go));
	double t0 = srn_tc_now();
	for (uint32_t i = 0; i < T_N; i++) {
		uint32_t off = T_OFF + i * CHUNK;
		struct ibv_sge sg = { (uintptr_t)src + off, CHUNK, src_mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 5000 + i, .sg_list = &sg, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;
		wr.wr.rdma.rkey = ti.rkey;
		wr.wr.rdma.remote_addr = ti.addr + off;
		CHECK(ibv_post_send(h->qp, &wr, &bad) == 0);
		tv_expect(h->qp->send_cq, IBV_WC_SUCCESS, 5000 + i);
	}
	h->took_s = srn_tc_now() - t0;
	atomic_store(&h->done, 1);
	return NULL;
}

static int run_writer(int fd)
{
	struct tv_side s;
	tv_open(&s);
	src = malloc(REGION);
	CHECK(src);
	for (uint32_t i = 0; i < REGION; i++)
		src[i] = pattern(i);
	src_mr = ibv_reg_mr(s.pd, src, REGION, IBV_ACCESS_LOCAL_WRITE);
	CHECK(src_mr);
	struct ibv_qp *qp[2] = { tv_qp_ex(&s, 128, 256), tv_qp_ex(&s, 16, 16) };
	tv_connect(&s, fd, qp, 2);
	srn_tc_recv(fd, &ti, sizeof(ti), 30000);
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp[0]);
	struct ibv_cq *cq = qp[0]->send_cq;

	/* A: other verbs on the same thread inside the batch. */
	ibv_wr_start(x);
	struct ibv_mr *amr = ibv_reg_mr(s.pd, src + A_OFF, A_N * CHUNK, IBV_ACCESS_LOCAL_WRITE);
	CHECK(amr);
	struct ibv_wc wc;
	CHECK(ibv_poll_cq(cq, 1, &wc) == 0);
	struct ibv_mw *mw = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
	CHECK(mw);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	CHECK(ibv_query_qp(qp[0], &qa, IBV_QP_STATE, &qia) == 0 && qa.qp_state == IBV_QPS_RTS);
	struct ibv_device_attr da;
	CHECK(ibv_query_device(s.ctx, &da) == 0);
	CHECK(ibv_dealloc_mw(mw) == 0);
	struct ibv_sge sg = { (uintptr_t)src, 8, amr->lkey };
	struct ibv_send_wr pw = { .wr_id = 1, .sg_list = &sg, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE }, *bad = NULL;
	pw.wr.rdma.rkey = ti.rkey;
	pw.wr.rdma.remote_addr = ti.addr;
	CHECK(ibv_post_send(qp[0], &pw, &bad) == EBUSY && bad == &pw);
	for (uint32_t i = 0; i < A_N; i++)
		batch_write(x, 100 + i, A_OFF + i * CHUNK, amr->lkey);
	CHECK(ibv_wr_complete(x) == 0);
	for (uint32_t i = 0; i < A_N; i++)
		tv_expect(cq, IBV_WC_SUCCESS, 100 + i);
	printf("[parent] A: reg_mr, poll_cq, alloc_mw, query_qp inside a batch; 8 Writes done\n");

	/* B: a long batch open while another thread works the device. */
	struct helper h = { .qp = qp[1] };
	pthread_t th;
	CHECK(pthread_create(&th, NULL, helper_main, &h) == 0);
	ibv_wr_start(x);
	for (uint32_t i = 0; i < B_N / 2; i++)
		batch_write(x, 200 + i, B_OFF + i * CHUNK, src_mr->lkey);
	atomic_store(&h.go, 1);
	double end = srn_tc_now() + 15;
	while (!atomic_load(&h.done) && srn_tc_now() < end)
		usleep(1000);
	if (!atomic_load(&h.done)) {
		fprintf(stderr, "[parent] B: the other thread made no progress in 15 s while "
			"a batch was open\n");
		_exit(1);
	}
	for (uint32_t i = B_N / 2; i < B_N; i++)
		batch_write(x, 200 + i, B_OFF + i * CHUNK, src_mr->lkey);
	CHECK(ibv_wr_complete(x) == 0);
	CHECK(pthread_join(th, NULL) == 0);
	for (uint32_t i = 0; i < B_N; i++)
		tv_expect(cq, IBV_WC_SUCCESS, 200 + i);
	printf("[parent] B: another thread did %u round trips in %.1f ms inside a %u-WR batch\n",
	       T_N, h.took_s * 1e3, B_N);

	/* C: abort drops the batch; the next one runs. */
	ibv_wr_start(x);
	batch_write(x, 300, ABORT_OFF, src_mr->lkey);
	ibv_wr_abort(x);
	ibv_wr_start(x);
	batch_write(x, 301, C_OFF, src_mr->lkey);
	CHECK(ibv_wr_complete(x) == 0);
	tv_expect(cq, IBV_WC_SUCCESS, 301);
	CHECK(ibv_poll_cq(cq, 1, &wc) == 0);      /* nothing of the aborted batch */
	/* An empty batch is fine; a batch on a QP in RESET is refused whole. */
	ibv_wr_start(x);
	CHECK(ibv_wr_complete(x) == 0);
	struct ibv_qp *idle = tv_qp_ex(&s, 16, 16);
	struct ibv_qp_ex *ix = ibv_qp_to_qp_ex(idle);
	ibv_wr_start(ix);
	batch_write(ix, 400, C_OFF, src_mr->lkey);
	CHECK(ibv_wr_complete(ix) == EINVAL);
	CHECK(ibv_destroy_qp(idle) == 0);

	/* Read the whole region back and check every byte. */
	uint8_t *back = calloc(1, REGION);
	CHECK(back);
	struct ibv_mr *bmr = ibv_reg_mr(s.pd, back, REGION, IBV_ACCESS_LOCAL_WRITE);
	CHECK(bmr);
	ibv_wr_start(x);
	x->wr_id = 500;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_read(x, ti.rkey, ti.addr);
	ibv_wr_set_sge(x, bmr->lkey, (uintptr_t)back, REGION);
	CHECK(ibv_wr_complete(x) == 0);
	tv_expect(cq, IBV_WC_SUCCESS, 500);
	struct { uint32_t off, n; } ranges[] = {
		{ A_OFF, A_N }, { B_OFF, B_N }, { T_OFF, T_N }, { C_OFF, 1 },
	};
	for (size_t r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++)
		for (uint32_t i = ranges[r].off; i < ranges[r].off + ranges[r].n * CHUNK; i++)
			if (back[i] != pattern(i)) {
				fprintf(stderr, "[parent] target byte %u is %#x, wanted %#x\n", i,
					back[i], pattern(i));
				return 1;
			}
	for (uint32_t i = ABORT_OFF; i < ABORT_OFF + CHUNK; i++)
		CHECK(back[i] == 0);              /* the aborted Write never ran */
	printf("[parent] all %u written chunks hold their bytes; the aborted one is zero\n",
	       A_N + B_N + T_N + 1);
	srn_tc_barrier(fd, 0xd0, 60000);
	CHECK(ibv_dereg_mr(bmr) == 0 && ibv_dereg_mr(amr) == 0);
	free(back);
	return 0;
}

int main(void)
{
	return tv_main(run_target, run_writer);
}
