/*
 * test_cc_ports.c - per-QP UDP source ports (link/udp_ports.h) on real
 * sockets on 127.0.0.1:
 *   1. the port of a QP is rxe's 0xC000 + hash_32(qpn, 14) (against a
 *      naive 64-bit model on many QPNs), its socket bound to it;
 *   2. a port another program holds is skipped for the next free one;
 *   3. past the SOFTRNIC_SRC_PORTS budget a QP shares a port we hold;
 *   4. a batch leaves from the sockets its messages name, split at each
 *      change of port, and the receiver sees those source ports;
 *   5. SOFTRNIC_SRC_PORTS=0 keeps the device port; a bad value fails the
 *      open with a message naming the variable.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "link/udp.h"
#include "link/udp_ports.h"

static struct srn_dev_cfg cfg(const char *name)
{
	struct srn_dev_cfg c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "%s", name);
	c.family = AF_INET;
	c.port = 0;      /* the kernel picks: no clash with other tests */
	struct sockaddr_in *sin = (struct sockaddr_in *)&c.addr;
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return c;
}

static uint16_t bound_port(int fd)
{
	struct sockaddr_in a;
	socklen_t l = sizeof(a);
	if (getsockname(fd, (struct sockaddr *)&a, &l))
		return 0;
	return ntohs(a.sin_port);
}

/* A socket holding 127.0.0.1:port, or -1 when someone else has it. */
static int hold(uint16_t port)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return -1;
	}
	return fd;
}

static void test_formula(void)
{
	for (uint64_t q = 0; q < (1u << 24); q += 4099) {
		uint64_t naive = 0xC000 + (((q * 0x61C88647ull) % (1ull << 32)) >> 18);
		CHECK(srn_rxe_src_port((uint32_t)q) == naive, "qpn %llu", (unsigned long long)q);
	}
}

/* Receive n datagrams on b (bounded: 5 s) and return their source ports. */
static int recv_ports(struct srn_udp *b, struct srn_rx_batch *rx, uint16_t *ports, int n)
{
	int got = 0;
	for (int tries = 0; got < n && tries < 500; tries++) {
		int r = srn_udp_recv_batch(b, rx, NULL);
		if (r < 0)
			break;
		for (int i = 0; i < r && got < n; i++)
			ports[got++] = ntohs(((struct sockaddr_in *)&rx->pkt[i].src)->sin_port);
		if (r == 0)
			nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
	}
	return got;
}

static void test_ports(void)
{
	setenv(SRN_SRC_PORTS_ENV, "2", 1);
	struct srn_dev_cfg ca = cfg("softrnicA"), cb = cfg("softrnicB");
	struct srn_udp a, b;
	char err[256];
	int rc = srn_udp_open(&a, &ca, err, sizeof(err));
	CHECK(rc == 0, "open A: %s", err);
	rc = srn_udp_open(&b, &cb, err, sizeof(err));
	CHECK(rc == 0, "open B: %s", err);
	if (srn_check_failures)
		return;

	/* 1. QP 0x123: its formula port, if nobody else on the host has it. */
	uint32_t q1 = 0x123, q2 = 0x456, q3 = 0x789;
	uint16_t f1 = srn_rxe_src_port(q1), f2 = srn_rxe_src_port(q2);
	int probe = hold(f1);
	bool f1_free = probe >= 0;
	if (probe >= 0)
		close(probe);
	uint16_t p1 = srn_udp_port_for_qp(&a, q1);
	if (f1_free)
		CHECK(p1 == f1, "QP %#x: port %u, rxe says %u", q1, p1, f1);
	CHECK(p1 >= SRN_SRC_PORT_BASE && p1 != a.port, "QP %#x: port %u", q1, p1);
	int fd1 = srn_udp_port_fd(&a, p1);
	CHECK(fd1 != a.fd && bound_port(fd1) == p1, "QP %#x: socket on %u", q1, bound_port(fd1));
	CHECK(srn_udp_port_for_qp(&a, q1) == p1, "the same QP, the same port");

	/* 2. Someone holds QP 0x456's port: the next free one. */
	int other = hold(f2);
	uint16_t p2 = srn_udp_port_for_qp(&a, q2);
	if (other >= 0)
		CHECK(p2 != f2, "QP %#x took %u, held by another socket", q2, p2);
	CHECK(p2 >= SRN_SRC_PORT_BASE && p2 != p1, "QP %#x: port %u", q2, p2);
	CHECK(bound_port(srn_udp_port_fd(&a, p2)) == p2, "QP %#x: its socket", q2);
	if (other >= 0)
		close(other);
	/* Asked again once the port is free: still the port it has. */
	CHECK(srn_udp_port_for_qp(&a, q2) == p2, "QP %#x asked again", q2);

	/* 3. Budget of 2 spent: a third QP shares one of them. */
	uint16_t p3 = srn_udp_port_for_qp(&a, q3);
	CHECK(p3 == p1 || p3 == p2, "QP %#x: port %u beyond the budget", q3, p3);
	CHECK(srn_udp_port_fd(&a, a.port) == a.fd, "the device port is the device socket");
	CHECK(srn_udp_port_fd(&a, 0xFFFF) == a.fd || p1 == 0xFFFF || p2 == 0xFFFF,
	      "a port not ours sends from the device socket");

	/* 4. One batch, three ports: p1, p1, device, p2. */
	struct srn_rx_batch rx;
	CHECK(srn_rx_batch_init(&rx) == 0);
	uint8_t data[64] = { 0 };
	struct iovec v = { data, sizeof(data) };
	uint16_t order[4] = { p1, p1, a.port, p2 };
	struct srn_tx_msg m[4];
	for (int i = 0; i < 4; i++)
		m[i] = (struct srn_tx_msg){ (struct sockaddr *)&b.local, b.local_len, &v, 1, 0,
					    order[i] };
	int sent = 0, calls = 0;
	while (sent < 4 && calls < 20) {
		int r = srn_udp_send_batch(&a, m + sent, 4 - sent);
		calls++;
		CHECK(r > 0, "send_batch: %d", r);
		if (r <= 0)
			break;
		sent += r;
	}
	CHECK(sent == 4 && calls == 3, "sent %d in %d calls (expected 4 in 3)", sent, calls);
	uint16_t seen[4] = { 0 };
	int got = recv_ports(&b, &rx, seen, 4);
	CHECK(got == 4, "received %d of 4", got);
	for (int i = 0; i < got; i++)
		CHECK(seen[i] == order[i], "datagram %d from port %u, sent from %u", i, seen[i],
		      order[i]);
	srn_rx_batch_free(&rx);
	srn_udp_close(&a);
	srn_udp_close(&b);
}

static void test_off_and_bad(void)
{
	setenv(SRN_SRC_PORTS_ENV, "0", 1);
	struct srn_dev_cfg c = cfg("softrnic0");
	struct srn_udp u;
	char err[256];
	int rc = srn_udp_open(&u, &c, err, sizeof(err));
	CHECK(rc == 0, "open: %s", err);
	if (rc == 0) {
		CHECK(srn_udp_port_for_qp(&u, 0x123) == u.port, "off: the device port");
		srn_udp_close(&u);
	}
	setenv(SRN_SRC_PORTS_ENV, "many", 1);
	c = cfg("softrnic0");
	rc = srn_udp_open(&u, &c, err, sizeof(err));
	CHECK(rc == -EINVAL && strstr(err, "SOFTRNIC_SRC_PORTS=many"), "bad value: %d %s", rc, err);
	setenv(SRN_SRC_PORTS_ENV, "256", 1);
	c = cfg("softrnic0");
	rc = srn_udp_open(&u, &c, err, sizeof(err));
	CHECK(rc == -EINVAL, "256 sockets: %d", rc);
	unsetenv(SRN_SRC_PORTS_ENV);
}

int main(void)
{
	test_formula();
	test_ports();
	test_off_and_bad();
	return srn_check_result();
}
