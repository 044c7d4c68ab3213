/*
 * test_cc_dcqcn.c - the DCQCN reaction point (transport/dcqcn.c) against
 * the state transitions the paper publishes (Zhu et al., SIGCOMM 2015,
 * figure 7) and mlx5's documented parameter semantics:
 *  - a CNP cuts the rate by alpha/2 (rpg_gd 11), never below
 *    rpg_min_dec_fac of it, never below the minimum rate;
 *  - alpha rises in a period with a CNP, decays in one without;
 *  - F rounds of fast recovery, then additive, then hyper increase;
 *  - never above the ceiling (line rate, rpg_max_rate, a QP limit);
 *  - CNPs inside rate_reduce_monitor_period fold into one later cut;
 *  - a late advance() gives the same result as step-by-step ones;
 *  - rp disabled: CNPs are ignored.
 * Plus a random walk against invariants.  Pure: no clock, no sockets.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "transport/dcqcn.h"

#define US 1000ull
#define MS 1000000ull


static void test_defaults(void)
{
	struct srn_dcqcn_cfg c;
	struct srn_dcqcn st;

	srn_dcqcn_cfg_default(&c);
	/* mlx5 firmware defaults (mlxconfig RPG_*, DCE_TCP_*, ...). */
	CHECK(c.rpg_time_reset == 300 && c.rpg_byte_reset == 32767 && c.rpg_threshold == 1,
	      "timer/byte/threshold");
	CHECK(c.rpg_ai_rate == 5 && c.rpg_hai_rate == 50 && c.rpg_min_rate == 1 &&
		      c.rpg_max_rate == 0, "rates");
	CHECK(c.rpg_gd == 11 && c.rpg_min_dec_fac == 50 && c.dce_tcp_g == 1019 &&
		      c.dce_tcp_rtt == 1 && c.initial_alpha_value == 1023, "alpha");
	CHECK(c.rate_reduce_monitor_period == 4 && c.min_time_between_cnps == 4 &&
		      c.cnp_dscp == 48, "periods");
	CHECK(!c.clamp_tgt_rate && c.clamp_tgt_rate_after_time_inc, "clamps");
	srn_dcqcn_init(&st, &c);
	CHECK(!st.limited && srn_dcqcn_rate(&st) == 100000 * SRN_MBPS, "starts at line rate");
	/* No CNP: time and bytes change nothing. */
	srn_dcqcn_advance(&st, &c, 10 * MS);
	srn_dcqcn_sent(&st, &c, 10 * MS, 1 << 20);
	CHECK(!st.limited && st.phase == SRN_DCQCN_UNLIMITED, "idle stays unlimited");
}

/* The first CNP: alpha = initial (1023/1024), rate * (1 - alpha/2). */
static void test_cut_by_alpha_half(void)
{
	struct srn_dcqcn_cfg c;
	struct srn_dcqcn st;
	uint64_t line = 100000 * SRN_MBPS;

	srn_dcqcn_cfg_default(&c);
	srn_dcqcn_init(&st, &c);
	CHECK(srn_dcqcn_cnp(&st, &c, 1000), "handled");
	CHECK(st.limited && st.phase == SRN_DCQCN_CUT, "limited after a CNP");
	CHECK(st.rc_bps == line - ((line * 1023) >> 11), "cut by alpha/2: %" PRIu64, st.rc_bps);
	CHECK(st.rt_bps == line, "target keeps the old rate");

	/* A chosen alpha: 512/1024 cuts by a quarter.  No alpha period
	 * and no timer event between the two CNPs. */
	c.dce_tcp_rtt = 1000000;
	srn_dcqcn_init(&st, &c);
	srn_dcqcn_cnp(&st, &c, 0);
	uint64_t rc = st.rc_bps;
	st.alpha = 512;
	srn_dcqcn_cnp(&st, &c, 10 * US);	/* past the monitor period */
	CHECK(st.rc_bps == rc - rc / 4, "alpha 1/2 cuts a quarter: %" PRIu64 " from %" PRIu64,
	      st.rc_bps, rc);

	/* rpg_min_dec_fac bounds one cut: gd 1 would cut by alpha (~100%). */
	c.rpg_gd = 1;
	srn_dcqcn_init(&st, &c);
	srn_dcqcn_cnp(&st, &c, 0);
	CHECK(st.rc_bps == line / 2, "min_dec_fac 50%% floors the cut: %" PRIu64, st.rc_bps);

	/* Never below rpg_min_rate. */
	srn_dcqcn_cfg_default(&c);
	c.line_rate = 10;	/* 10 Mb/s */
	c.rpg_min_rate = 4;
	srn_dcqcn_init(&st, &c);
	for (int i = 0; i < 20; i++)	/* 10 us apart: no timer increase between */
		srn_dcqcn_cnp(&st, &c, (uint64_t)i * 10 * US);
	CHECK(st.rc_bps == 4 * SRN_MBPS, "floor at the minimum rate: %" PRIu64, st.rc_bps);
}

static void test_alpha(void)
{
	struct srn_dcqcn_cfg c;
	struct srn_dcqcn st;

	srn_dcqcn_cfg_default(&c);
	c.rpg_time_reset = 0;	/* keep the rate still: only alpha moves */
	c.rpg_byte_reset = 0;
	srn_dcqcn_init(&st, &c);
	srn_dcqcn_cnp(&st, &c, 0);
	/* The first period had the CNP: alpha = (a*g + (1024-g)*1024) >> 10. */
	srn_dcqcn_advance(&st, &c, 1 * US);
	CHECK(st.alpha == ((1023u * 1019 + 5 * 1024) >> 10), "rise: %u", st.alpha);
	uint32_t a = st.alpha;
	srn_dcqcn_advance(&st, &c, 2 * US);
	CHECK(st.alpha == (a * 1019) >> 10, "decay: %u", st.alpha);
	/* Decays monotonically to 0 without CNPs, and stays there. */
	uint32_t prev = st.alpha;
	for (uint64_t t = 3; t < 3000; t++) {
		srn_dcqcn_advance(&st, &c, t * US);
		CHECK(st.alpha <= prev, "monotone at %" PRIu64, t);
		prev = st.alpha;
	}
	CHECK(st.alpha == 0, "decayed to 0: %u", st.alpha);
	/* A CNP now rises it again from 0 by (1 - g). */
	srn_dcqcn_cnp(&st, &c, 3000 * US);
	srn_dcqcn_advance(&st, &c, 3001 * US);
	CHECK(st.alpha == 5, "rise from 0 by 1-g: %u", st.alpha);
	/* One late advance equals many small ones. */
	struct srn_dcqcn a1 = st, a2 = st;
	for (uint64_t t = 3002; t <= 3500; t++)
		srn_dcqcn_advance(&a1, &c, t * US);
	srn_dcqcn_advance(&a2, &c, 3500 * US);
	CHECK(a1.alpha == a2.alpha, "late advance: %u vs %u", a1.alpha, a2.alpha);
}

/*
 * Recovery, timer only (byte counter off), F = 3: timer events 1..3 are
 * fast recovery (rc halfway to rt, rt unchanged), then additive (rt +=
 * AI); hyper never, because it needs both counters past F.  Then with
 * the byte counter too: once both pass F, hyper (rt += i * HAI).
 */
static void test_recovery_phases(void)
{
	struct srn_dcqcn_cfg c;
	struct srn_dcqcn st;

	srn_dcqcn_cfg_default(&c);
	c.rpg_threshold = 3;
	c.rpg_byte_reset = 0;
	c.clamp_tgt_rate = true;	/* the paper's rule: target = rate at the cut */
	c.line_rate = 40000;
	srn_dcqcn_init(&st, &c);
	srn_dcqcn_cnp(&st, &c, 0);
	uint64_t rt = st.rt_bps, rc = st.rc_bps;
	CHECK(rt == 40000 * SRN_MBPS, "clamped target = rate before the cut");
	for (int ev = 1; ev <= 3; ev++) {
		srn_dcqcn_advance(&st, &c, (uint64_t)ev * 300 * US);
		CHECK(st.phase == SRN_DCQCN_FAST_RECOVERY, "event %d fast recovery: %s", ev,
		      srn_dcqcn_phase_name(st.phase));
		CHECK(st.rt_bps == rt, "fast recovery keeps the target");
		CHECK(st.rc_bps == (rc + rt + 1) / 2, "halfway: %" PRIu64, st.rc_bps);
		rc = st.rc_bps;
	}
	for (int ev = 4; ev <= 6; ev++) {
		srn_dcqcn_advance(&st, &c, (uint64_t)ev * 300 * US);
		CHECK(st.phase == SRN_DCQCN_ADDITIVE, "event %d additive: %s", ev,
		      srn_dcqcn_phase_name(st.phase));
		uint64_t want_rt = rt + 5 * SRN_MBPS;
		want_rt = want_rt > st.ceil_bps ? st.ceil_bps : want_rt;
		CHECK(st.rt_bps == want_rt || !st.limited, "AI adds 5 Mb/s to the target");
		rt = st.rt_bps;
	}

	/* Both counters: cut again, then send bytes and let the timer run. */
	srn_dcqcn_cfg_default(&c);
	c.rpg_threshold = 2;
	c.clamp_tgt_rate = true;
	c.line_rate = 40000;
	srn_dcqcn_init(&st, &c);
	srn_dcqcn_cnp(&st, &c, 0);
	srn_dcqcn_cnp(&st, &c, 10 * US);	/* a second cut: target below the ceiling */
	CHECK(st.rt_bps < st.ceil_bps, "target under the ceiling");
	srn_dcqcn_sent(&st, &c, 11 * US, 2 * c.rpg_byte_reset);	/* bc = 2: FR */
	CHECK(st.phase == SRN_DCQCN_FAST_RECOVERY && st.bc_cnt == 2, "bytes: FR");
	srn_dcqcn_sent(&st, &c, 12 * US, c.rpg_byte_reset);	/* bc = 3 > F, t = 0 */
	CHECK(st.phase == SRN_DCQCN_ADDITIVE, "bytes past F alone: additive (%s)",
	      srn_dcqcn_phase_name(st.phase));
	srn_dcqcn_advance(&st, &c, 910 * US);			/* t = 3 > F */
	CHECK(st.t_cnt == 3, "three timer events: %u", st.t_cnt);
	rt = st.rt_bps;
	srn_dcqcn_sent(&st, &c, 911 * US, c.rpg_byte_reset);	/* bc = 4, t = 3 */
	CHECK(st.phase == SRN_DCQCN_HYPER, "both past F: hyper (%s)", srn_dcqcn_phase_name(st.phase));
	CHECK(st.rt_bps == rt + 1 * 50 * SRN_MBPS, "HAI step i = min(t, bc) - F = 1");
}

/* Recovery ends at the ceiling, exactly, and the QP is unlimited again. */
static void test_ceiling(void)
{
	struct srn_dcqcn_cfg c;
	struct srn_dcqcn st;

	srn_dcqcn_cfg_default(&c);
	c.line_rate = 1000;
	srn_dcqcn_init(&st, &c);
	srn_dcqcn_cnp(&st, &c, 0);
	uint64_t t = 0;
	for (int i = 0; i < 100000 && st.limited; i++) {
		t += 10 * US;
		srn_dcqcn_sent(&st, &c, t, 4096);
		srn_dcqcn_advance(&st, &c, t);
		CHECK(st.rc_bps <= st.ceil_bps && st.rt_bps <= st.ceil_bps, "above the ceiling");
	}
	CHECK(!st.limited && srn_dcqcn_rate(&st) == 1000 * SRN_MBPS, "recovered to line rate");

	/* rpg_max_rate below the line rate is the ceiling. */
	c.rpg_max_rate = 300;
	srn_dcqcn_init(&st, &c);
	CHECK(srn_dcqcn_rate(&st) == 300 * SRN_MBPS, "rpg_max_rate");
	/* A QP rate limit lowers it further; 0 restores. */
	srn_dcqcn_set_ceiling(&st, &c, 100 * SRN_MBPS);
	CHECK(srn_dcqcn_rate(&st) == 100 * SRN_MBPS, "QP limit");
	srn_dcqcn_cnp(&st, &c, 0);
	CHECK(st.rc_bps < 100 * SRN_MBPS && st.rt_bps <= 100 * SRN_MBPS, "cut under the limit");
	srn_dcqcn_set_ceiling(&st, &c, 10 * SRN_MBPS);
	CHECK(st.rc_bps <= 10 * SRN_MBPS && st.rt_bps <= 10 * SRN_MBPS, "limit clamps both");
	srn_dcqcn_set_ceiling(&st, &c, 0);
	CHECK(st.ceil_bps == 300 * SRN_MBPS, "limit 0 restores the configured ceiling");
}

/* rate_reduce_monitor_period: CNPs 1 us apart give one cut per 4 us. */
static void test_monitor_period(void)
{
	struct srn_dcqcn_cfg c;
	struct srn_dcqcn st;

	srn_dcqcn_cfg_default(&c);
	srn_dcqcn_init(&st, &c);
	for (uint64_t t = 0; t <= 40; t++)
		srn_dcqcn_cnp(&st, &c, t * US);
	srn_dcqcn_advance(&st, &c, 44 * US);
	CHECK(st.cnp_handled == 41, "every CNP handled: %" PRIu64, st.cnp_handled);
	CHECK(st.cuts == 12, "one cut per 4 us over 0..44 us: %" PRIu64, st.cuts);

	/* rate_to_set_on_first_cnp replaces the first cut. */
	c.rate_to_set_on_first_cnp = 2000;
	srn_dcqcn_init(&st, &c);
	srn_dcqcn_cnp(&st, &c, 0);
	CHECK(st.rc_bps == 2000 * SRN_MBPS && st.rt_bps == 2000 * SRN_MBPS, "first CNP sets rate");
}

static void test_disabled(void)
{
	struct srn_dcqcn_cfg c;
	struct srn_dcqcn st;

	srn_dcqcn_cfg_default(&c);
	c.rp_enable = false;
	srn_dcqcn_init(&st, &c);
	CHECK(!srn_dcqcn_cnp(&st, &c, 0), "ignored when disabled");
	CHECK(!st.limited && st.cnp_handled == 0, "nothing changes");
}

/* Random events against the invariants; and chunked vs whole advances. */
static void test_random_walk(void)
{
	struct srn_dcqcn_cfg c;
	struct srn_dcqcn st;
	uint64_t seed = 0x9e3779b97f4a7c15ull, t = 0;

	srn_dcqcn_cfg_default(&c);
	c.line_rate = 25000;
	srn_dcqcn_init(&st, &c);
	for (int i = 0; i < 200000; i++) {
		seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
		t += seed % (50 * US);
		switch (seed >> 60) {
		case 0:
		case 1:
			srn_dcqcn_cnp(&st, &c, t);
			break;
		case 2:
			srn_dcqcn_set_ceiling(&st, &c, (seed >> 20) % 30000 * SRN_MBPS);
			break;
		default:
			srn_dcqcn_sent(&st, &c, t, (uint32_t)(seed >> 40) % 65536);
			break;
		}
		uint64_t min = 1 * SRN_MBPS < st.ceil_bps ? 1 * SRN_MBPS : st.ceil_bps;
		if (st.limited)
			CHECK(min <= st.rc_bps && st.rc_bps <= st.rt_bps && st.rt_bps <= st.ceil_bps,
			      "step %d: min %" PRIu64 " rc %" PRIu64 " rt %" PRIu64 " ceil %" PRIu64,
			      i, min, st.rc_bps, st.rt_bps, st.ceil_bps);
		else
			CHECK(st.rc_bps == st.ceil_bps, "unlimited at the ceiling");
		CHECK(st.alpha < 1024, "alpha in range");
		if (srn_check_failures > 10)
			return;
	}
}

int main(void)
{
	test_defaults();
	test_cut_by_alpha_half();
	test_alpha();
	test_recovery_phases();
	test_ceiling();
	test_monitor_period();
	test_disabled();
	test_random_walk();
	return srn_check_result();
}
