/*
 * dcqcn.c - the DCQCN reaction point's rate machine (dcqcn.h).
 *
 * Three kinds of event move a limited QP, and srn_dcqcn_advance() applies
 * them in time order so a caller that calls in late gets the same result
 * as one that called at every event:
 *  - the end of an alpha period (every dce_tcp_rtt): alpha rises towards
 *    1 if a CNP arrived in the period, else decays (mlx5 updates alpha on
 *    this clock, the paper on each CNP and on its own timer K);
 *  - a deferred cut: CNPs that arrive within rate_reduce_monitor_period of
 *    the last cut are folded into one cut at the end of that period;
 *  - a timer increase event (every rpg_time_reset since the last cut or
 *    event).  Byte-counter events come from srn_dcqcn_sent().
 * Every loop is bounded: alpha periods stop costing once alpha is 0
 * (it falls by at least one step per period), increases stop once the
 * rate is back at the ceiling, and a hard cap resynchronises the clocks.
 */
#include "transport/dcqcn.h"

#define ONE_US		1000ull
#define MAX_EVENTS	(1u << 20)	/* per advance call; see the head comment */
#define MAX_BYTE_EVENTS	1024u		/* per sent call */

enum inc_kind { INC_TIMER, INC_BYTES };

void srn_dcqcn_cfg_default(struct srn_dcqcn_cfg *cfg)
{
	*cfg = (struct srn_dcqcn_cfg){
		.rp_enable = true,
		.np_enable = true,
		.line_rate = 100000,		/* 100 Gb/s: a nominal port */
		.rpg_max_rate = 0,
		.rpg_min_rate = 1,
		.rpg_ai_rate = 5,
		.rpg_hai_rate = 50,
		.rpg_time_reset = 300,
		.rpg_byte_reset = 32767,
		.rpg_threshold = 1,
		.rpg_gd = 11,
		.rpg_min_dec_fac = 50,
		.rate_to_set_on_first_cnp = 0,
		.dce_tcp_g = 1019,
		.dce_tcp_rtt = 1,
		.initial_alpha_value = 1023,
		.rate_reduce_monitor_period = 4,
		.clamp_tgt_rate = false,
		.clamp_tgt_rate_after_time_inc = true,
		.min_time_between_cnps = 4,
		.cnp_dscp = 48,
	};
}

void srn_dcqcn_cfg_sanitize(struct srn_dcqcn_cfg *cfg)
{
	if (cfg->line_rate == 0)
		cfg->line_rate = 100000;
	if (cfg->rpg_min_rate == 0)	/* mlx5's range starts at 1 Mb/s */
		cfg->rpg_min_rate = 1;
	if (cfg->dce_tcp_g >= SRN_DCQCN_ALPHA_ONE)	/* g = 1 would freeze alpha */
		cfg->dce_tcp_g = SRN_DCQCN_ALPHA_ONE - 1;
	if (cfg->initial_alpha_value >= SRN_DCQCN_ALPHA_ONE)
		cfg->initial_alpha_value = SRN_DCQCN_ALPHA_ONE - 1;
	if (cfg->dce_tcp_rtt == 0)
		cfg->dce_tcp_rtt = 1;
	if (cfg->rpg_gd == 0)		/* a shift of 0 would cut by alpha, 2x the rule */
		cfg->rpg_gd = 1;
	if (cfg->rpg_gd > 31)
		cfg->rpg_gd = 31;
	if (cfg->rpg_min_dec_fac > 100)
		cfg->rpg_min_dec_fac = 100;
	if (cfg->cnp_dscp > 63)
		cfg->cnp_dscp = 63;
}

static uint64_t cfg_ceiling(const struct srn_dcqcn_cfg *cfg)
{
	uint64_t line = cfg->line_rate * SRN_MBPS;
	uint64_t max = cfg->rpg_max_rate * SRN_MBPS;

	return max && max < line ? max : line;
}

static uint64_t min_rate(const struct srn_dcqcn *st, const struct srn_dcqcn_cfg *cfg)
{
	uint64_t m = cfg->rpg_min_rate * SRN_MBPS;

	return m < st->ceil_bps ? m : st->ceil_bps;
}

void srn_dcqcn_init(struct srn_dcqcn *st, const struct srn_dcqcn_cfg *cfg)
{
	*st = (struct srn_dcqcn){ .ceil_bps = cfg_ceiling(cfg) };
	st->rc_bps = st->rt_bps = st->ceil_bps;
	st->alpha = cfg->initial_alpha_value;
	st->phase = SRN_DCQCN_UNLIMITED;
}

static void unlimit(struct srn_dcqcn *st)
{
	st->limited = false;
	st->cut_pending = false;
	st->rc_bps = st->rt_bps = st->ceil_bps;
	st->phase = SRN_DCQCN_UNLIMITED;
}

void srn_dcqcn_set_ceiling(struct srn_dcqcn *st, const struct srn_dcqcn_cfg *cfg, uint64_t bps)
{
	uint64_t top = cfg_ceiling(cfg);

	st->ceil_bps = bps && bps < top ? bps : top;
	if (!st->limited) {
		unlimit(st);
		return;
	}
	if (st->rt_bps > st->ceil_bps)
		st->rt_bps = st->ceil_bps;
	if (st->rc_bps > st->rt_bps)
		st->rc_bps = st->rt_bps;
}

/* Rate decrease (paper figure 7, "cut"; mlx5 rpg_gd, rpg_min_dec_fac). */
static void cut(struct srn_dcqcn *st, const struct srn_dcqcn_cfg *cfg, uint64_t t)
{
	uint64_t rc = st->rc_bps;
	uint64_t dec = (rc * st->alpha) >> cfg->rpg_gd;
	uint64_t floor_fac = rc * cfg->rpg_min_dec_fac / 100;
	uint64_t next = rc - (dec < rc ? dec : rc);

	/* mlx5 keeps the target unless told to clamp it, or unless the
	 * timer raised the rate since the last cut: then the old target
	 * was already probed and found too high. */
	if (cfg->clamp_tgt_rate || (cfg->clamp_tgt_rate_after_time_inc && st->timer_inc_since_cut))
		st->rt_bps = rc;
	if (next < floor_fac)
		next = floor_fac;
	if (next < min_rate(st, cfg))
		next = min_rate(st, cfg);
	st->rc_bps = next;
	if (st->rt_bps < next)
		st->rt_bps = next;
	st->t_cnt = st->bc_cnt = 0;
	st->bytes = 0;
	st->next_timer_ns = t + cfg->rpg_time_reset * ONE_US;
	st->last_cut_ns = t;
	st->cut_pending = false;
	st->timer_inc_since_cut = false;
	st->phase = SRN_DCQCN_CUT;
	st->cuts++;
}

/* Rate increase (paper figure 7): the first F events of each counter
 * are fast recovery, then additive increase while only one counter is
 * past F, hyper increase once both are. */
static void increase(struct srn_dcqcn *st, const struct srn_dcqcn_cfg *cfg, enum inc_kind kind)
{
	uint32_t f = cfg->rpg_threshold;
	uint32_t hi, lo;

	if (kind == INC_TIMER) {
		st->t_cnt++;
		st->timer_inc_since_cut = true;
	} else {
		st->bc_cnt++;
	}
	hi = st->t_cnt > st->bc_cnt ? st->t_cnt : st->bc_cnt;
	lo = st->t_cnt < st->bc_cnt ? st->t_cnt : st->bc_cnt;
	if (hi <= f) {
		st->phase = SRN_DCQCN_FAST_RECOVERY;
	} else if (lo > f) {
		st->phase = SRN_DCQCN_HYPER;
		st->rt_bps += (uint64_t)(lo - f) * cfg->rpg_hai_rate * SRN_MBPS;
	} else {
		st->phase = SRN_DCQCN_ADDITIVE;
		st->rt_bps += cfg->rpg_ai_rate * SRN_MBPS;
	}
	if (st->rt_bps > st->ceil_bps)
		st->rt_bps = st->ceil_bps;
	/* Halfway to the target, rounded up so rc reaches rt. */
	st->rc_bps = (st->rc_bps + st->rt_bps + 1) / 2;
	if (st->rc_bps >= st->ceil_bps)
		unlimit(st);
}

static void alpha_period(struct srn_dcqcn *st, const struct srn_dcqcn_cfg *cfg)
{
	uint32_t g = cfg->dce_tcp_g;

	/* alpha = g*alpha + (1 - g) when a CNP came, else g*alpha; g in
	 * 1/1024 (NVIDIA: DcQcnDceAlphaG).  Stays below 1024: g*a/1024 +
	 * (1024 - g) < 1024 for a < 1024. */
	if (st->cnp_in_period)
		st->alpha = (st->alpha * g + (SRN_DCQCN_ALPHA_ONE - g) * SRN_DCQCN_ALPHA_ONE) >> 10;
	else
		st->alpha = (st->alpha * g) >> 10;
	st->cnp_in_period = false;
}

void srn_dcqcn_advance(struct srn_dcqcn *st, const struct srn_dcqcn_cfg *cfg, uint64_t now_ns)
{
	uint64_t rtt = cfg->dce_tcp_rtt * ONE_US;
	uint64_t reset = cfg->rpg_time_reset * ONE_US;

	for (uint32_t n = 0; st->limited; n++) {
		uint64_t t_alpha = st->next_alpha_ns;
		uint64_t t_cut = st->cut_pending ?
			st->last_cut_ns + cfg->rate_reduce_monitor_period * ONE_US : UINT64_MAX;
		uint64_t t_timer = reset ? st->next_timer_ns : UINT64_MAX;

		if (n == MAX_EVENTS) {	/* far behind: resynchronise, keep the rates */
			st->next_alpha_ns = now_ns + rtt;
			st->next_timer_ns = now_ns + reset;
			return;
		}
		if (t_alpha <= t_cut && t_alpha <= t_timer && t_alpha <= now_ns) {
			if (st->alpha == 0 && !st->cnp_in_period) {
				/* Nothing left to decay: skip to the period after now. */
				st->next_alpha_ns += ((now_ns - t_alpha) / rtt + 1) * rtt;
				continue;
			}
			alpha_period(st, cfg);
			st->next_alpha_ns += rtt;
		} else if (t_cut <= t_timer && t_cut <= now_ns) {
			cut(st, cfg, t_cut);
		} else if (t_timer <= now_ns) {
			st->next_timer_ns += reset;
			increase(st, cfg, INC_TIMER);
		} else {
			return;
		}
	}
}

bool srn_dcqcn_cnp(struct srn_dcqcn *st, const struct srn_dcqcn_cfg *cfg, uint64_t now_ns)
{
	if (!cfg->rp_enable)
		return false;
	srn_dcqcn_advance(st, cfg, now_ns);
	st->cnp_handled++;
	if (!st->limited) {
		/* A flow's first CNP (or the first after a full recovery):
		 * alpha starts at initial_alpha_value, the target at the
		 * rate the QP had. */
		st->limited = true;
		st->alpha = cfg->initial_alpha_value;
		st->next_alpha_ns = now_ns + cfg->dce_tcp_rtt * ONE_US;
		st->cnp_in_period = true;
		st->rt_bps = st->rc_bps = st->ceil_bps;
		cut(st, cfg, now_ns);
		if (cfg->rate_to_set_on_first_cnp) {
			/* mlx5: the first CNP sets current and target to
			 * this rate instead of cutting by alpha. */
			uint64_t r = cfg->rate_to_set_on_first_cnp * SRN_MBPS;

			if (r > st->ceil_bps)
				r = st->ceil_bps;
			if (r < min_rate(st, cfg))
				r = min_rate(st, cfg);
			st->rc_bps = st->rt_bps = r;
		}
		return true;
	}
	st->cnp_in_period = true;
	if (now_ns - st->last_cut_ns < cfg->rate_reduce_monitor_period * ONE_US)
		st->cut_pending = true;
	else
		cut(st, cfg, now_ns);
	return true;
}

void srn_dcqcn_sent(struct srn_dcqcn *st, const struct srn_dcqcn_cfg *cfg, uint64_t now_ns,
		    uint32_t bytes)
{
	if (!st->limited || cfg->rpg_byte_reset == 0)
		return;
	srn_dcqcn_advance(st, cfg, now_ns);
	st->bytes += bytes;
	for (uint32_t n = 0; st->limited && st->bytes >= cfg->rpg_byte_reset; n++) {
		if (n == MAX_BYTE_EVENTS) {	/* a giant report: the rest is noise */
			st->bytes = 0;
			break;
		}
		st->bytes -= cfg->rpg_byte_reset;
		increase(st, cfg, INC_BYTES);
	}
	if (!st->limited)
		st->bytes = 0;
}

const char *srn_dcqcn_phase_name(enum srn_dcqcn_phase p)
{
	static const char *const names[] = {
		[SRN_DCQCN_UNLIMITED] = "unlimited",
		[SRN_DCQCN_CUT] = "cut",
		[SRN_DCQCN_FAST_RECOVERY] = "fast_recovery",
		[SRN_DCQCN_ADDITIVE] = "additive",
		[SRN_DCQCN_HYPER] = "hyper",
	};

	return (unsigned)p < sizeof(names) / sizeof(names[0]) ? names[p] : "?";
}
