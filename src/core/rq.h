/*
 * rq.h - a receive queue: the ring a QP's own receive queue and a shared
 * receive queue (SRQ) both use.  Power-of-two ring of posted receive WQEs
 * with their scatter lists, free-running indices.  Guarded by nic->lock.
 */
#ifndef SRN_CORE_RQ_H
#define SRN_CORE_RQ_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

struct srn_rwqe {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t length;               /* sum of sge lengths */
};

struct srn_rq {
	struct srn_rwqe *wqe;
	struct ibv_sge *sge;           /* size * max_sge */
	uint32_t size, head, tail;
	uint32_t max_sge;
	uint32_t max_wr;               /* what was granted (<= size) */
};

int srn_rq_init(struct srn_rq *rq, uint32_t max_wr, uint32_t max_sge);
void srn_rq_fini(struct srn_rq *rq);
/* Post one receive: 0, -EINVAL (too many SGEs), -ENOMEM (full).  wr is
 * ours (the verbs copy the caller's); its sg_list is still the caller's,
 * read at any alignment (core/caller_mem.h). */
int srn_rq_post(struct srn_rq *rq, const struct ibv_recv_wr *wr);
/* Move the oldest WQE out (copying its scatter list into sge[]); false
 * if the queue is empty. */
bool srn_rq_take(struct srn_rq *rq, struct srn_rwqe *w, struct ibv_sge *sge);
static inline uint32_t srn_rq_count(const struct srn_rq *rq)
{
	return rq->head - rq->tail;
}

#endif
