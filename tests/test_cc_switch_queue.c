/*
 * test_cc_switch_queue.c - the emulated switch's egress queue
 * (tools/switch_queue.c), with simulated time:
 *  - RED: probability 0 up to Kmin, Pmax * linear up to Kmax, 1 above;
 *    the measured marking rate at a held queue depth matches it, for
 *    marks decided as frames join the queue and as they leave it;
 *  - only ECN-capable frames are marked (CE set, IPv4 checksum valid);
 *  - tail drop exactly at the buffer;
 *  - departures at the link rate (serialisation), whatever arrives;
 *  - XOFF/XON hysteresis and the pause time it accumulates.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "switch_queue.h"
#include "wire/ecn.h"

#define L3 14

static uint16_t ip_csum(const uint8_t *h)
{
	uint32_t s = 0;

	for (int i = 0; i < 20; i += 2)
		s += (uint32_t)(h[i] << 8 | h[i + 1]);
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* An Ethernet + IPv4 frame of len bytes with the given ECN bits. */
static struct srn_swq_frame frame(uint32_t len, enum srn_ecn ecn)
{
	struct srn_swq_frame f = { .len = len, .wire_len = len, .l3_off = L3, .flow = -1 };
	uint8_t *ip;
	uint16_t c;

	f.data = calloc(1, len);
	ip = f.data + L3;
	f.data[12] = 0x08;
	ip[0] = 0x45;
	ip[1] = (uint8_t)(26 << 2 | ecn);
	ip[2] = (uint8_t)((len - L3) >> 8);
	ip[3] = (uint8_t)(len - L3);
	ip[8] = 64;
	ip[9] = 17;
	c = ip_csum(ip);
	ip[10] = (uint8_t)(c >> 8);
	ip[11] = (uint8_t)c;
	return f;
}

static void test_red_curve(void)
{
	struct srn_swq_cfg c = { .ecn = true, .kmin = 10000, .kmax = 50000, .pmax = 0.2 };

	CHECK(srn_swq_mark_prob(&c, 0) == 0 && srn_swq_mark_prob(&c, 10000) == 0, "below Kmin");
	CHECK(srn_swq_mark_prob(&c, 30000) > 0.0999 && srn_swq_mark_prob(&c, 30000) < 0.1001,
	      "halfway: Pmax/2");
	CHECK(srn_swq_mark_prob(&c, 50000) == 1 && srn_swq_mark_prob(&c, 1 << 20) == 1,
	      "at and above Kmax");
	c.ecn = false;
	CHECK(srn_swq_mark_prob(&c, 1 << 20) == 0, "off");
}

/* The same with marks decided at dequeue: none as frames join; as each
 * leaves the head of a queue of 31 000 B (itself included), p = 0.105. */
static void test_marking_at_dequeue(void)
{
	struct srn_swq_cfg c = { .buffer = 1 << 20, .ecn = true, .mark_dequeue = true,
				 .kmin = 10000, .kmax = 50000, .pmax = 0.2, .rate_bps = 0 };
	struct srn_swq q;
	struct srn_swq_frame f, out;
	int marked = 0, n = 20000;

	srn_swq_init(&q, &c, 42);
	for (int i = 0; i < 30; i++) {
		f = frame(1000, SRN_ECN_ECT0);
		CHECK(srn_swq_enqueue(&q, &f, 0) == SRN_SWQ_QUEUED, "marked as it joined");
	}
	for (int i = 0; i < n; i++) {
		f = frame(1000, SRN_ECN_ECT0);
		CHECK(srn_swq_enqueue(&q, &f, 0) == SRN_SWQ_QUEUED, "marked as it joined");
		CHECK(srn_swq_dequeue(&q, 0, &out), "dequeue");
		bool ce = srn_ecn_of_ipv4(out.data + L3) == SRN_ECN_CE;
		CHECK(ce == out.marked, "the flag says what the header says");
		CHECK(ip_csum(out.data + L3) == 0, "checksum after marking");
		marked += out.marked;
		free(out.data);
	}
	/* sd ~ 43, allow 5 sd. */
	CHECK(marked > 2100 - 217 && marked < 2100 + 217, "marked %d of %d at p = 0.105", marked, n);
	CHECK(q.marked == (uint64_t)marked, "counter");
	srn_swq_fini(&q);
}

/* Hold the queue at a depth and count marks over many frames. */
static void test_marking_rate(void)
{
	struct srn_swq_cfg c = { .buffer = 1 << 20, .ecn = true, .kmin = 10000, .kmax = 50000,
				 .pmax = 0.2, .rate_bps = 0 };
	struct srn_swq q;
	struct srn_swq_frame f, out;
	int marked = 0, n = 20000;

	srn_swq_init(&q, &c, 42);
	/* 30 frames of 1000 B: depth 30000 before each further frame. */
	for (int i = 0; i < 30; i++) {
		f = frame(1000, SRN_ECN_NOT_ECT);
		srn_swq_enqueue(&q, &f, 0);
	}
	for (int i = 0; i < n; i++) {
		f = frame(1000, SRN_ECN_ECT0);
		enum srn_swq_verdict v = srn_swq_enqueue(&q, &f, 0);
		marked += v == SRN_SWQ_MARKED;
		/* Take the oldest out: the depth stays 30000. */
		CHECK(srn_swq_dequeue(&q, 0, &out), "dequeue");
		if (out.data[L3 + 1] & 3) {
			CHECK(ip_csum(out.data + L3) == 0, "checksum after marking");
			if (srn_ecn_of_ipv4(out.data + L3) == SRN_ECN_CE)
				CHECK((out.data[L3 + 1] >> 2) == 26, "DSCP kept");
		}
		free(out.data);
	}
	/* p = 0.1; 20000 trials: sd ~ 42, allow 5 sd. */
	CHECK(marked > 2000 - 212 && marked < 2000 + 212, "marked %d of %d at p = 0.1", marked, n);
	CHECK(q.marked == (uint64_t)marked, "counter");
	srn_swq_fini(&q);

	/* Not-ECT frames above Kmax: counted, never marked. */
	srn_swq_init(&q, &c, 1);
	for (int i = 0; i < 100; i++) {
		f = frame(1000, i < 60 ? SRN_ECN_ECT0 : SRN_ECN_NOT_ECT);
		srn_swq_enqueue(&q, &f, 0);
	}
	CHECK(q.not_ect == 40, "not_ect %llu", (unsigned long long)q.not_ect);
	while (srn_swq_dequeue(&q, 0, &out)) {
		CHECK(ip_csum(out.data + L3) == 0, "checksums valid");
		free(out.data);
	}
	srn_swq_fini(&q);
}

static void test_tail_drop_and_rate(void)
{
	struct srn_swq_cfg c = { .buffer = 10000, .rate_bps = 80000000 };	/* 10 MB/s */
	struct srn_swq q;
	struct srn_swq_frame f, out;
	uint64_t t = 0, bytes = 0;

	srn_swq_init(&q, &c, 7);
	for (int i = 0; i < 12; i++) {
		f = frame(1000, SRN_ECN_ECT0);
		if (srn_swq_enqueue(&q, &f, 0) == SRN_SWQ_DROPPED)
			free(f.data);
	}
	CHECK(q.bytes == 10000 && q.dropped == 2, "10 fit, 2 dropped: %llu",
	      (unsigned long long)q.dropped);
	/* 1000 B at 10 MB/s: 100 us apart. */
	CHECK(srn_swq_dequeue(&q, 0, &out), "first goes at once");
	free(out.data);
	CHECK(!srn_swq_dequeue(&q, 99999, &out), "not before 100 us");
	CHECK(srn_swq_next_ns(&q) == 100000, "next at 100 us");
	srn_swq_fini(&q);

	/* Keep it busy for 1 s of simulated time, waking late by up to 50 us:
	 * 10 MB leave, within a frame. */
	srn_swq_init(&q, &c, 7);
	for (int i = 0; i < 1000000 && t < 1000000000ull; i++) {
		while (q.bytes + 1000 <= c.buffer) {
			f = frame(1000, SRN_ECN_ECT0);
			srn_swq_enqueue(&q, &f, t);
		}
		if (srn_swq_dequeue(&q, t, &out)) {
			bytes += out.wire_len;
			free(out.data);
			continue;
		}
		t = srn_swq_next_ns(&q) + (uint64_t)(i % 50) * 1000;
	}
	CHECK(bytes >= 9999000 && bytes <= 10001000, "rate held: %llu B in 1 s",
	      (unsigned long long)bytes);
	srn_swq_fini(&q);
}

static void test_pfc(void)
{
	struct srn_swq_cfg c = { .buffer = 1 << 20, .pfc = true, .xoff = 5000, .xon = 2000,
				 .rate_bps = 8000000 };
	struct srn_swq q;
	struct srn_swq_frame f, out;
	int ev = 0;

	srn_swq_init(&q, &c, 3);
	for (int i = 0; i < 5; i++) {
		f = frame(1000, SRN_ECN_ECT0);
		srn_swq_enqueue(&q, &f, 0);
		ev = srn_swq_pfc_update(&q, 0);
		CHECK(ev == (i == 4 ? 1 : 0), "XOFF exactly at 5000 B (frame %d: %d)", i, ev);
	}
	CHECK(q.paused && q.pauses == 1, "paused");
	/* 1000 B at 1 MB/s = 1 ms each; XON at 2000 B: after 3 departures. */
	uint64_t t = 0;
	for (int i = 0; i < 3; i++) {
		t = srn_swq_next_ns(&q);
		CHECK(srn_swq_dequeue(&q, t, &out), "departure %d", i);
		free(out.data);
		ev = srn_swq_pfc_update(&q, t);
		CHECK(ev == (i == 2 ? -1 : 0), "XON at 2000 B (departure %d: %d)", i, ev);
	}
	CHECK(!q.paused && srn_swq_paused_ns(&q, t + 5) == t, "paused for %llu ns",
	      (unsigned long long)srn_swq_paused_ns(&q, t));
	srn_swq_fini(&q);
}

int main(void)
{
	test_red_curve();
	test_marking_rate();
	test_marking_at_dequeue();
	test_tail_drop_and_rate();
	test_pfc();
	return srn_check_result();
}
