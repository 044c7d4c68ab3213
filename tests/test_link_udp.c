/* Tests for link/udp.c on loopback: auto_loopback address selection, batched
 * send/receive both ways (IPv4 and IPv6 ::1), truncation, the behaviour of a
 * full receive buffer, the bind error messages, IPv6 zero-checksum transmit
 * and accept, and the GID/sockaddr helpers. Traffic goes to 127/8 and ::1
 * only. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "link/udp.h"
#include "link/udp_group.h"
#include "check.h"
#include "diag/clock.h"

#define NPKT 20

static struct srn_rx_batch rx;

/* addr=auto,share=0: a free 127.0.0.N of the device's own. */
static struct srn_dev_cfg auto_cfg(const char *name, uint16_t port)
{
	struct srn_dev_cfg c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "%s", name);
	c.family = AF_INET;
	c.port = port;
	c.auto_loopback = true;
	c.exclusive = true;
	return c;
}

/* addr=auto, the default: every device of the user on one address, as on
 * a NIC, told apart by member number (link/udp_group.h). */
static void test_auto_shared(void)
{
	struct srn_dev_cfg ca = auto_cfg("softrnicS", 0), cb = auto_cfg("softrnicT", 0);
	/* A port of our own, so other suites on 4791 do not interfere. */
	int probe = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in pa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t pl = sizeof(pa);
	CHECK(probe >= 0 && bind(probe, (struct sockaddr *)&pa, sizeof(pa)) == 0 &&
	      getsockname(probe, (struct sockaddr *)&pa, &pl) == 0, "probe port");
	close(probe);
	ca.port = cb.port = ntohs(pa.sin_port);
	ca.exclusive = cb.exclusive = false;
	struct srn_udp a, b;
	char err[256], s1[SRN_SOCKADDR_STRLEN];
	int rc = srn_udp_open(&a, &ca, err, sizeof(err));
	CHECK(rc == 0, "shared auto A: %d %s", rc, err);
	rc = srn_udp_open(&b, &cb, err, sizeof(err));
	CHECK(rc == 0, "shared auto B: %d %s", rc, err);
	if (srn_check_failures)
		return;
	const struct sockaddr_in *la = (const void *)&a.local, *lb = (const void *)&b.local;
	CHECK(la->sin_addr.s_addr == lb->sin_addr.s_addr && la->sin_port == lb->sin_port,
	      "shared auto: two addresses");
	CHECK(srn_udp_member(&a) != srn_udp_member(&b), "shared auto: one member number twice");
	printf("auto_shared: A and B both on %s, members %u and %u\n",
	       srn_sockaddr_str((struct sockaddr *)&a.local, s1, sizeof(s1)), srn_udp_member(&a),
	       srn_udp_member(&b));
	srn_udp_close(&b);
	srn_udp_close(&a);
}

static struct srn_dev_cfg fixed_cfg(const char *name, const char *addr, uint16_t port)
{
	struct srn_dev_cfg c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "%s", name);
	c.port = port;
	struct sockaddr_in *sin = (struct sockaddr_in *)&c.addr;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&c.addr;
	if (inet_pton(AF_INET, addr, &sin->sin_addr) == 1) {
		c.family = sin->sin_family = AF_INET;
	} else if (inet_pton(AF_INET6, addr, &sin6->sin6_addr) == 1) {
		c.family = sin6->sin6_family = AF_INET6;
	}
	return c;
}

/* Packet i: 12-byte header, a body whose length varies (up to 4200 bytes,
 * beyond the 4096 IB MTU), 4-byte trailer; each piece from its own buffer. */
static size_t pkt_len(int i)
{
	return 12 + (size_t)(i * 211) % 4201 + 4;
}

static void fill_pkt(int i, uint8_t tag, uint8_t *hdr, uint8_t *body, uint8_t *trl, struct iovec iov[3])
{
	size_t blen = pkt_len(i) - 16;
	memset(hdr, 0, 12);
	hdr[0] = tag;
	hdr[1] = (uint8_t)i;
	for (size_t k = 0; k < blen; k++)
		body[k] = (uint8_t)(k * 7 + (size_t)i);
	memcpy(trl, "\xde\xad\xbe\xef", 4);
	iov[0] = (struct iovec){ hdr, 12 };
	iov[1] = (struct iovec){ body, blen };
	iov[2] = (struct iovec){ trl, 4 };
}

static bool check_pkt(const uint8_t *d, uint32_t len, uint8_t tag, int i)
{
	if (len != pkt_len(i) || d[0] != tag || d[1] != (uint8_t)i)
		return false;
	for (size_t k = 0; k < len - 16; k++)
		if (d[12 + k] != (uint8_t)(k * 7 + (size_t)i))
			return false;
	return memcmp(d + len - 4, "\xde\xad\xbe\xef", 4) == 0;
}

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
		return x->sin_addr.s_addr == y->sin_addr.s_addr && x->sin_port == y->sin_port;
	}
	const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
	return !memcmp(&x->sin6_addr, &y->sin6_addr, 16) && x->sin6_port == y->sin6_port;
}

/* Receive until want datagrams arrived or 2 s passed; returns how many were
 * accepted by check_pkt in order and from the expected source. */
static int recv_n(struct srn_udp *u, const struct srn_udp *from, uint8_t tag, int want, int *calls)
{
	int got = 0, good = 0;
	*calls = 0;
	double end = (srn_now_ns() / 1e9) + 2.0;
	while (got < want && (srn_now_ns() / 1e9) < end) {
		int trunc = -1;
		int n = srn_udp_recv_batch(u, &rx, &trunc);
		(*calls)++;
		CHECK(n >= 0 && trunc == 0 && rx.count == n, "recv_batch %d trunc %d", n, trunc);
		if (n < 0)
			break;
		for (int i = 0; i < n; i++, got++) {
			if (check_pkt(rx.pkt[i].data, rx.pkt[i].len, tag, got) &&
				same_addr(&rx.pkt[i].src, &from->local) && rx.pkt[i].srclen == from->local_len)
				good++;
		}
		if (n == 0) {
			struct pollfd p = { .fd = u->fd, .events = POLLIN };
			poll(&p, 1, 100);
		}
	}
	CHECK(got == want, "received %d of %d", got, want);
	return good;
}

static void exchange(struct srn_udp *a, struct srn_udp *b, const char *what)
{
	static uint8_t hdr[12], body[4300], trl[4];
	struct iovec iov[3];
	int calls;
	/* a -> b with sendv */
	for (int i = 0; i < NPKT; i++) {
		fill_pkt(i, 0xA1, hdr, body, trl, iov);
		int rc = srn_udp_sendv(a, (struct sockaddr *)&b->local, b->local_len, iov, 3);
		CHECK(rc == 0, "%s: sendv %d: %d", what, i, rc);
	}
	int good = recv_n(b, a, 0xA1, NPKT, &calls);
	CHECK(good == NPKT, "%s a->b: %d of %d intact", what, good, NPKT);
	printf("%s: a->b %d datagrams in %d recv_batch call(s)\n", what, good, calls);

	/* b -> a with send_batch; each message needs its own buffers */
	static uint8_t hdrs[NPKT][12], bodies[NPKT][4300], trls[NPKT][4];
	static struct iovec iovs[NPKT][3];
	struct srn_tx_msg m[NPKT];
	for (int i = 0; i < NPKT; i++) {
		fill_pkt(i, 0xB2, hdrs[i], bodies[i], trls[i], iovs[i]);
		m[i] = (struct srn_tx_msg){ (struct sockaddr *)&a->local, a->local_len, iovs[i], 3 };
	}
	int sent = 0;
	for (int tries = 0; sent < NPKT && tries < 100; tries++) {
		int r = srn_udp_send_batch(b, m + sent, NPKT - sent);
		CHECK(r >= 0, "%s: send_batch %d", what, r);
		if (r < 0)
			break;
		sent += r;
	}
	CHECK(sent == NPKT, "%s: send_batch sent %d", what, sent);
	good = recv_n(a, b, 0xB2, NPKT, &calls);
	CHECK(good == NPKT, "%s b->a: %d of %d intact", what, good, NPKT);
}

static void test_auto_loopback(void)
{
	struct srn_dev_cfg ca = auto_cfg("softrnicA", SRN_ROCE_PORT), cb = auto_cfg("softrnicB", SRN_ROCE_PORT);
	struct srn_udp a, b;
	char err[256], s1[SRN_SOCKADDR_STRLEN], s2[SRN_SOCKADDR_STRLEN];
	int rc = srn_udp_open(&a, &ca, err, sizeof(err));
	if (rc == -EADDRINUSE) {
		printf("SKIP auto_loopback: %s\n", err);
		return;
	}
	CHECK(rc == 0, "open A: %d %s", rc, err);
	rc = srn_udp_open(&b, &cb, err, sizeof(err));
	CHECK(rc == 0, "open B: %d %s", rc, err);
	if (srn_check_failures)
		return;
	const struct sockaddr_in *la = (const void *)&a.local, *lb = (const void *)&b.local;
	printf("auto_loopback: A %s, B %s\n", srn_sockaddr_str((struct sockaddr *)&a.local, s1, sizeof(s1)),
		   srn_sockaddr_str((struct sockaddr *)&b.local, s2, sizeof(s2)));
	CHECK(a.port == SRN_ROCE_PORT && b.port == SRN_ROCE_PORT, "ports %u %u", a.port, b.port);
	CHECK(ntohs(la->sin_port) == SRN_ROCE_PORT && ntohs(lb->sin_port) == SRN_ROCE_PORT, "bound ports");
	CHECK(la->sin_addr.s_addr != lb->sin_addr.s_addr, "same address for both");
	CHECK((ntohl(la->sin_addr.s_addr) >> 24) == 127 && (ntohl(lb->sin_addr.s_addr) >> 24) == 127,
		  "not loopback");
	/* Written back into the config, port field clear. */
	const struct sockaddr_in *cfa = (const void *)&ca.addr;
	CHECK(cfa->sin_addr.s_addr == la->sin_addr.s_addr && cfa->sin_port == 0, "cfg addr not written back");
	CHECK(ca.link_mtu >= 1500, "link_mtu %u", ca.link_mtu);
	CHECK(a.rcvbuf > 0 && a.sndbuf > 0, "buffers %d %d", a.rcvbuf, a.sndbuf);
	if (geteuid() == 0)   /* the FORCE options work as root */
		CHECK(a.rcvbuf >= (int)SRN_UDP_SOCKBUF && a.sndbuf >= (int)SRN_UDP_SOCKBUF,
			  "root but buffers %d %d", a.rcvbuf, a.sndbuf);

	/* Binding A's exact address and port again: the clear in-use message. */
	struct srn_dev_cfg dup = fixed_cfg("softrnic9", inet_ntop(AF_INET, &la->sin_addr, s1, sizeof(s1)),
									   SRN_ROCE_PORT);
	struct srn_udp d;
	rc = srn_udp_open(&d, &dup, err, sizeof(err));
	char want[256];
	snprintf(want, sizeof(want), "softrnic9: cannot bind %s:4791: Address already in use (another "
			 "softrnic process or the rdma_rxe kernel module owns this port)", s1);
	CHECK(rc == -EADDRINUSE && !strcmp(err, want) && d.fd == -1, "%d\n   got: %s\n  want: %s", rc, err, want);

	exchange(&a, &b, "ipv4");

	/* Empty socket: 0, not an error, and quickly (it must never block). */
	double t0 = (srn_now_ns() / 1e9);
	int trunc = -1;
	for (int i = 0; i < 100; i++) {
		int n = srn_udp_recv_batch(&a, &rx, &trunc);
		CHECK(n == 0 && trunc == 0 && rx.count == 0, "empty recv gave %d", n);
	}
	CHECK((srn_now_ns() / 1e9) - t0 < 1.0, "100 empty receives took %.3f s", (srn_now_ns() / 1e9) - t0);

	/* Truncation: a datagram longer than SRN_RX_BUFSZ between two good ones
	 * is dropped and counted; the good ones close ranks in order. */
	static uint8_t big[SRN_RX_BUFSZ + 100];
	struct iovec v;
	memset(big, 0x5A, sizeof(big));
	v = (struct iovec){ (void *)"first", 5 };
	CHECK(srn_udp_sendv(&a, (struct sockaddr *)&b.local, b.local_len, &v, 1) == 0, "send first");
	v = (struct iovec){ big, sizeof(big) };
	CHECK(srn_udp_sendv(&a, (struct sockaddr *)&b.local, b.local_len, &v, 1) == 0, "send big");
	v = (struct iovec){ (void *)"third", 5 };
	CHECK(srn_udp_sendv(&a, (struct sockaddr *)&b.local, b.local_len, &v, 1) == 0, "send third");
	int got = 0, tr = 0;
	for (int i = 0; i < 20 && got < 2; i++) {
		int n = srn_udp_recv_batch(&b, &rx, &trunc);
		for (int k = 0; k < n; k++) {
			const char *want_s = got == 0 ? "first" : "third";
			CHECK(rx.pkt[k].len == 5 && !memcmp(rx.pkt[k].data, want_s, 5) &&
				  same_addr(&rx.pkt[k].src, &a.local), "pkt %d after truncation", got);
			got++;
		}
		tr += trunc;
		if (got < 2) {
			struct pollfd p = { .fd = b.fd, .events = POLLIN };
			poll(&p, 1, 100);
		}
	}
	CHECK(got == 2 && tr == 1, "truncation: got %d, truncated %d", got, tr);

	/* A full receive buffer drops silently: the sender is never told (no
	 * EAGAIN on loopback, which frees the send charge at transmit), so the
	 * transport must retransmit. */
	int small = 4096;
	setsockopt(b.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	static uint8_t kb[1000];
	v = (struct iovec){ kb, sizeof(kb) };
	int sent_ok = 0;
	for (int i = 0; i < 200; i++)
		sent_ok += srn_udp_sendv(&a, (struct sockaddr *)&b.local, b.local_len, &v, 1) == 0;
	int drained = 0;
	for (int i = 0; i < 20; i++) {
		int n = srn_udp_recv_batch(&b, &rx, NULL);
		if (n <= 0)
			break;
		drained += n;
	}
	CHECK(sent_ok == 200 && drained > 0 && drained < 200, "overflow: sent %d, received %d", sent_ok, drained);
	printf("overflow: 200 sent, %d received through a 4 KiB receive buffer\n", drained);

	/* Family mismatch is refused before the kernel sees it. */
	struct sockaddr_in6 six = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	CHECK(srn_udp_sendv(&a, (struct sockaddr *)&six, sizeof(six), &v, 1) == -EAFNOSUPPORT, "v6 dst on v4");
	struct srn_tx_msg m = { (struct sockaddr *)&six, sizeof(six), &v, 1 };
	CHECK(srn_udp_send_batch(&a, &m, 1) == -EAFNOSUPPORT, "batch v6 dst on v4");
	CHECK(srn_udp_send_batch(&a, &m, 0) == 0, "empty batch");

	srn_udp_close(&a);
	srn_udp_close(&b);
	CHECK(a.fd == -1 && b.fd == -1, "close resets fd");
	srn_udp_close(&a);   /* idempotent */
}

static void test_bad_address(void)
{
	/* TEST-NET addresses (RFC 5737): pick one no interface here has. Only a
	 * bind is attempted; nothing is sent. */
	static const char *cands[] = { "192.0.2.1", "198.51.100.1", "203.0.113.1" };
	const char *addr = NULL;
	for (size_t i = 0; i < 3 && !addr; i++) {
		struct srn_dev_cfg c = fixed_cfg("x", cands[i], 4791);
		uint32_t m;
		if (srn_link_detect_mtu((struct sockaddr *)&c.addr, &m) == -ENODEV)
			addr = cands[i];
	}
	FILE *f = fopen("/proc/sys/net/ipv4/ip_nonlocal_bind", "r");
	int nonlocal = 0;
	if (f) {
		if (fscanf(f, "%d", &nonlocal) != 1)
			nonlocal = 0;
		fclose(f);
	}
	if (!addr || nonlocal) {
		printf("SKIP bad address: no unused TEST-NET address or ip_nonlocal_bind=1\n");
		return;
	}
	struct srn_dev_cfg c = fixed_cfg("softrnic0", addr, 4791);
	struct srn_udp u;
	char err[256], want[256];
	int rc = srn_udp_open(&u, &c, err, sizeof(err));
	snprintf(want, sizeof(want), "softrnic0: cannot bind %s:4791: Cannot assign requested address "
			 "(is the address configured on an interface in this network namespace?)", addr);
	CHECK(rc == -EADDRNOTAVAIL && u.fd == -1 && !strcmp(err, want), "%d\n   got: %s\n  want: %s", rc, err, want);

	c = fixed_cfg("softrnic1", "fd00:77:77::1", 4791);
	rc = srn_udp_open(&u, &c, err, sizeof(err));
	CHECK(rc == -EADDRNOTAVAIL && strstr(err, "softrnic1: cannot bind [fd00:77:77::1]:4791: Cannot assign "
										 "requested address (is the address configured") &&
		  strstr(err, "duplicate address detection"), "%d %s", rc, err);

	/* Misuse caught before any system call. */
	c = fixed_cfg("softrnic2", "::1", 4791);
	c.auto_loopback = true;
	rc = srn_udp_open(&u, &c, err, sizeof(err));
	CHECK(rc == -EINVAL && !strcmp(err, "softrnic2: addr=auto picks an IPv4 loopback address"), "%d %s", rc, err);
	memset(&c, 0, sizeof(c));
	strcpy(c.name, "softrnic3");
	rc = srn_udp_open(&u, &c, NULL, 0);
	CHECK(rc == -EAFNOSUPPORT && u.fd == -1, "family 0: %d", rc);
}

/* A plain IPv6 socket drops UDP checksum 0; ours sends 0 and accepts 0. */
static void test_ipv6(void)
{
	struct srn_dev_cfg ca = fixed_cfg("v6a", "::1", 0), cb = fixed_cfg("v6b", "::1", 0);
	struct srn_udp a, b;
	char err[256];
	int rc = srn_udp_open(&a, &ca, err, sizeof(err));
	if (rc == -EADDRNOTAVAIL || rc == -EAFNOSUPPORT) {
		printf("SKIP ipv6: %s\n", err);
		return;
	}
	CHECK(rc == 0, "open v6a: %d %s", rc, err);
	rc = srn_udp_open(&b, &cb, err, sizeof(err));
	CHECK(rc == 0, "open v6b: %d %s", rc, err);
	if (srn_check_failures)
		return;
	CHECK(a.port != 0 && a.port != b.port && ca.port == a.port, "kernel-chosen ports %u %u", a.port, b.port);
	CHECK(a.family == AF_INET6 && a.local_len == sizeof(struct sockaddr_in6), "v6 local");
	exchange(&a, &b, "ipv6 ::1");

	int plain = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in6 pa = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	socklen_t pl = sizeof(pa);
	CHECK(bind(plain, (struct sockaddr *)&pa, sizeof(pa)) == 0 &&
		  getsockname(plain, (struct sockaddr *)&pa, &pl) == 0, "plain bind");
	struct iovec v = { (void *)"zero-csum", 9 };
	CHECK(srn_udp_sendv(&a, (struct sockaddr *)&pa, pl, &v, 1) == 0, "send to plain");
	/* A normal-checksum datagram after it, from a normal socket: once the
	 * control one is there, the zero-checksum one had its chance. */
	int ctl = socket(AF_INET6, SOCK_DGRAM, 0);
	CHECK(sendto(ctl, "control", 7, 0, (struct sockaddr *)&pa, pl) == 7, "control send");
	char buf[64];
	ssize_t n = -1;
	struct pollfd p = { .fd = plain, .events = POLLIN };
	if (poll(&p, 1, 2000) == 1)
		n = recv(plain, buf, sizeof(buf), 0);
	CHECK(n == 7 && !memcmp(buf, "control", 7), "plain socket got %zd bytes first (zero checksum accepted?)", n);
	CHECK(recv(plain, buf, sizeof(buf), 0) < 0 && errno == EAGAIN, "plain socket has more");
	close(plain);

	/* Our socket accepts what a plain socket sends, too. */
	CHECK(sendto(ctl, "normal", 6, 0, (struct sockaddr *)&b.local, b.local_len) == 6, "normal send");
	p.fd = b.fd;
	int got = 0;
	for (int i = 0; i < 20 && !got; i++) {
		poll(&p, 1, 100);
		got = srn_udp_recv_batch(&b, &rx, NULL);
	}
	CHECK(got == 1 && rx.pkt[0].len == 6 && !memcmp(rx.pkt[0].data, "normal", 6), "srn v6 from plain: %d", got);
	close(ctl);
	srn_udp_close(&a);
	srn_udp_close(&b);
}

static void test_gid(void)
{
	struct sockaddr_storage ss, back;
	socklen_t len = 0;
	uint8_t gid[16];
	char s[SRN_SOCKADDR_STRLEN];
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	memset(&ss, 0, sizeof(ss));
	sin->sin_family = AF_INET;
	sin->sin_port = htons(4791);
	inet_pton(AF_INET, "10.1.2.3", &sin->sin_addr);
	srn_sockaddr_to_gid((struct sockaddr *)&ss, gid);
	static const uint8_t want4[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3 };
	CHECK(!memcmp(gid, want4, 16), "v4 gid");
	CHECK(srn_gid_to_sockaddr(gid, 4791, AF_INET, &back, &len) == 0 && len == sizeof(struct sockaddr_in) &&
		  same_addr(&back, &ss), "v4 round trip");
	CHECK(srn_gid_to_sockaddr(gid, 4791, AF_UNSPEC, &back, &len) == 0 && back.ss_family == AF_INET, "v4 unspec");
	CHECK(srn_gid_to_sockaddr(gid, 4791, AF_INET6, &back, &len) == -EAFNOSUPPORT, "v4 gid on v6 device");
	CHECK(!strcmp(srn_sockaddr_str((struct sockaddr *)&back, s, sizeof(s)), "10.1.2.3:4791"), "%s", s);

	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	memset(&ss, 0, sizeof(ss));
	sin6->sin6_family = AF_INET6;
	sin6->sin6_port = htons(5000);
	inet_pton(AF_INET6, "fd00::1", &sin6->sin6_addr);
	srn_sockaddr_to_gid((struct sockaddr *)&ss, gid);
	CHECK(!memcmp(gid, &sin6->sin6_addr, 16), "v6 gid");
	CHECK(srn_gid_to_sockaddr(gid, 5000, AF_INET6, &back, &len) == 0 && len == sizeof(struct sockaddr_in6) &&
		  same_addr(&back, &ss), "v6 round trip");
	CHECK(srn_gid_to_sockaddr(gid, 5000, AF_INET, &back, &len) == -EAFNOSUPPORT, "v6 gid on v4 device");
	CHECK(!strcmp(srn_sockaddr_str((struct sockaddr *)&back, s, sizeof(s)), "[fd00::1]:5000"), "%s", s);

	/* Round trip over many v4 addresses, including edge octets. */
	for (uint32_t i = 0; i < 1000; i++) {
		uint32_t a = i * 2654435761u;
		memset(&ss, 0, sizeof(ss));
		sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = htonl(a ? a : 1);
		sin->sin_port = htons((uint16_t)i);
		srn_sockaddr_to_gid((struct sockaddr *)&ss, gid);
		if (srn_gid_to_sockaddr(gid, (uint16_t)i, AF_UNSPEC, &back, &len) || !same_addr(&back, &ss)) {
			CHECK(0, "v4 round trip %08x", a);
			break;
		}
	}
	static const uint8_t zero[16];
	CHECK(srn_gid_to_sockaddr(zero, 1, AF_UNSPEC, &back, &len) == -EINVAL, "zero gid");
	memset(&ss, 0, sizeof(ss));
	ss.ss_family = AF_UNIX;
	memset(gid, 0x77, 16);
	srn_sockaddr_to_gid((struct sockaddr *)&ss, gid);
	CHECK(!memcmp(gid, zero, 16), "unknown family gives zero gid");
	CHECK(!strcmp(srn_sockaddr_str((struct sockaddr *)&ss, s, sizeof(s)), "(address family 1)"), "%s", s);

	memset(&ss, 0, sizeof(ss));
	sin->sin_family = AF_INET;
	sin->sin_port = htons(4791);
	inet_pton(AF_INET, "127.0.0.2", &sin->sin_addr);
	CHECK(!strcmp(srn_sockaddr_str((struct sockaddr *)&ss, s, sizeof(s)), "127.0.0.2:4791"), "%s", s);
	char tiny[6];
	srn_sockaddr_str((struct sockaddr *)&ss, tiny, sizeof(tiny));
	CHECK(!strcmp(tiny, "127.0"), "truncated: %s", tiny);
	memset(&ss, 0, sizeof(ss));
	sin6->sin6_family = AF_INET6;
	sin6->sin6_port = htons(4791);
	sin6->sin6_addr = in6addr_loopback;
	sin6->sin6_scope_id = 1;
	srn_sockaddr_str((struct sockaddr *)&ss, s, sizeof(s));
	CHECK(!strcmp(s, "[::1%lo]:4791") || !strcmp(s, "[::1%1]:4791"), "%s", s);
}

int main(void)
{
	if (srn_rx_batch_init(&rx)) {
		fprintf(stderr, "rx_batch_init failed\n");
		return 1;
	}
	test_gid();
	test_auto_loopback();
	test_auto_shared();
	test_bad_address();
	test_ipv6();
	srn_rx_batch_free(&rx);
	CHECK(rx.bufs == NULL, "free clears");
	if (srn_check_failures) {
		fprintf(stderr, "test_link_udp: %d failure(s)\n", srn_check_failures);
		return 1;
	}
	printf("test_link_udp: ok\n");
	return 0;
}
