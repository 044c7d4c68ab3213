/*
 * srq.h - shared receive queues: one receive ring many QPs take from.
 * srq_limit arms a one-shot IBV_EVENT_SRQ_LIMIT_REACHED for when the
 * number of posted WQEs drops below it (IBTA 10.2.9.2).
 */
#ifndef SRN_CORE_SRQ_H
#define SRN_CORE_SRQ_H

#include <infiniband/verbs.h>

#include <sys/types.h>

#include "core/async.h"
#include "core/rq.h"

struct srn_nic;
struct srn_context;
struct srn_pd;

struct srn_xrcd {
	struct ibv_xrcd ibxrcd;
	struct srn_nic *nic;
	dev_t dev;                     /* the file naming a shared domain, or 0 */
	ino_t ino;
	int refs;                      /* opens */
	int users;                     /* SRQs and QPs in it */
	struct srn_xrcd *next;
};

struct srn_srq {
	struct ibv_srq ibsrq;
	struct srn_nic *nic;
	struct srn_context *ctx;
	struct srn_async_ref async_ref; /* its events read, not yet acknowledged */
	struct srn_pd *pd;
	struct srn_rq rq;
	uint32_t limit;                /* 0 = not armed */
	int nqps;
	struct srn_diag_obj *diag;
	/* XRC SRQs: their domain, the CQ their receives complete on, and the
	 * number senders name them by in the XRCETH. */
	struct srn_xrcd *xrcd;
	struct srn_cq *cq;
	uint32_t srqn;
};

static inline struct srn_srq *srn_srq(struct ibv_srq *s)
{
	return (struct srn_srq *)s;
}

/* An XRC SRQ by number (XRCETH), or NULL.  Must hold nic->lock. */
struct srn_srq *srn_srq_lookup(struct srn_nic *nic, uint32_t srqn);

/* After a take: fire the limit event if armed and below it.  Must hold
 * nic->lock. */
void srn_srq_check_limit(struct srn_srq *srq);

#endif
