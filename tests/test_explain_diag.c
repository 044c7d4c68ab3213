/* test_explain_diag - the diagnoses of `softrnic explain` on synthetic
 * counter snapshots and log lines (tools/explain_diag.c): each rule fires
 * on a storm and stays quiet on a healthy run just below its threshold.
 * The PFC pause counters do not exist in the library yet: this is where
 * their diagnosis is tested, under mlx5's names (docs/congestion.md). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "explain_diag.h"

static int fails;

#define MAXC 16

struct snap {
	char names[MAXC][SRN_XD_NAME_LEN];
	uint64_t base[MAXC], now[MAXC];
	uint32_t n;
};

static void put(struct snap *s, const char *name, uint64_t base, uint64_t now)
{
	snprintf(s->names[s->n], SRN_XD_NAME_LEN, "%s", name);
	s->base[s->n] = base;
	s->now[s->n++] = now;
}

static struct srn_xd_dev dev_of(const struct snap *s, double secs, const struct srn_xd_qp *q,
				size_t nq)
{
	return (struct srn_xd_dev){ .who = "pid 42 (prog) softrnic0",
				    .cnt = { s->n, s->names, s->now, s->base },
				    .secs = secs, .qps = q, .nqps = nq };
}

/* Check that a diagnosis returned want and printed each needle (the
 * output is passed by address: RUN fills it in the same call). */
static void check(const char *what, int got, int want, char **outp, ...)
{
	char *out = *outp;
	va_list ap;
	va_start(ap, outp);
	bool ok = got == want;
	for (const char *needle; (needle = va_arg(ap, const char *));)
		if (!strstr(out, needle)) {
			printf("  missing '%s'\n", needle);
			ok = false;
		}
	va_end(ap);
	printf("%s: %s\n", ok ? "ok" : "FAIL", what);
	if (!ok) {
		printf("  returned %d, want %d; output:\n%s", got, want, out);
		fails++;
	}
	free(out);
}

#define RUN(call, outp)                                                                       \
	({                                                                                     \
		size_t len_;                                                                   \
		FILE *f_ = open_memstream(outp, &len_);                                        \
		int r_ = call;                                                                 \
		fclose(f_);                                                                    \
		r_;                                                                            \
	})

static void retransmit(void)
{
	char *out;
	struct snap s = { .n = 0 };
	put(&s, "sent_pkts", 1000, 11000);
	put(&s, "rcvd_pkts", 1000, 9000);
	put(&s, "retransmits", 0, 9);
	struct srn_xd_dev d = dev_of(&s, 2, NULL, 0);
	check("9 restarts are no storm", RUN(srn_xd_retransmit_storm(f_, &d), &out), 0, &out, NULL);

	s.now[2] = 90;   /* 90 restarts in 10000 packets: 0.9 % */
	check("0.9 % restarts are no storm", RUN(srn_xd_retransmit_storm(f_, &d), &out), 0, &out,
	      NULL);

	s.now[2] = 300;  /* 3 % */
	put(&s, "local_ack_timeout_err", 0, 20);
	put(&s, "packet_seq_err", 0, 280);
	put(&s, "fault_tx_dropped", 5, 305);
	struct srn_xd_qp q[2] = { { .qpn = 0x11, .peer = "QP 0x000022 at 127.0.0.2",
				    .retransmits = 10, .sent = 100 },
				  { .qpn = 0x12, .peer = "QP 0x000023 at 127.0.0.2",
				    .retransmits = 290, .sent = 9900 } };
	d = dev_of(&s, 2, q, 2);
	check("3 % restarts after injected drops", RUN(srn_xd_retransmit_storm(f_, &d), &out), 1,
	      &out, "diagnosis: retransmission storm: pid 42 (prog) softrnic0 in the last 2.0 s",
	      "300 go-back-N restarts for 10000 packets sent (30.0 per 1000)",
	      "fault injector (SOFTRNIC_FAULTS)", "300 packets", "after a NAK-sequence",
	      "qp 0x000012 to QP 0x000023 at 127.0.0.2: 290 restarts", "what to do", NULL);

	/* The base matters: the same totals with the storm before the window. */
	for (uint32_t i = 0; i < s.n; i++)
		s.base[i] = s.now[i] - (i < 2 ? 5000 : 0);
	d = dev_of(&s, 2, NULL, 0);
	check("a storm before the window is over", RUN(srn_xd_retransmit_storm(f_, &d), &out), 0,
	      &out, NULL);

	struct snap r = { .n = 0 };
	put(&r, "sent_pkts", 0, 4000);
	put(&r, "rcvd_pkts", 0, 4000);
	put(&r, "duplicate_request", 0, 300);
	put(&r, "out_of_sequence", 0, 100);
	d = dev_of(&r, 0, NULL, 0);
	d.lifetime = true;
	check("responder side: 10 % duplicates", RUN(srn_xd_retransmit_storm(f_, &d), &out), 1,
	      &out, "over its life", "300 duplicate and 100 out-of-sequence packets of 4000", NULL);
}

static void pause_storms(void)
{
	char *out;
	struct snap s = { .n = 0 };
	put(&s, "sent_pkts", 0, 100000);
	struct srn_xd_dev d = dev_of(&s, 2, NULL, 0);
	check("no pause counters: nothing", RUN(srn_xd_pause_storm(f_, &d), &out), 0, &out, NULL);

	put(&s, "rx_prio3_pause", 100, 120);
	put(&s, "rx_prio3_pause_duration", 5000, 15000);   /* 10 ms of 2 s */
	put(&s, "tx_prio3_pause", 0, 0);
	put(&s, "rx_prio3_pause_transition", 0, 99999);    /* not a pause count */
	d = dev_of(&s, 2, NULL, 0);
	check("20 pauses, 0.5 % of the time: healthy", RUN(srn_xd_pause_storm(f_, &d), &out), 0,
	      &out, NULL);

	s.now[1] = 5100;
	s.now[2] = 5000 + 500000;   /* 500 ms of 2 s */
	check("paused 25 % of the time", RUN(srn_xd_pause_storm(f_, &d), &out), 1, &out,
	      "diagnosis: PFC pause storm: pid 42 (prog) softrnic0 in the last 2.0 s",
	      "received 5000 pause frames (rx_prio3_pause), paused 500.0 ms = 25 % of the time",
	      "head-of-line blocking", "ECN/DCQCN", NULL);

	struct snap g = { .n = 0 };
	put(&g, "rx_pause_ctrl_phy", 0, 150);
	d = dev_of(&g, 2, NULL, 0);
	check("150 frames in 2 s, no duration: healthy", RUN(srn_xd_pause_storm(f_, &d), &out), 0,
	      &out, NULL);
	g.now[0] = 1000;
	check("500 frames a second, no duration", RUN(srn_xd_pause_storm(f_, &d), &out), 1, &out,
	      "received 1000 pause frames (rx_pause_ctrl_phy)", NULL);

	struct snap t = { .n = 0 };
	put(&t, "tx_pause", 0, 4000);
	put(&t, "rx_pause_duration", 0, 0);
	d = dev_of(&t, 0, NULL, 0);
	d.lifetime = true;
	check("this host sends pauses, window unknown", RUN(srn_xd_pause_storm(f_, &d), &out), 1,
	      &out, "sent 4000 pause frames (tx_pause)", "receive side cannot keep up", NULL);
}

static void keys(void)
{
	char *out;
	struct srn_xd_key_err e[5];
	memset(e, 0, sizeof(e));
	bool ok = srn_xd_parse_key_err(
		"REM_ACCESS_ERR: RDMA_WRITE wr_id 0x0 PSN 0x00a1b2 rkey 0x1234 va 0x7f0000001000 "
		"len 4096 to QP 0x000099 at 127.0.0.9: the responder answered PSN 0x00a1b2 with "
		"NAK remote access error", &e[0]);
	ok = ok && !e[0].responder && e[0].rkey == 0x1234 && e[0].va == 0x7f0000001000ull &&
	     e[0].len == 4096 && !strcmp(e[0].peer_addr, "127.0.0.9");
	ok = ok && srn_xd_parse_key_err(
		"NAK remote access error for RC_RDMA_WRITE_ONLY PSN 0x00a1b2: RDMA WRITE rkey "
		"0x1234 va 0x7f0000001000 len 4096: stale key (region re-registered or key byte "
		"mismatch)", &e[4]);
	ok = ok && e[4].responder && e[4].rkey == 0x1234 && !strncmp(e[4].why, "stale key", 9);
	ok = ok && !srn_xd_parse_key_err("RETRY_EXC_ERR: SEND wr_id 0x1 to QP 0x2 at x: y", &e[3]);
	ok = ok && !srn_xd_parse_key_err("REM_ACCESS_ERR: RDMA_WRITE wr_id 0x0 rkey zz", &e[3]);
	printf("%s: parse the requester's and the responder's lines\n", ok ? "ok" : "FAIL");
	fails += !ok;

	for (int i = 0; i < 3; i++) {
		e[i] = e[0];
		e[i].pid = 10;
		e[i].who = "pid 10 (client) softrnic0";
		e[i].qpn = 0x20 + (uint32_t)(i > 0);
		e[i].when = 1000000000ull * (uint64_t)(i + 1);
	}
	e[3] = e[0];
	e[3].pid = 11;
	e[3].who = "pid 11 (other) softrnic0";
	e[3].rkey = 0x9999;
	e[3].qpn = 0x30;
	e[4].pid = 20;
	e[4].who = "pid 20 (server) softrnic0";
	e[4].self_addr = "127.0.0.9";
	struct srn_xd_region r[3] = {
		{ .pid = 20, .who = "pid 20 (server) softrnic0", .addr = "127.0.0.9",
		  .rkey = 0x1234, .access = 0xf, .va = 0x7f0000000000ull, .len = 8u << 20 },
		{ .pid = 20, .who = "pid 20 (server) softrnic0", .addr = "127.0.0.9",
		  .rkey = 0x5678, .access = 0xf, .va = 0x7f1000000000ull, .len = 8u << 20,
		  .live = true },
		{ .pid = 20, .who = "pid 20 (server) softrnic0", .addr = "127.0.0.9",
		  .rkey = 0x9999, .access = 0x1, .va = 0x7f2000000000ull, .len = 4096,
		  .live = true },
	};
	int got = RUN(srn_xd_stale_rkeys(f_, e, 5, r, 3), &out);
	check("a stale key used on two QPs; one refused live key is no pattern", got, 1, &out,
	      "diagnosis: stale rkey: pid 10 (client) softrnic0 keeps using rkey 0x1234 after "
	      "pid 20 (server) softrnic0 deregistered it",
	      "in its log: 3 RDMA operations failed with REM_ACCESS_ERR on 2 QPs (0x000020, 0x000021) over 2.0 s",
	      "connected again and used the same key",
	      "rkey 0x1234 was the region va 0x7f0000000000 len 8 MiB of pid 20",
	      "now offers rkey 0x5678 va 0x7f1000000000 len 8 MiB",
	      "the responder refused it 1 time: stale key",
	      "softrnic res --pid 20 --type mr", NULL);

	/* The live key refused twice for its range: repeated, not stale. */
	struct srn_xd_key_err l[3] = { e[3], e[3], e[4] };
	l[1].qpn = 0x31;
	l[2].rkey = 0x9999;
	snprintf(l[2].why, sizeof(l[2].why), "address range outside the region");
	got = RUN(srn_xd_stale_rkeys(f_, l, 3, r, 3), &out);
	check("a live key refused twice for its range", got, 1, &out,
	      "diagnosis: repeated remote access errors: pid 11 (other) softrnic0 used rkey 0x9999 "
	      "2 times on 2 QPs and was refused each time: address range outside the region",
	      "the key is not stale", NULL);

	got = RUN(srn_xd_stale_rkeys(f_, e, 3, NULL, 0), &out);
	check("a key nobody here registered", got, 1, &out,
	      "diagnosis: repeated remote access errors: pid 10 (client) softrnic0 used rkey "
	      "0x1234, which no softrnic process on this host has registered at that address",
	      NULL);
}

int main(void)
{
	retransmit();
	pause_storms();
	keys();
	return fails ? 1 : 0;
}
