/*
 * pacer.c - the per-QP token bucket (pacer.h).
 */
#include "transport/pacer.h"

/* Bursts are capped so credit arithmetic stays far inside int64 (1 GiB
 * is 8.6e18 nanobits; 64 MiB leaves room for the debt of a packet). */
#define BURST_MAX_BYTES	(64u << 20)

static void refill(struct srn_pacer *p, uint64_t now_ns)
{
	uint64_t elapsed;
	uint64_t room;

	if (now_ns <= p->last_ns)	/* a clock that did not move (or a stale now) */
		return;
	elapsed = now_ns - p->last_ns;
	p->last_ns = now_ns;
	if (p->rate_bps == 0 || p->credit >= p->burst)
		return;
	room = (uint64_t)(p->burst - p->credit);
	/* elapsed * rate could overflow: compare by division first. */
	if (elapsed >= room / p->rate_bps + 1)
		p->credit = p->burst;
	else
		p->credit += (int64_t)(elapsed * p->rate_bps);
	if (p->credit > p->burst)
		p->credit = p->burst;
}

void srn_pacer_init(struct srn_pacer *p, uint64_t rate_bps, uint32_t burst_bytes, uint64_t now_ns)
{
	if (burst_bytes > BURST_MAX_BYTES)
		burst_bytes = BURST_MAX_BYTES;
	p->rate_bps = rate_bps;
	p->burst = (int64_t)burst_bytes * SRN_NANOBITS_PER_BYTE;
	p->credit = p->burst;
	p->last_ns = now_ns;
}

void srn_pacer_set_rate(struct srn_pacer *p, uint64_t rate_bps, uint64_t now_ns)
{
	refill(p, now_ns);
	p->rate_bps = rate_bps;
}

uint64_t srn_pacer_wait_ns(struct srn_pacer *p, uint64_t now_ns)
{
	refill(p, now_ns);
	if (p->rate_bps == 0 || p->credit > 0)
		return 0;
	/* Credit must become positive: (-credit + 1) nanobits at rate_bps
	 * nanobits per nanosecond, rounded up. */
	return ((uint64_t)(-p->credit) + p->rate_bps) / p->rate_bps;
}

void srn_pacer_consume(struct srn_pacer *p, uint32_t bytes, uint64_t now_ns)
{
	refill(p, now_ns);
	if (p->rate_bps == 0)
		return;
	p->credit -= (int64_t)bytes * SRN_NANOBITS_PER_BYTE;
}
