/*
 * dcqcn.h - the DCQCN reaction point (RP): one QP's sending rate as a
 * function of the CNPs it receives and of time and bytes sent (Zhu et
 * al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM
 * 2015, figure 7; docs/congestion.md has the equations).
 *
 * A pure state machine: no I/O, no clock, no locks.  The caller owns the
 * state (one per QP), passes the time in, reports events (a CNP, bytes
 * sent) and reads the rate out.  Parameters carry the names and units of
 * mlx5's roce_rp / roce_np settings (NVIDIA "DCQCN CC Parameters";
 * `mlxconfig` RPG_*, DCE_TCP_*), and srn_dcqcn_cfg_default() gives their
 * firmware defaults.
 *
 * Invariants (every function keeps them):
 *  - min_bps <= rc <= rt <= ceiling, with min_bps = rpg_min_rate clamped
 *    to the ceiling;
 *  - alpha in [0, 1024) in units of 1/1024;
 *  - a QP that never saw a CNP, or recovered to the ceiling, is not
 *    limited: srn_dcqcn_rate() returns the ceiling and no timer runs.
 */
#ifndef SRN_TRANSPORT_DCQCN_H
#define SRN_TRANSPORT_DCQCN_H

#include <stdbool.h>
#include <stdint.h>

#define SRN_DCQCN_ALPHA_ONE	1024u	/* alpha and dce_tcp_g: 10 fractional bits */
#define SRN_MBPS		1000000ull

struct srn_dcqcn_cfg {
	bool rp_enable;			/* react to CNPs; else each is "ignored" */
	bool np_enable;			/* send CNPs for CE-marked packets */
	uint32_t line_rate;		/* Mb/s: the port's speed, the ceiling when rpg_max_rate is 0 */
	/* Ours: pace every RC/UC/XRC QP at the line rate from its first
	 * packet, as a NIC's wire does.  For an emulated link slower than
	 * the host (the incast demo's 100 Mb/s): without it a QP starts at
	 * whatever the host can do and its first burst overflows the
	 * switch before any CNP can come back.  Off by default: free. */
	bool pace_line_rate;
	/* Reaction point: mlx5 roce_rp names and units. */
	uint32_t rpg_max_rate;		/* Mb/s, 0 = line rate */
	uint32_t rpg_min_rate;		/* Mb/s */
	uint32_t rpg_ai_rate;		/* Mb/s added to the target in additive increase */
	uint32_t rpg_hai_rate;		/* Mb/s per step in hyper increase */
	uint32_t rpg_time_reset;	/* us between timer increase events, 0 = no timer */
	uint32_t rpg_byte_reset;	/* bytes between byte-counter events, 0 = none */
	uint32_t rpg_threshold;		/* F: events of fast recovery per counter */
	uint32_t rpg_gd;		/* cut = rc * alpha / 2^rpg_gd (11: alpha/2) */
	uint32_t rpg_min_dec_fac;	/* %: one cut never goes below this share of rc */
	uint32_t rate_to_set_on_first_cnp; /* Mb/s, 0 = cut as usual */
	uint32_t dce_tcp_g;		/* alpha gain, /1024 */
	uint32_t dce_tcp_rtt;		/* us between alpha updates */
	uint32_t initial_alpha_value;	/* /1024, alpha at a flow's first CNP */
	uint32_t rate_reduce_monitor_period; /* us: at most one cut per period */
	bool clamp_tgt_rate;		/* every cut sets target = current */
	bool clamp_tgt_rate_after_time_inc; /* ... also after a timer increase */
	/* Notification point: mlx5 roce_np. */
	uint32_t min_time_between_cnps;	/* us between two CNPs of one QP */
	uint32_t cnp_dscp;		/* DSCP of the CNPs sent */
};

/* Which rule made the last change (for `softrnic res` and tests). */
enum srn_dcqcn_phase {
	SRN_DCQCN_UNLIMITED,	/* never cut, or recovered to the ceiling */
	SRN_DCQCN_CUT,		/* just decreased on a CNP */
	SRN_DCQCN_FAST_RECOVERY,
	SRN_DCQCN_ADDITIVE,
	SRN_DCQCN_HYPER,
};

struct srn_dcqcn {
	uint64_t ceil_bps;	/* rpg_max_rate or line rate, or a QP rate limit */
	uint64_t rc_bps;	/* current rate: what the pacer enforces */
	uint64_t rt_bps;	/* target rate: where recovery heads */
	uint32_t alpha;		/* congestion estimate, /1024 */
	uint32_t t_cnt;		/* timer events since the last cut */
	uint32_t bc_cnt;	/* byte-counter events since the last cut */
	uint64_t bytes;		/* sent since the last byte-counter event */
	uint64_t next_timer_ns;	/* next timer increase event */
	uint64_t next_alpha_ns;	/* end of the current alpha period */
	uint64_t last_cut_ns;	/* the last decrease */
	bool limited;		/* a CNP was taken and rc has not recovered */
	bool cnp_in_period;	/* a CNP arrived in this alpha period */
	bool cut_pending;	/* a CNP arrived inside the monitor period */
	bool timer_inc_since_cut;
	enum srn_dcqcn_phase phase;
	uint64_t cnp_handled;	/* rp_cnp_handled, this QP */
	uint64_t cuts;		/* rate decreases applied */
};

/* mlx5's firmware defaults (docs/congestion.md, table). */
void srn_dcqcn_cfg_default(struct srn_dcqcn_cfg *cfg);
/* Bring out-of-range values into range (g < 1024, 1 <= gd <= 31, ...). */
void srn_dcqcn_cfg_sanitize(struct srn_dcqcn_cfg *cfg);

/* A new QP: unlimited at the configured ceiling. */
void srn_dcqcn_init(struct srn_dcqcn *st, const struct srn_dcqcn_cfg *cfg);
/* A QP rate limit (ibv_modify_qp_rate_limit): the ceiling, 0 = the
 * configured one.  rc and rt never exceed it from now on. */
void srn_dcqcn_set_ceiling(struct srn_dcqcn *st, const struct srn_dcqcn_cfg *cfg,
			   uint64_t bps);

/* A CNP for this QP.  Returns true when handled (rp_cnp_handled), false
 * when the reaction point is disabled (rp_cnp_ignored). */
bool srn_dcqcn_cnp(struct srn_dcqcn *st, const struct srn_dcqcn_cfg *cfg, uint64_t now_ns);
/* The QP sent bytes (drives the byte counter). */
void srn_dcqcn_sent(struct srn_dcqcn *st, const struct srn_dcqcn_cfg *cfg, uint64_t now_ns,
		    uint32_t bytes);
/* Time passed: alpha periods, a deferred cut, timer increase events. */
void srn_dcqcn_advance(struct srn_dcqcn *st, const struct srn_dcqcn_cfg *cfg, uint64_t now_ns);

/* The rate to send at now, bits per second. */
static inline uint64_t srn_dcqcn_rate(const struct srn_dcqcn *st)
{
	return st->limited ? st->rc_bps : st->ceil_bps;
}

const char *srn_dcqcn_phase_name(enum srn_dcqcn_phase p);

#endif /* SRN_TRANSPORT_DCQCN_H */
