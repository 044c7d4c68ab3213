/* Helper for tests/test_netns_lib.sh: softrnic UDP sockets across two
 * network namespaces joined by a veth pair (not a CTest test by itself; it
 * needs the namespaces the script creates).
 *
 *   test_link_netns serve  MTU            answer pings on every configured device
 *   test_link_netns client MTU PEER...    device i pings PEER i, checks MTU rules
 *   test_link_netns eagain PEER           fill a tiny send buffer behind a slow qdisc
 *
 * Devices come from SOFTRNIC_DEVICES, so this also checks that configuration
 * and MTU detection work on a real, non-loopback interface. IPv6 packets
 * cross with UDP checksum 0 and must be accepted (UDP_NO_CHECK6_RX). Every
 * loop is bounded; exit 0 pass, 1 fail.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "link/udp.h"
#include "check.h"
#include "diag/clock.h"

static struct srn_dev_cfg cfg[SRN_MAX_DEVICES];
static struct srn_udp sock[SRN_MAX_DEVICES];
static int nopen;
static struct srn_rx_batch rx;
static uint8_t big[65536];

/* Open every configured device; expect_mtu 0 skips the MTU check. */
static int open_all(uint32_t expect_mtu)
{
	char err[256];
	int n = srn_config_load(cfg, SRN_MAX_DEVICES, err, sizeof(err));
	if (n < 0) {
		fprintf(stderr, "config: %s\n", err);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		CHECK(!expect_mtu || cfg[i].link_mtu == expect_mtu, "%s: detected link_mtu %u, want %u", cfg[i].name,
			  cfg[i].link_mtu, expect_mtu);
		int rc = srn_udp_open(&sock[i], &cfg[i], err, sizeof(err));
		if (rc) {
			fprintf(stderr, "%s\n", err);
			return -1;
		}
		nopen++;
	}
	return n;
}

static int serve(uint32_t mtu)
{
	int n = open_all(mtu);
	if (n < 0)
		return 1;
	bool done[SRN_MAX_DEVICES] = { false };
	int ndone = 0;
	double end = (srn_now_ns() / 1e9) + 20.0;
	while (ndone < n && (srn_now_ns() / 1e9) < end) {
		struct pollfd p[SRN_MAX_DEVICES];
		for (int i = 0; i < n; i++)
			p[i] = (struct pollfd){ .fd = sock[i].fd, .events = POLLIN };
		poll(p, (nfds_t)n, 100);
		for (int i = 0; i < n; i++) {
			int got = srn_udp_recv_batch(&sock[i], &rx, NULL);
			for (int k = 0; k < got; k++) {
				if (rx.pkt[k].len == 4 && !memcmp(rx.pkt[k].data, "quit", 4)) {
					if (!done[i])
						ndone++;
					done[i] = true;
					continue;
				}
				char reply[32];
				int rl = snprintf(reply, sizeof(reply), "pong:%u", rx.pkt[k].len);
				struct iovec v = { reply, (size_t)rl };
				srn_udp_sendv(&sock[i], (struct sockaddr *)&rx.pkt[k].src, rx.pkt[k].srclen, &v, 1);
			}
		}
	}
	CHECK(ndone == n, "serve: %d of %d devices said quit", ndone, n);
	return srn_check_failures ? 1 : 0;
}

/* Send len bytes to dst and wait for "pong:len"; retries every 100 ms, at
 * most tries times (the peer may still be starting). */
static bool ping(struct srn_udp *u, const struct sockaddr_storage *dst, socklen_t dl, size_t len, int tries)
{
	char want[32];
	snprintf(want, sizeof(want), "pong:%zu", len);
	struct iovec v = { big, len };
	for (int t = 0; t < tries; t++) {
		int rc = srn_udp_sendv(u, (const struct sockaddr *)dst, dl, &v, 1);
		if (rc) {
			fprintf(stderr, "ping %zu: sendv %s\n", len, strerror(-rc));
			return false;
		}
		struct pollfd p = { .fd = u->fd, .events = POLLIN };
		poll(&p, 1, 100);
		int got = srn_udp_recv_batch(u, &rx, NULL);
		for (int k = 0; k < got; k++)
			if (rx.pkt[k].len == strlen(want) && !memcmp(rx.pkt[k].data, want, strlen(want)))
				return true;
	}
	return false;
}

static int peer_addr(const char *s, uint16_t port, struct sockaddr_storage *out, socklen_t *len)
{
	memset(out, 0, sizeof(*out));
	struct sockaddr_in *sin = (struct sockaddr_in *)out;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)out;
	if (inet_pton(AF_INET, s, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		*len = sizeof(*sin);
		return 0;
	}
	if (inet_pton(AF_INET6, s, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		*len = sizeof(*sin6);
		return 0;
	}
	return -1;
}

static int client(uint32_t mtu, int npeers, char **peers)
{
	int n = open_all(mtu);
	if (n < 0)
		return 1;
	CHECK(n == npeers, "%d devices for %d peers", n, npeers);
	for (int i = 0; i < n && i < npeers; i++) {
		struct sockaddr_storage dst;
		socklen_t dl;
		if (peer_addr(peers[i], SRN_ROCE_PORT, &dst, &dl)) {
			fprintf(stderr, "bad peer %s\n", peers[i]);
			return 1;
		}
		char s[SRN_SOCKADDR_STRLEN];
		srn_sockaddr_str((struct sockaddr *)&dst, s, sizeof(s));
		/* Largest datagram that fits the link MTU unfragmented (DF). */
		size_t hdr = cfg[i].family == AF_INET ? 20 + 8 : 40 + 8;
		size_t max = cfg[i].link_mtu - hdr;
		int ib = srn_link_ib_mtu(cfg[i].link_mtu);
		CHECK(srn_link_ib_mtu_bytes(ib) + SRN_LINK_HDR_ROOM <= cfg[i].link_mtu, "ib mtu %d too big", ib);

		CHECK(ping(&sock[i], &dst, dl, 100, 50), "%s: no answer from %s", cfg[i].name, s);
		CHECK(ping(&sock[i], &dst, dl, max, 10), "%s: %zu-byte datagram (link MTU %u) did not cross",
			  cfg[i].name, max, cfg[i].link_mtu);
		size_t ibmax = srn_link_ib_mtu_bytes(ib) + SRN_LINK_HDR_ROOM - hdr;
		CHECK(ping(&sock[i], &dst, dl, ibmax, 10), "%s: IB-MTU-sized datagram (%zu) did not cross",
			  cfg[i].name, ibmax);
		struct iovec v = { big, max + 1 };
		int rc = srn_udp_sendv(&sock[i], (struct sockaddr *)&dst, dl, &v, 1);
		CHECK(rc == -EMSGSIZE, "%s: %zu bytes over a %u MTU gave %d, want -EMSGSIZE (no fragmenting)",
			  cfg[i].name, max + 1, cfg[i].link_mtu, rc);
		printf("%s %s -> %s: link MTU %u, IB MTU %u, %zu-byte datagram crossed, %zu refused\n",
			   cfg[i].name, cfg[i].family == AF_INET ? "ipv4" : "ipv6", s, cfg[i].link_mtu,
			   srn_link_ib_mtu_bytes(ib), max, max + 1);
		struct iovec q = { (void *)"quit", 4 };
		for (int k = 0; k < 3; k++)
			srn_udp_sendv(&sock[i], (struct sockaddr *)&dst, dl, &q, 1);
	}
	return srn_check_failures ? 1 : 0;
}

/* With a slow qdisc on the interface, sent packets stay charged to the
 * socket until they leave, so a small send buffer fills: sendv must report
 * -EAGAIN (not block, not drop silently), and succeed again once drained. */
static int eagain(const char *peer)
{
	if (open_all(0) < 1)
		return 1;
	struct sockaddr_storage dst;
	socklen_t dl;
	if (peer_addr(peer, SRN_ROCE_PORT, &dst, &dl))
		return 1;
	int small = 4096;
	setsockopt(sock[0].fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	struct iovec v = { big, 1000 };
	int rc = 0, sent = 0;
	for (int i = 0; i < 10000; i++) {
		rc = srn_udp_sendv(&sock[0], (struct sockaddr *)&dst, dl, &v, 1);
		if (rc)
			break;
		sent++;
	}
	CHECK(rc == -EAGAIN, "after %d sends: %d, want -EAGAIN", sent, rc);
	double t0 = (srn_now_ns() / 1e9);
	struct pollfd p = { .fd = sock[0].fd, .events = POLLOUT };
	CHECK(poll(&p, 1, 5000) == 1, "socket never became writable again");
	rc = -EAGAIN;
	for (int i = 0; i < 50 && rc == -EAGAIN; i++) {
		rc = srn_udp_sendv(&sock[0], (struct sockaddr *)&dst, dl, &v, 1);
		if (rc == -EAGAIN)
			usleep(100000);
	}
	CHECK(rc == 0, "send after drain: %d", rc);
	printf("eagain: -EAGAIN after %d datagrams, writable again after %.0f ms\n", sent,
		   ((srn_now_ns() / 1e9) - t0) * 1e3);
	return srn_check_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (srn_rx_batch_init(&rx))
		return 1;
	int rc = 1;
	if (argc == 3 && !strcmp(argv[1], "serve"))
		rc = serve((uint32_t)atoi(argv[2]));
	else if (argc >= 4 && !strcmp(argv[1], "client"))
		rc = client((uint32_t)atoi(argv[2]), argc - 3, argv + 3);
	else if (argc == 3 && !strcmp(argv[1], "eagain"))
		rc = eagain(argv[2]);
	else
		fprintf(stderr, "usage: %s serve MTU | client MTU PEER... | eagain PEER\n", argv[0]);
	for (int i = 0; i < nopen; i++)
		srn_udp_close(&sock[i]);
	srn_rx_batch_free(&rx);
	return rc;
}
