/*
 * test_cc_incast_sim.c - the pure congestion-control pieces closed into
 * one loop, in simulated time: N greedy senders (each a DCQCN reaction
 * point + a pacer, transport/dcqcn.c, pacer.c) into one switch egress
 * (tools/switch_queue.c: rate, buffer, RED marking) to one receiver whose
 * notification point (transport/cnp_np.c) sends CNPs back.
 *
 *   sender i --(prop)--> [ switch queue, RED ] --(egress rate)--(prop)-->
 *   receiver: CE? -> NP -> CNP --(prop)--> sender i's RP
 *
 * 4 senders with 40 Gb/s lines into a 40 Gb/s egress, RED at the paper's
 * Kmin 5 KB, Kmax 200 KB, Pmax 1 %, 2 MB buffer, staggered starts:
 *  - with the paper's rules and timers (Zhu et al.: target = rate at each
 *    cut, F = 5, 55 us timer and alpha period, g = 1/256, one CNP per
 *    50 us; the byte counter off and R_HAI 100 Mb/s are our choices):
 *    after 100 ms, no drops, each flow within +-20 % of a fair share,
 *    >= 90 % of the egress used, the queue above Kmax under half the time
 *    (issue 16's targets);
 *  - with no congestion control the buffer overflows;
 *  - mlx5's defaults are run and printed, and must at least drop less
 *    than no control at all: they keep the old target after a cut and
 *    recover towards it on every 32 KB, which against 1 % marking does
 *    not settle here (docs/congestion.md, "What the simulation shows").
 * Deterministic (seeded), no clock, no sockets.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "switch_queue.h"
#include "transport/cnp_np.h"
#include "transport/dcqcn.h"
#include "transport/pacer.h"

#define NSEND		4
#define PKT		1024u		/* bytes per packet */
#define PROP_NS		2000ull		/* each hop's propagation delay */
#define STEP_NS		100ull		/* simulation step */
#define RUN_NS		400000000ull	/* 400 ms */
#define WARM_NS		100000000ull	/* measure after 100 ms */
#define EGRESS_BPS	40000000000ull
#define DL_SLOTS	65536u		/* delay lines: power of two */

/* A constant-delay line: events leave in the order they entered. */
struct dline {
	uint64_t t[DL_SLOTS];
	uint16_t who[DL_SLOTS];
	uint8_t ce[DL_SLOTS];
	uint32_t head, tail;
};

static void dl_push(struct dline *d, uint64_t t, int who, int ce)
{
	if (d->tail - d->head == DL_SLOTS)
		abort();	/* the simulation outgrew its lines: a test bug */
	d->t[d->tail & (DL_SLOTS - 1)] = t;
	d->who[d->tail & (DL_SLOTS - 1)] = (uint16_t)who;
	d->ce[d->tail & (DL_SLOTS - 1)] = (uint8_t)ce;
	d->tail++;
}

static int dl_pop(struct dline *d, uint64_t now, int *who, int *ce)
{
	if (d->head == d->tail || d->t[d->head & (DL_SLOTS - 1)] > now)
		return 0;
	*who = d->who[d->head & (DL_SLOTS - 1)];
	*ce = d->ce[d->head & (DL_SLOTS - 1)];
	d->head++;
	return 1;
}

struct result {
	uint64_t drops, marks, cnps;
	uint64_t delivered[NSEND];	/* bytes after warm-up */
	uint64_t samples, above_kmax;	/* queue samples after warm-up */
	uint64_t qmax;
	double qmean;
};

static struct dline to_switch, to_recv, to_send;

enum setting { PAPER, MLX5, NO_CC };

static void simulate(enum setting set, struct result *r)
{
	struct srn_dcqcn_cfg cfg;
	struct srn_dcqcn rp[NSEND];
	struct srn_pacer pace[NSEND];
	struct srn_cnp_np np[NSEND];
	struct srn_swq_cfg qc = {
		.rate_bps = EGRESS_BPS,
		.buffer = 2u << 20,
		.ecn = true,
		.kmin = 5 * 1024,	/* the paper's Kmin 5 KB, Kmax 200 KB, Pmax 1 % */
		.kmax = 200 * 1024,
		.pmax = 0.01,
	};
	struct srn_swq *q = malloc(sizeof(*q));
	/* Only the Ethernet + IP headers are ever read (marking): frames
	 * are 64-byte slots of a pool twice the queue's frame capacity, so a
	 * slot is reused only after its frame has left (FIFO). */
	static uint8_t pool[2 * SRN_SWQ_SLOTS][64];
	uint32_t next_slot = 0;
	double qsum = 0;

	memset(r, 0, sizeof(*r));
	memset(&to_switch, 0, sizeof(to_switch));
	memset(&to_recv, 0, sizeof(to_recv));
	memset(&to_send, 0, sizeof(to_send));
	srn_dcqcn_cfg_default(&cfg);
	cfg.line_rate = 40000;
	cfg.rp_enable = set != NO_CC;
	if (set == PAPER) {
		cfg.clamp_tgt_rate = true;
		cfg.rpg_threshold = 5;
		cfg.rpg_time_reset = 55;
		cfg.rpg_byte_reset = 0;
		cfg.dce_tcp_g = 1020;		/* g = 4/1024 = 1/256 */
		cfg.dce_tcp_rtt = 55;
		cfg.rate_reduce_monitor_period = 50;
		cfg.min_time_between_cnps = 50;
		cfg.rpg_ai_rate = 40;
		cfg.rpg_hai_rate = 100;
		cfg.rpg_min_dec_fac = 0;
	}
	srn_swq_init(q, &qc, 2015);
	for (int i = 0; i < NSEND; i++) {
		srn_dcqcn_init(&rp[i], &cfg);
		srn_pacer_init(&pace[i], srn_dcqcn_rate(&rp[i]), 2 * PKT, 0);
		srn_cnp_np_init(&np[i]);
	}
	for (uint64_t t = 0; t < RUN_NS; t += STEP_NS) {
		int who, ce;

		/* CNPs arriving at the senders. */
		while (dl_pop(&to_send, t, &who, &ce))
			srn_dcqcn_cnp(&rp[who], &cfg, t);
		/* Senders: greedy, paced to the RP's rate.  Staggered start:
		 * the fairness must come from DCQCN, not from symmetry. */
		for (int i = 0; i < NSEND; i++) {
			if (t < (uint64_t)i * 5000000)
				continue;
			srn_dcqcn_advance(&rp[i], &cfg, t);
			srn_pacer_set_rate(&pace[i], srn_dcqcn_rate(&rp[i]), t);
			for (int k = 0; k < 64 && srn_pacer_wait_ns(&pace[i], t) == 0; k++) {
				srn_pacer_consume(&pace[i], PKT, t);
				srn_dcqcn_sent(&rp[i], &cfg, t, PKT);
				dl_push(&to_switch, t + PROP_NS, i, 0);
			}
		}
		/* Switch ingress. */
		while (dl_pop(&to_switch, t, &who, &ce)) {
			struct srn_swq_frame f = { .len = 64, .wire_len = PKT, .l3_off = 14,
						   .flow = who };

			f.data = pool[next_slot++ % (2 * SRN_SWQ_SLOTS)];
			f.data[14] = 0x45;	/* IPv4, ECT(0) */
			f.data[15] = 0x02;
			srn_swq_enqueue(q, &f, t);
		}
		/* Switch egress. */
		struct srn_swq_frame f;
		while (srn_swq_dequeue(q, t, &f)) {
			dl_push(&to_recv, t + PROP_NS, f.flow, (f.data[15] & 3) == 3);
		}
		/* Receiver: count, and the NP answers marks with CNPs. */
		while (dl_pop(&to_recv, t, &who, &ce)) {
			if (t >= WARM_NS)
				r->delivered[who] += PKT;
			if (ce && srn_cnp_np_marked(&np[who], &cfg, t)) {
				r->cnps++;
				dl_push(&to_send, t + PROP_NS, who, 0);
			}
		}
		if (t >= WARM_NS && t % 10000 == 0) {
			r->samples++;
			r->above_kmax += q->bytes > qc.kmax;
			qsum += (double)q->bytes;
			if (q->bytes > r->qmax)
				r->qmax = q->bytes;
		}
	}
	r->drops = q->dropped;
	r->marks = q->marked;
	r->qmean = r->samples ? qsum / (double)r->samples : 0;
	free(q);	/* not srn_swq_fini: the pool owns the frames */
}

static void report(const char *name, const struct result *r, double *agg)
{
	double secs = (double)(RUN_NS - WARM_NS) / 1e9;

	printf("%s: drops=%" PRIu64 " marks=%" PRIu64 " cnps=%" PRIu64
	       " queue mean=%.0f max=%" PRIu64 " B, above Kmax %.1f%% of the time\n  flows (Mb/s):",
	       name, r->drops, r->marks, r->cnps, r->qmean, r->qmax,
	       100.0 * (double)r->above_kmax / (double)r->samples);
	*agg = 0;
	for (int i = 0; i < NSEND; i++) {
		printf(" %.0f", (double)r->delivered[i] * 8 / secs / 1e6);
		*agg += (double)r->delivered[i] * 8 / secs;
	}
	printf(", aggregate %.0f of %.0f\n", *agg / 1e6, (double)EGRESS_BPS / 1e6);
}

int main(void)
{
	struct result paper, mlx5, off;
	double secs = (double)(RUN_NS - WARM_NS) / 1e9, fair = (double)EGRESS_BPS / NSEND, agg;

	simulate(PAPER, &paper);
	report("DCQCN, the paper's rules", &paper, &agg);
	for (int i = 0; i < NSEND; i++) {
		double bps = (double)paper.delivered[i] * 8 / secs;

		CHECK(bps > 0.8 * fair && bps < 1.2 * fair, "flow %d at %.0f Mb/s, fair %.0f", i,
		      bps / 1e6, fair / 1e6);
	}
	CHECK(agg >= 0.9 * (double)EGRESS_BPS, "aggregate %.0f Mb/s", agg / 1e6);
	CHECK(paper.drops == 0, "drops with DCQCN: %" PRIu64, paper.drops);
	CHECK(paper.above_kmax * 2 < paper.samples, "queue above Kmax in %" PRIu64 " of %" PRIu64,
	      paper.above_kmax, paper.samples);

	simulate(NO_CC, &off);
	report("no congestion control", &off, &agg);
	CHECK(off.drops > 0, "without DCQCN the buffer overflows");

	simulate(MLX5, &mlx5);
	report("DCQCN, mlx5 defaults", &mlx5, &agg);
	CHECK(mlx5.drops < off.drops, "mlx5 defaults drop less than no control");
	return srn_check_result();
}
