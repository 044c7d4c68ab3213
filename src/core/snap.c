/*
 * snap.c - copying live objects into their diagnostic slots (see snap.h).
 *
 * Invariants: called with the device's nic->lock held, which guards every
 * field read here (qp.h, cq.h, rq.h say so for theirs; MR fields never
 * change after registration).  Each snapshot is one seqlock write section,
 * so a reader sees a QP's state and PSNs from the same moment.
 */
#include "core/snap.h"

#include <string.h>

#include "core/ah.h"
#include "core/cq.h"
#include "core/mr.h"
#include "core/nic.h"
#include "core/qp.h"
#include "core/srq.h"
#include "wire/roce_hdr.h"

static void set_bytes(uint8_t *dst, const uint8_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		SRN_DIAG_SET(dst[i], src[i]);
}

static void snap_pd(struct srn_diag_obj *o, const struct srn_pd *pd)
{
	srn_diag_obj_begin(o);
	SRN_DIAG_SET(o->s->pd.users, (uint32_t)atomic_load_explicit(
					     (_Atomic int *)&pd->refs, memory_order_relaxed));
	srn_diag_obj_end(o);
}

static void snap_mr(struct srn_diag_obj *o, const struct srn_mr *mr)
{
	struct srn_diag_mr *m = &o->s->mr;
	srn_diag_obj_begin(o);
	SRN_DIAG_SET(m->pd, srn_diag_handle(o->d, mr->pd));
	SRN_DIAG_SET(m->addr, mr->iova);
	SRN_DIAG_SET(m->length, mr->length);
	SRN_DIAG_SET(m->lkey, mr->ibmr.lkey);
	SRN_DIAG_SET(m->rkey, mr->ibmr.rkey);
	SRN_DIAG_SET(m->access, (uint32_t)mr->access);
	srn_diag_obj_end(o);
}

static void snap_cq(struct srn_diag_obj *o, const struct srn_cq *cq)
{
	struct srn_diag_cq *c = &o->s->cq;
	srn_diag_obj_begin(o);
	SRN_DIAG_SET(c->cqe, (uint32_t)cq->ibcq.cqe);
	SRN_DIAG_SET(c->size, cq->size);
	SRN_DIAG_SET(c->fill, cq->head - cq->tail);
	SRN_DIAG_SET(c->nqps, (uint32_t)cq->nqps);
	SRN_DIAG_SET(c->overflowed, (uint8_t)cq->overflowed);
	SRN_DIAG_SET(c->arm, (uint8_t)cq->arm);
	SRN_DIAG_SET(c->has_channel, (uint8_t)(cq->channel != NULL));
	srn_diag_obj_end(o);
}

static void snap_qp(struct srn_diag_obj *o, const struct srn_qp *qp)
{
	struct srn_diag_qp *q = &o->s->qp;
	struct srn_diag *d = o->d;
	const struct srn_rq *rq = qp->srq ? &qp->srq->rq : &qp->rq;
	uint32_t flags = (qp->comp.rnr_wait ? SRN_DIAG_QPF_RNR_WAIT : 0) |
			 (qp->comp.rewound ? SRN_DIAG_QPF_REWOUND : 0) |
			 (qp->req.blocked ? SRN_DIAG_QPF_TX_BLOCKED : 0) |
			 (qp->comp.ack_deadline ? SRN_DIAG_QPF_ACK_TIMER : 0) |
			 (qp->resp.in_msg ? SRN_DIAG_QPF_IN_MSG : 0) |
			 (qp->sq.drained_pending ? SRN_DIAG_QPF_SQ_DRAINING : 0) |
			 (qp->req.placed_direct ? SRN_DIAG_QPF_DIRECT : 0) |
			 (qp->nic && srn_shm_has_ring(&qp->nic->link.shm,
						      (const struct sockaddr *)&qp->path.peer, qp->path.peer_len)
				  ? SRN_DIAG_QPF_SHM : 0);

	srn_diag_obj_begin(o);
	SRN_DIAG_SET(q->qpn, qp->qpn);
	SRN_DIAG_SET(q->type, (uint32_t)qp->type);
	SRN_DIAG_SET(q->state, (uint32_t)qp->state);
	SRN_DIAG_SET(q->flags, flags);
	SRN_DIAG_SET(q->sq_psn, qp->req.psn & SRN_PSN_MASK);
	SRN_DIAG_SET(q->una_psn, qp->comp.una & SRN_PSN_MASK);
	SRN_DIAG_SET(q->rq_psn, qp->resp.epsn & SRN_PSN_MASK);
	SRN_DIAG_SET(q->msn, qp->resp.msn);
	SRN_DIAG_SET(q->sq_size, qp->cap.max_send_wr);
	SRN_DIAG_SET(q->rq_size, rq->max_wr);
	SRN_DIAG_SET(q->sq_outstanding, qp->sq.head - qp->sq.tail);
	SRN_DIAG_SET(q->sq_unsent, qp->sq.head - qp->req.cur);
	SRN_DIAG_SET(q->rq_posted, rq->wqe ? srn_rq_count(rq) : 0);
	SRN_DIAG_SET(q->rd_atomic_inflight, qp->req.rd_atomic_inflight);
	SRN_DIAG_SET(q->peer_qpn, qp->attr.dest_qp_num);
	set_bytes(q->peer_gid, qp->attr.ah_attr.grh.dgid.raw, 16);
	SRN_DIAG_SET(q->mtu, qp->path.mtu);
	SRN_DIAG_SET(q->retry_left, qp->comp.retry_left);
	SRN_DIAG_SET(q->rnr_left, qp->comp.rnr_left);
	SRN_DIAG_SET(q->timeout, qp->attr.timeout);
	SRN_DIAG_SET(q->retry_cnt, qp->attr.retry_cnt);
	SRN_DIAG_SET(q->rnr_retry, qp->attr.rnr_retry);
	SRN_DIAG_SET(q->min_rnr_timer, qp->attr.min_rnr_timer);
	SRN_DIAG_SET(q->max_rd_atomic, qp->attr.max_rd_atomic);
	SRN_DIAG_SET(q->max_dest_rd_atomic, qp->attr.max_dest_rd_atomic);
	SRN_DIAG_SET(q->port, qp->attr.port_num);
	SRN_DIAG_SET(q->rate_mbps, qp->cc_rate_mbps);
	SRN_DIAG_SET(q->pd, srn_diag_handle(d, qp->pd));
	SRN_DIAG_SET(q->scq, srn_diag_handle(d, qp->scq));
	SRN_DIAG_SET(q->rcq, srn_diag_handle(d, qp->rcq));
	SRN_DIAG_SET(q->srq, srn_diag_handle(d, qp->srq));
	SRN_DIAG_SET(q->ack_deadline_ns, qp->comp.ack_deadline);
	SRN_DIAG_SET(q->rnr_deadline_ns, qp->comp.rnr_deadline);
	srn_diag_obj_end(o);
}

static void snap_srq(struct srn_diag_obj *o, const struct srn_srq *srq)
{
	struct srn_diag_srq *s = &o->s->srq;
	srn_diag_obj_begin(o);
	SRN_DIAG_SET(s->pd, srn_diag_handle(o->d, srq->pd));
	SRN_DIAG_SET(s->max_wr, srq->rq.max_wr);
	SRN_DIAG_SET(s->posted, srq->rq.wqe ? srn_rq_count(&srq->rq) : 0);
	SRN_DIAG_SET(s->limit, srq->limit);
	SRN_DIAG_SET(s->nqps, (uint32_t)srq->nqps);
	srn_diag_obj_end(o);
}

static void snap_ah(struct srn_diag_obj *o, const struct srn_ah *ah)
{
	struct srn_diag_ah *a = &o->s->ah;
	const struct ibv_ah_attr *at = &ah->attr;
	srn_diag_obj_begin(o);
	SRN_DIAG_SET(a->pd, srn_diag_handle(o->d, ah->ibah.pd));
	set_bytes(a->dgid, at->grh.dgid.raw, 16);
	SRN_DIAG_SET(a->is_global, at->is_global);
	SRN_DIAG_SET(a->sgid_index, at->grh.sgid_index);
	SRN_DIAG_SET(a->hop_limit, at->grh.hop_limit);
	SRN_DIAG_SET(a->traffic_class, at->grh.traffic_class);
	SRN_DIAG_SET(a->flow_label, at->grh.flow_label);
	SRN_DIAG_SET(a->port, at->port_num);
	SRN_DIAG_SET(a->sl, at->sl);
	srn_diag_obj_end(o);
}

void srn_diag_snap(struct srn_diag_obj *o)
{
	if (!o || !o->owner || o->idx >= SRN_DIAG_SLOTS)
		return;
	switch (o->kind) {
	case SRN_DIAG_PD: snap_pd(o, o->owner); break;
	case SRN_DIAG_MR: snap_mr(o, o->owner); break;
	case SRN_DIAG_CQ: snap_cq(o, o->owner); break;
	case SRN_DIAG_QP: snap_qp(o, o->owner); break;
	case SRN_DIAG_SRQ: snap_srq(o, o->owner); break;
	case SRN_DIAG_AH: snap_ah(o, o->owner); break;
	default: break;
	}
}

void srn_diag_refresh(struct srn_diag *d)
{
	if (!d)
		return;
	for (struct srn_diag_obj *o = srn_diag_obj_next(d, NULL); o; o = srn_diag_obj_next(d, o))
		srn_diag_snap(o);
}
