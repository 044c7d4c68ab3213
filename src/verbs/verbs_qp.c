/*
 * verbs_qp.c - QP create/modify/query/destroy and posting work requests.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/ah.h"
#include "core/caller_mem.h"
#include "core/cq.h"
#include "core/device.h"
#include "core/limits.h"
#include "core/mcast.h"
#include "core/mr.h"
#include "core/nic.h"
#include "engine/nic.h"
#include "core/qp.h"
#include "transport/tx.h"
#include "core/qp_rules.h"
#include "core/srq.h"
#include "diag/names.h"
#include "diag/qp_state.h"
#include "transport/cc.h"
#include "transport/complete.h"
#include "transport/qp_effects.h"
#include "transport/requester.h"
#include "transport/txq.h"
#include "verbs/verbs.h"
#include "wire/roce_hdr.h"

static struct srn_qp_limits limits_of(struct srn_nic *nic)
{
	return (struct srn_qp_limits){
		.port_max_mtu = (enum ibv_mtu)nic->ib_mtu,
		.max_rd_atomic = SRN_MAX_RD_ATOMIC,
		.max_dest_rd_atomic = SRN_MAX_RD_ATOMIC,
		.gid_tbl_len = SRN_GID_TBL_LEN,
		.pkey_tbl_len = SRN_PKEY_TBL_LEN,
		.max_qp_wr = SRN_MAX_QP_WR,
		.max_sge = SRN_MAX_SGE,
		.max_inline = SRN_MAX_INLINE,
	};
}

SRN_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *ibpd, struct ibv_qp_init_attr *init)
{
	struct srn_qp *qp;
	/* An XRC receive QP needs a domain: only ibv_create_qp_ex has one.
	 * (The header's ibv_create_qp_ex lands here for a PD-only attr.) */
	if (init->qp_type == IBV_QPT_XRC_RECV)
		return srn_null_errno(-EINVAL);
	int ret = srn_qp_create(ibpd->context, ibpd, init, NULL, &qp);
	return ret ? srn_null_errno(ret) : &qp->ibqp_ex.qp_base;
}

int srn_qp_create(struct ibv_context *c, struct ibv_pd *ibpd, struct ibv_qp_init_attr *init,
		  struct srn_xrcd *xrcd, struct srn_qp **out)
{
	return srn_qp_create_at(c, ibpd, init, xrcd, false, out);
}

/* Which queues a type has: XRC send QPs send only, XRC receive QPs only
 * receive, into the SRQs of their domain.  Clears what the type has not. */
static int qp_init_check(struct ibv_qp_init_attr *init, const struct srn_pd *pd,
			 const struct srn_xrcd *xrcd, const struct srn_qp_limits *lim)
{
	switch (init->qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_UD:
		if (!pd || !init->send_cq || !init->recv_cq)
			return -EINVAL;
		break;
	case IBV_QPT_XRC_SEND:
		if (!pd || !init->send_cq || init->srq)
			return -EINVAL;
		init->cap.max_recv_wr = init->cap.max_recv_sge = 0;
		break;
	case IBV_QPT_XRC_RECV:
		if (!xrcd)
			return -EINVAL;
		init->cap = (struct ibv_qp_cap){ 0 };
		init->send_cq = init->recv_cq = NULL;
		init->srq = NULL;
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (init->srq && init->qp_type == IBV_QPT_UD)
		return -EOPNOTSUPP;   /* SRQ on UD: not yet */
	if (srn_qp_check_cap(&init->cap, init->srq != NULL, lim))
		return -EINVAL;
	return 0;
}

/* The new QP's own fields from the checked init attributes. */
static void qp_init_fields(struct srn_qp *qp, struct srn_nic *nic, struct ibv_context *c,
			   struct srn_pd *pd, struct srn_xrcd *xrcd,
			   const struct ibv_qp_init_attr *init)
{
	qp->nic = nic;
	qp->ctx = srn_ctx(c);
	qp->pd = pd;
	qp->xrcd = xrcd;
	qp->scq = init->send_cq ? srn_cq(init->send_cq) : NULL;
	qp->rcq = init->recv_cq ? srn_cq(init->recv_cq) : NULL;
	qp->type = init->qp_type;
	qp->srq = init->srq ? srn_srq(init->srq) : NULL;
	qp->sq_sig_all = init->sq_sig_all;
	qp->cap = init->cap;
	if (qp->cap.max_send_sge == 0)
		qp->cap.max_send_sge = 1;
	if (qp->cap.max_recv_sge == 0)
		qp->cap.max_recv_sge = 1;
	/* Report at least a useful inline size (rc_pingpong sends inline
	 * when the message fits what the QP reports). */
	if (qp->cap.max_inline_data < SRN_DEFAULT_INLINE)
		qp->cap.max_inline_data = SRN_DEFAULT_INLINE;
	qp->state = IBV_QPS_RESET;
	/* UD has no path MTU attribute: datagrams may fill the port MTU. */
	qp->path.mtu = qp->type == IBV_QPT_UD ? srn_link_ib_mtu_bytes(nic->ib_mtu) : 256;
}

/* The objects a new QP uses count it.  Must hold the nic lock. */
static void qp_count_users(struct srn_qp *qp)
{
	if (qp->scq)
		qp->scq->nqps++;
	if (qp->rcq)
		qp->rcq->nqps++;
	if (qp->pd)
		qp->pd->refs++;
	if (qp->srq)
		qp->srq->nqps++;
	if (qp->xrcd)
		qp->xrcd->users++;
}

/* The struct ibv_qp the application sees. */
static void qp_init_ibqp(struct srn_qp *qp, struct ibv_context *c, struct ibv_pd *ibpd,
			 const struct ibv_qp_init_attr *init)
{
	struct ibv_qp *q = &qp->ibqp_ex.qp_base;
	q->context = c;
	q->qp_context = init->qp_context;
	q->pd = ibpd;
	q->send_cq = init->send_cq;
	q->recv_cq = init->recv_cq;
	q->srq = init->srq;
	q->handle = qp->qpn;
	q->qp_num = qp->qpn;
	q->state = IBV_QPS_RESET;
	q->qp_type = init->qp_type;
	pthread_mutex_init(&q->mutex, NULL);
	pthread_cond_init(&q->cond, NULL);
}

int srn_qp_create_at(struct ibv_context *c, struct ibv_pd *ibpd, struct ibv_qp_init_attr *init,
		     struct srn_xrcd *xrcd, bool gsi, struct srn_qp **out)
{
	struct srn_pd *pd = ibpd ? srn_pd(ibpd) : NULL;
	struct srn_nic *nic = srn_ctx(c)->nic;
	struct srn_qp_limits lim = limits_of(nic);

	int ret = qp_init_check(init, pd, xrcd, &lim);
	if (ret)
		return ret;

	struct srn_qp *qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	qp_init_fields(qp, nic, c, pd, xrcd, init);
	ret = srn_qp_alloc_queues(qp);
	if (ret)
		goto fail;
	qp->cap.max_send_wr = qp->sq.size;
	qp->cap.max_recv_wr = qp->srq ? 0 : qp->rq.max_wr;

	srn_nic_lock(nic);
	ret = gsi ? srn_nic_qp_add_gsi(nic, qp, &qp->qpn) : srn_nic_qp_add(nic, qp, &qp->qpn);
	if (!ret)
		qp_count_users(qp);
	srn_nic_unlock(nic);
	if (ret)
		goto fail;

	qp_init_ibqp(qp, c, ibpd, init);
	init->cap = qp->cap;
	srn_nic_lock(nic);
	qp->diag = srn_diag_obj_add(nic->diag.seg, SRN_DIAG_QP, qp);
	srn_diag_snap(qp->diag);
	srn_nic_unlock(nic);
	*out = qp;
	return 0;
fail:
	srn_qp_free_queues(qp);
	free(qp);
	return ret;
}

SRN_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct srn_qp *qp = srn_qp(ibqp);
	struct srn_nic *nic = qp->nic;
	struct srn_qp_limits lim = limits_of(nic);
	int ret;

	/* IBV_QP_RATE_LIMIT (where the table allows it): its value checked
	 * with the others, applied after the rest (verbs_rate.c). */
	bool rate = mask & IBV_QP_RATE_LIMIT;

	srn_nic_lock(nic);
	srn_ack_flush(nic);             /* ACKs owed go before any state change */
	ret = srn_qp_check_transition(qp->type, qp->state, attr, mask);
	if (!ret)
		ret = srn_qp_check_attr_values(qp->type, attr, mask, &lim);
	if (!ret && rate)
		ret = srn_verbs_rate_check(qp, attr->rate_limit, 0, 0);
	enum ibv_qp_state from = qp->state;
	if (!ret)
		ret = srn_qp_modify(qp, attr, mask & ~IBV_QP_RATE_LIMIT);
	if (!ret && rate)
		ret = srn_verbs_rate_apply(qp, attr->rate_limit, 0, 0);
	if (!ret && qp->state != from)
		srn_diag_log(qp->diag, SRN_LOG_INFO, "state %s -> %s", srn_qp_state_name(from),
			     srn_qp_state_name(qp->state));
	srn_diag_snap(qp->diag);
	srn_nic_unlock(nic);
	return -ret;
}

SRN_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
			    struct ibv_qp_init_attr *init)
{
	struct srn_qp *qp = srn_qp(ibqp);
	srn_nic_lock(qp->nic);
	*attr = qp->attr;
	attr->qp_state = qp->state;
	attr->cur_qp_state = qp->state;
	attr->rq_psn = qp->resp.epsn;
	attr->sq_psn = qp->req.psn;
	attr->cap = qp->cap;
	attr->sq_draining = qp->state == IBV_QPS_SQD && qp->sq.tail != qp->sq.head;
	memset(init, 0, sizeof(*init));
	init->qp_context = ibqp->qp_context;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->cap = qp->cap;
	init->qp_type = qp->type;
	init->sq_sig_all = qp->sq_sig_all;
	srn_nic_unlock(qp->nic);
	return 0;
}

SRN_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct srn_qp *qp = srn_qp(ibqp);
	struct srn_nic *nic = qp->nic;
	/* An ibv_wr_* batch holds the send-queue lock from ibv_wr_start to
	 * its end and keeps writing into the QP: while one is open (this
	 * thread's or another's) the QP stays, as rdma-core refuses to
	 * destroy what is in use.  Held to the end: no batch starts now. */
	if (qp->sq.wr_stage && pthread_mutex_trylock(&qp->sq.lock))
		return EBUSY;
	srn_nic_lock(nic);
	srn_ack_flush(nic);             /* an ACK it owes still leaves */
	srn_txq_flush(nic);             /* queued packets point into this QP */
	srn_qp_unlink(qp);
	srn_mcast_qp_gone(nic, qp);
	srn_nic_qp_del(nic, qp->qpn);
	srn_diag_obj_del(qp->diag);
	if (qp->scq)
		qp->scq->nqps--;
	if (qp->rcq && qp->type != IBV_QPT_XRC_RECV)
		qp->rcq->nqps--;
	if (qp->pd && qp->type != IBV_QPT_XRC_RECV)
		qp->pd->refs--;
	if (qp->srq && qp->type != IBV_QPT_XRC_RECV)
		qp->srq->nqps--;
	if (qp->xrcd)
		qp->xrcd->users--;
	srn_nic_unlock(nic);
	srn_verbs_forget_events(qp->ctx, &qp->async_ref);
	pthread_mutex_destroy(&ibqp->mutex);
	pthread_cond_destroy(&ibqp->cond);
	if (qp->sq.wr_stage) {
		pthread_mutex_unlock(&qp->sq.lock);
		pthread_mutex_destroy(&qp->sq.lock);
	}
	srn_qp_free_queues(qp);
	srn_cc_qp_free(qp);
	free(qp);
	return 0;
}

/* Which work-request opcodes a QP type takes (rdma-core/IBTA), and which
 * of those this version executes. */
static int check_send_opcode(const struct srn_qp *qp, enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		return 0;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return qp->type == IBV_QPT_UD ? -EINVAL : 0;
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return qp->type == IBV_QPT_RC || qp->type == IBV_QPT_XRC_SEND ? 0 : -EINVAL;
	case IBV_WR_SEND_WITH_INV:
		return qp->type == IBV_QPT_RC || qp->type == IBV_QPT_XRC_SEND ? 0 : -EINVAL;
	case IBV_WR_LOCAL_INV:
	case IBV_WR_BIND_MW:
		return qp->type == IBV_QPT_UD ? -EINVAL : 0;
	default:
		return -EINVAL;
	}
}

/* The work request's fields into its WQE; srn_sq_fill checked them. */
static void swqe_fill(struct srn_swqe *w, const struct srn_qp *qp, const struct ibv_send_wr *wr,
		      uint64_t total, bool inl, bool atomic)
{
	/* Cleared by copying a zero WQE: GCC makes that a few vector moves,
	 * where memset's `rep stos` was 7 % of an 8-byte Write stream. */
	static const struct srn_swqe zero;
	memcpy(w, &zero, sizeof(*w));
	w->wr_id = wr->wr_id;
	w->opcode = wr->opcode;
	w->send_flags = wr->send_flags;
	w->imm_be = wr->imm_data;
	w->length = (uint32_t)total;
	w->num_sge = (uint32_t)wr->num_sge;
	w->is_inline = inl;
	if (qp->type == IBV_QPT_XRC_SEND)
		w->xrc_srqn = wr->qp_type.xrc.remote_srqn;
	if (qp->type == IBV_QPT_UD) {
		w->ah = srn_ah(wr->wr.ud.ah);
		w->remote_qpn = wr->wr.ud.remote_qpn & SRN_QPN_MASK;
		w->remote_qkey = wr->wr.ud.remote_qkey;
	} else if (atomic) {
		w->remote_addr = wr->wr.atomic.remote_addr;
		w->rkey = wr->wr.atomic.rkey;
		w->compare_add = wr->wr.atomic.compare_add;
		w->swap = wr->wr.atomic.swap;
	} else if (wr->opcode == IBV_WR_BIND_MW) {
		w->mw = srn_mw_from_handle(wr->bind_mw.mw);
		w->rkey = wr->bind_mw.rkey;
		w->bind = wr->bind_mw.bind_info;
	} else {
		w->remote_addr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
	}
	if (wr->opcode == IBV_WR_LOCAL_INV || wr->opcode == IBV_WR_SEND_WITH_INV)
		w->imm_be = wr->invalidate_rkey;   /* the rkey to invalidate */
}

/* Everything here reads only what is fixed when the QP is created (type,
 * cap, and a UD QP's MTU), so a batch of ibv_wr_* calls may run it without
 * nic->lock.  The slot at pos belongs to the caller: see verbs.h. */
int srn_sq_fill(struct srn_qp *qp, uint32_t pos, const struct ibv_send_wr *wr)
{
	/* Every send WQE enters here, and each ends in a completion on the
	 * send CQ (at the latest when a flush empties the queue): a QP with
	 * none (an XRC receive QP) has no send queue. */
	if (!qp->scq)
		return -EINVAL;
	int ret = check_send_opcode(qp, wr->opcode);
	if (ret)
		return ret;
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge)
		return -EINVAL;
	uint32_t idx = pos & (qp->sq.size - 1);
	/* The scatter list is the caller's, at any alignment: copied into
	 * the slot first (the slot is ours, and nothing reads it before
	 * sq.head passes it) and read only from there.  Local operations
	 * (LOCAL_INV, BIND_MW) carry none. */
	struct ibv_sge *sge = qp->sq.sge + (size_t)idx * qp->cap.max_send_sge;
	uint64_t total = 0;
	if (!srn_wr_is_local(wr->opcode)) {
		srn_caller_read(sge, wr->sg_list, (size_t)wr->num_sge * sizeof(*sge));
		for (int i = 0; i < wr->num_sge; i++)
			total += sge[i].length;
	}
	if (total > SRN_MAX_MSG_SZ)
		return -EINVAL;
	bool inl = (wr->send_flags & IBV_SEND_INLINE) && !srn_wr_is_rd_atomic(wr->opcode);
	if (inl && total > qp->cap.max_inline_data)
		return -EINVAL;
	bool atomic = wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
		      wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
	if (atomic && total != 8)
		return -EINVAL;     /* the original value lands in 8 bytes */
	if (qp->type == IBV_QPT_UD) {
		/* A datagram is one packet: larger than the MTU is an error,
		 * never a truncation (rxe refuses it at post time too). */
		if (total > qp->path.mtu || !wr->wr.ud.ah)
			return -EINVAL;
	}

	struct srn_swqe *w = &qp->sq.wqe[idx];
	swqe_fill(w, qp, wr, total, inl, atomic);
	if (inl) {
		/* Inline data is copied now: the buffer may be reused as soon
		 * as post returns, and needs no memory key. */
		uint8_t *dst = qp->sq.inline_buf + (size_t)idx * qp->cap.max_inline_data;
		for (int i = 0; i < wr->num_sge; i++) {
			memcpy(dst, (const void *)(uintptr_t)sge[i].addr, sge[i].length);
			dst += sge[i].length;
		}
	}
	return 0;
}

int srn_qp_post_one(struct srn_qp *qp, const struct ibv_send_wr *wr)
{
	if (qp->sq.head - qp->sq.tail >= qp->sq.size)
		return -ENOMEM;
	int ret = srn_sq_fill(qp, qp->sq.head, wr);
	if (ret)
		return ret;
	srn_req_number(qp, &qp->sq.wqe[qp->sq.head & (qp->sq.size - 1)]);
	qp->sq.head++;
	return 0;
}

/* Copy the caller's send work request wr (at any alignment: see
 * core/caller_mem.h) into w, reading only what srn_sq_fill will use.
 * libibverbs grew the struct at its tail (qp_type.xrc in 1.1.7, the
 * bind_mw/tso union in 1.1.8), and a binary built against an older one
 * has a shorter struct: the tail is read only by the QPs and opcodes that
 * have it, as field-by-field reads would, never past the caller's end. */
static void send_wr_read(const struct srn_qp *qp, struct ibv_send_wr *w,
			 const struct ibv_send_wr *wr)
{
	const char *p = (const char *)wr;
	srn_caller_read(w, p, offsetof(struct ibv_send_wr, qp_type));
	if (qp->type == IBV_QPT_XRC_SEND)
		srn_caller_read(&w->qp_type, p + offsetof(struct ibv_send_wr, qp_type),
				sizeof(w->qp_type));
	if (w->opcode == IBV_WR_BIND_MW)
		srn_caller_read(&w->bind_mw, p + offsetof(struct ibv_send_wr, bind_mw),
				sizeof(w->bind_mw));
}

int srn_verbs_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct srn_qp *qp = srn_qp(ibqp);
	int ret = 0;

	if (qp->type == IBV_QPT_XRC_RECV) {
		srn_caller_write(bad, &wr, sizeof(wr));
		return EINVAL;          /* no send queue */
	}
	/* A QP with the ibv_wr_* API has a send-queue lock that a batch
	 * holds from ibv_wr_start to its end; posting waits for the batch of
	 * another thread and is refused inside a batch of this thread (it
	 * would otherwise wait for itself). */
	if (qp->sq.wr_stage && srn_sq_lock(qp)) {
		srn_caller_write(bad, &wr, sizeof(wr));
		return EBUSY;
	}
	srn_nic_lock(qp->nic);
	/* IBTA: posting to the send queue before RTS is an immediate error;
	 * in ERR work is accepted and flushed (as mlx5 and rxe do). */
	if (qp->state == IBV_QPS_RESET || qp->state == IBV_QPS_INIT || qp->state == IBV_QPS_RTR) {
		srn_caller_write(bad, &wr, sizeof(wr));
		ret = EINVAL;
		goto out;
	}
	/* Each work request is the caller's: read from a copy. */
	struct ibv_send_wr w;
	for (; wr; wr = w.next) {
		send_wr_read(qp, &w, wr);
		int r = srn_qp_post_one(qp, &w);
		if (r) {
			srn_caller_write(bad, &wr, sizeof(wr));
			ret = -r;
			break;
		}
	}
	if (qp->state == IBV_QPS_ERR) {
		srn_qp_flush(qp);
	} else {
		struct srn_qp *others = srn_ack_take_others(qp->nic, qp);
		srn_ack_flush_held(qp->nic);
		srn_req_push(qp);
		if (others)
			srn_ack_put_back(qp->nic, others);
	}
out:
	srn_nic_unlock(qp->nic);
	if (qp->sq.wr_stage)
		pthread_mutex_unlock(&qp->sq.lock);
	return ret;
}

int srn_verbs_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct srn_qp *qp = srn_qp(ibqp);
	int ret = 0;

	srn_nic_lock(qp->nic);
	if (qp->state == IBV_QPS_RESET || qp->srq || qp->type == IBV_QPT_XRC_SEND ||
	    qp->type == IBV_QPT_XRC_RECV) {
		srn_caller_write(bad, &wr, sizeof(wr));
		ret = EINVAL;
		goto out;
	}
	/* The caller's work requests, read from copies (as post_send). */
	struct ibv_recv_wr w;
	for (; wr; wr = w.next) {
		srn_caller_read(&w, wr, sizeof(w));
		int r = srn_rq_post(&qp->rq, &w);
		if (r) {
			srn_caller_write(bad, &wr, sizeof(wr));
			ret = -r;
			break;
		}
	}
	if (qp->state == IBV_QPS_ERR)
		srn_qp_flush(qp);
out:
	srn_nic_unlock(qp->nic);
	return ret;
}

SRN_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *ibqp)
{
	struct srn_qp *qp = srn_qp(ibqp);
	/* Only QPs created with send_ops_flags have the ibv_wr_* table, as
	 * in rdma-core. */
	if (!qp->ibqp_ex.wr_start)
		return srn_null_errno(-EOPNOTSUPP);
	return &qp->ibqp_ex;
}

SRN_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	/* Data of one message is placed in PSN order under one lock, so a
	 * later byte is never visible before an earlier one of the same
	 * message. */
	return flags ? 0 : 1;
}
