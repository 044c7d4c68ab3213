/*
 * test_cc_wire_ecn.c - the ECN bits on the device socket (link/udp_ecn.c),
 * on loopback through the kernel:
 *  - by default a datagram leaves ECT(0) and the receiver reads it so,
 *    both through srn_udp_recv_batch and the GRO path (srn_udp_recv_gro);
 *  - SOFTRNIC_DSCP sets the upper six bits and keeps ECT(0);
 *  - SOFTRNIC_ECN_MARK=N sends every Nth datagram CE-marked, and the
 *    receiver sees exactly those as CE;
 *  - SOFTRNIC_ECN=0 sends Not-ECT (a receiver that reads TOS sees 0);
 *  - a foreign sender's CE mark (a plain socket with IP_TOS 3, as a
 *    switch's marked packet arrives) is seen, IPv4 and IPv6;
 *  - bad settings fail the open with a message naming them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "link/gso.h"
#include "link/udp.h"
#include "wire/ecn.h"

static struct srn_rx_batch rx;

static struct srn_dev_cfg cfg_of(const char *name, int family)
{
	struct srn_dev_cfg c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "%s", name);
	c.family = family;
	c.port = 0; /* the kernel picks: tests run in parallel */
	if (family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)&c.addr;
		s->sin_family = AF_INET;
		s->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	} else {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)&c.addr;
		s->sin6_family = AF_INET6;
		s->sin6_addr = in6addr_loopback;
	}
	return c;
}

static int open_dev(struct srn_udp *u, const char *name, int family)
{
	struct srn_dev_cfg c = cfg_of(name, family);
	char err[256];
	int r = srn_udp_open(u, &c, err, sizeof(err));
	if (r)
		fprintf(stderr, "open %s: %s\n", name, err);
	return r;
}

static void wait_readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	poll(&p, 1, 2000);
}

/* Send n datagrams of 64 bytes from a to b, receive them, and store the
 * TOS of each (in order) in tos[].  Returns how many arrived. */
static int exchange(struct srn_udp *a, struct srn_udp *b, int n, uint8_t *tos)
{
	uint8_t buf[64] = { 0x04 };
	struct iovec v = { buf, sizeof(buf) };
	for (int i = 0; i < n; i++) {
		struct srn_tx_msg m = { (const struct sockaddr *)&b->local, b->local_len, &v, 1,
					0 };
		if (srn_udp_send_batch(a, &m, 1) != 1)
			return -1;
	}
	int got = 0;
	for (int tries = 0; tries < 50 && got < n; tries++) {
		wait_readable(b->fd);
		int r = srn_udp_recv_batch(b, &rx, NULL);
		for (int i = 0; i < r && got < n; i++)
			tos[got++] = rx.pkt[i].tos;
	}
	return got;
}

static void default_ect0(int family)
{
	struct srn_udp a, b;
	if (open_dev(&a, "a", family) || open_dev(&b, "b", family)) {
		CHECK(0, "open");
		return;
	}
	CHECK(a.tos == SRN_ECN_ECT0, "the socket's TOS is 0x%x", a.tos);
	uint8_t tos[8];
	int n = exchange(&a, &b, 8, tos);
	CHECK(n == 8, "received %d of 8", n);
	for (int i = 0; i < n; i++)
		CHECK(tos[i] == SRN_ECN_ECT0, "%s datagram %d arrived with TOS 0x%x, not ECT(0)",
		      family == AF_INET ? "IPv4" : "IPv6", i, tos[i]);
	srn_udp_close(&a);
	srn_udp_close(&b);
	printf("ok: %s datagrams leave ECT(0) and arrive so\n",
	       family == AF_INET ? "IPv4" : "IPv6");
}

static void dscp_and_marks(void)
{
	struct srn_udp a, b;
	setenv("SOFTRNIC_DSCP", "46", 1);
	setenv("SOFTRNIC_ECN_MARK", "3", 1);
	int r = open_dev(&a, "a", AF_INET);
	unsetenv("SOFTRNIC_DSCP");
	unsetenv("SOFTRNIC_ECN_MARK");
	if (r || open_dev(&b, "b", AF_INET)) {
		CHECK(0, "open");
		return;
	}
	uint8_t tos[9];
	int n = exchange(&a, &b, 9, tos);
	CHECK(n == 9, "received %d of 9", n);
	for (int i = 0; i < n; i++) {
		uint8_t want = (uint8_t)(46 << 2 | ((i % 3 == 2) ? SRN_ECN_CE : SRN_ECN_ECT0));
		CHECK(tos[i] == want, "datagram %d: TOS 0x%x, expected 0x%x", i, tos[i], want);
	}
	srn_udp_close(&a);
	srn_udp_close(&b);
	printf("ok: DSCP 46 kept; every 3rd datagram CE-marked by the kernel, the rest ECT(0)\n");
}

static void ecn_off(void)
{
	struct srn_udp a, b;
	setenv("SOFTRNIC_ECN", "0", 1);
	int r = open_dev(&a, "a", AF_INET);
	unsetenv("SOFTRNIC_ECN");
	if (r || open_dev(&b, "b", AF_INET)) {
		CHECK(0, "open");
		return;
	}
	CHECK(!a.ecn_rx && a.tos == 0, "ECN off: tos 0x%x, ecn_rx %d", a.tos, a.ecn_rx);
	uint8_t tos[4];
	int n = exchange(&a, &b, 4, tos);
	CHECK(n == 4, "received %d of 4", n);
	for (int i = 0; i < n; i++)
		CHECK(tos[i] == 0, "ECN off: datagram %d arrived with TOS 0x%x", i, tos[i]);
	srn_udp_close(&a);
	srn_udp_close(&b);
	printf("ok: SOFTRNIC_ECN=0 sends Not-ECT\n");
}

/* A switch's CE mark, as a plain socket sends it; through GRO too. */
static void foreign_ce(int family, bool gro)
{
	struct srn_udp b;
	if (open_dev(&b, "b", family)) {
		CHECK(0, "open");
		return;
	}
	struct srn_gro_batch *g = NULL;
	if (gro) {
		g = calloc(1, sizeof(*g));
		if (!g || !srn_udp_enable_gro(&b) || srn_gro_batch_init(g)) {
			printf("skip: no UDP_GRO here\n");
			free(g);
			srn_udp_close(&b);
			return;
		}
	}
	int s = socket(family, SOCK_DGRAM, 0);
	int ce = SRN_ECN_CE | 0x20;
	if (family == AF_INET)
		setsockopt(s, IPPROTO_IP, IP_TOS, &ce, sizeof(ce));
	else
		setsockopt(s, IPPROTO_IPV6, IPV6_TCLASS, &ce, sizeof(ce));
	uint8_t buf[48] = { 0 };
	for (int i = 0; i < 3; i++)
		CHECK(sendto(s, buf, sizeof(buf), 0, (const struct sockaddr *)&b.local,
			     b.local_len) == (ssize_t)sizeof(buf),
		      "sendto: %s", strerror(errno));
	int got = 0;
	for (int tries = 0; tries < 50 && got < 3; tries++) {
		wait_readable(b.fd);
		if (gro) {
			int r = srn_udp_recv_gro(&b, g);
			for (int i = 0; i < r; i++, got++)
				CHECK(g->pkt[i].tos == (uint8_t)ce, "GRO: TOS 0x%x", g->pkt[i].tos);
		} else {
			int r = srn_udp_recv_batch(&b, &rx, NULL);
			for (int i = 0; i < r; i++, got++)
				CHECK(rx.pkt[i].tos == (uint8_t)ce, "TOS 0x%x", rx.pkt[i].tos);
		}
	}
	CHECK(got == 3, "received %d of 3", got);
	close(s);
	if (g) {
		srn_gro_batch_free(g);
		free(g);
	}
	srn_udp_close(&b);
	printf("ok: a CE mark from the wire is seen (%s%s)\n", family == AF_INET ? "IPv4" : "IPv6",
	       gro ? ", GRO" : "");
}

static void bad_settings(void)
{
	const char *bad[][2] = { { "SOFTRNIC_ECN", "2" },
				 { "SOFTRNIC_DSCP", "64" },
				 { "SOFTRNIC_DSCP", "-1" },
				 { "SOFTRNIC_ECN_MARK", "x" } };
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct srn_udp u;
		struct srn_dev_cfg c = cfg_of("bad", AF_INET);
		char err[256] = "";
		setenv(bad[i][0], bad[i][1], 1);
		int r = srn_udp_open(&u, &c, err, sizeof(err));
		unsetenv(bad[i][0]);
		CHECK(r == -EINVAL && strstr(err, bad[i][0]), "%s=%s: %d, \"%s\"", bad[i][0],
		      bad[i][1], r, err);
		if (!r)
			srn_udp_close(&u);
	}
	printf("ok: bad ECN settings fail the open, named\n");
}

static bool have_ipv6(void)
{
	int s = socket(AF_INET6, SOCK_DGRAM, 0);
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	bool ok = s >= 0 && bind(s, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (s >= 0)
		close(s);
	return ok;
}

int main(void)
{
	unsetenv("SOFTRNIC_FAULTS");
	unsetenv("SOFTRNIC_PCAP");
	if (srn_rx_batch_init(&rx))
		return 1;
	default_ect0(AF_INET);
	dscp_and_marks();
	ecn_off();
	foreign_ce(AF_INET, false);
	foreign_ce(AF_INET, true);
	if (have_ipv6()) {
		default_ect0(AF_INET6);
		foreign_ce(AF_INET6, false);
	} else {
		printf("skip: no IPv6 loopback\n");
	}
	bad_settings();
	srn_rx_batch_free(&rx);
	return srn_check_result();
}
