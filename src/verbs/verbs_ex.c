/*
 * verbs_ex.c - the extended verbs: ibv_create_cq_ex with the ibv_cq_ex
 * polling API, and ibv_create_qp_ex with the ibv_wr_* work-request API.
 *
 * cq_ex: start_poll and next_poll each take nic->lock just long enough to
 * move one completion out of the ring (start_poll drives progress first if
 * the CQ is empty); the lock is NOT held until end_poll, because
 * applications post work between start_poll and end_poll (rc_pingpong
 * does) and posting takes the same lock.  read_* are plain loads of the
 * copied-out completion.
 *
 * qp_ex: a batch (ibv_wr_start .. ibv_wr_complete) holds only that QP's
 * send-queue lock (qp->sq.lock), as rxe and mlx5 lock only the QP's send
 * queue, so other verbs -- on this thread or any other -- run freely in
 * between.  Each ibv_wr_<op> call opens a staged work request that the
 * ibv_wr_set_* calls complete; when the next one opens, or at
 * ibv_wr_complete, it is checked by the same code as ibv_post_send and
 * written into the next free SQ slot past sq.head, which nothing else
 * reads (the transport reads only [sq.tail, sq.head), and every poster of
 * this QP holds sq.lock).  ibv_wr_complete takes nic->lock once: it checks
 * the QP state, numbers the batch's WQEs, moves sq.head over them and
 * rings the doorbell.  An error anywhere makes ibv_wr_complete drop the
 * whole batch and return it; ibv_wr_abort drops it silently.  So both APIs
 * queue identical work and send identical packets.
 *
 * A batch belongs to the thread that opened it (sq.wr_stage->owner): the
 * ibv_wr_* calls of any other thread, and ibv_wr_complete/abort with no
 * batch open, touch nothing (complete returns EINVAL) and never unlock a
 * lock they do not hold.  A reset of the QP under an open batch (counted
 * by qp->sq.reset_gen) makes ibv_wr_complete refuse it, and ibv_destroy_qp
 * is EBUSY while a batch is open.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/caller_mem.h"
#include "core/cq.h"
#include "core/device.h"
#include "core/limits.h"
#include "core/nic.h"
#include "engine/nic.h"
#include "core/qp.h"
#include "transport/complete.h"
#include "transport/requester.h"
#include "transport/tx.h"
#include "verbs/verbs.h"

/* ---- ibv_cq_ex ------------------------------------------------------ */

static struct srn_cq *cq_of(struct ibv_cq_ex *c)
{
	return (struct srn_cq *)c;
}

static bool cq_ex_fetch(struct srn_cq *cq)
{
	if (cq->tail == cq->head)
		return false;
	uint32_t i = cq->tail++ & (cq->size - 1);
	cq->cur = cq->ring[i];
	cq->cur_ts = cq->ts ? cq->ts[i] : 0;
	cq->ibcq_ex.status = cq->cur.status;
	cq->ibcq_ex.wr_id = cq->cur.wr_id;
	if (cq->tail == cq->head)
		srn_cq_drained(cq);
	return true;
}

static int cq_ex_start(struct ibv_cq_ex *c, struct ibv_poll_cq_attr *attr)
{
	struct srn_cq *cq = cq_of(c);
	if (attr->comp_mask)
		return EINVAL;
	srn_nic_lock(cq->nic);
	/* Under the lock: one clock read serves the stamp and the pass. */
	uint64_t now = srn_progress_app_active(cq->nic);
	bool got = cq_ex_fetch(cq);
	if (!got) {
		srn_progress_poll_at(cq->nic, SRN_POLL_APP, now);
		got = cq_ex_fetch(cq);
	} else {
		srn_progress_held_acks_due(cq->nic, now);
	}
	bool sleeps = srn_cq_armed_look(cq, got) && !srn_channel_blocks(cq->channel);
	srn_nic_unlock(cq->nic);
	if (sleeps)
		srn_progress_app_sleeps(cq->nic);
	return got ? 0 : ENOENT;       /* on ENOENT the caller skips end_poll */
}

static int cq_ex_next(struct ibv_cq_ex *c)
{
	struct srn_cq *cq = cq_of(c);
	srn_nic_lock(cq->nic);
	bool got = cq_ex_fetch(cq);
	srn_nic_unlock(cq->nic);
	return got ? 0 : ENOENT;
}

static void cq_ex_end(struct ibv_cq_ex *c)
{
	(void)c;
}

static enum ibv_wc_opcode rd_opcode(struct ibv_cq_ex *c) { return cq_of(c)->cur.opcode; }
static uint32_t rd_vendor_err(struct ibv_cq_ex *c) { return cq_of(c)->cur.vendor_err; }
static uint32_t rd_byte_len(struct ibv_cq_ex *c) { return cq_of(c)->cur.byte_len; }
static __be32 rd_imm(struct ibv_cq_ex *c) { return cq_of(c)->cur.imm_data; }
static uint32_t rd_qp_num(struct ibv_cq_ex *c) { return cq_of(c)->cur.qp_num; }
static uint32_t rd_src_qp(struct ibv_cq_ex *c) { return cq_of(c)->cur.src_qp; }
static unsigned int rd_wc_flags(struct ibv_cq_ex *c) { return cq_of(c)->cur.wc_flags; }
static uint32_t rd_slid(struct ibv_cq_ex *c) { return cq_of(c)->cur.slid; }
static uint8_t rd_sl(struct ibv_cq_ex *c) { return cq_of(c)->cur.sl; }
static uint8_t rd_dlid_path_bits(struct ibv_cq_ex *c) { return cq_of(c)->cur.dlid_path_bits; }
/* The "HCA clock" is CLOCK_MONOTONIC in ns (hca_core_clock 1 GHz). */
static uint64_t rd_ts(struct ibv_cq_ex *c) { return cq_of(c)->cur_ts; }
static uint64_t rd_wallclock(struct ibv_cq_ex *c)
{
	struct timespec mono, real;
	clock_gettime(CLOCK_MONOTONIC, &mono);
	clock_gettime(CLOCK_REALTIME, &real);
	int64_t off = ((int64_t)real.tv_sec - mono.tv_sec) * 1000000000ll +
		      (real.tv_nsec - mono.tv_nsec);
	return (uint64_t)((int64_t)cq_of(c)->cur_ts + off);
}

#define SRN_CQ_EX_WC_FLAGS (IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | \
			    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)

struct ibv_cq_ex *srn_verbs_create_cq_ex(struct ibv_context *c, struct ibv_cq_init_attr_ex *attr)
{
	if (attr->wc_flags & ~(uint64_t)SRN_CQ_EX_WC_FLAGS)
		return srn_null_errno(-EOPNOTSUPP);
	if (attr->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD))
		return srn_null_errno(-EINVAL);
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    (attr->flags & ~(uint32_t)(IBV_CREATE_CQ_ATTR_SINGLE_THREADED |
				       IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN)))
		return srn_null_errno(-EOPNOTSUPP);
	struct ibv_cq *ibcq = srn_cq_create(c, (int)attr->cqe, attr->cq_context, attr->channel,
					    (int)attr->comp_vector);
	if (!ibcq)
		return NULL;
	struct srn_cq *cq = srn_cq(ibcq);
	if (attr->wc_flags & (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
			      IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)) {
		cq->ts = calloc(cq->size, sizeof(*cq->ts));
		if (!cq->ts) {
			ibv_destroy_cq(ibcq);
			return srn_null_errno(-ENOMEM);
		}
	}
	struct ibv_cq_ex *x = &cq->ibcq_ex;
	x->comp_mask = 0;
	x->start_poll = cq_ex_start;
	x->next_poll = cq_ex_next;
	x->end_poll = cq_ex_end;
	x->read_opcode = rd_opcode;
	x->read_vendor_err = rd_vendor_err;
	x->read_byte_len = rd_byte_len;
	x->read_imm_data = rd_imm;
	x->read_qp_num = rd_qp_num;
	x->read_src_qp = rd_src_qp;
	x->read_wc_flags = rd_wc_flags;
	x->read_slid = rd_slid;
	x->read_sl = rd_sl;
	x->read_dlid_path_bits = rd_dlid_path_bits;
	x->read_completion_ts = rd_ts;
	x->read_completion_wallclock_ns = rd_wallclock;
	return x;
}

/* ---- ibv_qp_ex ------------------------------------------------------ */

struct srn_wr_stage {
	/* The thread whose batch is open (its thread_tag), 0 when none.
	 * Written only by that thread while it holds sq.lock; read by any
	 * thread, so atomic.  The fields below are the owner's alone. */
	_Atomic uintptr_t owner;
	uint32_t gen;                  /* qp->sq.reset_gen at ibv_wr_start */
	bool open;
	int err;                       /* first error of the batch (positive errno) */
	uint32_t head;                 /* sq.head at ibv_wr_start: the batch fills [head, head + n) */
	uint32_t n;
	uint32_t room;                 /* free slots from head, as last seen under nic->lock
					* (completions only ever add to it) */
	struct ibv_send_wr wr;
	struct ibv_sge sge[SRN_MAX_SGE];
	uint8_t inline_buf[SRN_MAX_INLINE];
};

static struct srn_qp *qpx(struct ibv_qp_ex *q)
{
	return (struct srn_qp *)q;
}

/* Any address unique to the calling thread names it (never 0). */
static _Thread_local char thread_tag;

static uintptr_t this_thread(void)
{
	return (uintptr_t)&thread_tag;
}

/* The batch of this QP if this thread has it open, else NULL: the
 * ibv_wr_* calls of other threads or outside a batch do nothing. */
static struct srn_wr_stage *stage_of(struct srn_qp *qp)
{
	struct srn_wr_stage *st = qp->sq.wr_stage;
	if (atomic_load_explicit(&st->owner, memory_order_relaxed) != this_thread())
		return NULL;
	return st;
}

/* Free slots from st->head on (at ibv_wr_start, head becomes sq.head and
 * gen the QP's reset count).  After a reset under the batch sq.tail is
 * back at 0 and the figure means nothing, so the batch is failed here:
 * ibv_wr_complete refuses it anyway. */
static void stage_see_room(struct srn_qp *qp, struct srn_wr_stage *st, bool start)
{
	srn_nic_lock(qp->nic);
	if (start) {
		st->head = qp->sq.head;
		st->gen = qp->sq.reset_gen;
	}
	uint32_t used = st->head - qp->sq.tail;
	st->room = used > qp->sq.size ? 0 : qp->sq.size - used;
	if (st->gen != qp->sq.reset_gen) {
		st->room = 0;
		if (!st->err)
			st->err = EINVAL;
	}
	srn_nic_unlock(qp->nic);
}

/* Write the staged work request, if any, into the batch's next slot. */
static void stage_flush(struct srn_qp *qp, struct srn_wr_stage *st)
{
	if (!st->open)
		return;
	st->open = false;
	if (st->err)
		return;
	if (st->n == st->room)
		stage_see_room(qp, st, false);
	if (st->err)
		return;
	if (st->n >= st->room) {
		st->err = ENOMEM;       /* as ibv_post_send on a full queue */
		return;
	}
	int r = srn_sq_fill(qp, st->head + st->n, &st->wr);
	if (r)
		st->err = -r;
	else
		st->n++;
}

/* Open a work request of opcode op in this thread's batch; returns it,
 * or NULL when this thread has no batch open on the QP. */
static struct ibv_send_wr *stage_open(struct ibv_qp_ex *q, enum ibv_wr_opcode op)
{
	struct srn_qp *qp = qpx(q);
	struct srn_wr_stage *st = stage_of(qp);
	if (!st)
		return NULL;
	stage_flush(qp, st);
	memset(&st->wr, 0, sizeof(st->wr));
	st->wr.wr_id = q->wr_id;
	st->wr.send_flags = q->wr_flags;
	st->wr.opcode = op;
	st->wr.sg_list = st->sge;
	st->open = true;
	return &st->wr;
}

/* The work request the ibv_wr_set_* calls complete, or NULL. */
static struct ibv_send_wr *staged_wr(struct ibv_qp_ex *q)
{
	struct srn_wr_stage *st = stage_of(qpx(q));
	return st ? &st->wr : NULL;
}

static void wr_send(struct ibv_qp_ex *q) { (void)stage_open(q, IBV_WR_SEND); }

static void wr_send_imm(struct ibv_qp_ex *q, __be32 imm)
{
	struct ibv_send_wr *wr = stage_open(q, IBV_WR_SEND_WITH_IMM);
	if (wr)
		wr->imm_data = imm;
}

static void wr_send_inv(struct ibv_qp_ex *q, uint32_t rkey)
{
	struct ibv_send_wr *wr = stage_open(q, IBV_WR_SEND_WITH_INV);
	if (wr)
		wr->invalidate_rkey = rkey;
}

static void wr_local_inv(struct ibv_qp_ex *q, uint32_t rkey)
{
	struct ibv_send_wr *wr = stage_open(q, IBV_WR_LOCAL_INV);
	if (wr)
		wr->invalidate_rkey = rkey;
}

static void wr_bind_mw(struct ibv_qp_ex *q, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *info)
{
	struct ibv_send_wr *wr = stage_open(q, IBV_WR_BIND_MW);
	if (!wr)
		return;
	wr->bind_mw.mw = mw;
	wr->bind_mw.rkey = rkey;
	srn_caller_read(&wr->bind_mw.bind_info, info, sizeof(*info));
}

static void stage_rdma(struct ibv_qp_ex *q, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr,
		       __be32 imm)
{
	struct ibv_send_wr *wr = stage_open(q, op);
	if (!wr)
		return;
	wr->wr.rdma.rkey = rkey;
	wr->wr.rdma.remote_addr = addr;
	wr->imm_data = imm;
}

static void wr_rdma_write(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr)
{
	stage_rdma(q, IBV_WR_RDMA_WRITE, rkey, addr, 0);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr, __be32 imm)
{
	stage_rdma(q, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr, imm);
}

static void wr_rdma_read(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr)
{
	stage_rdma(q, IBV_WR_RDMA_READ, rkey, addr, 0);
}

static void stage_atomic(struct ibv_qp_ex *q, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr,
			 uint64_t compare_add, uint64_t swap)
{
	struct ibv_send_wr *wr = stage_open(q, op);
	if (!wr)
		return;
	wr->wr.atomic.rkey = rkey;
	wr->wr.atomic.remote_addr = addr;
	wr->wr.atomic.compare_add = compare_add;
	wr->wr.atomic.swap = swap;
}

static void wr_cmp_swp(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr, uint64_t compare,
		       uint64_t swap)
{
	stage_atomic(q, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, addr, compare, swap);
}

static void wr_fetch_add(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr, uint64_t add)
{
	stage_atomic(q, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, addr, add, 0);
}

static void wr_set_ud_addr(struct ibv_qp_ex *q, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct ibv_send_wr *wr = staged_wr(q);
	if (!wr)
		return;
	wr->wr.ud.ah = ah;
	wr->wr.ud.remote_qpn = qpn;
	wr->wr.ud.remote_qkey = qkey;
}

static void wr_set_xrc_srqn(struct ibv_qp_ex *q, uint32_t srqn)
{
	struct ibv_send_wr *wr = staged_wr(q);
	if (wr)
		wr->qp_type.xrc.remote_srqn = srqn;
}

static void wr_set_sge_list(struct ibv_qp_ex *q, size_t n, const struct ibv_sge *sg)
{
	struct srn_wr_stage *st = stage_of(qpx(q));
	if (!st)
		return;
	if (n > SRN_MAX_SGE) {
		st->err = EINVAL;
		return;
	}
	srn_caller_read(st->sge, sg, n * sizeof(*sg));   /* the caller's, any alignment */
	st->wr.num_sge = (int)n;
}

static void wr_set_sge(struct ibv_qp_ex *q, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct ibv_sge s = { addr, length, lkey };
	wr_set_sge_list(q, 1, &s);
}

/* Inline data is copied now (the caller may reuse its buffer at once). */
static void wr_set_inline_data_list(struct ibv_qp_ex *q, size_t n, const struct ibv_data_buf *b)
{
	struct srn_wr_stage *st = stage_of(qpx(q));
	if (!st)
		return;
	size_t total = 0;
	for (size_t i = 0; i < n; i++) {
		struct ibv_data_buf d;  /* the caller's, at any alignment */
		srn_caller_read(&d, b + i, sizeof(d));
		if (d.length > sizeof(st->inline_buf) - total) {
			st->err = EINVAL;
			return;
		}
		memcpy(st->inline_buf + total, d.addr, d.length);
		total += d.length;
	}
	st->sge[0] = (struct ibv_sge){ (uintptr_t)st->inline_buf, (uint32_t)total, 0 };
	st->wr.num_sge = 1;
	st->wr.send_flags |= IBV_SEND_INLINE;
}

static void wr_set_inline_data(struct ibv_qp_ex *q, void *addr, size_t length)
{
	struct ibv_data_buf b = { addr, length };
	wr_set_inline_data_list(q, 1, &b);
}

/* A second ibv_wr_start on the same thread before the batch ended starts
 * the batch over (its lock is already ours: EDEADLK).  Any other failure
 * to lock leaves no batch open, so the calls that follow do nothing and
 * ibv_wr_complete says EINVAL. */
static void wr_start(struct ibv_qp_ex *q)
{
	struct srn_qp *qp = qpx(q);
	int r = srn_sq_lock(qp);
	if (r && r != -EDEADLK)
		return;
	struct srn_wr_stage *st = qp->sq.wr_stage;
	atomic_store_explicit(&st->owner, this_thread(), memory_order_relaxed);
	st->open = false;
	st->err = 0;
	st->n = 0;
	stage_see_room(qp, st, true);
}

/* End the batch: forget what it wrote (the slots were never visible)
 * and give the send queue back. */
static void stage_close(struct srn_qp *qp, struct srn_wr_stage *st)
{
	st->open = false;
	st->err = 0;
	st->n = 0;
	atomic_store_explicit(&st->owner, 0, memory_order_relaxed);
	pthread_mutex_unlock(&qp->sq.lock);
}

static void wr_abort(struct ibv_qp_ex *q)
{
	struct srn_qp *qp = qpx(q);
	struct srn_wr_stage *st = stage_of(qp);
	if (st)
		stage_close(qp, st);
}

/* Publish the batch: the only part under nic->lock. */
static int wr_complete(struct ibv_qp_ex *q)
{
	struct srn_qp *qp = qpx(q);
	struct srn_wr_stage *st = stage_of(qp);
	if (!st)
		return EINVAL;          /* no batch of this thread is open */
	stage_flush(qp, st);
	srn_nic_lock(qp->nic);
	int err = st->err;
	/* The same state rule as ibv_post_send, applied when the work
	 * becomes visible.  A reset under the batch (reset_gen moved)
	 * emptied the queue its slots were counted in, even if it since
	 * came back to RTS with sq.head where the batch began. */
	if (!err && (qp->state == IBV_QPS_RESET || qp->state == IBV_QPS_INIT ||
		     qp->state == IBV_QPS_RTR || qp->sq.reset_gen != st->gen ||
		     qp->sq.head != st->head))
		err = EINVAL;
	if (!err && st->n > qp->sq.size - (st->head - qp->sq.tail))
		err = ENOMEM;
	if (!err) {
		for (uint32_t i = 0; i < st->n; i++)
			srn_req_number(qp, &qp->sq.wqe[(st->head + i) & (qp->sq.size - 1)]);
		qp->sq.head = st->head + st->n;
		if (qp->state == IBV_QPS_ERR) {
			srn_qp_flush(qp);
		} else {
			struct srn_qp *others = srn_ack_take_others(qp->nic, qp);
			srn_ack_flush_held(qp->nic);
			srn_req_push(qp);
			if (others)
				srn_ack_put_back(qp->nic, others);
		}
	}
	srn_nic_unlock(qp->nic);
	stage_close(qp, st);
	return err;
}

#define SRN_QP_EX_OPS (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
		       IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |                 \
		       IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |       \
		       IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV |      \
		       IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV)

/* The extended attributes softrnic can honour: 0 or -errno. */
static int qp_ex_attr_check(const struct ibv_qp_init_attr_ex *a, const struct ibv_pd *pd)
{
	uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
			 IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
	if (!pd && a->qp_type != IBV_QPT_XRC_RECV)
		return -EINVAL;
	if (a->comp_mask & ~known)
		return -EOPNOTSUPP;
	/* Create flags as the kernel judges them: bits no verbs flag names
	 * are EINVAL (uverbs), named flags EOPNOTSUPP (rxe supports none,
	 * nor do we), and no flags at all is simply accepted. */
	if (a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) {
		uint32_t named = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB | IBV_QP_CREATE_SCATTER_FCS |
				 IBV_QP_CREATE_CVLAN_STRIPPING | IBV_QP_CREATE_SOURCE_QPN |
				 IBV_QP_CREATE_PCI_WRITE_END_PADDING;
		if (a->create_flags & ~named)
			return -EINVAL;
		if (a->create_flags)
			return -EOPNOTSUPP;
	}
	bool ops = a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	if (ops && (a->send_ops_flags & ~(uint64_t)SRN_QP_EX_OPS))
		return -EOPNOTSUPP;
	/* An XRC receive QP has no send queue, so no ibv_wr_* table: any
	 * send_ops_flags at all is EOPNOTSUPP (rxe and mlx5 say the same). */
	if (ops && a->qp_type == IBV_QPT_XRC_RECV)
		return -EOPNOTSUPP;
	return 0;
}

/* Give a new QP its ibv_wr_* table, its batch stage and the send queue
 * lock the batch takes: 0 or a positive errno. */
static int qp_ex_wr_ops(struct srn_qp *qp)
{
	struct srn_wr_stage *st = calloc(1, sizeof(*st));
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
	int r = st ? pthread_mutex_init(&qp->sq.lock, &ma) : ENOMEM;
	pthread_mutexattr_destroy(&ma);
	if (r) {
		free(st);
		return r;
	}
	qp->sq.wr_stage = st;
	struct ibv_qp_ex *x = &qp->ibqp_ex;
	x->comp_mask = 0;
	x->wr_send = wr_send;
	x->wr_send_imm = wr_send_imm;
	x->wr_send_inv = wr_send_inv;
	x->wr_local_inv = wr_local_inv;
	x->wr_bind_mw = wr_bind_mw;
	x->wr_rdma_write = wr_rdma_write;
	x->wr_rdma_write_imm = wr_rdma_write_imm;
	x->wr_rdma_read = wr_rdma_read;
	x->wr_atomic_cmp_swp = wr_cmp_swp;
	x->wr_atomic_fetch_add = wr_fetch_add;
	x->wr_set_ud_addr = wr_set_ud_addr;
	x->wr_set_xrc_srqn = wr_set_xrc_srqn;
	x->wr_set_sge = wr_set_sge;
	x->wr_set_sge_list = wr_set_sge_list;
	x->wr_set_inline_data = wr_set_inline_data;
	x->wr_set_inline_data_list = wr_set_inline_data_list;
	x->wr_start = wr_start;
	x->wr_complete = wr_complete;
	x->wr_abort = wr_abort;
	return 0;
}

struct ibv_qp *srn_verbs_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *a)
{
	struct ibv_pd *pd = (a->comp_mask & IBV_QP_INIT_ATTR_PD) ? a->pd : NULL;
	struct srn_xrcd *xrcd = (a->comp_mask & IBV_QP_INIT_ATTR_XRCD) ? (struct srn_xrcd *)a->xrcd
									 : NULL;
	int ret = qp_ex_attr_check(a, pd);
	if (ret)
		return srn_null_errno(ret);
	struct ibv_qp_init_attr init = {
		.qp_context = a->qp_context,
		.send_cq = a->send_cq,
		.recv_cq = a->recv_cq,
		.srq = a->srq,
		.cap = a->cap,
		.qp_type = a->qp_type,
		.sq_sig_all = a->sq_sig_all,
	};
	struct srn_qp *qp;
	ret = srn_qp_create(c, pd, &init, xrcd, &qp);
	if (ret)
		return srn_null_errno(ret);
	a->cap = init.cap;
	if (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		int r = qp_ex_wr_ops(qp);
		if (r) {
			ibv_destroy_qp(&qp->ibqp_ex.qp_base);
			return srn_null_errno(-r);
		}
	}
	return &qp->ibqp_ex.qp_base;
}
