/* Tests for the pcap trace (link/pcap.c and its hooks in link/udp.c), on
 * sockets on 127.0.0.1 and ::1:
 * - %p / %% expansion of the file name;
 * - the synthesised IPv4 and IPv6+UDP headers, byte for byte against the
 *   generated vectors G01 and G18 of tests/data/roce-frames.tsv;
 * - a two-way exchange of real RoCE packets, IPv4 and IPv6, two sockets
 *   sharing one file: every datagram appears once as sent and once as
 *   received, every frame decodes, its ICRC checks and its IPv4 header
 *   checksum is right;
 * - the trace follows the fault injector: after TX faults (drops absent,
 *   duplicates twice, corrupted frames fail the ICRC), before RX ones;
 * - a received packet whose ICRC was made with a foreign IPv4 ID is
 *   written with that ID;
 * - records are buffered until 100 ms old, next_ns says when, flush
 *   writes them;
 * - SOFTRNIC_PCAP_MAX_MB bounds the file, which stays readable;
 * - a bad file name or size fails srn_udp_open with a clear message. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pcap_read.h"
#include "link/pcap.h"
#include "link/udp.h"
#include "wire/icrc.h"
#include "check.h"
#include "diag/clock.h"

static struct srn_rx_batch rxb;
static char dir[64];

static void unhex(const char *h, uint8_t *out)
{
	for (size_t i = 0; h[2 * i]; i++) {
		unsigned v;
		sscanf(h + 2 * i, "%2x", &v);
		out[i] = (uint8_t)v;
	}
}

/* Open on 127.0.0.1 or ::1 with the given environment (NULL: unset). */
static int open_env(struct srn_udp *u, const char *name, bool v6, const char *pcap,
					const char *faults, const char *max_mb, char *err, size_t errlen)
{
	struct srn_dev_cfg c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "%s", name);
	if (v6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&c.addr;
		c.family = s6->sin6_family = AF_INET6;
		s6->sin6_addr = in6addr_loopback;
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&c.addr;
		c.family = s4->sin_family = AF_INET;
		s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	}
	const char *names[3] = { SRN_PCAP_ENV, SRN_FAULT_ENV, SRN_PCAP_MAX_ENV };
	const char *vals[3] = { pcap, faults, max_mb };
	for (int i = 0; i < 3; i++) {
		if (vals[i])
			setenv(names[i], vals[i], 1);
		else
			unsetenv(names[i]);
	}
	int rc = srn_udp_open(u, &c, err, errlen);
	for (int i = 0; i < 3; i++)
		unsetenv(names[i]);
	return rc;
}

static void meta_of(struct srn_ip_meta *m, const struct srn_udp *from, const struct srn_udp *to,
					uint16_t id)
{
	memset(m, 0, sizeof(*m));
	m->family = from->family;
	if (from->family == AF_INET) {
		memcpy(m->src, &((const struct sockaddr_in *)&from->local)->sin_addr, 4);
		memcpy(m->dst, &((const struct sockaddr_in *)&to->local)->sin_addr, 4);
		m->ipv4_frag = SRN_IPV4_DF;
		m->ipv4_id = id;
	} else {
		memcpy(m->src, &((const struct sockaddr_in6 *)&from->local)->sin6_addr, 16);
		memcpy(m->dst, &((const struct sockaddr_in6 *)&to->local)->sin6_addr, 16);
	}
	m->sport = from->port;
	m->dport = to->port;
}

/* An RC SEND_ONLY with a correct ICRC computed for IPv4 ID id. */
static int send_roce(struct srn_udp *from, const struct srn_udp *to, uint32_t psn,
					 size_t paylen, uint16_t id)
{
	static uint8_t pay[4096];
	uint8_t bth[12] = { 0x04, 0, 0xff, 0xff, 0, 0, 0, 0x11, 0x80 };
	uint8_t tail[8] = { 0 };
	size_t pad = (0u - paylen) & 3;
	bth[1] = (uint8_t)(pad << 4);
	bth[9] = (uint8_t)(psn >> 16);
	bth[10] = (uint8_t)(psn >> 8);
	bth[11] = (uint8_t)psn;
	for (size_t i = 0; i < paylen; i++)
		pay[i] = (uint8_t)(psn + i);
	struct iovec iov[3] = { { bth, 12 }, { pay, paylen }, { tail, pad } };
	struct srn_ip_meta m;
	meta_of(&m, from, to, id);
	srn_icrc_put(tail + pad, srn_icrc_calc(&m, iov, 3));
	iov[2].iov_len = pad + 4;
	return srn_udp_sendv(from, (const struct sockaddr *)&to->local, to->local_len, iov, 3);
}

/* Receive until u's socket has taken want datagrams since it was opened
 * (*delivered: those delivered so far, kept by the caller, plus those its
 * RX fault injector dropped after the trace recorded them), or 10 s pass;
 * returns the datagrams delivered by this call. Waiting for a count, not
 * for a quiet spell: on a loaded machine this thread or the loopback
 * softirq can stall longer than any quiet spell, and datagrams still in
 * flight were left behind (the RX trace once missed 11 of 460). */
static int recv_until(struct srn_udp *u, uint64_t *delivered, uint64_t want)
{
	const struct srn_fault_stats *st = srn_udp_fault_stats(u);
	uint64_t start = *delivered, end = srn_now_ns() + 10000000000ull;
	while (*delivered + (st ? st->rx_dropped : 0) < want && srn_now_ns() < end) {
		int n = srn_udp_recv_batch(u, &rxb, NULL);
		if (n > 0)
			*delivered += (uint64_t)n;
		else
			usleep(100);
	}
	return (int)(*delivered - start);
}

/* Receive until quiet for 5 ms (at most 2 s); returns datagrams seen. Only
 * to make room in the socket buffer, or to show nothing more arrives:
 * counts that a test checks come from recv_until. */
static int drain(struct srn_udp *u)
{
	int got = 0;
	uint64_t end = srn_now_ns() + 2000000000ull, quiet = srn_now_ns();
	while (srn_now_ns() < end && srn_now_ns() - quiet < 5000000ull) {
		int n = srn_udp_recv_batch(u, &rxb, NULL);
		if (n > 0) {
			got += n;
			quiet = srn_now_ns();
		} else {
			usleep(100);
		}
	}
	return got;
}

struct scan {
	int frames, good, bad, undecodable, bad_csum, torn;
	int from_port[2];               /* frames whose UDP source port is port[i] */
	uint16_t port[2];
	uint16_t last_id;
};

static void scan_file(const char *path, struct scan *s)
{
	static uint8_t f[1 << 18];
	struct pcap_reader r;
	memset(s->from_port, 0, sizeof(s->from_port));
	s->frames = s->good = s->bad = s->undecodable = s->bad_csum = s->torn = 0;
	if (pcap_open_read(&r, path)) {
		s->torn = 1;
		return;
	}
	CHECK(r.linktype == 1 && r.snaplen >= 65536, "%s: linktype %u snaplen %u", path, r.linktype,
		  r.snaplen);
	uint32_t len;
	int rc;
	while ((rc = pcap_next_frame(&r, f, sizeof(f), &len)) == 1) {
		struct srn_frame fr;
		uint32_t c, w;
		s->frames++;
		if (srn_frame_decode(f, len, &fr) || srn_icrc_of_frame(f, len, &c, &w)) {
			s->undecodable++;
			continue;
		}
		if (c == w)
			s->good++;
		else
			s->bad++;
		for (int i = 0; i < 2; i++)
			s->from_port[i] += fr.ip.sport == s->port[i];
		if (fr.ip.family == AF_INET) {
			uint32_t sum = 0;
			for (int i = 0; i < 20; i += 2)
				sum += (uint32_t)fr.l3[i] << 8 | fr.l3[i + 1];
			while (sum >> 16)
				sum = (sum & 0xffff) + (sum >> 16);
			s->bad_csum += sum != 0xffff;
			s->last_id = fr.ip.ipv4_id;
		}
	}
	s->torn = rc < 0;
	pcap_close_read(&r);
}

static off_t file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) ? -1 : st.st_size;
}

/* ---- tests ------------------------------------------------------------- */

static void expand(void)
{
	char out[64];
	CHECK(!srn_pcap_expand_path("/tmp/a-%p.pcap", 1234, out, sizeof(out)) &&
			  !strcmp(out, "/tmp/a-1234.pcap"), "%%p: %s", out);
	CHECK(!srn_pcap_expand_path("x%%p%p%q", 7, out, sizeof(out)) && !strcmp(out, "x%p7%q"),
		  "%%%% and unknown: %s", out);
	CHECK(srn_pcap_expand_path("0123456789%p", 123456, out, 16) == -ENAMETOOLONG, "too long");
	CHECK(!srn_pcap_expand_path("0123456789%p", 1234, out, 16) && !strcmp(out, "01234567891234"),
		  "exact fit: %s", out);
}

static void headers(void)
{
	uint8_t h[SRN_PCAP_HDRS_MAX], want[64];
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(0xc001) };
	struct sockaddr_in b = { .sin_family = AF_INET, .sin_port = htons(4791) };
	inet_pton(AF_INET, "10.0.0.1", &a.sin_addr);
	inet_pton(AF_INET, "10.0.0.2", &b.sin_addr);
	/* G01: IPv4 ID 0, DF, TTL 64, checksum 0x26af; UDP length 0x28. */
	unhex("02000a000002" "02000a000001" "0800"
		  "4500003c00004000401126af0a0000010a000002" "c00112b700280000", want);
	size_t n = srn_pcap_headers(h, (struct sockaddr *)&a, (struct sockaddr *)&b, 32, 0);
	CHECK(n == 42 && !memcmp(h, want, 42), "IPv4 headers differ from G01");
	/* G18 from the payload length on (softrnic writes TC and flow label 0,
	 * both masked by the ICRC). */
	struct sockaddr_in6 c = { .sin6_family = AF_INET6, .sin6_port = htons(0xc001) };
	struct sockaddr_in6 d = { .sin6_family = AF_INET6, .sin6_port = htons(4791) };
	inet_pton(AF_INET6, "fd00::1", &c.sin6_addr);
	inet_pton(AF_INET6, "fd00::2", &d.sin6_addr);
	unhex("60000000001c1140fd000000000000000000000000000001fd000000000000000000000000000002"
		  "c00112b7001c0000", want);
	n = srn_pcap_headers(h, (struct sockaddr *)&c, (struct sockaddr *)&d, 20, 0);
	CHECK(n == 62 && !memcmp(h + 14, want, 48) && h[12] == 0x86 && h[13] == 0xdd &&
			  h[0] == 0x02 && h[5] == 0x02 && h[11] == 0x01,
		  "IPv6 headers differ from G18");
	CHECK(srn_pcap_headers(h, (struct sockaddr *)&a, (struct sockaddr *)&d, 20, 0) == 0,
		  "mixed families accepted");
}

/* Two sockets, one file: each datagram is recorded by its sender and by
 * its receiver. */
static void exchange(bool v6)
{
	char path[128], err[256];
	snprintf(path, sizeof(path), "%s/x%s-%%p.pcap", dir, v6 ? "6" : "4");
	struct srn_udp a, b;
	int rc = open_env(&a, "pa", v6, path, NULL, NULL, err, sizeof(err));
	rc |= open_env(&b, "pb", v6, path, NULL, NULL, err, sizeof(err));
	CHECK(rc == 0, "%s", err);
	if (rc)
		return;
	CHECK(a.pcap && a.pcap == b.pcap, "two sockets naming one file must share its writer");
	const int K = 300;
	uint64_t got_b = 0, got_a = 0;
	for (int i = 0; i < K; i++) {
		CHECK(send_roce(&a, &b, (uint32_t)i, (size_t)(i * 37) % 4001, 0) == 0, "send a->b");
		CHECK(send_roce(&b, &a, (uint32_t)i, (size_t)(i * 11) % 1500, 0) == 0, "send b->a");
		if (i % 50 == 49) {
			recv_until(&b, &got_b, (uint64_t)i + 1);
			recv_until(&a, &got_a, (uint64_t)i + 1);
		}
	}
	got_b += (uint64_t)drain(&b);     /* nothing more may come */
	got_a += (uint64_t)drain(&a);
	CHECK(got_a == K && got_b == K, "received %llu and %llu of %d", (unsigned long long)got_a,
		  (unsigned long long)got_b, K);
	char real[160];
	srn_pcap_expand_path(path, getpid(), real, sizeof(real));
	struct scan s = { .port = { a.port, b.port } };
	srn_udp_close(&a);
	srn_udp_close(&b);
	scan_file(real, &s);
	CHECK(s.frames == 4 * K && s.good == 4 * K && !s.torn && !s.bad_csum,
		  "%s: %d frames (want %d), %d good ICRC, %d bad, %d undecodable, %d bad checksum%s",
		  real, s.frames, 4 * K, s.good, s.bad, s.undecodable, s.bad_csum, s.torn ? ", torn" : "");
	CHECK(s.from_port[0] == 2 * K && s.from_port[1] == 2 * K, "frames per sender %d/%d",
		  s.from_port[0], s.from_port[1]);
	printf("%s: %d frames, all ICRCs good\n", v6 ? "IPv6" : "IPv4", s.frames);
}

/* TX: the trace shows the wire after faults. RX: before faults. */
static void with_faults(void)
{
	char pa[128], pb[128], err[256];
	snprintf(pa, sizeof(pa), "%s/fault-tx.pcap", dir);
	snprintf(pb, sizeof(pb), "%s/fault-rx.pcap", dir);
	struct srn_udp a, b;
	int rc = open_env(&a, "fa", false, pa, "seed=5,tx.drop=30,tx.dup=30,tx.corrupt=20", NULL, err,
					  sizeof(err));
	rc |= open_env(&b, "fb", false, pb, "rx.drop=100", NULL, err, sizeof(err));
	CHECK(rc == 0, "%s", err);
	if (rc)
		return;
	const int K = 500;
	uint64_t delivered = 0;
	for (int i = 0; i < K; i++) {
		CHECK(send_roce(&a, &b, (uint32_t)i, 64, 0) == 0, "send");
		if (i % 50 == 49) {
			/* What a put on the wire so far (no TX delay or reorder:
			 * its datagrams leave inside the send call). */
			const struct srn_fault_stats *t = srn_udp_fault_stats(&a);
			uint64_t wire = (uint64_t)i + 1 - t->tx_dropped + t->tx_duplicated;
			CHECK(recv_until(&b, &delivered, wire) == 0, "rx.drop=100 delivered something");
		}
	}
	CHECK(drain(&b) == 0, "rx.drop=100 delivered something");
	const struct srn_fault_stats st = *srn_udp_fault_stats(&a);
	uint64_t rx_dropped = srn_udp_fault_stats(&b)->rx_dropped;
	srn_udp_close(&a);
	srn_udp_close(&b);
	int wire = K - (int)st.tx_dropped + (int)st.tx_duplicated;
	struct scan s = { .port = { 0, 0 } };
	scan_file(pa, &s);
	CHECK(s.frames == wire && st.tx_dropped > 0 && st.tx_duplicated > 0,
		  "TX trace: %d frames, want %d (%llu dropped, %llu duplicated)", s.frames, wire,
		  (unsigned long long)st.tx_dropped, (unsigned long long)st.tx_duplicated);
	/* A corrupted packet that is duplicated goes out corrupted twice. */
	CHECK(s.bad >= (int)st.tx_corrupted && s.bad <= 2 * (int)st.tx_corrupted && s.bad > 0 &&
			  s.good + s.bad == s.frames,
		  "TX trace: %d bad ICRCs for %llu corrupted", s.bad, (unsigned long long)st.tx_corrupted);
	scan_file(pb, &s);
	CHECK(s.frames == wire && (uint64_t)wire == rx_dropped && s.bad == s.frames - s.good,
		  "RX trace: %d frames, %llu dropped after capture, %d on the wire", s.frames,
		  (unsigned long long)rx_dropped, wire);
}

/* A peer whose kernel chose IPv4 ID 0x1234: the RX record carries it. */
static void foreign_id(void)
{
	char p[128], err[256];
	snprintf(p, sizeof(p), "%s/id.pcap", dir);
	struct srn_udp a, b;
	int rc = open_env(&a, "ia", false, NULL, NULL, NULL, err, sizeof(err));
	rc |= open_env(&b, "ib", false, p, NULL, NULL, err, sizeof(err));
	CHECK(rc == 0, "%s", err);
	if (rc)
		return;
	CHECK(send_roce(&a, &b, 1, 100, 0x1234) == 0, "send");
	uint64_t delivered = 0;
	CHECK(recv_until(&b, &delivered, 1) == 1, "not received");
	srn_udp_close(&a);
	srn_udp_close(&b);
	struct scan s = { .port = { 0, 0 } };
	scan_file(p, &s);
	CHECK(s.frames == 1 && s.good == 1 && s.last_id == 0x1234, "frames %d good %d id 0x%x",
		  s.frames, s.good, s.last_id);
}

static void buffering(void)
{
	char p[128], err[256];
	snprintf(p, sizeof(p), "%s/buf.pcap", dir);
	struct srn_udp a, b;
	int rc = open_env(&a, "ba", false, p, NULL, NULL, err, sizeof(err));
	rc |= open_env(&b, "bb", false, NULL, NULL, NULL, err, sizeof(err));
	CHECK(rc == 0, "%s", err);
	if (rc)
		return;
	CHECK(file_size(p) == 24 && srn_udp_fault_next_ns(&a) == 0, "fresh trace: %lld bytes",
		  (long long)file_size(p));
	uint64_t t0 = srn_now_ns();
	CHECK(send_roce(&a, &b, 1, 100, 0) == 0, "send");
	uint64_t t1 = srn_now_ns(), next = srn_udp_fault_next_ns(&a);
	CHECK(next >= t0 + SRN_PCAP_FLUSH_NS && next <= t1 + SRN_PCAP_FLUSH_NS,
		  "next_ns not 100 ms after the record");
	/* next - 1, not srn_now_ns(): the rule under test is "nothing before the
	 * deadline", and a stall of this thread must not pass the deadline. */
	CHECK(srn_udp_fault_flush(&a, next - 1) == 0 && file_size(p) == 24,
		  "written before 100 ms: %lld bytes", (long long)file_size(p));
	while (srn_now_ns() < next)
		usleep(2000);
	srn_udp_fault_flush(&a, srn_now_ns());
	CHECK(file_size(p) == 24 + 16 + 42 + 12 + 100 + 4 && srn_udp_fault_next_ns(&a) == 0,
		  "after the deadline: %lld bytes", (long long)file_size(p));
	srn_udp_close(&a);
	srn_udp_close(&b);
}

static void size_bound(void)
{
	char p[128], err[256];
	snprintf(p, sizeof(p), "%s/big.pcap", dir);
	struct srn_udp a, b;
	int rc = open_env(&a, "sa", false, p, NULL, "1", err, sizeof(err));
	rc |= open_env(&b, "sb", false, NULL, NULL, NULL, err, sizeof(err));
	CHECK(rc == 0, "%s", err);
	if (rc)
		return;
	for (int i = 0; i < 1500; i++) {
		CHECK(send_roce(&a, &b, (uint32_t)i, 1000, 0) == 0, "send");
		if (i % 100 == 99)
			drain(&b);
	}
	uint64_t lost = srn_pcap_lost(a.pcap);
	srn_udp_close(&a);
	srn_udp_close(&b);
	struct scan s = { .port = { 0, 0 } };
	scan_file(p, &s);
	off_t sz = file_size(p);
	const int rec = 16 + 42 + 12 + 1000 + 4;
	CHECK(sz <= (1 << 20) && sz > (1 << 20) - rec && !s.torn && s.good == s.frames &&
			  (uint64_t)s.frames + lost == 1500,
		  "bounded trace: %lld bytes, %d frames, %llu lost", (long long)sz, s.frames,
		  (unsigned long long)lost);
}

static void open_errors(void)
{
	struct srn_udp u;
	char err[256] = "";
	int rc = open_env(&u, "e1", false, "/nonexistent-softrnic-dir/t.pcap", NULL, NULL, err,
					  sizeof(err));
	CHECK(rc == -ENOENT && u.fd == -1 && strstr(err, "e1") && strstr(err, SRN_PCAP_ENV) &&
			  strstr(err, "/nonexistent-softrnic-dir/t.pcap") && strstr(err, "No such file"),
		  "rc %d, message: %s", rc, err);
	char p[128];
	snprintf(p, sizeof(p), "%s/e.pcap", dir);
	const char *bad[] = { "0", "abc", "-5", "12x", "99999999999" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		rc = open_env(&u, "e2", false, p, NULL, bad[i], err, sizeof(err));
		CHECK(rc == -EINVAL && strstr(err, SRN_PCAP_MAX_ENV) && strstr(err, bad[i]),
			  "SOFTRNIC_PCAP_MAX_MB=%s: rc %d, message: %s", bad[i], rc, err);
	}
	rc = open_env(&u, "e3", false, p, "drop=5", "oops", err, sizeof(err));
	CHECK(rc == -EINVAL && !u.fault && !u.pcap, "half-opened hooks left behind");
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/srn-pcap-XXXXXX");
	if (!mkdtemp(dir) || srn_rx_batch_init(&rxb)) {
		fprintf(stderr, "setup failed\n");
		return 1;
	}
	expand();
	headers();
	exchange(false);
	exchange(true);
	with_faults();
	foreign_id();
	buffering();
	size_bound();
	open_errors();
	srn_rx_batch_free(&rxb);
	if (!srn_check_failures) {
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	} else {
		fprintf(stderr, "%d check(s) failed; traces kept in %s\n", srn_check_failures, dir);
		return 1;
	}
	printf("all pcap trace checks passed\n");
	return 0;
}
