/*
 * srq.c - what the responder asks of a shared receive queue beyond its
 * ring (rq.c): the XRC SRQ a message names, and the limit event.  Creating
 * and destroying SRQs is the verbs' (verbs/verbs_srq.c, verbs_xrc.c).
 */
#include "core/srq.h"

#include "core/async.h"
#include "core/device.h"
#include "core/nic.h"

struct srn_srq *srn_srq_lookup(struct srn_nic *nic, uint32_t srqn)
{
	struct srn_srq *s = srqn < SRN_MAX_SRQ ? nic->tables.srq_by_num[srqn] : NULL;
	return s && s->srqn == srqn ? s : NULL;
}

void srn_srq_check_limit(struct srn_srq *srq)
{
	if (srq->limit && srn_rq_count(&srq->rq) < srq->limit) {
		srq->limit = 0;         /* one shot: re-armed by ibv_modify_srq */
		struct ibv_async_event ev = { .element.srq = &srq->ibsrq,
					      .event_type = IBV_EVENT_SRQ_LIMIT_REACHED };
		srn_async_post(&srq->ctx->async, &ev, &srq->async_ref);
	}
}
