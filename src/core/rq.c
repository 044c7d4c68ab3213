/*
 * rq.c - receive queue rings (see rq.h).
 */
#include "core/rq.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/caller_mem.h"

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 1;
	while (p < n)
		p <<= 1;
	return p;
}

int srn_rq_init(struct srn_rq *rq, uint32_t max_wr, uint32_t max_sge)
{
	memset(rq, 0, sizeof(*rq));
	rq->size = pow2_at_least(max_wr ? max_wr : 1);
	rq->max_wr = rq->size;
	rq->max_sge = max_sge ? max_sge : 1;
	rq->wqe = calloc(rq->size, sizeof(*rq->wqe));
	rq->sge = calloc((size_t)rq->size * rq->max_sge, sizeof(*rq->sge));
	if (!rq->wqe || !rq->sge) {
		srn_rq_fini(rq);
		return -ENOMEM;
	}
	return 0;
}

void srn_rq_fini(struct srn_rq *rq)
{
	free(rq->wqe);
	free(rq->sge);
	rq->wqe = NULL;
	rq->sge = NULL;
}

int srn_rq_post(struct srn_rq *rq, const struct ibv_recv_wr *wr)
{
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > rq->max_sge)
		return -EINVAL;
	if (rq->head - rq->tail >= rq->size)
		return -ENOMEM;
	uint32_t idx = rq->head & (rq->size - 1);
	/* The scatter list is the caller's, at any alignment: copied into
	 * the slot first (nothing reads it before head passes it, so a
	 * refused WQE leaves nothing behind) and read only from there. */
	struct ibv_sge *sge = rq->sge + (size_t)idx * rq->max_sge;
	srn_caller_read(sge, wr->sg_list, (size_t)wr->num_sge * sizeof(*sge));
	uint64_t total = 0;
	for (int i = 0; i < wr->num_sge; i++)
		total += sge[i].length;
	if (total > UINT32_MAX)
		return -EINVAL;
	rq->wqe[idx] = (struct srn_rwqe){ wr->wr_id, (uint32_t)wr->num_sge, (uint32_t)total };
	rq->head++;
	return 0;
}

bool srn_rq_take(struct srn_rq *rq, struct srn_rwqe *w, struct ibv_sge *sge)
{
	if (rq->head == rq->tail)
		return false;
	uint32_t idx = rq->tail++ & (rq->size - 1);
	*w = rq->wqe[idx];
	memcpy(sge, rq->sge + (size_t)idx * rq->max_sge, w->num_sge * sizeof(*sge));
	return true;
}
