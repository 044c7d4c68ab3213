/* The device's UDP socket: open/bind with the options RoCEv2 needs, batched
 * send and receive of opaque datagrams, and sockaddr/GID helpers.
 *
 * Invariants: an open srn_udp has a bound, non-blocking, unconnected socket
 * whose local address and port are in u->local/u->port; sends and receives
 * never block and never log (the caller counts errors). Nothing here parses
 * a datagram.
 *
 * Why each socket option (see docs/wire.md §6):
 * - IP_PMTUDISC_DO: RoCEv2 packets carry DF. It also makes Linux write IP ID
 *   0 on an unconnected socket instead of a hashed counter; the ICRC covers
 *   the ID, so a predictable 0 is what lets the receiver verify it without
 *   seeing the IP header.
 * - IPV6_PMTUDISC_DO: never fragment locally; an oversized packet is a
 *   caller bug (wrong path MTU) and must fail loudly with EMSGSIZE.
 * - UDP_NO_CHECK6_RX/TX: rxe and RoCE NICs send UDP checksum 0 over IPv6,
 *   which Linux drops by default; the ICRC protects the payload instead.
 * - IPV6_V6ONLY: an IPv6 device must not collide with, or receive for, an
 *   IPv4 device on the same port.
 * - No SO_REUSEADDR: a failed bind is how auto_loopback learns that another
 *   user, or an exclusive process, owns 127.0.0.N:port.  A configured or
 *   auto address is bound with SO_REUSEPORT (udp_group.h): processes of
 *   one user share it.
 *
 * The fault injector and the pcap trace hook in behind u->hooked: with
 * neither configured, each data-path call costs one untaken branch. With
 * them, every datagram that reaches the socket goes through srn_udp_xmit
 * and every one read from it through srn_udp_recv_into, the two places
 * that trace, so the trace shows the wire: after TX faults, before RX ones.
 */
#include "link/udp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "diag/clock.h"
#include "link/fork_drop.h"
#include "diag/memcheck.h"
#include "link/pcap.h"
#include "link/udp_group.h"
#include "link/udp_ports.h"
#include "wire/roce_hdr.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103         /* Linux 4.18; older headers lack it */
#endif

#define SRN_AUTO_LOOPBACK_LAST 254   /* 127.0.0.1 .. 127.0.0.254 */
#define SRN_FALLBACK_MTU 1500        /* when the interface cannot be found: the common Ethernet MTU */

/* Best effort: the FORCE variants ignore rmem_max/wmem_max but need
 * CAP_NET_ADMIN; without it the plain option is capped by the sysctl. */
static int set_bufsize(int fd, int force_opt, int opt, int bytes)
{
	if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof(bytes)))
		setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
	int got = 0;
	socklen_t len = sizeof(got);
	getsockopt(fd, SOL_SOCKET, opt, &got, &len);
	return got;
}

static int set_int(int fd, int level, int opt, int val)
{
	return setsockopt(fd, level, opt, &val, sizeof(val)) ? -errno : 0;
}

static int set_options(struct srn_udp *u, const char *name, char *err, size_t errlen)
{
	int rc;
	const char *what;
	if (u->family == AF_INET) {
		what = "IP_MTU_DISCOVER";
		rc = set_int(u->fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO);
	} else {
		what = "IPV6_V6ONLY";
		rc = set_int(u->fd, IPPROTO_IPV6, IPV6_V6ONLY, 1);
		if (!rc) {
			what = "IPV6_MTU_DISCOVER";
			rc = set_int(u->fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, IPV6_PMTUDISC_DO);
		}
		if (!rc) {
			what = "UDP_NO_CHECK6_RX";
			rc = set_int(u->fd, SOL_UDP, UDP_NO_CHECK6_RX, 1);
		}
		if (!rc) {
			what = "UDP_NO_CHECK6_TX";
			rc = set_int(u->fd, SOL_UDP, UDP_NO_CHECK6_TX, 1);
		}
	}
	if (rc) {
		snprintf(err, errlen, "%s: cannot set %s on the UDP socket: %s", name, what, strerror(-rc));
		return rc;
	}
	u->rcvbuf = set_bufsize(u->fd, SO_RCVBUFFORCE, SO_RCVBUF, SRN_UDP_SOCKBUF);
	u->sndbuf = set_bufsize(u->fd, SO_SNDBUFFORCE, SO_SNDBUF, SRN_UDP_SOCKBUF);
	return 0;
}

static const char *bind_hint(int e, const struct srn_dev_cfg *cfg)
{
	switch (e) {
	case EADDRNOTAVAIL:
		if (cfg->auto_loopback)
			return "is the loopback interface up in this network namespace?";
		if (cfg->family == AF_INET6)
			return "is the address configured on an interface in this network namespace, "
				   "and past duplicate address detection?";
		return "is the address configured on an interface in this network namespace?";
	case EADDRINUSE:
		return "another softrnic process or the rdma_rxe kernel module owns this port";
	case EACCES:
		return "ports below 1024 need CAP_NET_BIND_SERVICE";
	default:
		return NULL;
	}
}

static void bind_error(const struct srn_dev_cfg *cfg, const char *target, int e,
					   char *err, size_t errlen)
{
	const char *hint = bind_hint(e, cfg);
	snprintf(err, errlen, "%s: cannot bind %s: %s%s%s%s", cfg->name, target, strerror(e),
			 hint ? " (" : "", hint ? hint : "", hint ? ")" : "");
}

static socklen_t fill_local(struct sockaddr_storage *ss, const struct srn_dev_cfg *cfg)
{
	memcpy(ss, &cfg->addr, sizeof(*ss));
	if (cfg->family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;
		sin->sin_family = AF_INET;
		sin->sin_port = htons(cfg->port);
		return sizeof(*sin);
	}
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
	sin6->sin6_family = AF_INET6;
	sin6->sin6_port = htons(cfg->port);
	return sizeof(*sin6);
}

/* addr=auto, the default: like a NIC, one address for every process of
 * the host (of this user, in this network namespace), the first of
 * 127.0.0.1..254 whose group we may join: another user's processes, or
 * an exclusive one, hold theirs alone (udp_group.h).  With share=0 each
 * process keeps the first address nobody holds, its own, from 127.0.0.2:
 * 127.0.0.1 stays the host's, or an exclusive process that took it while
 * the group was empty would move every other process's address. */
static int bind_auto(struct srn_udp *u, struct srn_dev_cfg *cfg, char *err, size_t errlen)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(cfg->port) };
	int e = 0;
	for (uint32_t n = cfg->exclusive ? 2 : 1; n <= SRN_AUTO_LOOPBACK_LAST; n++) {
		sin.sin_addr.s_addr = htonl((IN_LOOPBACKNET << 24) | n);
		int rc;
		if (cfg->exclusive)
			rc = bind(u->fd, (struct sockaddr *)&sin, sizeof(sin)) ? -errno : 0;
		else
			rc = srn_udp_group_bind(u, cfg, (struct sockaddr *)&sin, sizeof(sin), err, errlen);
		if (rc == 0)
			return 0;
		e = -rc;
		if (e != EADDRINUSE)
			break;
	}
	if (err[0])
		return -e;              /* the group explained it */
	char target[96];
	snprintf(target, sizeof(target), "any of 127.0.0.%d-127.0.0.%d on port %u",
			 cfg->exclusive ? 2 : 1, SRN_AUTO_LOOPBACK_LAST, cfg->port);
	bind_error(cfg, target, e, err, errlen);
	return -e;
}

static void hooks_close(struct srn_udp *u)
{
	srn_fault_destroy(u->fault);
	srn_pcap_close(u->pcap);
	u->fault = NULL;
	u->pcap = NULL;
	u->hooked = false;
}

/* SOFTRNIC_FAULTS and SOFTRNIC_PCAP, read at every open so a test can set
 * them per device; a mistake fails the open rather than silently running
 * without the faults or the trace the user asked for. */
static int hooks_open(struct srn_udp *u, const char *name, char *err, size_t errlen)
{
	char msg[256];
	int rc = 0;
	const char *spec = getenv(SRN_FAULT_ENV);
	if (spec && *spec) {
		struct srn_fault_cfg fc;
		rc = srn_fault_parse(spec, &fc, msg, sizeof(msg));
		if (!rc) {
			rc = srn_fault_create(&fc, &u->fault);
			if (rc)
				snprintf(msg, sizeof(msg), "%s: %s", SRN_FAULT_ENV, strerror(-rc));
		}
	}
	if (!rc)
		rc = srn_pcap_open_env(&u->pcap, msg, sizeof(msg));
	if (rc) {
		snprintf(err, errlen, "%s: %s", name, msg);
		hooks_close(u);
		return rc;
	}
	u->hooked = u->fault || u->pcap;
	return 0;
}

/* Bind to the configured address: alone, or into the group that shares
 * it (link/udp_group.h). */
static int bind_cfg(struct srn_udp *u, struct srn_dev_cfg *cfg, char *err, size_t errlen)
{
	if (cfg->auto_loopback)
		return bind_auto(u, cfg, err, errlen);
	int rc;
	struct sockaddr_storage ss;
	socklen_t sl = fill_local(&ss, cfg);
	/* Port 0 (tests): the kernel picks a port nobody else has. */
	if (cfg->exclusive || cfg->port == 0)
		rc = bind(u->fd, (struct sockaddr *)&ss, sl) ? -errno : 0;
	else
		rc = srn_udp_group_bind(u, cfg, (struct sockaddr *)&ss, sl, err, errlen);
	if (rc && !err[0]) {
		char target[SRN_SOCKADDR_STRLEN];
		bind_error(cfg, srn_sockaddr_str((struct sockaddr *)&ss, target, sizeof(target)),
				   -rc, err, errlen);
	}
	return rc;
}

/* The bound address and port, written back into cfg (the auto address
 * and a 0 port become what the kernel chose), and the link MTU when the
 * configuration left it open. */
static int learn_local(struct srn_udp *u, struct srn_dev_cfg *cfg, char *err, size_t errlen)
{
	u->local_len = sizeof(u->local);
	if (getsockname(u->fd, (struct sockaddr *)&u->local, &u->local_len)) {
		int rc = -errno;
		snprintf(err, errlen, "%s: getsockname: %s", cfg->name, strerror(-rc));
		return rc;
	}
	if (u->family == AF_INET)
		u->port = ntohs(((struct sockaddr_in *)&u->local)->sin_port);
	else
		u->port = ntohs(((struct sockaddr_in6 *)&u->local)->sin6_port);

	/* Write back what the kernel chose: the auto address and a 0 port. */
	memcpy(&cfg->addr, &u->local, sizeof(cfg->addr));
	if (u->family == AF_INET)
		((struct sockaddr_in *)&cfg->addr)->sin_port = 0;
	else
		((struct sockaddr_in6 *)&cfg->addr)->sin6_port = 0;
	cfg->port = u->port;
	if (cfg->link_mtu == 0) {
		uint32_t mtu;
		if (srn_link_detect_mtu((struct sockaddr *)&u->local, &mtu) == 0)
			cfg->link_mtu = mtu;
		else
			cfg->link_mtu = cfg->auto_loopback ? SRN_LOOPBACK_MTU : SRN_FALLBACK_MTU;
	}
	return 0;
}

int srn_udp_open(struct srn_udp *u, struct srn_dev_cfg *cfg, char *err, size_t errlen)
{
	char dummy[1];
	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	memset(u, 0, sizeof(*u));
	u->fd = -1;
	if (cfg->family != AF_INET && cfg->family != AF_INET6) {
		snprintf(err, errlen, "%s: address family %d is not IPv4 or IPv6", cfg->name, cfg->family);
		return -EAFNOSUPPORT;
	}
	if (cfg->auto_loopback && cfg->family != AF_INET) {
		snprintf(err, errlen, "%s: addr=auto picks an IPv4 loopback address", cfg->name);
		return -EINVAL;
	}
	u->family = cfg->family;
	u->fd = socket(cfg->family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
	if (u->fd < 0) {
		int e = errno;
		snprintf(err, errlen, "%s: cannot create a UDP socket: %s", cfg->name, strerror(e));
		return -e;
	}
	srn_fork_drop_add(u->fd);
	int rc = set_options(u, cfg->name, err, errlen);
	if (rc)
		goto fail;

	rc = bind_cfg(u, cfg, err, errlen);
	if (rc)
		goto fail;
	rc = learn_local(u, cfg, err, errlen);
	if (rc)
		goto fail;
	rc = srn_udp_ecn_setup(u, cfg->name, err, errlen);
	if (rc)
		goto fail;
	rc = hooks_open(u, cfg->name, err, errlen);
	if (rc)
		goto fail;
	rc = srn_udp_ports_open(u, cfg->name, err, errlen);
	if (rc) {
		hooks_close(u);
		goto fail;
	}
	return 0;

fail:
	srn_udp_group_leave(u);
	srn_fork_drop_del(u->fd);
	if (u->fd >= 0)
		close(u->fd);
	u->fd = -1;
	return rc;
}

void srn_udp_close(struct srn_udp *u)
{
	srn_udp_ports_close(u);
	hooks_close(u);
	srn_udp_group_leave(u);          /* closes fd under the group's lock */
	srn_fork_drop_del(u->fd);
	if (u->fd >= 0)
		close(u->fd);
	u->fd = -1;
}

/* A full socket buffer, a full device queue (ENOBUFS) and a signal are all
 * "try again later" to the transport, which keeps the packet queued. */
static int send_errno(int e)
{
	if (e == EAGAIN || e == EWOULDBLOCK || e == ENOBUFS || e == EINTR)
		return -EAGAIN;
	return -e;
}

/* *tos: the TOS the datagram left with (for the trace); fd: the device
 * socket or one of its source-port sockets (udp_ports.h). */
static int raw_send(struct srn_udp *u, int fd, const struct sockaddr *dst, socklen_t dstlen,
					const struct iovec *iov, int iovcnt, uint8_t *tos)
{
	*tos = u->tos;
	struct msghdr mh = {
		.msg_name = (void *)dst,
		.msg_namelen = dstlen,
		.msg_iov = (struct iovec *)iov,
		.msg_iovlen = (size_t)iovcnt,
	};
	union {
		char buf[SRN_ECN_TX_CMSG_SPACE];
		struct cmsghdr align;
	} mark;
	if (__builtin_expect(u->ce_every != 0, 0) && iovcnt) {   /* not a doorbell */
		mh.msg_controllen = srn_udp_ecn_mark_cmsg(u, mark.buf);
		mh.msg_control = mh.msg_controllen ? mark.buf : NULL;
		if (mh.msg_controllen)
			*tos |= SRN_ECN_CE;
	}
	/* The iovecs: headers checked at egress, payload read as by DMA
	 * (diag/memcheck.h); the address and control message are ours. */
	SRN_MEM_CHECK_DEFINED(dst, dstlen);
	SRN_MEM_CHECK_DEFINED(iov, (size_t)iovcnt * sizeof(*iov));
	SRN_MEM_CHECK_DEFINED(mh.msg_control, mh.msg_controllen);
	SRN_DMA_READ_BEGIN();
	ssize_t r = sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	int err = errno;
	SRN_DMA_READ_END();
	if (r < 0)
		return send_errno(err);
	return 0;
}

/* One datagram from source port sport, traced with that port. */
static int xmit_from(struct srn_udp *u, uint16_t sport, const struct sockaddr *dst,
		     socklen_t dstlen, const struct iovec *iov, int iovcnt)
{
	uint8_t tos;
	int fd = srn_udp_port_fd(u, sport);
	int r = raw_send(u, fd, dst, dstlen, iov, iovcnt, &tos);
	if (r == 0 && u->pcap) {
		struct sockaddr_storage from = u->local;
		if (fd != u->fd)
			srn_udp_port_addr(u, sport, &from);
		srn_pcap_record(u->pcap, (const struct sockaddr *)&from, dst, iov, iovcnt, false,
				srn_now_ns(), tos);
	}
	return r;
}

int srn_udp_xmit(struct srn_udp *u, const struct sockaddr *dst, socklen_t dstlen,
				 const struct iovec *iov, int iovcnt)
{
	return xmit_from(u, u->port, dst, dstlen, iov, iovcnt);
}

/* The fault injector keeps one port (udp_ports.h), so sport matters to
 * the trace alone. */
static int sendv_hooked(struct srn_udp *u, uint16_t sport, const struct sockaddr *dst,
			socklen_t dstlen, const struct iovec *iov, int iovcnt)
{
	if (u->fault)
		return srn_fault_tx(u, dst, dstlen, iov, iovcnt, srn_now_ns());
	return xmit_from(u, sport, dst, dstlen, iov, iovcnt);
}

int srn_udp_doorbell(struct srn_udp *u, const struct sockaddr *dst, socklen_t dstlen,
		     unsigned member)
{
	if (dst->sa_family != u->family)
		return -EAFNOSUPPORT;
	/* An empty datagram reaches a shared address's member 0 only. */
	if (member && srn_udp_group_doorbell(u, dst, dstlen, member) == 0)
		return 0;
	uint8_t tos;
	return raw_send(u, u->fd, dst, dstlen, NULL, 0, &tos);
}

int srn_udp_sendv(struct srn_udp *u, const struct sockaddr *dst, socklen_t dstlen,
				  const struct iovec *iov, int iovcnt)
{
	if (dst->sa_family != u->family)
		return -EAFNOSUPPORT;
	if (__builtin_expect(u->hooked, 0))
		return sendv_hooked(u, u->port, dst, dstlen, iov, iovcnt);
	uint8_t tos;
	return raw_send(u, u->fd, dst, dstlen, iov, iovcnt, &tos);
}

/* One datagram at a time, so each gets its own fault decision and trace
 * record; same result convention as the sendmmsg path. */
static int send_batch_hooked(struct srn_udp *u, const struct srn_tx_msg *m, int n)
{
	int k;
	for (k = 0; k < n; k++) {
		if (m[k].dst->sa_family != u->family)
			break;
		int r = sendv_hooked(u, m[k].sport, m[k].dst, m[k].dstlen, m[k].iov, m[k].iovcnt);
		if (r == -EAGAIN)
			break;
		if (r < 0)
			return k ? k : r;
	}
	if (k == 0 && n > 0 && m[0].dst->sa_family != u->family)
		return -EAFNOSUPPORT;
	return k;
}

int srn_udp_send_batch(struct srn_udp *u, const struct srn_tx_msg *m, int n)
{
	struct mmsghdr mm[SRN_TX_BATCH];
	union {
		char buf[CMSG_SPACE(sizeof(uint16_t)) + SRN_ECN_TX_CMSG_SPACE];
		struct cmsghdr align;
	} ctrl[SRN_TX_BATCH];
	if (n > SRN_TX_BATCH)
		n = SRN_TX_BATCH;
	if (__builtin_expect(u->hooked, 0)) {
		/* The hooks judge one packet at a time: the messages before the
		 * first GSO run go; the run itself is refused. */
		for (int k = 0; k < n; k++)
			if (m[k].gso_seg) {
				if (k == 0)
					return -EINVAL;
				n = k;
				break;
			}
		return send_batch_hooked(u, m, n);
	}
	int k;
	for (k = 0; k < n; k++) {
		if (m[k].dst->sa_family != u->family || m[k].sport != m[0].sport)
			break;
		struct msghdr *h = &mm[k].msg_hdr;
		memset(&mm[k], 0, sizeof(mm[k]));
		h->msg_name = (void *)m[k].dst;
		h->msg_namelen = m[k].dstlen;
		h->msg_iov = (struct iovec *)m[k].iov;
		h->msg_iovlen = (size_t)m[k].iovcnt;
		if (m[k].gso_seg) {
			memset(&ctrl[k], 0, sizeof(ctrl[k]));
			h->msg_control = ctrl[k].buf;
			h->msg_controllen = CMSG_SPACE(sizeof(uint16_t));
			struct cmsghdr *c = CMSG_FIRSTHDR(h);
			c->cmsg_level = SOL_UDP;
			c->cmsg_type = UDP_SEGMENT;
			c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
			memcpy(CMSG_DATA(c), &m[k].gso_seg, sizeof(uint16_t));
		}
		if (__builtin_expect(u->ce_every != 0, 0)) {
			/* SOFTRNIC_ECN_MARK: after the GSO message, if any. */
			size_t at = h->msg_controllen;
			size_t l = srn_udp_ecn_mark_cmsg(u, ctrl[k].buf + at);
			if (l) {
				h->msg_control = ctrl[k].buf;
				h->msg_controllen = at + l;
			}
		}
	}
	if (k == 0)
		return n > 0 ? -EAFNOSUPPORT : 0;
	/* As raw_send: what is ours checked, the payloads read as by DMA. */
	for (int j = 0; j < k; j++) {
		const struct msghdr *h = &mm[j].msg_hdr;
		SRN_MEM_CHECK_DEFINED(h->msg_name, h->msg_namelen);
		SRN_MEM_CHECK_DEFINED(h->msg_iov, h->msg_iovlen * sizeof(*h->msg_iov));
		SRN_MEM_CHECK_DEFINED(h->msg_control, h->msg_controllen);
	}
	SRN_DMA_READ_BEGIN();
	int r = sendmmsg(srn_udp_port_fd(u, m[0].sport), mm, (unsigned)k, MSG_DONTWAIT | MSG_NOSIGNAL);
	int err = errno;
	SRN_DMA_READ_END();
	if (r < 0) {
		int e = send_errno(err);
		return e == -EAGAIN ? 0 : e;
	}
	return r;
}

int srn_rx_batch_init(struct srn_rx_batch *b)
{
	memset(b, 0, sizeof(*b));
	void *p = NULL;
	if (posix_memalign(&p, 64, (size_t)SRN_RX_BATCH * SRN_RX_BUFSZ))
		return -ENOMEM;
	b->bufs = p;
	return 0;
}

void srn_rx_batch_free(struct srn_rx_batch *b)
{
	free(b->bufs);
	b->bufs = NULL;
	b->count = 0;
}

/* Receive into slots first..first+max-1 and describe what arrived in
 * pkt[first..]. */
static int recv_raw(struct srn_udp *u, struct srn_rx_batch *b, int first, int max,
					int *truncated)
{
	if (truncated)
		*truncated = 0;
	/* Descriptors are rebuilt each call (a few stores per slot, nothing next
	 * to the system call) so a batch stays valid if its owner moves it, and
	 * the kernel's msg_namelen/msg_flags outputs never leak into a later call. */
	for (int i = first; i < first + max; i++) {
		b->iov[i].iov_base = b->bufs + (size_t)i * SRN_RX_BUFSZ;
		b->iov[i].iov_len = SRN_RX_BUFSZ;
		struct msghdr *h = &b->msgs[i].msg_hdr;
		memset(h, 0, sizeof(*h));
		h->msg_name = &b->pkt[i].src;
		h->msg_namelen = sizeof(b->pkt[i].src);
		h->msg_iov = &b->iov[i];
		h->msg_iovlen = 1;
		if (u->ecn_rx) {
			h->msg_control = b->ctrl[i];
			h->msg_controllen = sizeof(b->ctrl[i]);
		}
	}
	int r = recvmmsg(u->fd, b->msgs + first, (unsigned)max, MSG_DONTWAIT, NULL);
	if (r < 0) {
		int e = errno;
		return (e == EAGAIN || e == EWOULDBLOCK || e == EINTR) ? 0 : -e;
	}
	int n = first, trunc = 0;
	for (int i = first; i < first + r; i++) {
		const struct msghdr *h = &b->msgs[i].msg_hdr;
		/* A cut datagram cannot pass the ICRC anyway; drop it here so the
		 * layers above only ever see whole packets. */
		if (h->msg_flags & MSG_TRUNC) {
			trunc++;
			continue;
		}
		if (n != i)
			b->pkt[n].src = b->pkt[i].src;
		b->pkt[n].data = b->iov[i].iov_base;
		b->pkt[n].len = b->msgs[i].msg_len;
		b->pkt[n].srclen = h->msg_namelen;
		b->pkt[n].tos = srn_udp_cmsg_tos(h);
		n++;
	}
	if (truncated)
		*truncated = trunc;
	return n - first;
}

int srn_udp_recv_into(struct srn_udp *u, struct srn_rx_batch *b, int first, int max,
					  int *truncated)
{
	int r = recv_raw(u, b, first, max, truncated);
	if (u->pcap && r > 0) {
		uint64_t now = srn_now_ns();
		for (int i = first; i < first + r; i++) {
			if (b->pkt[i].len == 0 || srn_grp_is_probe(b->pkt[i].data, b->pkt[i].len))
				continue;   /* a same-host peer's doorbell (link/shm.h), a group's
					     * probe (udp_group.h): not RoCE */
			struct iovec v = { b->pkt[i].data, b->pkt[i].len };
			srn_pcap_record(u->pcap, (const struct sockaddr *)&b->pkt[i].src,
							(const struct sockaddr *)&u->local, &v, 1, true, now,
							b->pkt[i].tos);
		}
	}
	return r;
}

void srn_udp_rx_meta(const struct srn_udp *u, const struct sockaddr *src,
		     const struct sockaddr_storage *local, struct srn_ip_meta *m)
{
	memset(m, 0, sizeof(*m));
	m->family = u->family;
	m->dport = u->port;
	if (src->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)src;
		const struct sockaddr_in *d = (const void *)local;
		memcpy(m->src, &s->sin_addr, 4);
		memcpy(m->dst, &d->sin_addr, 4);
		m->sport = ntohs(s->sin_port);
		m->ipv4_frag = 0x4000;
	} else {
		const struct sockaddr_in6 *s = (const void *)src;
		const struct sockaddr_in6 *d = (const void *)local;
		memcpy(m->src, &s->sin6_addr, 16);
		memcpy(m->dst, &d->sin6_addr, 16);
		m->sport = ntohs(s->sin6_port);
	}
}

void srn_udp_trace_synth(struct srn_udp *u, const struct sockaddr *peer,
			 const struct srn_ip_meta *tx_meta, bool from_peer, struct iovec *v, int n,
			 uint32_t pad, uint8_t tos)
{
	/* Pad bytes are zero; the ICRC follows them. */
	uint8_t tail[3 + SRN_ICRC_LEN] = { 0 };
	struct srn_ip_meta m;
	if (from_peer) {
		srn_udp_rx_meta(u, peer, &u->local, &m);
	} else {
		/* From the device port, not the QP's own (udp_ports.h): the
		 * receiving side of a ring traces what it got with the only
		 * source it knows, the device's address and port, and both
		 * records of a packet must agree. */
		m = *tx_meta;
		m.sport = u->port;
	}
	v[n - 1] = (struct iovec){ tail, pad };
	srn_icrc_put(tail + pad, srn_icrc_calc(&m, v, n));
	v[n - 1].iov_len = pad + SRN_ICRC_LEN;
	const struct sockaddr *local = (const struct sockaddr *)&u->local;
	srn_pcap_record(u->pcap, from_peer ? peer : local, from_peer ? local : peer, v, n,
			from_peer, srn_now_ns(), tos);
}

void srn_udp_trace_ring_rx(struct srn_udp *u, const struct sockaddr *src, const uint8_t *data,
			   uint32_t len, uint8_t tos)
{
	if (!u->pcap || len < SRN_ICRC_LEN)
		return;
	/* The pad is in data already. */
	struct iovec v[2] = { { (void *)data, len - SRN_ICRC_LEN }, { NULL, 0 } };
	srn_udp_trace_synth(u, src, NULL, true, v, 2, 0, tos);
}

static int recv_hooked(struct srn_udp *u, struct srn_rx_batch *b, int *truncated)
{
	uint64_t now = srn_now_ns();
	int n;
	if (u->fault) {
		/* Every progress pass receives, so held TX packets also leave on
		 * time when nobody calls srn_udp_fault_flush. */
		uint64_t due = srn_fault_next_ns(u->fault);
		if (due && due <= now)
			srn_fault_tx_flush(u, now);
		n = srn_fault_rx(u, b, truncated, now);
	} else {
		n = srn_udp_recv_into(u, b, 0, SRN_RX_BATCH, truncated);
		b->count = n > 0 ? n : 0;
	}
	if (u->pcap)
		srn_pcap_flush(u->pcap, now);
	return n;
}

int srn_udp_recv_batch(struct srn_udp *u, struct srn_rx_batch *b, int *truncated)
{
	int n;
	if (__builtin_expect(u->hooked, 0)) {
		n = recv_hooked(u, b, truncated);
	} else {
		n = recv_raw(u, b, 0, SRN_RX_BATCH, truncated);
		b->count = n > 0 ? n : 0;
	}
	if (__builtin_expect(u->grp != NULL, 0))
		n = srn_udp_group_rx(u, b, n);   /* other members' packets out, theirs for us in */
	return n;
}

int srn_udp_fault_flush(struct srn_udp *u, uint64_t now_ns)
{
	int n = 0;
	if (u->fault)
		n = srn_fault_tx_flush(u, now_ns);
	if (u->pcap)
		srn_pcap_flush(u->pcap, now_ns);
	if (u->grp)
		srn_udp_group_tick(u, now_ns);
	return n;
}

static uint64_t earliest(uint64_t a, uint64_t b)
{
	return !a || (b && b < a) ? b : a;
}

uint64_t srn_udp_fault_next_ns(const struct srn_udp *u)
{
	uint64_t a = u->fault ? srn_fault_next_ns(u->fault) : 0;
	uint64_t t = u->pcap ? srn_pcap_next_ns(u->pcap) : 0;
	/* A shared address's probe (udp_group.h) wakes the engine too. */
	return earliest(earliest(a, t), srn_udp_group_next_ns(u));
}

const struct srn_fault_stats *srn_udp_fault_stats(const struct srn_udp *u)
{
	return srn_fault_stats_of(u->fault);
}

void srn_sockaddr_to_gid(const struct sockaddr *sa, uint8_t gid[16])
{
	memset(gid, 0, 16);
	if (sa->sa_family == AF_INET) {
		gid[10] = 0xff;
		gid[11] = 0xff;
		memcpy(gid + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		memcpy(gid, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	}
}

int srn_gid_to_sockaddr(const uint8_t gid[16], uint16_t port, int family_hint,
						struct sockaddr_storage *out, socklen_t *len)
{
	static const uint8_t zero[16];
	static const uint8_t v4mapped_prefix[12] = { [10] = 0xff, [11] = 0xff };
	if (!memcmp(gid, zero, 16))
		return -EINVAL;
	int family = memcmp(gid, v4mapped_prefix, 12) ? AF_INET6 : AF_INET;
	if (family_hint != AF_UNSPEC && family_hint != family)
		return -EAFNOSUPPORT;
	memset(out, 0, sizeof(*out));
	if (family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)out;
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		memcpy(&sin->sin_addr, gid + 12, 4);
		*len = sizeof(*sin);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)out;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		memcpy(&sin6->sin6_addr, gid, 16);
		*len = sizeof(*sin6);
	}
	return 0;
}

const char *srn_sockaddr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN];
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const void *)sa;
		inet_ntop(AF_INET, &sin->sin_addr, a, sizeof(a));
		snprintf(buf, len, "%s:%u", a, ntohs(sin->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const void *)sa;
		char scope[IF_NAMESIZE + 12] = "";
		inet_ntop(AF_INET6, &sin6->sin6_addr, a, sizeof(a));
		if (sin6->sin6_scope_id) {
			char ifn[IF_NAMESIZE];
			if (if_indextoname(sin6->sin6_scope_id, ifn))
				snprintf(scope, sizeof(scope), "%%%s", ifn);
			else
				snprintf(scope, sizeof(scope), "%%%u", sin6->sin6_scope_id);
		}
		snprintf(buf, len, "[%s%s]:%u", a, scope, ntohs(sin6->sin6_port));
	} else {
		snprintf(buf, len, "(address family %d)", sa->sa_family);
	}
	return buf;
}
