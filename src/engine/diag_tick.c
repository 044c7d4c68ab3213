/*
 * diag_tick.c - when the engine refreshes the diagnostic slots: at most
 * every SRN_DIAG_TICK_NS from the progress loop, and once more when a
 * tick was skipped, so the slots do not stay stale once the application
 * goes quiet (diag_tick.h).  The refresh itself is core/snap.c.
 */
#include "engine/diag_tick.h"

#include <stdatomic.h>

#include "core/snap.h"

void srn_diag_tick(struct srn_diag *d, uint64_t now_ns)
{
	if (!d)
		return;
	struct srn_diag_clock *c = srn_diag_clock(d);
	uint64_t last = atomic_load_explicit(&c->last_ns, memory_order_relaxed);
	/* Signed: a caller's reading may predate one another thread stored. */
	if (last && (int64_t)(now_ns - last) < (int64_t)SRN_DIAG_TICK_NS) {
		/* Too soon: remember that something changed, so the idle
		 * progress thread refreshes once more (srn_diag_deadline). */
		if (!atomic_load_explicit(&c->due_ns, memory_order_relaxed))
			atomic_store_explicit(&c->due_ns, last + SRN_DIAG_TICK_NS,
					      memory_order_relaxed);
		return;
	}
	atomic_store_explicit(&c->last_ns, now_ns, memory_order_relaxed);
	atomic_store_explicit(&c->due_ns, 0, memory_order_relaxed);
	srn_diag_refresh(d);
}

uint64_t srn_diag_deadline(struct srn_diag *d)
{
	return d ? atomic_load_explicit(&srn_diag_clock(d)->due_ns, memory_order_relaxed) : 0;
}
