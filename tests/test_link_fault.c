/* Tests for the fault injector (link/fault.c, fault_parse.c, hooks in
 * link/udp.c), on two UDP sockets on 127.0.0.1:
 * - the SOFTRNIC_FAULTS parser: values, direction prefixes, filters, and
 *   the message of every kind of mistake, also through srn_udp_open;
 * - each fault alone, TX and RX, at 100 % and 30 % over 2000 datagrams
 *   with a fixed seed: the counter is within bounds and equals what the
 *   receiver observed (missing, doubled, one bit flipped after byte 12,
 *   overtaken, arriving only after the flush / deadline);
 * - the caller's buffers are never modified by TX corruption;
 * - opcode and QP filters restrict the faults to the chosen packets;
 * - the same seed gives the same decisions (and the same received
 *   sequence), another seed does not;
 * - the held-packet bound, srn_udp_fault_next_ns, and close with packets
 *   still held (ASan reports a leak if they are not freed).
 * Traffic goes to 127.0.0.1 only. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "link/fault.h"
#include "link/udp.h"
#include "check.h"
#include "diag/clock.h"

#define N 2000
#define CHUNK 100                 /* < SRN_FAULT_MAX_HELD: 100 % delay holds a whole chunk */
#define DELAY_US 30000            /* long enough that "before the deadline" is unambiguous */
#define PHASE_LIMIT_NS 10000000000ull  /* a phase that has not seen its datagrams by then fails */

static struct srn_rx_batch rxb;

static struct srn_dev_cfg lo_cfg(const char *name)
{
	struct srn_dev_cfg c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "%s", name);
	c.family = AF_INET;
	struct sockaddr_in *sin = (struct sockaddr_in *)&c.addr;
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return c;
}

/* Open with SOFTRNIC_FAULTS = spec (NULL: unset). */
static int open_with(struct srn_udp *u, const char *name, const char *spec, char *err,
					 size_t errlen)
{
	struct srn_dev_cfg c = lo_cfg(name);
	if (spec)
		setenv(SRN_FAULT_ENV, spec, 1);
	else
		unsetenv(SRN_FAULT_ENV);
	int rc = srn_udp_open(u, &c, err, errlen);
	unsetenv(SRN_FAULT_ENV);
	return rc;
}

/* ---- packets ----------------------------------------------------------- */

/* Datagram seq: a BTH-shaped header (opcode, P_Key, dest QP, seq in the
 * PSN word), a body derived from seq, a 4-byte trailer. */
struct pkt {
	uint8_t hdr[12], body[128], tail[4];
	size_t blen;
};

static size_t body_len(uint32_t seq)
{
	return 16 + (seq % 7) * 13;
}

static void make_pkt(struct pkt *p, uint32_t seq, uint8_t opcode, uint32_t qpn)
{
	memset(p->hdr, 0, sizeof(p->hdr));
	p->hdr[0] = opcode;
	p->hdr[2] = p->hdr[3] = 0xff;
	p->hdr[5] = (uint8_t)(qpn >> 16);
	p->hdr[6] = (uint8_t)(qpn >> 8);
	p->hdr[7] = (uint8_t)qpn;
	p->hdr[8] = (uint8_t)(seq >> 24);
	p->hdr[9] = (uint8_t)(seq >> 16);
	p->hdr[10] = (uint8_t)(seq >> 8);
	p->hdr[11] = (uint8_t)seq;
	p->blen = body_len(seq);
	for (size_t k = 0; k < p->blen; k++)
		p->body[k] = (uint8_t)(seq * 31 + k * 7 + 1);
	for (int k = 0; k < 4; k++)
		p->tail[k] = (uint8_t)(0xa5 ^ seq ^ (uint32_t)k);
}

/* Traffic pattern: opcode and QP of datagram seq. */
static uint8_t pat_opcode[N];
static uint32_t pat_qpn[N];

static void pattern_plain(void)
{
	for (int i = 0; i < N; i++) {
		pat_opcode[i] = 0x04;
		pat_qpn[i] = 0x11;
	}
}

/* Send datagram seq. With an injector, its clock is the caller's `now`
 * (0: the real one): run_traffic gives one reading for a whole chunk, so a
 * sender stalled past a deadline cannot release held packets early. */
static int send_pkt_at(struct srn_udp *tx, const struct srn_udp *rx, uint32_t seq, uint64_t now)
{
	struct pkt p, orig;
	make_pkt(&p, seq, pat_opcode[seq], pat_qpn[seq]);
	orig = p;
	/* Split inside the BTH: the filters must read across iovecs. */
	struct iovec iov[4] = {
		{ p.hdr, 5 }, { p.hdr + 5, 7 }, { p.body, p.blen }, { p.tail, 4 },
	};
	int rc;
	for (int tries = 0; tries < 1000; tries++) {
		if (tx->fault && now)
			rc = srn_fault_tx(tx, (const struct sockaddr *)&rx->local, rx->local_len, iov, 4, now);
		else
			rc = srn_udp_sendv(tx, (const struct sockaddr *)&rx->local, rx->local_len, iov, 4);
		if (rc != -EAGAIN)
			break;
		usleep(100);
	}
	CHECK(!memcmp(&p, &orig, sizeof(p)), "seq %u: the sender's buffers were modified", seq);
	return rc;
}

static int send_pkt(struct srn_udp *tx, const struct srn_udp *rx, uint32_t seq)
{
	return send_pkt_at(tx, rx, seq, 0);
}

/* ---- observation ------------------------------------------------------- */

struct rec {
	uint32_t seq;
	int phase;       /* 1: before any flush / RX deadline, 2: after */
	int bitdiff;     /* bits differing after byte 12; -1: bad length/header */
};

struct obs {
	int n;
	struct rec r[3 * N];
};

static int popcount8(uint8_t v)
{
	return __builtin_popcount(v);
}

static void record(struct obs *o, const uint8_t *d, uint32_t len, int phase)
{
	if (o->n >= 3 * N || len < 12)
		return;
	struct rec *r = &o->r[o->n++];
	r->seq = (uint32_t)d[8] << 24 | (uint32_t)d[9] << 16 | (uint32_t)d[10] << 8 | d[11];
	r->phase = phase;
	if (r->seq >= N) {
		r->bitdiff = -1;
		return;
	}
	struct pkt p;
	make_pkt(&p, r->seq, pat_opcode[r->seq], pat_qpn[r->seq]);
	if (len != 12 + p.blen + 4 || memcmp(d, p.hdr, 12)) {
		r->bitdiff = -1;
		return;
	}
	int bits = 0;
	for (size_t k = 0; k < p.blen; k++)
		bits += popcount8(d[12 + k] ^ p.body[k]);
	for (int k = 0; k < 4; k++)
		bits += popcount8(d[12 + p.blen + k] ^ p.tail[k]);
	r->bitdiff = bits;
}

static const struct srn_fault_stats no_stats;

static const struct srn_fault_stats *stats_or_zero(const struct srn_udp *u)
{
	const struct srn_fault_stats *st = srn_udp_fault_stats(u);
	return st ? st : &no_stats;
}

/* A packet held for reordering (at most one per direction): the injector
 * holds something and none of it was delayed. Callers mix delay and
 * reorder in one direction nowhere. */
static uint64_t pending(const struct srn_udp *u, uint64_t delayed)
{
	return srn_udp_fault_next_ns(u) && delayed == 0;
}

/* The datagrams of one chunk, counted from the injectors' statistics so
 * that each phase waits for what it must see, not for a quiet spell (on a
 * loaded machine the loopback softirq or this thread stalls longer than
 * any quiet spell, and a straggler then counted as late or missing). */
struct chunk {
	struct srn_fault_stats t0, r0;  /* the injectors' counters at its start */
	uint64_t sent, delivered;
};

/* Datagrams tx's sends have put on the wire so far in this chunk. held:
 * phase 1, where none of the chunk's held packets has left yet (the TX
 * clock stood still and nothing flushes), so the delayed ones and a
 * reorder-held one are still held; phase 2 asks only once nothing is held.
 * Duplicates of held packets are counted when they leave. */
static uint64_t on_wire(const struct chunk *c, const struct srn_udp *tx, bool held)
{
	const struct srn_fault_stats *t = stats_or_zero(tx);
	uint64_t delayed = t->tx_delayed - c->t0.tx_delayed;
	uint64_t w = c->sent - (t->tx_dropped - c->t0.tx_dropped) +
				 (t->tx_duplicated - c->t0.tx_duplicated);
	return held ? w - delayed - pending(tx, delayed) : w;
}

/* Datagrams rx's injector has taken from the socket in this chunk: each
 * was delivered (once, or twice if duplicated), dropped, or (held: phase 1,
 * whose RX clock stays short of every deadline) is still held. */
static uint64_t taken(const struct chunk *c, const struct srn_udp *rx, bool held)
{
	const struct srn_fault_stats *r = stats_or_zero(rx);
	uint64_t delayed = r->rx_delayed - c->r0.rx_delayed;
	uint64_t t = c->delivered + (r->rx_dropped - c->r0.rx_dropped) -
				 (r->rx_duplicated - c->r0.rx_duplicated);
	return held ? t + delayed + pending(rx, delayed) : t;
}

/* Phase 1: take what the socket delivers without flushing TX, with the RX
 * injector's clock held short of its first deadline (so a stall of this
 * thread cannot release a delayed packet here), until the RX injector has
 * taken every datagram on the wire. Phase 2: flush TX as deadlines pass
 * and receive until neither side holds anything and every datagram has
 * been taken. */
static void drain(struct srn_udp *tx, struct srn_udp *rx, struct obs *o, struct chunk *c,
				  int phase)
{
	uint64_t start = srn_now_ns();
	while (srn_now_ns() - start < PHASE_LIMIT_NS) {
		uint64_t t = srn_now_ns();
		uint64_t rx_next = srn_udp_fault_next_ns(rx);
		if (phase == 1) {
			if (taken(c, rx, true) == on_wire(c, tx, true))
				return;
			if (rx_next && t >= rx_next)
				t = rx_next - 1;
		} else {
			bool held = srn_udp_fault_next_ns(tx) || rx_next;
			if (!held && taken(c, rx, false) == on_wire(c, tx, false))
				return;
			uint64_t tx_next = srn_udp_fault_next_ns(tx);
			if (tx_next && t >= tx_next)
				srn_udp_fault_flush(tx, t);
		}
		int n = rx->fault ? srn_fault_rx(rx, &rxb, NULL, t) : srn_udp_recv_batch(rx, &rxb, NULL);
		CHECK(n >= 0, "recv_batch: %s", strerror(-n));
		if (n < 0)
			return;
		for (int i = 0; i < n; i++)
			record(o, rxb.pkt[i].data, rxb.pkt[i].len, phase);
		c->delivered += (uint64_t)n;
		if (n == 0)
			usleep(50);
	}
	CHECK(0, "phase %d: %llu datagrams taken (%llu delivered) of %llu on the wire (%llu sent) "
		  "after 10 s", phase, (unsigned long long)taken(c, rx, phase == 1),
		  (unsigned long long)c->delivered, (unsigned long long)on_wire(c, tx, phase == 1),
		  (unsigned long long)c->sent);
}

static void run_traffic(struct srn_udp *tx, struct srn_udp *rx, int n, struct obs *o)
{
	o->n = 0;
	for (int i0 = 0; i0 < n; i0 += CHUNK) {
		struct chunk c = { *stats_or_zero(tx), *stats_or_zero(rx), 0, 0 };
		uint64_t t = srn_now_ns();
		for (int i = i0; i < i0 + CHUNK && i < n; i++) {
			int rc = send_pkt_at(tx, rx, (uint32_t)i, t);
			CHECK(rc == 0, "send %d: %s", i, strerror(-rc));
			c.sent++;
		}
		drain(tx, rx, o, &c, 1);
		drain(tx, rx, o, &c, 2);
	}
}

/* ---- each fault alone ---------------------------------------------------- */

static const char *const kind_name[SRN_FAULT_NKINDS] = {
	[SRN_FAULT_DROP] = "drop", [SRN_FAULT_CORRUPT] = "corrupt", [SRN_FAULT_DELAY] = "delay",
	[SRN_FAULT_REORDER] = "reorder", [SRN_FAULT_DUP] = "dup",
};

static uint64_t stat_of(const struct srn_fault_stats *s, int dir, int kind)
{
	const uint64_t tx[SRN_FAULT_NKINDS] = {
		[SRN_FAULT_DROP] = s->tx_dropped, [SRN_FAULT_CORRUPT] = s->tx_corrupted,
		[SRN_FAULT_DELAY] = s->tx_delayed, [SRN_FAULT_REORDER] = s->tx_reordered,
		[SRN_FAULT_DUP] = s->tx_duplicated,
	};
	const uint64_t rx[SRN_FAULT_NKINDS] = {
		[SRN_FAULT_DROP] = s->rx_dropped, [SRN_FAULT_CORRUPT] = s->rx_corrupted,
		[SRN_FAULT_DELAY] = s->rx_delayed, [SRN_FAULT_REORDER] = s->rx_reordered,
		[SRN_FAULT_DUP] = s->rx_duplicated,
	};
	return dir == SRN_FAULT_TX ? tx[kind] : rx[kind];
}

static uint64_t stats_total(const struct srn_fault_stats *s)
{
	const uint64_t *v = (const uint64_t *)s;
	uint64_t t = 0;
	for (size_t i = 0; i < sizeof(*s) / sizeof(uint64_t); i++)
		t += v[i];
	return t;
}

struct seen {
	int count[N];
	int corrupt, bad, phase2, overtaken;
};

static void summarise(const struct obs *o, struct seen *s)
{
	memset(s, 0, sizeof(*s));
	uint32_t maxseq = 0;
	bool any = false;
	for (int i = 0; i < o->n; i++) {
		const struct rec *r = &o->r[i];
		if (r->bitdiff < 0) {
			s->bad++;
			continue;
		}
		s->count[r->seq]++;
		if (r->bitdiff == 1)
			s->corrupt++;
		else if (r->bitdiff > 1)
			s->bad++;
		if (r->phase == 2)
			s->phase2++;
		if (any && r->seq < maxseq)
			s->overtaken++;
		if (!any || r->seq > maxseq)
			maxseq = r->seq;
		any = true;
	}
}

static int count_with(const struct seen *s, int times)
{
	int c = 0;
	for (int i = 0; i < N; i++)
		c += s->count[i] == times;
	return c;
}

static void one_fault(int dir, int kind, const char *pct)
{
	const char *d = dir == SRN_FAULT_TX ? "tx" : "rx";
	char spec[160], err[256], what[64];
	snprintf(spec, sizeof(spec), "seed=1234,%s.%s=%s,%s.delay_us=%d", d, kind_name[kind], pct, d,
			 DELAY_US);
	snprintf(what, sizeof(what), "%s.%s=%s", d, kind_name[kind], pct);
	struct srn_udp a, b;
	int rc = open_with(&a, "fa", dir == SRN_FAULT_TX ? spec : NULL, err, sizeof(err));
	CHECK(rc == 0, "%s", err);
	rc |= open_with(&b, "fb", dir == SRN_FAULT_RX ? spec : NULL, err, sizeof(err));
	CHECK(rc == 0, "%s", err);
	if (rc)
		return;
	pattern_plain();
	static struct obs o;
	run_traffic(&a, &b, N, &o);
	struct srn_udp *fu = dir == SRN_FAULT_TX ? &a : &b;
	const struct srn_fault_stats *st = srn_udp_fault_stats(fu);
	CHECK(st != NULL, "%s: no stats", what);
	CHECK(srn_udp_fault_stats(dir == SRN_FAULT_TX ? &b : &a) == NULL,
		  "the socket without SOFTRNIC_FAULTS has an injector");
	if (!st)
		goto out;
	uint64_t v = stat_of(st, dir, kind);
	CHECK(stats_total(st) == v, "%s: other counters moved (total %llu, this %llu)", what,
		  (unsigned long long)stats_total(st), (unsigned long long)v);

	bool full = !strcmp(pct, "100");
	uint64_t lo, hi;
	if (kind == SRN_FAULT_REORDER) {
		/* The partner's roll is spent on the swap: p/(1+p) of the packets
		 * are overtaken; at 100 % exactly one in two. */
		lo = full ? N / 2 - N / 40 : 360;
		hi = full ? N / 2 : 560;
	} else {
		lo = full ? N : 500;      /* 30 %: 600 +- 5 standard deviations */
		hi = full ? N : 700;
	}
	CHECK(v >= lo && v <= hi, "%s: counter %llu outside [%llu, %llu]", what,
		  (unsigned long long)v, (unsigned long long)lo, (unsigned long long)hi);

	struct seen s;
	summarise(&o, &s);
	CHECK(s.bad == 0, "%s: %d datagrams with a damaged header, wrong length or several flipped bits",
		  what, s.bad);
	int once = count_with(&s, 1), twice = count_with(&s, 2), never = count_with(&s, 0);
	printf("%-12s counter %4llu | received %4d: missing %4d, doubled %4d, one bit flipped %4d, "
		   "late %4d, overtaken %4d\n", what, (unsigned long long)v, o.n, never, twice,
		   s.corrupt, s.phase2, s.overtaken);
	switch (kind) {
	case SRN_FAULT_DROP:
		CHECK((uint64_t)never == v && once == N - never, "%s: %d missing, %d once, counter %llu",
			  what, never, once, (unsigned long long)v);
		break;
	case SRN_FAULT_DUP:
		CHECK((uint64_t)twice == v && once + twice == N, "%s: %d doubled, %d once, counter %llu",
			  what, twice, once, (unsigned long long)v);
		break;
	case SRN_FAULT_CORRUPT:
		CHECK(once == N && (uint64_t)s.corrupt == v, "%s: %d corrupted seen, counter %llu", what,
			  s.corrupt, (unsigned long long)v);
		break;
	case SRN_FAULT_DELAY:
		CHECK(once == N && (uint64_t)s.phase2 == v,
			  "%s: %d arrived after the deadline, counter %llu", what, s.phase2,
			  (unsigned long long)v);
		break;
	case SRN_FAULT_REORDER:
		CHECK(once == N && (uint64_t)s.overtaken == v, "%s: %d overtaken, counter %llu", what,
			  s.overtaken, (unsigned long long)v);
		break;
	}
	if (kind != SRN_FAULT_CORRUPT)
		CHECK(s.corrupt == 0, "%s: %d corrupted datagrams", what, s.corrupt);
	if (kind != SRN_FAULT_DELAY && kind != SRN_FAULT_REORDER)
		CHECK(s.phase2 == 0, "%s: %d late datagrams", what, s.phase2);
	if (kind != SRN_FAULT_REORDER && kind != SRN_FAULT_DELAY)
		CHECK(s.overtaken == 0, "%s: order changed (%d)", what, s.overtaken);
	CHECK(srn_udp_fault_next_ns(fu) == 0, "%s: packets still held", what);
out:
	srn_udp_close(&a);
	srn_udp_close(&b);
}

/* 100 % delay: nothing arrives before the flush; flush before the deadline
 * sends nothing; after it, everything, in order. */
static void delay_needs_flush(void)
{
	struct srn_udp a, b;
	char err[256];
	int rc = open_with(&a, "da", "tx.delay=100,tx.delay_us=40000", err, sizeof(err));
	rc |= open_with(&b, "db", NULL, err, sizeof(err));
	CHECK(rc == 0, "%s", err);
	if (rc)
		return;
	pattern_plain();
	uint64_t t0 = srn_now_ns();
	for (uint32_t i = 0; i < 50; i++)
		CHECK(send_pkt(&a, &b, i) == 0, "send");
	uint64_t t1 = srn_now_ns();
	uint64_t next = srn_udp_fault_next_ns(&a);
	CHECK(next >= t0 + 40000000ull && next <= t1 + 40000000ull,
		  "next_ns %llu not 40 ms after the first send (%llu)", (unsigned long long)next,
		  (unsigned long long)t0);
	usleep(5000);
	CHECK(srn_udp_recv_batch(&b, &rxb, NULL) == 0, "a delayed packet arrived without a flush");
	/* One clock reading for the comparison and the flush: read twice, a
	 * preemption in between could carry the flush past the deadline. */
	uint64_t t = srn_now_ns();
	if (t < next)
		CHECK(srn_udp_fault_flush(&a, t) == 0, "flush before the deadline sent packets");
	/* Every packet's own deadline (the last was sent at t1) has passed. */
	while (srn_now_ns() < t1 + 40000000ull)
		usleep(1000);
	CHECK(srn_udp_fault_flush(&a, srn_now_ns()) == 50, "flush after the deadline did not send 50");
	CHECK(srn_udp_fault_next_ns(&a) == 0, "next_ns after the flush");
	static struct obs o;
	o.n = 0;
	uint64_t end = srn_now_ns() + 1000000000ull;
	while (o.n < 50 && srn_now_ns() < end) {
		int n = srn_udp_recv_batch(&b, &rxb, NULL);
		for (int i = 0; i < n; i++)
			record(&o, rxb.pkt[i].data, rxb.pkt[i].len, 2);
	}
	CHECK(o.n == 50, "got %d of 50 after the flush", o.n);
	for (int i = 0; i < o.n; i++)
		CHECK(o.r[i].seq == (uint32_t)i && o.r[i].bitdiff == 0, "delayed packet %d out of order", i);
	srn_udp_close(&a);
	srn_udp_close(&b);
}

/* Bounded holding, both ways: the 257th delayed packet goes at once, and
 * close frees what is still held (LeakSanitizer checks under ASan). */
static void held_bound(void)
{
	struct srn_udp a, b;
	char err[256];
	int rc = open_with(&a, "ha", "tx.delay=100,tx.delay_us=5000000", err, sizeof(err));
	rc |= open_with(&b, "hb", "rx.delay=100,rx.delay_us=5000000", err, sizeof(err));
	CHECK(rc == 0, "%s", err);
	if (rc)
		return;
	pattern_plain();
	for (uint32_t i = 0; i < 300; i++)
		CHECK(send_pkt(&a, &b, i) == 0, "send");
	CHECK(srn_udp_fault_stats(&a)->tx_delayed == SRN_FAULT_MAX_HELD, "tx_delayed %llu",
		  (unsigned long long)srn_udp_fault_stats(&a)->tx_delayed);
	/* a sent the 44 past its bound at once; b, far from its own bound,
	 * holds all of them. */
	int got = 0;
	uint64_t end = srn_now_ns() + 200000000ull;
	while (srn_now_ns() < end) {
		int n = srn_udp_recv_batch(&b, &rxb, NULL);
		got += n > 0 ? n : 0;
	}
	CHECK(got == 0, "rx delay of 44 packets: %d delivered at once", got);
	CHECK(srn_udp_fault_stats(&b)->rx_delayed == 44, "rx_delayed %llu",
		  (unsigned long long)srn_udp_fault_stats(&b)->rx_delayed);
	/* Now 256 more straight through a (its bound is full) to b: b holds
	 * 256 - 44 = 212 of them and delivers the other 44 at once. */
	for (uint32_t i = 0; i < 256; i++)
		CHECK(send_pkt(&a, &b, i) == 0, "send");
	CHECK(srn_udp_fault_stats(&a)->tx_delayed == SRN_FAULT_MAX_HELD, "tx bound passed");
	got = 0;
	end = srn_now_ns() + 500000000ull;
	while (srn_now_ns() < end && got < 44) {
		int n = srn_udp_recv_batch(&b, &rxb, NULL);
		got += n > 0 ? n : 0;
	}
	CHECK(got == 44, "past the rx bound: %d of 44 delivered at once", got);
	CHECK(srn_udp_fault_stats(&b)->rx_delayed == SRN_FAULT_MAX_HELD, "rx_delayed %llu",
		  (unsigned long long)srn_udp_fault_stats(&b)->rx_delayed);
	CHECK(srn_udp_fault_next_ns(&a) && srn_udp_fault_next_ns(&b), "held packets without deadline");
	srn_udp_close(&a);
	srn_udp_close(&b);
}

/* ---- filters ------------------------------------------------------------- */

static void filter_case(const char *spec, int dir, bool (*chosen)(int))
{
	struct srn_udp a, b;
	char err[256];
	int rc = open_with(&a, "fa", dir == SRN_FAULT_TX ? spec : NULL, err, sizeof(err));
	rc |= open_with(&b, "fb", dir == SRN_FAULT_RX ? spec : NULL, err, sizeof(err));
	CHECK(rc == 0, "%s", err);
	if (rc)
		return;
	static const uint8_t ops[] = { 0x04, 0x11, 0x0a, 0x00, 0x0c };
	static const uint32_t qps[] = { 0x12345, 0x12346, 0x11 };
	for (int i = 0; i < N; i++) {
		pat_opcode[i] = ops[i % 5];
		pat_qpn[i] = qps[(i / 5) % 3];
	}
	static struct obs o;
	run_traffic(&a, &b, 1000, &o);
	struct seen s;
	summarise(&o, &s);
	int want = 0, wrong = 0;
	for (int i = 0; i < 1000; i++) {
		want += chosen(i);
		wrong += s.count[i] != (chosen(i) ? 0 : 1);
	}
	const struct srn_fault_stats *st = srn_udp_fault_stats(dir == SRN_FAULT_TX ? &a : &b);
	uint64_t dropped = dir == SRN_FAULT_TX ? st->tx_dropped : st->rx_dropped;
	CHECK(wrong == 0 && dropped == (uint64_t)want && want > 0,
		  "%s: %d packets with the wrong fate, %llu dropped, %d chosen", spec, wrong,
		  (unsigned long long)dropped, want);
	srn_udp_close(&a);
	srn_udp_close(&b);
}

static bool op_04_11(int i)
{
	return pat_opcode[i] == 0x04 || pat_opcode[i] == 0x11;
}

static bool qp_12345(int i)
{
	return pat_qpn[i] == 0x12345;
}

static bool op_0a_and_qp_11(int i)
{
	return pat_opcode[i] == 0x0a && pat_qpn[i] == 0x11;
}

/* ---- determinism --------------------------------------------------------- */

static void same_seed_same_decisions(void)
{
	struct srn_fault_cfg c1, c2;
	char err[256];
	CHECK(!srn_fault_parse("seed=99,drop=20,dup=20,corrupt=20,reorder=20,delay=20", &c1, err,
						   sizeof(err)), "%s", err);
	c2 = c1;
	struct srn_fault *f1, *f2, *f3;
	CHECK(!srn_fault_create(&c1, &f1) && !srn_fault_create(&c2, &f2), "create");
	c2.seed = 100;
	CHECK(!srn_fault_create(&c2, &f3), "create");
	uint8_t hdr[12] = { 0x04, 0, 0xff, 0xff, 0, 0, 0, 0x11 };
	int differ_seed = 0, differ_dir = 0, fired = 0;
	for (int i = 0; i < 10000; i++) {
		struct srn_fault_decision d1, d2, d3, d4;
		hdr[11] = (uint8_t)i;
		int dir = i & 1;
		CHECK(srn_fault_decide(f1, dir, hdr, sizeof(hdr), &d1), "not eligible");
		srn_fault_decide(f2, dir, hdr, sizeof(hdr), &d2);
		srn_fault_decide(f3, dir, hdr, sizeof(hdr), &d3);
		srn_fault_decide(f3, !dir, hdr, sizeof(hdr), &d4);
		if (memcmp(&d1, &d2, sizeof(d1))) {
			CHECK(0, "decision %d differs with the same seed", i);
			break;
		}
		differ_seed += memcmp(&d1, &d3, sizeof(d1)) != 0;
		differ_dir += memcmp(&d3, &d4, sizeof(d3)) != 0;
		for (int k = 0; k < SRN_FAULT_NKINDS; k++)
			fired += d1.fire[k];
	}
	CHECK(differ_seed > 1000, "another seed changed only %d decisions", differ_seed);
	CHECK(differ_dir > 1000, "TX and RX streams agree on %d decisions", 10000 - differ_dir);
	CHECK(fired > 8000 && fired < 12000, "%d faults fired at 5 x 20 %% over 10000", fired);
	srn_fault_destroy(f1);
	srn_fault_destroy(f2);
	srn_fault_destroy(f3);
}

static void replay(const char *spec, struct obs *o)
{
	struct srn_udp a, b;
	char err[256];
	int rc = open_with(&a, "ra", spec, err, sizeof(err));
	rc |= open_with(&b, "rb", NULL, err, sizeof(err));
	CHECK(rc == 0, "%s", err);
	if (rc)
		return;
	pattern_plain();
	run_traffic(&a, &b, 1000, o);
	srn_udp_close(&a);
	srn_udp_close(&b);
}

static void same_seed_same_traffic(void)
{
	static struct obs o1, o2, o3;
	const char *s1 = "seed=7,tx.drop=10,tx.dup=10,tx.corrupt=10,tx.reorder=10,tx.delay_us=20000";
	replay(s1, &o1);
	replay(s1, &o2);
	replay("seed=8,tx.drop=10,tx.dup=10,tx.corrupt=10,tx.reorder=10,tx.delay_us=20000", &o3);
	bool same = o1.n == o2.n;
	for (int i = 0; same && i < o1.n; i++)
		same = o1.r[i].seq == o2.r[i].seq && o1.r[i].bitdiff == o2.r[i].bitdiff;
	CHECK(same, "seed 7 twice: received sequences differ (%d vs %d datagrams)", o1.n, o2.n);
	bool same3 = o1.n == o3.n;
	for (int i = 0; same3 && i < o1.n; i++)
		same3 = o1.r[i].seq == o3.r[i].seq && o1.r[i].bitdiff == o3.r[i].bitdiff;
	CHECK(!same3, "seeds 7 and 8 gave the same received sequence");
}

/* ---- parser -------------------------------------------------------------- */

/* num / scale percent, rounded down, as the parser must compute it. */
static uint64_t pct_threshold(uint64_t num, uint64_t scale)
{
	return (uint64_t)(((unsigned __int128)num << 53) / (100 * scale));
}

static void parser_valid(void)
{
	struct srn_fault_cfg c;
	char err[256];
	CHECK(!srn_fault_parse("", &c, err, sizeof(err)), "empty: %s", err);
	CHECK(c.seed == 1 && c.dir[0].delay_us == 1000 && c.dir[1].delay_us == 1000 &&
			  !c.dir[0].threshold[SRN_FAULT_DROP] && !c.dir[1].by_opcode && !c.dir[1].nqps,
		  "defaults");
	CHECK(!srn_fault_parse("drop=5", &c, err, sizeof(err)), "%s", err);
	CHECK(c.dir[0].threshold[SRN_FAULT_DROP] == pct_threshold(5, 1) &&
			  c.dir[1].threshold[SRN_FAULT_DROP] == pct_threshold(5, 1),
		  "drop=5 must apply to both directions");
	CHECK(!srn_fault_parse("tx.drop=5,rx.dup=2", &c, err, sizeof(err)), "%s", err);
	CHECK(c.dir[SRN_FAULT_TX].threshold[SRN_FAULT_DROP] == pct_threshold(5, 1) &&
			  !c.dir[SRN_FAULT_RX].threshold[SRN_FAULT_DROP] &&
			  c.dir[SRN_FAULT_RX].threshold[SRN_FAULT_DUP] == pct_threshold(2, 1) &&
			  !c.dir[SRN_FAULT_TX].threshold[SRN_FAULT_DUP],
		  "direction prefixes");
	CHECK(!srn_fault_parse(" drop=0.5 , corrupt=100,reorder=0,, delay=12.25,delay_us=250", &c,
						   err, sizeof(err)), "%s", err);
	CHECK(c.dir[1].threshold[SRN_FAULT_DROP] == SRN_FAULT_ALWAYS / 200, "drop=0.5: %llu",
		  (unsigned long long)c.dir[1].threshold[SRN_FAULT_DROP]);
	CHECK(c.dir[0].threshold[SRN_FAULT_CORRUPT] == SRN_FAULT_ALWAYS, "corrupt=100");
	CHECK(c.dir[0].threshold[SRN_FAULT_REORDER] == 0, "reorder=0");
	CHECK(c.dir[0].threshold[SRN_FAULT_DELAY] == pct_threshold(1225, 100), "delay=12.25");
	CHECK(c.dir[0].delay_us == 250 && c.dir[1].delay_us == 250, "delay_us");
	CHECK(!srn_fault_parse("seed=0x10,opcode=0x04|0x11|10,qp=0x12345", &c, err, sizeof(err)),
		  "%s", err);
	CHECK(c.seed == 16, "seed hex");
	CHECK(c.dir[0].by_opcode && c.dir[0].opcodes[0] == ((1ull << 4) | (1ull << 17) | (1ull << 10)),
		  "opcode set %llx", (unsigned long long)c.dir[0].opcodes[0]);
	CHECK(c.dir[1].nqps == 1 && c.dir[1].qps[0] == 0x12345, "qp");
	CHECK(!srn_fault_parse("seed=010,rx.opcode=0xff,tx.qp=1|2", &c, err, sizeof(err)), "%s", err);
	CHECK(c.seed == 10, "seed=010 is decimal");
	CHECK(c.dir[1].by_opcode && c.dir[1].opcodes[3] == 1ull << 63 && !c.dir[0].by_opcode,
		  "rx.opcode");
	CHECK(c.dir[0].nqps == 2 && c.dir[1].nqps == 0, "tx.qp");
}

static void parser_invalid(void)
{
	static const struct {
		const char *spec, *msg;
	} bad[] = {
		{ "drop", "expected key=value" },
		{ "drop=101", "percentage from 0 to 100" },
		{ "drop=-1", "percentage" },
		{ "drop=abc", "percentage" },
		{ "drop=5.", "percentage" },
		{ "drop=.5", "percentage" },
		{ "drop=5%", "percentage" },
		{ "drop=0.0000001", "percentage" },
		{ "drop=", "percentage" },
		{ "drpo=5", "unknown key" },
		{ "tx.seed=3", "both directions" },
		{ "seed=x", "whole number" },
		{ "seed=99999999999999999999", "whole number" },
		{ "delay_us=10000001", "microseconds" },
		{ "opcode=0x100", "opcodes 0..0xff" },
		{ "opcode=0x04|", "opcodes" },
		{ "opcode=", "opcodes" },
		{ "qp=0x1000000", "QP numbers" },
		{ "qp=1|2|3|4|5|6|7|8|9|10|11|12|13|14|15|16|17", "too many" },
		{ "tx.=5", "unknown key" },
		{ "up.drop=5", "unknown key" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct srn_fault_cfg c;
		char err[256] = "";
		char spec[128];
		snprintf(spec, sizeof(spec), "seed=3,%s,dup=1", bad[i].spec);
		int rc = srn_fault_parse(spec, &c, err, sizeof(err));
		CHECK(rc == -EINVAL, "\"%s\" accepted", spec);
		CHECK(strstr(err, SRN_FAULT_ENV) && strstr(err, bad[i].spec) && strstr(err, bad[i].msg),
			  "\"%s\": message \"%s\" lacks the item or \"%s\"", spec, err, bad[i].msg);
	}
	/* Through srn_udp_open: it fails, names the device and the item, and
	 * leaves no socket open. */
	struct srn_udp u;
	char err[256] = "";
	int rc = open_with(&u, "badfaults", "drop=5,dup=lots", err, sizeof(err));
	CHECK(rc == -EINVAL && u.fd == -1, "open with a bad SOFTRNIC_FAULTS: rc %d", rc);
	CHECK(strstr(err, "badfaults") && strstr(err, "dup=lots"), "open message: %s", err);
	rc = open_with(&u, "nofaults", NULL, err, sizeof(err));
	CHECK(rc == 0 && !u.hooked && !srn_udp_fault_stats(&u) && !srn_udp_fault_next_ns(&u) &&
			  srn_udp_fault_flush(&u, srn_now_ns()) == 0,
		  "without SOFTRNIC_FAULTS: no hooks");
	if (!rc)
		srn_udp_close(&u);
}

int main(void)
{
	unsetenv("SOFTRNIC_PCAP");
	if (srn_rx_batch_init(&rxb)) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	parser_valid();
	parser_invalid();
	same_seed_same_decisions();
	for (int dir = 0; dir < SRN_FAULT_NDIRS; dir++)
		for (int kind = 0; kind < SRN_FAULT_NKINDS; kind++) {
			one_fault(dir, kind, "100");
			one_fault(dir, kind, "30");
		}
	delay_needs_flush();
	held_bound();
	filter_case("tx.drop=100,tx.opcode=0x04|0x11", SRN_FAULT_TX, op_04_11);
	filter_case("rx.drop=100,opcode=0x04|0x11", SRN_FAULT_RX, op_04_11);
	filter_case("drop=100,qp=0x12345", SRN_FAULT_TX, qp_12345);
	filter_case("drop=100,qp=0x12345", SRN_FAULT_RX, qp_12345);
	filter_case("drop=100,opcode=0x0a,qp=0x11", SRN_FAULT_RX, op_0a_and_qp_11);
	same_seed_same_traffic();
	srn_rx_batch_free(&rxb);
	if (srn_check_failures) {
		fprintf(stderr, "%d check(s) failed\n", srn_check_failures);
		return 1;
	}
	printf("all fault injector checks passed\n");
	return 0;
}
