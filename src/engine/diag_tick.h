/*
 * diag_tick.h - the engine's refresh of the diagnostic slots (diag_tick.c).
 */
#ifndef SRN_ENGINE_DIAG_TICK_H
#define SRN_ENGINE_DIAG_TICK_H

#include <stdint.h>

#include "diag/shm.h"

#define SRN_DIAG_TICK_NS 10000000ull   /* 10 ms: fresh to a human, free to the NIC */

/* Refresh every object when SRN_DIAG_TICK_NS passed since the last
 * refresh (one comparison otherwise).  Call it wherever state changes in
 * bulk: the end of srn_progress_poll, post_send, post_recv, the progress
 * thread's timer wakeup. */
void srn_diag_tick(struct srn_diag *d, uint64_t now_ns);
/* When a tick was skipped since the last refresh, the time by which the
 * next one is due (else 0): the progress thread includes it in its sleep
 * so the slots do not stay stale once the application goes quiet.  No
 * lock needed. */
uint64_t srn_diag_deadline(struct srn_diag *d);

#endif
