/*
 * udp_ports.c - per-QP UDP source ports (see udp_ports.h).
 *
 * Invariants: slot_of[p - 0xC000] is 1 + the index of the socket bound
 * to p when we hold p; for a port another program held when a QP wanted
 * it, 1 + the index of the socket bound in its place; else 0.  A QP's
 * port is always one we hold or the device port, so the egress finds its
 * socket in one load.
 */
#include "link/udp_ports.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "link/udp.h"

struct srn_udp_ports {
	unsigned max, n;
	int fd[SRN_SRC_PORTS_MAX];
	uint16_t port[SRN_SRC_PORTS_MAX];
	uint8_t slot_of[SRN_SRC_PORT_SPAN];
};

int srn_udp_ports_open(struct srn_udp *u, const char *name, char *err, size_t errlen)
{
	u->ports = NULL;
	unsigned long max = SRN_SRC_PORTS_DEFAULT;
	const char *v = getenv(SRN_SRC_PORTS_ENV);
	if (v && *v) {
		char *end;
		errno = 0;
		max = strtoul(v, &end, 10);
		if (errno || *end || v[0] == '-' || max > SRN_SRC_PORTS_MAX) {
			snprintf(err, errlen, "%s: %s=%s: expected a whole number from 0 (off) to %u",
				 name, SRN_SRC_PORTS_ENV, v, SRN_SRC_PORTS_MAX);
			return -EINVAL;
		}
	}
	/* Held packets of the fault injector leave later from the device
	 * socket, with the ICRC of the port they were built for: keep one
	 * port, so that every packet is still verifiable. */
	if (max == 0 || u->fault)
		return 0;
	struct srn_udp_ports *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->max = (unsigned)max;
	u->ports = p;
	return 0;
}

void srn_udp_ports_close(struct srn_udp *u)
{
	struct srn_udp_ports *p = u->ports;
	if (!p)
		return;
	for (unsigned i = 0; i < p->n; i++)
		close(p->fd[i]);
	free(p);
	u->ports = NULL;
}

/* What the device socket has that the packets' ICRC and the fabric rely
 * on (udp.c set_options, udp_ecn.c): DF and so IPv4 ID 0, IPv6 zero
 * checksums, the TOS with its ECN bits, a send buffer for bursts. */
static int set_send_options(const struct srn_udp *u, int fd)
{
	int one = 1, tos = u->tos, sz = SRN_UDP_SOCKBUF, tiny = 1;
	int r;
	if (u->family == AF_INET) {
		int df = IP_PMTUDISC_DO;
		r = setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &df, sizeof(df));
		if (!r && tos)
			r = setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
	} else {
		int df = IPV6_PMTUDISC_DO;
		r = setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		if (!r)
			r = setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &df, sizeof(df));
		if (!r)
			r = setsockopt(fd, SOL_UDP, UDP_NO_CHECK6_TX, &one, sizeof(one));
		if (!r && tos)
			r = setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof(tos));
	}
	if (r)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	/* Nothing should arrive here; what does only waits to be freed. */
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &tiny, sizeof(tiny));
	return 0;
}

/* Bind a send socket to the device address and the first port from
 * `want` on (wrapping inside 0xC000-0xFFFF) that nobody holds: -1 when
 * none could be had. */
static int open_port(struct srn_udp *u, uint16_t want, uint16_t *got)
{
	struct srn_udp_ports *p = u->ports;
	/* Straight to the kernel: a port opens when a QP connects, which may
	 * be inside a program running under librspreload, and its socket()
	 * and bind() would make this an rsocket over our own device.  The
	 * preload passes every other call on an fd it did not make through
	 * to libc. */
	int fd = (int)syscall(SYS_socket, u->family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			      IPPROTO_UDP);
	if (fd < 0)
		return -1;
	if (set_send_options(u, fd)) {
		close(fd);
		return -1;
	}
	struct sockaddr_storage a = u->local;
	/* A bounded walk: past 64 taken ports the host is busy enough that
	 * the device port will do. */
	for (unsigned k = 0; k < 64; k++) {
		uint16_t port = (uint16_t)(SRN_SRC_PORT_BASE + (want - SRN_SRC_PORT_BASE + k) % SRN_SRC_PORT_SPAN);
		if (p->slot_of[port - SRN_SRC_PORT_BASE] || port == u->port)
			continue;
		srn_udp_port_addr(u, port, &a);
		if (syscall(SYS_bind, fd, (struct sockaddr *)&a, u->local_len) == 0) {
			*got = port;
			return fd;
		}
		if (errno != EADDRINUSE)
			break;
	}
	close(fd);
	return -1;
}

uint16_t srn_udp_port_for_qp(struct srn_udp *u, uint32_t qpn)
{
	struct srn_udp_ports *p = u->ports;
	if (!p)
		return u->port;
	uint16_t want = srn_rxe_src_port(qpn);
	uint8_t s = p->slot_of[want - SRN_SRC_PORT_BASE];
	if (s)
		return p->port[s - 1];
	if (p->n == p->max) {
		/* Budget spent: share a socket we have, picked by the hash. */
		return p->n ? p->port[(want - SRN_SRC_PORT_BASE) % p->n] : u->port;
	}
	uint16_t got;
	int fd = open_port(u, want, &got);
	if (fd < 0)
		return u->port;
	p->fd[p->n] = fd;
	p->port[p->n] = got;
	p->slot_of[got - SRN_SRC_PORT_BASE] = (uint8_t)(++p->n);
	/* Someone else holds `want`: QPs that hash to it get `got` from now
	 * on, rather than a new socket each time they ask. */
	if (got != want)
		p->slot_of[want - SRN_SRC_PORT_BASE] = (uint8_t)p->n;
	return got;
}

int srn_udp_port_fd(const struct srn_udp *u, uint16_t sport)
{
	const struct srn_udp_ports *p = u->ports;
	/* The device port first: a slot of a port someone else holds
	 * (srn_udp_port_for_qp) may be the device's own. */
	if (!p || sport < SRN_SRC_PORT_BASE || sport == u->port)
		return u->fd;
	uint8_t s = p->slot_of[sport - SRN_SRC_PORT_BASE];
	return s ? p->fd[s - 1] : u->fd;
}

void srn_udp_port_addr(const struct srn_udp *u, uint16_t port, struct sockaddr_storage *out)
{
	*out = u->local;
	if (u->family == AF_INET)
		((struct sockaddr_in *)out)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)out)->sin6_port = htons(port);
}
