/*
 * clock.h - the one clock reader.  Every time the library keeps (timers,
 * deadlines, the diagnostic segment's stamps, the packet trace) is
 * CLOCK_MONOTONIC nanoseconds from srn_now_ns(), so times taken in
 * different layers, and by the tools reading the segment, compare.  It
 * lives in diag/ because the segment publishes that time base; link/ and
 * everything above may include it (header only: no call edge).
 */
#ifndef SRN_DIAG_CLOCK_H
#define SRN_DIAG_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds on clock clk: CLOCK_MONOTONIC for times, _COARSE where a
 * tick's precision will do and the read must cost nothing, _REALTIME
 * only to print wall-clock dates. */
static inline uint64_t srn_clock_ns(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t srn_now_ns(void)
{
	return srn_clock_ns(CLOCK_MONOTONIC);
}

#endif
