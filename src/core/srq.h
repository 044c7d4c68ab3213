/*
 * srq.h - shared receive queues: one receive ring many QPs take from.
 * srq_limit arms a one-shot IBV_EVENT_SRQ_LIMIT_REACHED for when the
 * number of posted WQEs drops below it (IBTA 10.2.9.2).
 */
#ifndef SRN_CORE_SRQ_H
#define SRN_CORE_SRQ_H

#include <infiniband/verbs.h>

#include "core/rq.h"

struct srn_nic;
struct srn_context;
struct srn_pd;

struct srn_srq {
	struct ibv_srq ibsrq;
	struct srn_nic *nic;
	struct srn_context *ctx;
	struct srn_pd *pd;
	struct srn_rq rq;
	uint32_t limit;                /* 0 = not armed */
	int nqps;
	struct srn_diag_obj *diag;
};

static inline struct srn_srq *srn_srq(struct ibv_srq *s)
{
	return (struct srn_srq *)s;
}

/* After a take: fire the limit event if armed and below it.  Must hold
 * nic->lock. */
void srn_srq_check_limit(struct srn_srq *srq);

#endif
