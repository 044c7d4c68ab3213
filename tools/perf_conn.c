/*
 * perf_conn.c - the out-of-band connection shared by the `softrnic`
 * subcommands that connect two processes: a TCP control channel of framed
 * messages, QP addresses, and RESET -> RTS bring-up (see perf_conn.h).
 *
 * Frame: magic "SRNc" (u32), type (u16), payload length (u16), payload;
 * all integers big-endian.  A frame with a wrong magic, or a payload
 * larger than the receiver's buffer, ends the conversation (-EPROTO): the
 * peer is not a softrnic tool speaking this protocol, and resynchronising
 * inside a TCP stream would be guesswork.
 *
 * Every wait is bounded: accept, connect (with retries while the server
 * is not listening yet) and each receive take a timeout in milliseconds.
 * Sends use MSG_NOSIGNAL so a vanished peer is an error, not SIGPIPE.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/qp_up.h"
#include "diag/clock.h"
#include "perf_conn.h"

#define CONN_MAGIC 0x53524e63u /* "SRNc" */
#define CONN_HDR_LEN 8
#define CONN_RETRY_MS 20       /* connect retry period while nobody listens */

static int64_t now_ms(void)
{
	return (int64_t)(srn_now_ns() / 1000000);
}

/* ---- payload writer / reader ---- */

void srn_conn_wr_init(struct srn_conn_wr *w, void *buf, size_t cap)
{
	w->buf = buf;
	w->cap = cap < SRN_CONN_MAX_PAYLOAD ? cap : SRN_CONN_MAX_PAYLOAD;
	w->len = 0;
	w->overflow = false;
}

void srn_conn_put_bytes(struct srn_conn_wr *w, const void *p, size_t n)
{
	if (w->overflow || n > w->cap - w->len) {
		w->overflow = true;
		return;
	}
	memcpy(w->buf + w->len, p, n);
	w->len += n;
}

void srn_conn_put_u8(struct srn_conn_wr *w, uint8_t v)
{
	srn_conn_put_bytes(w, &v, 1);
}

void srn_conn_put_u16(struct srn_conn_wr *w, uint16_t v)
{
	v = htobe16(v);
	srn_conn_put_bytes(w, &v, 2);
}

void srn_conn_put_u32(struct srn_conn_wr *w, uint32_t v)
{
	v = htobe32(v);
	srn_conn_put_bytes(w, &v, 4);
}

void srn_conn_put_u64(struct srn_conn_wr *w, uint64_t v)
{
	v = htobe64(v);
	srn_conn_put_bytes(w, &v, 8);
}

void srn_conn_put_str(struct srn_conn_wr *w, const char *s, size_t max)
{
	size_t n = strnlen(s, max);

	srn_conn_put_u16(w, (uint16_t)(n < UINT16_MAX ? n : UINT16_MAX));
	srn_conn_put_bytes(w, s, n < UINT16_MAX ? n : UINT16_MAX);
}

void srn_conn_get_bytes(struct srn_conn_rd *r, void *p, size_t n)
{
	if (r->bad || n > r->len - r->off) {
		r->bad = true;
		memset(p, 0, n);
		return;
	}
	memcpy(p, r->buf + r->off, n);
	r->off += n;
}

uint8_t srn_conn_get_u8(struct srn_conn_rd *r)
{
	uint8_t v;

	srn_conn_get_bytes(r, &v, 1);
	return v;
}

uint16_t srn_conn_get_u16(struct srn_conn_rd *r)
{
	uint16_t v;

	srn_conn_get_bytes(r, &v, 2);
	return be16toh(v);
}

uint32_t srn_conn_get_u32(struct srn_conn_rd *r)
{
	uint32_t v;

	srn_conn_get_bytes(r, &v, 4);
	return be32toh(v);
}

uint64_t srn_conn_get_u64(struct srn_conn_rd *r)
{
	uint64_t v;

	srn_conn_get_bytes(r, &v, 8);
	return be64toh(v);
}

void srn_conn_get_str(struct srn_conn_rd *r, char *out, size_t cap)
{
	size_t n = srn_conn_get_u16(r), keep;

	if (r->bad || n > r->len - r->off) {
		r->bad = true;
		out[0] = '\0';
		return;
	}
	keep = n < cap - 1 ? n : cap - 1;
	memcpy(out, r->buf + r->off, keep);
	out[keep] = '\0';
	/* The text is printed to a terminal: no escape sequences from a peer. */
	for (size_t i = 0; i < keep; i++)
		if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
			out[i] = '?';
	r->off += n;
}

bool srn_conn_rd_done(const struct srn_conn_rd *r)
{
	return !r->bad && r->off == r->len;
}

/* ---- TCP ---- */

int srn_conn_listen(const char *host, const char *port, int *lfd)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE };
	struct addrinfo *res, *ai;
	int err = -EADDRNOTAVAIL, one = 1, zero = 0, fd;

	/* With no host, prefer the IPv6 wildcard: dual-stack takes both. */
	if (!host)
		hints.ai_family = AF_INET6;
	if (getaddrinfo(host, port, &hints, &res)) {
		if (host)
			return -EADDRNOTAVAIL;
		hints.ai_family = AF_INET;
		if (getaddrinfo(NULL, port, &hints, &res))
			return -EADDRNOTAVAIL;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			err = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		if (!bind(fd, ai->ai_addr, ai->ai_addrlen) && !listen(fd, 4)) {
			freeaddrinfo(res);
			*lfd = fd;
			return 0;
		}
		err = -errno;
		close(fd);
	}
	freeaddrinfo(res);
	return err;
}

int srn_conn_bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len))
		return -errno;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return -EAFNOSUPPORT;
}

/* Wait for `events` on fd until deadline (ms, monotonic). */
static int wait_fd(int fd, short events, int64_t deadline)
{
	struct pollfd pfd = { .fd = fd, .events = events };

	for (;;) {
		int64_t left = deadline - now_ms();
		int n;

		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, left > 1000 ? 1000 : (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

static void tune(int fd)
{
	int one = 1;

	/* Control messages are small and each one waits for an answer. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int srn_conn_accept(int lfd, int timeout_ms)
{
	int ret = wait_fd(lfd, POLLIN, now_ms() + timeout_ms), fd;

	if (ret)
		return ret;
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return -errno;
	tune(fd);
	return fd;
}

/* One non-blocking connect attempt bounded by the deadline. */
static int try_connect(const struct addrinfo *ai, int64_t deadline)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int err = 0, ret;
	socklen_t len = sizeof(err);

	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) && errno != EINPROGRESS) {
		ret = -errno;
		goto fail;
	}
	ret = wait_fd(fd, POLLOUT, deadline);
	if (ret)
		goto fail;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
		ret = err ? -err : -errno;
		goto fail;
	}
	/* Blocking again: every read below is guarded by poll anyway. */
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)) {
		ret = -errno;
		goto fail;
	}
	tune(fd);
	return fd;
fail:
	close(fd);
	return ret;
}

int srn_conn_connect(const char *host, const char *port, int timeout_ms)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;
	int64_t deadline = now_ms() + timeout_ms;
	int ret = -ETIMEDOUT;

	if (getaddrinfo(host, port, &hints, &res))
		return -EHOSTUNREACH;
	/* The server may be starting: refused connections are retried. */
	while (now_ms() < deadline) {
		for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
			ret = try_connect(ai, deadline);
			if (ret >= 0)
				goto out;
		}
		if (ret != -ECONNREFUSED)
			break;
		usleep(CONN_RETRY_MS * 1000);
	}
out:
	freeaddrinfo(res);
	return ret;
}

static int send_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t k = send(fd, b, n, MSG_NOSIGNAL);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

int srn_conn_send(int fd, uint16_t type, const struct srn_conn_wr *payload)
{
	uint8_t frame[CONN_HDR_LEN + SRN_CONN_MAX_PAYLOAD];
	struct srn_conn_wr h;

	if (payload->overflow)
		return -EMSGSIZE;
	srn_conn_wr_init(&h, frame, CONN_HDR_LEN);
	srn_conn_put_u32(&h, CONN_MAGIC);
	srn_conn_put_u16(&h, type);
	srn_conn_put_u16(&h, (uint16_t)payload->len);
	/* One send per message: the peer waits for all of it anyway. */
	memcpy(frame + CONN_HDR_LEN, payload->buf, payload->len);
	return send_all(fd, frame, CONN_HDR_LEN + payload->len);
}

static int recv_all(int fd, void *p, size_t n, int64_t deadline)
{
	uint8_t *b = p;

	while (n) {
		int ret = wait_fd(fd, POLLIN, deadline);
		ssize_t k;

		if (ret)
			return ret;
		k = recv(fd, b, n, 0);
		if (k == 0)
			return -ECONNRESET;
		if (k < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

int srn_conn_recv(int fd, uint16_t *type, struct srn_conn_rd *r, void *buf,
		  size_t cap, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	uint8_t hdr[CONN_HDR_LEN];
	struct srn_conn_rd h = { .buf = hdr, .len = sizeof(hdr) };
	uint16_t len;
	int ret;

	ret = recv_all(fd, hdr, sizeof(hdr), deadline);
	if (ret)
		return ret;
	if (srn_conn_get_u32(&h) != CONN_MAGIC)
		return -EPROTO; /* not our protocol: nothing sane to resync on */
	*type = srn_conn_get_u16(&h);
	len = srn_conn_get_u16(&h);
	if (len > cap)
		return -EPROTO;
	ret = recv_all(fd, buf, len, deadline);
	if (ret)
		return ret;
	*r = (struct srn_conn_rd){ .buf = buf, .len = len };
	return 0;
}

int srn_conn_readable(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int n = poll(&pfd, 1, 0);

	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	return n > 0;
}

const char *srn_conn_peer_name(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getpeername(fd, (struct sockaddr *)&ss, &sl) ||
	    getnameinfo((struct sockaddr *)&ss, sl, buf, (socklen_t)len, NULL, 0,
			NI_NUMERICHOST))
		snprintf(buf, len, "?");
	else if (!strncmp(buf, "::ffff:", 7))
		memmove(buf, buf + 7, strlen(buf + 7) + 1);
	return buf;
}

/* ---- QP addresses ---- */

void srn_conn_put_qp(struct srn_conn_wr *w, const struct srn_conn_qp *qp)
{
	srn_conn_put_u32(w, qp->qpn);
	srn_conn_put_u32(w, qp->psn);
	srn_conn_put_u16(w, qp->lid);
	srn_conn_put_bytes(w, qp->gid.raw, sizeof(qp->gid.raw));
}

void srn_conn_get_qp(struct srn_conn_rd *r, struct srn_conn_qp *qp)
{
	qp->qpn = srn_conn_get_u32(r);
	qp->psn = srn_conn_get_u32(r);
	qp->lid = srn_conn_get_u16(r);
	srn_conn_get_bytes(r, qp->gid.raw, sizeof(qp->gid.raw));
	/* QPN and PSN are 24-bit fields of the BTH: a larger value is a lie. */
	if (qp->qpn > 0xffffff || qp->psn > 0xffffff)
		r->bad = true;
}

uint32_t srn_conn_random_psn(void)
{
	uint32_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = (uint32_t)getpid() * 2654435761u ^ (uint32_t)now_ms();
	return v & 0xffffff;
}

int srn_conn_local_qp(struct ibv_qp *qp, uint8_t port, int gid_index,
		      uint32_t psn, struct srn_conn_qp *out)
{
	struct ibv_port_attr pa;
	int ret;

	ret = ibv_query_port(qp->context, port, &pa);
	if (ret)
		return -ret;
	ret = ibv_query_gid(qp->context, port, gid_index, &out->gid);
	if (ret)
		return errno ? -errno : -EINVAL;
	out->qpn = qp->qp_num;
	out->psn = psn & 0xffffff;
	out->lid = pa.lid;
	return 0;
}

/* The shared bring-up's view of a perf connection: its defaults (RC
 * timers, hop limit 64) with this run's port, GID, MTU, depth and rights. */
static void up_attr(struct srn_qp_up_attr *u, struct srn_qp_up_peer *peer,
		    const struct srn_conn_qp_attr *a, const struct srn_conn_qp *remote)
{
	*u = srn_qp_up_defaults();
	u->port = a->port;
	u->sgid_index = (uint8_t)a->gid_index;
	u->mtu = a->mtu;
	u->max_rd_atomic = a->max_rd_atomic;
	u->access = a->access;
	u->qkey = SRN_CONN_UD_QKEY;
	*peer = (struct srn_qp_up_peer){ 0 };
	if (remote)     /* UD names its peers per send */
		*peer = (struct srn_qp_up_peer){ .qpn = remote->qpn, .psn = remote->psn,
						 .lid = remote->lid, .gid = remote->gid };
}

struct ibv_ah *srn_conn_ud_ah(struct ibv_pd *pd, const struct srn_conn_qp_attr *a,
			      const struct srn_conn_qp *remote)
{
	struct srn_qp_up_attr u;
	struct srn_qp_up_peer peer;
	struct ibv_ah_attr ah;

	up_attr(&u, &peer, a, remote);
	srn_qp_up_ah_attr(&ah, &u, &peer);
	return ibv_create_ah(pd, &ah);
}

int srn_conn_qp_up(struct ibv_qp *qp, const struct srn_conn_qp_attr *a,
		   const struct srn_conn_qp *local,
		   const struct srn_conn_qp *remote, const char **step)
{
	struct srn_qp_up_attr u;
	struct srn_qp_up_peer peer;

	up_attr(&u, &peer, a, remote);
	return srn_qp_up(qp, &u, local->psn, &peer, step);
}

const char *srn_conn_gid_str(const union ibv_gid *gid, char *buf, size_t len)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (!memcmp(gid->raw, v4mapped, sizeof(v4mapped)))
		inet_ntop(AF_INET, gid->raw + 12, buf, (socklen_t)len);
	else
		inet_ntop(AF_INET6, gid->raw, buf, (socklen_t)len);
	return buf;
}
