/*
 * host_tcp.c - an NVMe/TCP host queue: one TCP connection per queue.
 *
 * ICReq (digests if asked) and ICResp first; then a write's data rides in
 * the CapsuleCmd when it fits the controller's in-capsule size (8 KiB on
 * the admin queue by the NVMe/TCP rules, IOCCSZ on I/O queues), else
 * the command names a transport SGL and the data follows the target's
 * R2T in H2CData PDUs of at most MAXH2CDATA bytes.  Read data arrives in
 * C2HData PDUs into the slot's buffer, then the CapsuleResp.  PDUs from
 * the target are checked by the same door as the target's
 * (nvmf_tcp_pdu_check) and their digests verified.
 *
 * Sends block (whole PDUs, by sendmsg of header, data and digests);
 * receives never do: poll reads what is there and handles whole PDUs.
 */
#include "host.h"

#include "../blockstore/crc32c.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define PDU_MAX (256 + NVMF_MAX_DATA + TCP_DGST_LEN)
#define RX_CAP (2 * PDU_MAX)

struct hq {
	int fd;
	unsigned depth;
	uint32_t incap, maxh2c;
	bool hdgst, ddgst, broken;
	uint8_t *data;  /* depth x NVMF_MAX_DATA */
	uint8_t *rx;
	uint32_t rx_have;
};

static void *buf(struct hq *q, unsigned s) { return q->data + (size_t)s * NVMF_MAX_DATA; }
static void set_incap(struct hq *q, uint32_t incap) { q->incap = incap; }

static int send_all(struct hq *q, struct iovec *iov, int n)
{
	while (n) {
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)n };
		ssize_t w = sendmsg(q->fd, &m, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			q->broken = true;
			return -ECONNRESET;
		}
		while (n && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n) {
			iov->iov_base = (uint8_t *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

/* One PDU: header (common header's flags/hlen/pdo/plen filled here). */
static int send_pdu(struct hq *q, void *hdr, uint32_t hlen, const void *data, uint32_t dlen)
{
	struct nvme_tcp_hdr *h = hdr;
	bool ic = h->type == TCP_ICREQ;
	uint32_t hd = !ic && q->hdgst ? 4 : 0, dd = !ic && q->ddgst && dlen ? 4 : 0;
	h->hlen = (uint8_t)hlen;
	h->flags |= (hd ? TCP_F_HDGST : 0) | (dd ? TCP_F_DDGST : 0);
	h->pdo = dlen ? (uint8_t)(hlen + hd) : 0;
	h->plen = hlen + hd + dlen + dd;
	uint32_t hcrc = hd ? bs_crc32c(0, hdr, hlen) : 0;
	uint32_t dcrc = dd ? bs_crc32c(0, data, dlen) : 0;
	struct iovec iov[4];
	int n = 0;
	iov[n++] = (struct iovec){ hdr, hlen };
	if (hd)
		iov[n++] = (struct iovec){ &hcrc, 4 };
	if (dlen)
		iov[n++] = (struct iovec){ (void *)data, dlen };
	if (dd)
		iov[n++] = (struct iovec){ &dcrc, 4 };
	return send_all(q, iov, n);
}

static int recv_exact(struct hq *q, void *p, size_t n, int ms)
{
	size_t got = 0;
	while (got < n) {
		struct pollfd pf = { q->fd, POLLIN, 0 };
		if (poll(&pf, 1, ms) != 1)
			return -ETIMEDOUT;
		ssize_t r = recv(q->fd, (uint8_t *)p + got, n - got, 0);
		if (r <= 0)
			return -ECONNRESET;
		got += (size_t)r;
	}
	return 0;
}

static int handshake(struct hq *q, const struct host_opts *o)
{
	struct nvme_tcp_icreq ic = { .h.type = TCP_ICREQ, .pfv = 0, .hpda = 0,
				     .dgst = o->digest ? 3 : 0, .maxr2t = 0 };
	if (send_pdu(q, &ic, sizeof(ic), NULL, 0))
		return -ECONNRESET;
	struct nvme_tcp_icresp r;
	int ret = recv_exact(q, &r, sizeof(r), 3000);
	if (ret)
		return ret;
	if (r.h.type != TCP_ICRESP || r.h.plen != sizeof(r) || r.pfv != 0 || r.cpda != 0 ||
	    r.maxh2cdata < 4096 || (r.dgst & ~ic.dgst))
		return -EPROTO;
	q->hdgst = r.dgst & 1;
	q->ddgst = r.dgst & 2;
	q->maxh2c = r.maxh2cdata;
	return 0;
}

static void hq_close(struct hq *q)
{
	if (q->fd >= 0)
		close(q->fd);
	free(q->data);
	free(q->rx);
	free(q);
}

static int hq_open(struct hq **out, const struct host_opts *o, uint16_t qid, uint16_t depth)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST, .ai_socktype = SOCK_STREAM }, *ai;
	char port[16];
	snprintf(port, sizeof(port), "%d", o->port);
	if (getaddrinfo(o->addr, port, &hints, &ai))
		return -EINVAL;
	struct hq *q = calloc(1, sizeof(*q));
	if (!q) {
		freeaddrinfo(ai);
		return -ENOMEM;
	}
	q->depth = depth;
	q->incap = qid == 0 ? NVMF_INCAP : 0; /* NVMe/TCP: 8 KiB on the admin queue */
	q->data = calloc(depth, NVMF_MAX_DATA);
	q->rx = malloc(RX_CAP);
	q->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int ret = q->fd < 0 || !q->data || !q->rx || connect(q->fd, ai->ai_addr, ai->ai_addrlen)
			  ? -ECONNREFUSED
			  : 0;
	freeaddrinfo(ai);
	int one = 1;
	if (!ret) {
		setsockopt(q->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		ret = handshake(q, o);
	}
	if (ret) {
		hq_close(q);
		return ret;
	}
	if (o->no_incap && qid)
		q->incap = 0;
	*out = q;
	return 0;
}

static int submit(struct hq *q, unsigned s, struct nvme_sqe *sqe, uint32_t len, enum hq_mode mode)
{
	if (q->broken)
		return -ECONNRESET;
	sqe->cid = (uint16_t)s;
	uint32_t incap = 0;
	if (mode == HQ_RAW) {
		incap = len;
	} else {
		enum nvme_dir dir = nvmf_sqe_dir(sqe);
		sqe->flags = 1 << 6;
		memset(&sqe->sgl, 0, sizeof(sqe->sgl));
		sqe->sgl.type = SGL_TRANSPORT;
		if (dir == DIR_H2C && len && len <= q->incap) {
			sqe->sgl.type = SGL_DATA_OFFSET;
			incap = len;
		}
		if (dir != DIR_NONE)
			memcpy(sqe->sgl.len, &len, 4);
	}
	struct nvme_tcp_cmd c = { .h.type = TCP_CMD, .sqe = *sqe };
	return send_pdu(q, &c, sizeof(c), buf(q, s), incap);
}

static int on_r2t(struct hq *q, const struct nvme_tcp_r2t *r)
{
	if (r->cccid >= q->depth || r->r2tl > NVMF_MAX_DATA || r->r2to > NVMF_MAX_DATA - r->r2tl)
		return -EPROTO;
	uint8_t *p = (uint8_t *)buf(q, r->cccid) + r->r2to;
	for (uint32_t off = 0; off < r->r2tl;) {
		uint32_t n = r->r2tl - off < q->maxh2c ? r->r2tl - off : q->maxh2c;
		struct nvme_tcp_data d = { .h.type = TCP_H2C_DATA, .cccid = r->cccid,
					   .ttag = r->ttag, .datao = r->r2to + off, .datal = n };
		if (off + n == r->r2tl)
			d.h.flags = TCP_F_LAST;
		if (send_pdu(q, &d, sizeof(d), p + off, n))
			return -ECONNRESET;
		off += n;
	}
	return 0;
}

static int on_pdu(struct hq *q, const uint8_t *p, const struct tcp_pdu_shape *sh, hq_cb cb,
		  void *arg)
{
	const struct nvme_tcp_hdr *h = (const void *)p;
	if (sh->hlen > h->hlen) {
		uint32_t got;
		memcpy(&got, p + h->hlen, 4);
		if (got != bs_crc32c(0, p, h->hlen))
			return -EBADMSG;
	}
	if (sh->ddgst && sh->dlen) {
		uint32_t got;
		memcpy(&got, p + sh->pdo + sh->dlen, 4);
		if (got != bs_crc32c(0, p + sh->pdo, sh->dlen))
			return -EBADMSG;
	}
	switch (h->type) {
	case TCP_RSP: {
		const struct nvme_tcp_rsp *r = (const void *)p;
		if (r->cqe.cid >= q->depth)
			return -EPROTO;
		cb(arg, r->cqe.cid, &r->cqe);
		return 1;
	}
	case TCP_C2H_DATA: {
		const struct nvme_tcp_data *d = (const void *)p;
		if (d->cccid >= q->depth || d->datal != sh->dlen || d->datao > NVMF_MAX_DATA ||
		    d->datal > NVMF_MAX_DATA - d->datao)
			return -EPROTO;
		memcpy((uint8_t *)buf(q, d->cccid) + d->datao, p + sh->pdo, d->datal);
		if ((d->h.flags & (TCP_F_LAST | TCP_F_SUCCESS)) == (TCP_F_LAST | TCP_F_SUCCESS)) {
			/* No CapsuleResp follows: the command succeeded (3.6.2.7). */
			struct nvme_cqe c = { .cid = d->cccid };
			cb(arg, d->cccid, &c);
			return 1;
		}
		return 0;
	}
	case TCP_R2T: return on_r2t(q, (const void *)p);
	default: return -EPROTO; /* C2HTermReq: the target gave up on us */
	}
}

static int hq_poll(struct hq *q, hq_cb cb, void *arg)
{
	if (q->broken)
		return -ECONNRESET;
	ssize_t n = recv(q->fd, q->rx + q->rx_have, RX_CAP - q->rx_have, MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		q->broken = true;
		return -ECONNRESET;
	}
	if (n < 0)
		return 0;
	q->rx_have += (uint32_t)n;
	uint32_t off = 0;
	int seen = 0;
	while (q->rx_have - off >= sizeof(struct nvme_tcp_hdr)) {
		struct tcp_pdu_shape sh;
		if (nvmf_tcp_pdu_check((const void *)(q->rx + off), 1, q->hdgst, q->ddgst, &sh)) {
			q->broken = true;
			return -EPROTO;
		}
		if (q->rx_have - off < sh.plen)
			break;
		int r = on_pdu(q, q->rx + off, &sh, cb, arg);
		if (r < 0) {
			q->broken = true;
			return r;
		}
		seen += r;
		off += sh.plen;
	}
	memmove(q->rx, q->rx + off, q->rx_have - off);
	q->rx_have -= off;
	return seen;
}

/* probe: send raw bytes on a fresh connection, read what comes back until
 * the target closes it (bounded); returns the bytes read or -errno. */
int hq_tcp_raw(const struct host_opts *o, const void *out, size_t len, uint8_t *in, size_t cap)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST, .ai_socktype = SOCK_STREAM }, *ai;
	char port[16];
	snprintf(port, sizeof(port), "%d", o->port);
	if (getaddrinfo(o->addr, port, &hints, &ai))
		return -EINVAL;
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int ret = fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) ? -ECONNREFUSED : 0;
	freeaddrinfo(ai);
	if (!ret && send(fd, out, len, MSG_NOSIGNAL) != (ssize_t)len)
		ret = -EIO;
	size_t got = 0;
	while (!ret && got < cap) {
		struct pollfd pf = { fd, POLLIN, 0 };
		if (poll(&pf, 1, 2000) != 1) {
			ret = -ETIMEDOUT; /* the target kept a connection that lied */
			break;
		}
		ssize_t n = recv(fd, in + got, cap - got, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (fd >= 0)
		close(fd);
	return ret ? ret : (int)got;
}

static int wait_fd(struct hq *q) { return q->fd; }
static void no_op(struct hq *q) { }

const struct hq_ops hq_tcp_ops = {
	.open = hq_open, .buf = buf, .submit = submit, .poll = hq_poll,
	.set_incap = set_incap, .close = hq_close,
	.wait_fd = wait_fd, .arm = no_op, .drain = no_op,
};
