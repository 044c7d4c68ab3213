/*
 * test_cc_pacer_np.c - the per-QP token bucket (transport/pacer.c) and
 * the notification point's CNP moderation (transport/cnp_np.c).
 *  - pacer: over a long run, bytes sent / time == the rate (within one
 *    packet), whatever the packet sizes; a burst is bounded by the
 *    bucket; a rate change takes effect at once; rate 0 never waits;
 *  - NP: every CE packet counted, one CNP per min_time_between_cnps per
 *    QP, QPs independent, np disabled sends none.
 * Pure: time is simulated.
 */
#include <inttypes.h>
#include <stdio.h>

#include "check.h"
#include "transport/cnp_np.h"
#include "transport/pacer.h"


/* Send greedily for dur_ns; return bytes sent.  Time jumps to each
 * moment the pacer allows. */
static uint64_t greedy(struct srn_pacer *p, uint64_t *t, uint64_t dur_ns, uint32_t pkt,
		       uint64_t *seed)
{
	uint64_t end = *t + dur_ns, sent = 0;

	for (int i = 0; i < 10000000 && *t < end; i++) {
		uint64_t w = srn_pacer_wait_ns(p, *t);
		uint32_t len = pkt;

		if (w) {
			*t += w;
			continue;
		}
		if (seed) {
			*seed ^= *seed << 13, *seed ^= *seed >> 7, *seed ^= *seed << 17;
			len = 64 + (uint32_t)(*seed % 4033);
		}
		srn_pacer_consume(p, len, *t);
		sent += len;
	}
	return sent;
}

static void test_pacer(void)
{
	struct srn_pacer p;
	uint64_t t = 1000, seed = 12345;
	const uint64_t rate = 800 * 1000000ull;	/* 800 Mb/s = 100 MB/s */

	srn_pacer_init(&p, rate, 16384, t);
	/* The first 16 KiB go at once (the bucket), then the rate. */
	uint64_t burst = 0;
	while (srn_pacer_wait_ns(&p, t) == 0 && burst < 1 << 20) {
		srn_pacer_consume(&p, 1024, t);
		burst += 1024;
	}
	CHECK(burst == 16384, "burst is the bucket: %" PRIu64, burst);
	/* 100 ms at 100 MB/s = 10 MB, within a packet and the bucket. */
	uint64_t got = greedy(&p, &t, 100000000, 1500, NULL);
	CHECK(got >= 10000000 - 1500 && got <= 10000000 + 1500, "1500 B packets: %" PRIu64, got);
	got = greedy(&p, &t, 100000000, 0, &seed);
	CHECK(got >= 10000000 - 4096 && got <= 10000000 + 4096, "mixed sizes: %" PRIu64, got);

	/* A packet larger than the bucket still goes, and is paid for. */
	srn_pacer_init(&p, rate, 1024, t);
	CHECK(srn_pacer_wait_ns(&p, t) == 0, "full bucket sends");
	srn_pacer_consume(&p, 65536, t);
	uint64_t w = srn_pacer_wait_ns(&p, t);
	/* debt 65536 - 1024 bytes at 100 MB/s = 645.12 us */
	CHECK(w >= 645000 && w <= 645200, "debt paid: %" PRIu64 " ns", w);

	/* A slower rate from now on. */
	srn_pacer_set_rate(&p, rate / 8, t);
	w = srn_pacer_wait_ns(&p, t);
	CHECK(w >= 8 * 645000 && w <= 8 * 645200, "new rate applies to the debt: %" PRIu64, w);

	/* Low rates do not lose credit to rounding: 1 Mb/s, 1-byte packets. */
	srn_pacer_init(&p, 1000000, 1, t);
	got = greedy(&p, &t, 1000000000, 1, NULL);
	CHECK(got >= 124999 && got <= 125001, "1 Mb/s for 1 s: %" PRIu64, got);

	/* Idle time saves at most the bucket. */
	srn_pacer_init(&p, rate, 8192, t);
	srn_pacer_consume(&p, 8192, t);
	t += 10ull * 1000000000;
	burst = 0;
	while (srn_pacer_wait_ns(&p, t) == 0 && burst < 1 << 20) {
		srn_pacer_consume(&p, 512, t);
		burst += 512;
	}
	CHECK(burst == 8192, "idle fills only the bucket: %" PRIu64, burst);

	/* Unpaced. */
	srn_pacer_init(&p, 0, 0, t);
	for (int i = 0; i < 1000; i++) {
		CHECK(srn_pacer_wait_ns(&p, t) == 0, "rate 0 never waits");
		srn_pacer_consume(&p, 65536, t);
	}
	/* A clock going backwards changes nothing. */
	srn_pacer_init(&p, rate, 1024, t);
	srn_pacer_consume(&p, 4096, t);
	w = srn_pacer_wait_ns(&p, t);
	CHECK(srn_pacer_wait_ns(&p, t - 1000) == w, "stale time");
}

static void test_np(void)
{
	struct srn_dcqcn_cfg c;
	struct srn_cnp_np a, b;
	int sent = 0;

	srn_dcqcn_cfg_default(&c);
	srn_cnp_np_init(&a);
	srn_cnp_np_init(&b);
	/* A CE packet every 100 ns for 40 us: CNPs at 0, 4, ..., 36 us. */
	for (uint64_t t = 0; t < 40000; t += 100)
		sent += srn_cnp_np_marked(&a, &c, 5000000 + t);
	CHECK(a.ecn_marked == 400, "every mark counted: %" PRIu64, a.ecn_marked);
	CHECK(sent == 10 && a.cnp_sent == 10, "one CNP per 4 us: %d", sent);
	/* Another QP is not held back by the first. */
	CHECK(srn_cnp_np_marked(&b, &c, 5000000 + 39900), "QPs are independent");
	/* The very first mark at time 0 sends. */
	srn_cnp_np_init(&b);
	CHECK(srn_cnp_np_marked(&b, &c, 0), "first mark at t = 0");
	/* Interval 0: one CNP per mark. */
	c.min_time_between_cnps = 0;
	srn_cnp_np_init(&b);
	for (int i = 0; i < 5; i++)
		CHECK(srn_cnp_np_marked(&b, &c, 7), "interval 0");
	/* Disabled: marks counted, nothing sent. */
	c.np_enable = false;
	srn_cnp_np_init(&b);
	CHECK(!srn_cnp_np_marked(&b, &c, 0), "np disabled");
	CHECK(b.ecn_marked == 1 && b.cnp_sent == 0, "counted, not sent");
}

int main(void)
{
	test_pacer();
	test_np();
	return srn_check_result();
}
