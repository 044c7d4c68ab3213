/*
 * switch_queue.c - the emulated switch's egress queue (switch_queue.h).
 */
#include <stdlib.h>

#include "switch_queue.h"
#include "wire/ecn.h"

/* A scheduling delay shorter than this is made up by sending back to
 * back (the link was idle only because the loop woke late); a longer one
 * is an idle link and earns nothing. */
#define CATCH_UP_NS	1000000ull

void srn_swq_init(struct srn_swq *q, const struct srn_swq_cfg *cfg, uint64_t seed)
{
	*q = (struct srn_swq){ .cfg = *cfg, .rng = seed | 1 };
}

void srn_swq_fini(struct srn_swq *q)
{
	while (q->head != q->tail)
		free(q->ring[q->head++ & (SRN_SWQ_SLOTS - 1)].data);
	q->bytes = 0;
}

static double uniform(struct srn_swq *q)
{
	/* xorshift64: enough for marking decisions, and reproducible. */
	q->rng ^= q->rng << 13;
	q->rng ^= q->rng >> 7;
	q->rng ^= q->rng << 17;
	return (double)(q->rng >> 11) / (double)(1ull << 53);
}

double srn_swq_mark_prob(const struct srn_swq_cfg *cfg, uint64_t qb)
{
	if (!cfg->ecn || qb <= cfg->kmin)
		return 0.0;
	if (qb >= cfg->kmax || cfg->kmax <= cfg->kmin)
		return 1.0;
	return cfg->pmax * (double)(qb - cfg->kmin) / (double)(cfg->kmax - cfg->kmin);
}

int srn_swq_mark_frame(uint8_t *data, uint32_t len, uint32_t l3_off)
{
	uint8_t *ip = data + l3_off;

	if (l3_off >= len)
		return -1;
	if ((ip[0] >> 4) == 4 && len - l3_off >= 20)
		return srn_ecn_mark_ipv4(ip) ? 1 : 0;
	if ((ip[0] >> 4) == 6 && len - l3_off >= 40)
		return srn_ecn_mark_ipv6(ip) ? 1 : 0;
	return -1;
}

/* Mark f with the RED probability of a queue of qb bytes: true if CE
 * was set (Not-ECT frames are only counted). */
static bool red_mark(struct srn_swq *q, const struct srn_swq_frame *f, uint64_t qb)
{
	if (uniform(q) >= srn_swq_mark_prob(&q->cfg, qb))
		return false;
	int m = srn_swq_mark_frame(f->data, f->len, f->l3_off);
	if (m == 1)
		q->marked++;
	else if (m == 0)
		q->not_ect++;
	return m == 1;
}

enum srn_swq_verdict srn_swq_enqueue(struct srn_swq *q, const struct srn_swq_frame *f,
				     uint64_t now_ns)
{
	enum srn_swq_verdict v = SRN_SWQ_QUEUED;
	(void)now_ns;

	/* Tail drop: the buffer is full, or the ring of frames is. */
	if (q->bytes + f->wire_len > q->cfg.buffer || q->tail - q->head == SRN_SWQ_SLOTS) {
		q->dropped++;
		return SRN_SWQ_DROPPED;
	}
	/* RED on the queue this frame joins.  A Not-ECT frame is left alone
	 * (RFC 3168 would have RED drop it; we only mark). */
	if (q->cfg.ecn && !q->cfg.mark_dequeue && red_mark(q, f, q->bytes))
		v = SRN_SWQ_MARKED;
	q->ring[q->tail++ & (SRN_SWQ_SLOTS - 1)] = *f;
	q->bytes += f->wire_len;
	if (q->bytes > q->max_bytes)
		q->max_bytes = q->bytes;
	q->enqueued++;
	return v;
}

uint64_t srn_swq_next_ns(const struct srn_swq *q)
{
	if (q->head == q->tail)
		return UINT64_MAX;
	return q->next_free_ns;
}

bool srn_swq_dequeue(struct srn_swq *q, uint64_t now_ns, struct srn_swq_frame *f)
{
	uint64_t start;

	if (q->head == q->tail || now_ns < q->next_free_ns)
		return false;
	*f = q->ring[q->head++ & (SRN_SWQ_SLOTS - 1)];
	/* Dequeue marking: RED on the queue the frame was at the head of. */
	f->marked = q->cfg.ecn && q->cfg.mark_dequeue && red_mark(q, f, q->bytes);
	q->bytes -= f->wire_len;
	q->departed++;
	if (q->cfg.rate_bps) {
		/* Serialisation: the link is busy for wire_len * 8 / rate. */
		start = now_ns - q->next_free_ns < CATCH_UP_NS ? q->next_free_ns : now_ns;
		q->next_free_ns = start + (uint64_t)f->wire_len * 8000000000ull / q->cfg.rate_bps;
	}
	return true;
}

int srn_swq_pfc_update(struct srn_swq *q, uint64_t now_ns)
{
	if (!q->cfg.pfc)
		return 0;
	if (!q->paused && q->bytes >= q->cfg.xoff) {
		q->paused = true;
		q->pause_start_ns = now_ns;
		q->pauses++;
		return 1;
	}
	if (q->paused && q->bytes <= q->cfg.xon) {
		q->paused = false;
		q->paused_ns += now_ns - q->pause_start_ns;
		return -1;
	}
	return 0;
}

uint64_t srn_swq_paused_ns(const struct srn_swq *q, uint64_t now_ns)
{
	return q->paused_ns + (q->paused ? now_ns - q->pause_start_ns : 0);
}
