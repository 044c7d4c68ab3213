/*
 * verbs_srq.c - shared receive queues.
 */
#include <stdlib.h>

#include "core/caller_mem.h"
#include "core/cq.h"
#include "core/device.h"
#include "core/limits.h"
#include "core/mr.h"
#include "core/nic.h"
#include "core/srq.h"
#include "engine/nic.h"
#include "verbs/verbs.h"

SRN_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *ibpd, struct ibv_srq_init_attr *init)
{
	struct srn_pd *pd = srn_pd(ibpd);
	struct ibv_srq_attr *a = &init->attr;
	if (a->max_wr == 0 || a->max_wr > SRN_MAX_QP_WR || a->max_sge > SRN_MAX_SGE ||
	    a->srq_limit > a->max_wr)
		return srn_null_errno(-EINVAL);
	struct srn_srq *srq = calloc(1, sizeof(*srq));
	if (!srq)
		return srn_null_errno(-ENOMEM);
	if (srn_rq_init(&srq->rq, a->max_wr, a->max_sge ? a->max_sge : 1)) {
		free(srq);
		return srn_null_errno(-ENOMEM);
	}
	srq->nic = pd->nic;
	srq->ctx = srn_ctx(ibpd->context);
	srq->pd = pd;
	srq->limit = a->srq_limit;
	srq->ibsrq.context = ibpd->context;
	srq->ibsrq.srq_context = init->srq_context;
	srq->ibsrq.pd = ibpd;
	pthread_mutex_init(&srq->ibsrq.mutex, NULL);
	pthread_cond_init(&srq->ibsrq.cond, NULL);
	pd->refs++;
	a->max_wr = srq->rq.max_wr;
	a->max_sge = srq->rq.max_sge;
	srn_nic_lock(srq->nic);
	srq->diag = srn_diag_obj_add(srq->nic->diag.seg, SRN_DIAG_SRQ, srq);
	srn_diag_snap(srq->diag);
	srn_nic_unlock(srq->nic);
	return &srq->ibsrq;
}

SRN_EXPORT int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	struct srn_srq *srq = srn_srq(ibsrq);
	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return EINVAL;
	if (mask & IBV_SRQ_MAX_WR)
		return EOPNOTSUPP;      /* resizing is not supported (rxe allows it) */
	int ret = 0;
	srn_nic_lock(srq->nic);
	if (attr->srq_limit > srq->rq.max_wr)
		ret = EINVAL;
	else
		srq->limit = attr->srq_limit;
	srn_nic_unlock(srq->nic);
	return ret;
}

SRN_EXPORT int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct srn_srq *srq = srn_srq(ibsrq);
	srn_nic_lock(srq->nic);
	attr->max_wr = srq->rq.max_wr;
	attr->max_sge = srq->rq.max_sge;
	attr->srq_limit = srq->limit;
	srn_nic_unlock(srq->nic);
	return 0;
}

/* EBUSY while a QP uses it: one created on it, or an XRC receive QP
 * bound to it by the last message it took (srn_qp_bind_xrc_srq); the
 * kernel refuses on srq->usecnt alike.  Everything that lets a packet
 * find it goes in the same lock hold as the check, so none can start
 * using it between the two. */
SRN_EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct srn_srq *srq = srn_srq(ibsrq);
	srn_nic_lock(srq->nic);
	if (srq->nqps) {
		srn_nic_unlock(srq->nic);
		return EBUSY;
	}
	srn_diag_obj_del(srq->diag);
	if (srq->xrcd) {
		srq->nic->tables.srq_by_num[srq->srqn] = NULL;
		srq->xrcd->users--;
		srq->cq->nqps--;
	}
	srq->pd->refs--;
	srn_nic_unlock(srq->nic);
	srn_verbs_forget_events(srq->ctx, &srq->async_ref);
	srn_rq_fini(&srq->rq);
	pthread_mutex_destroy(&ibsrq->mutex);
	pthread_cond_destroy(&ibsrq->cond);
	free(srq);
	return 0;
}

int srn_verbs_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct srn_srq *srq = srn_srq(ibsrq);
	int ret = 0;
	srn_nic_lock(srq->nic);
	/* The caller's work requests, at any alignment: read from copies
	 * (core/caller_mem.h).  XRC SRQs post here too. */
	struct ibv_recv_wr w;
	for (; wr; wr = w.next) {
		srn_caller_read(&w, wr, sizeof(w));
		int r = srn_rq_post(&srq->rq, &w);
		if (r) {
			srn_caller_write(bad, &wr, sizeof(wr));
			ret = -r;
			break;
		}
	}
	srn_nic_unlock(srq->nic);
	return ret;
}
