/*
 * pacer.h - a token bucket that paces one QP's packets to a rate.
 *
 * Pure: no clock, no I/O.  Credit is kept in nanobits (1e-9 bit), so a
 * refill of elapsed_ns * rate_bps is exact and no rounding accumulates at
 * low rates.  A packet may leave whenever credit is positive, even if it
 * is larger than the credit (credit then goes negative and the debt is
 * paid before the next one): a packet bigger than the burst still goes.
 *
 * Invariants: -(largest packet) < credit <= burst; rate 0 means not
 * paced (srn_pacer_wait_ns() is always 0).
 */
#ifndef SRN_TRANSPORT_PACER_H
#define SRN_TRANSPORT_PACER_H

#include <stdint.h>

struct srn_pacer {
	uint64_t rate_bps;	/* 0 = unpaced */
	int64_t credit;		/* nanobits */
	int64_t burst;		/* nanobits: the most credit idle time can save */
	uint64_t last_ns;	/* credit is as of this time */
};

#define SRN_NANOBITS_PER_BYTE	8000000000ll

/* A full bucket of burst_bytes at rate_bps (0 = unpaced). */
void srn_pacer_init(struct srn_pacer *p, uint64_t rate_bps, uint32_t burst_bytes, uint64_t now_ns);
/* A new rate from now on (credit earned so far is kept). */
void srn_pacer_set_rate(struct srn_pacer *p, uint64_t rate_bps, uint64_t now_ns);
/* 0 when a packet may leave now, else the nanoseconds until it may. */
uint64_t srn_pacer_wait_ns(struct srn_pacer *p, uint64_t now_ns);
/* A packet of bytes left at now. */
void srn_pacer_consume(struct srn_pacer *p, uint32_t bytes, uint64_t now_ns);

#endif /* SRN_TRANSPORT_PACER_H */
