/*
 * cli_tcp.c - the client transport over TCP, the twin of cli_rdma.c.
 *
 * One socket per connection.  A write is bs_req + block in one writev; a
 * read is a bs_req answered by bs_rep + block + tag.  The server answers
 * each socket's requests in order, so a connection's requests in flight
 * form a FIFO (linked through io->next).  Like the RDMA client: spin for
 * poll_us (epoll_wait with timeout 0), then sleep; a failed connection
 * hands its requests back and reconnects with backoff.
 */
#include "client_priv.h"
#include "sock.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

struct tconn {
	int fd;
	struct bs_io *head, **tail; /* in flight, in the order sent */
	unsigned inflight;
	struct bs_rep rep;
	unsigned got; /* bytes of the reply being received */
	uint64_t down_since, retry_at;
	unsigned backoff_ms;
};

struct ttp {
	struct sockaddr_storage dst, src;
	socklen_t dstlen, srclen;
	int ep;
	unsigned rr;
	struct tconn *conns;
};

static struct ttp *tp(struct bs_client *c)
{
	return c->tp;
}

static void conn_fail(struct bs_client *c, unsigned ci)
{
	struct ttp *t = tp(c);
	struct tconn *tc = &t->conns[ci];
	struct bs_io *io = tc->head;
	/* Hand them back last first: each goes to the front of the queue. */
	struct bs_io *rev = NULL;
	while (io) {
		struct bs_io *next = io->next;
		io->next = rev;
		rev = io;
		io = next;
	}
	while (rev) {
		struct bs_io *next = rev->next;
		bs_requeue(c, rev, true);
		rev = next;
	}
	tc->head = NULL;
	tc->tail = &tc->head;
	tc->inflight = tc->got = 0;
	if (tc->fd >= 0) {
		epoll_ctl(t->ep, EPOLL_CTL_DEL, tc->fd, NULL);
		close(tc->fd);
		tc->fd = -1;
	}
	uint64_t now = bs_client_now();
	if (!tc->down_since)
		tc->down_since = now;
	tc->retry_at = now + (uint64_t)tc->backoff_ms * 1000000u;
	tc->backoff_ms = tc->backoff_ms ? (tc->backoff_ms * 2 > 200 ? 200 : tc->backoff_ms * 2) : 1;
}

static int recv_all(int fd, void *buf, size_t len)
{
	while (len) {
		ssize_t k = recv(fd, buf, len, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -EIO;
		buf = (char *)buf + k;
		len -= (size_t)k;
	}
	return 0;
}

static void conn_start(struct bs_client *c, unsigned ci)
{
	struct ttp *t = tp(c);
	struct tconn *tc = &t->conns[ci];
	int fd = socket(t->dst.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	struct timeval tmo = { .tv_sec = 2 };
	struct bs_hello h;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tmo, sizeof(tmo));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tmo, sizeof(tmo));
	struct epoll_event e = { .events = EPOLLIN, .data.u32 = ci };
	if (fd < 0 || (t->srclen && bind(fd, (struct sockaddr *)&t->src, t->srclen)) ||
	    connect(fd, (struct sockaddr *)&t->dst, t->dstlen) ||
	    recv_all(fd, &h, sizeof(h)) || h.magic != BS_MAGIC || !h.nblocks ||
	    (c->nblocks && h.nblocks != c->nblocks) || epoll_ctl(t->ep, EPOLL_CTL_ADD, fd, &e)) {
		if (fd >= 0)
			close(fd);
		conn_fail(c, ci);
		return;
	}
	c->nblocks = h.nblocks;
	tc->fd = fd;
	tc->backoff_ms = 0;
	bs_note_up(c, &tc->down_since);
}

static void on_reply(struct bs_client *c, unsigned ci)
{
	struct tconn *tc = &tp(c)->conns[ci];
	struct bs_io *io = tc->head;
	tc->head = io->next;
	if (!tc->head)
		tc->tail = &tc->head;
	tc->inflight--;
	if (io->op == BS_OP_WRITE && tc->rep.status == -EBADMSG) {
		c->cnt.crc_rejects++;
		bs_requeue(c, io, true);
		return;
	}
	if (io->op == BS_OP_STATS)
		memcpy(io->v, tc->rep.v, sizeof(io->v));
	if (io->op == BS_OP_WRITE)
		io->seq = tc->rep.seq;
	bs_complete(c, io, tc->rep.status);
}

/* Read what the socket has; complete every whole reply. */
static void on_readable(struct bs_client *c, unsigned ci)
{
	struct tconn *tc = &tp(c)->conns[ci];
	while (tc->fd >= 0) {
		struct bs_io *io = tc->head;
		if (!io) {
			char b;
			ssize_t k = recv(tc->fd, &b, 1, MSG_DONTWAIT | MSG_PEEK);
			if (k < 0 && errno == EAGAIN)
				return;
			conn_fail(c, ci); /* closed, or an answer nobody asked for */
			return;
		}
		bool data = tc->got >= sizeof(tc->rep) && tc->rep.req_op == BS_OP_READ &&
			    !tc->rep.status;
		uint8_t *dst = data ? io->buf + (tc->got - sizeof(tc->rep))
				    : (uint8_t *)&tc->rep + tc->got;
		size_t want = data ? sizeof(tc->rep) + BS_SLOT_STRIDE - tc->got
				   : sizeof(tc->rep) - tc->got;
		ssize_t k = recv(tc->fd, dst, want, MSG_DONTWAIT);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (k <= 0) {
			conn_fail(c, ci);
			return;
		}
		tc->got += (unsigned)k;
		if (tc->got == sizeof(tc->rep)) {
			if (tc->rep.magic != BS_MAGIC || tc->rep.id != io->index ||
			    tc->rep.req_op != io->op) {
				conn_fail(c, ci);
				return;
			}
			if (tc->rep.req_op == BS_OP_READ && !tc->rep.status)
				continue; /* block + tag follow */
		} else if (tc->got < sizeof(tc->rep) + BS_SLOT_STRIDE) {
			continue;
		}
		tc->got = 0;
		on_reply(c, ci);
	}
}

static void timers(struct bs_client *c)
{
	struct ttp *t = tp(c);
	uint64_t now = bs_client_now();
	for (unsigned i = 0; i < c->o.nconn; i++)
		if (t->conns[i].fd < 0 && t->conns[i].retry_at <= now)
			conn_start(c, i);
}

static int tcp_post(struct bs_client *c, struct bs_io *io)
{
	struct ttp *t = tp(c);
	bool alive = false;
	uint64_t now = bs_client_now();
	for (unsigned n = 0; n < c->o.nconn; n++) {
		unsigned ci = (t->rr + n) % c->o.nconn;
		struct tconn *tc = &t->conns[ci];
		if (tc->fd >= 0 || now - tc->down_since < c->o.reconnect_ms * 1000000ull)
			alive = true;
		if (tc->fd < 0 || tc->inflight >= c->o.depth)
			continue;
		t->rr = ci + 1;
		struct bs_req req = { .magic = BS_MAGIC, .op = io->op, .id = io->index,
				      .lba = io->lba };
		struct iovec iov[2] = { { &req, sizeof(req) }, { io->buf, BS_BLOCK } };
		if (io->op == BS_OP_WRITE) {
			req.len = BS_BLOCK;
			req.csum = io->csum;
		}
		if (bs_send_all(tc->fd, iov, io->op == BS_OP_WRITE ? 2 : 1)) {
			conn_fail(c, ci);
			return -EAGAIN;
		}
		io->conn = (int)ci;
		io->next = NULL;
		*tc->tail = io;
		tc->tail = &io->next;
		tc->inflight++;
		return 0;
	}
	return alive ? -EAGAIN : -ENOTCONN;
}

static void tcp_progress(struct bs_client *c, int timeout_ms)
{
	struct ttp *t = tp(c);
	uint64_t spin_end = bs_client_now() + c->o.poll_us * 1000ull;
	for (;;) {
		struct epoll_event evs[16];
		bool spinning = bs_client_now() < spin_end;
		int ms = timeout_ms < 10 ? timeout_ms : 10; /* reconnect timers */
		int n = epoll_wait(t->ep, evs, 16, spinning ? 0 : ms);
		for (int i = 0; i < n; i++)
			on_readable(c, evs[i].data.u32);
		timers(c);
		if (n > 0 || !spinning || c->done)
			return;
	}
}

static void tcp_close(struct bs_client *c)
{
	struct ttp *t = tp(c);
	for (unsigned i = 0; t->conns && i < c->o.nconn; i++)
		if (t->conns[i].fd >= 0)
			close(t->conns[i].fd);
	if (t->ep >= 0)
		close(t->ep);
	free(t->conns);
	free(t);
	c->tp = NULL;
}

static int tcp_open(struct bs_client *c)
{
	struct ttp *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	c->tp = t;
	t->ep = epoll_create1(EPOLL_CLOEXEC);
	t->conns = calloc(c->o.nconn, sizeof(*t->conns));
	struct addrinfo hints = { .ai_flags = AI_NUMERICSERV, .ai_socktype = SOCK_STREAM }, *ai;
	char port[16];
	snprintf(port, sizeof(port), "%d", c->o.port);
	if (!t->conns || t->ep < 0 || getaddrinfo(c->o.host, port, &hints, &ai)) {
		tcp_close(c);
		return -EINVAL;
	}
	memcpy(&t->dst, ai->ai_addr, ai->ai_addrlen);
	t->dstlen = ai->ai_addrlen;
	freeaddrinfo(ai);
	if (c->o.src) {
		if (getaddrinfo(c->o.src, NULL, &hints, &ai)) {
			tcp_close(c);
			return -EINVAL;
		}
		memcpy(&t->src, ai->ai_addr, ai->ai_addrlen);
		t->srclen = ai->ai_addrlen;
		freeaddrinfo(ai);
	}
	for (unsigned i = 0; i < c->o.nconn; i++) {
		t->conns[i].fd = -1;
		t->conns[i].tail = &t->conns[i].head;
		conn_start(c, i);
		if (t->conns[i].fd < 0) {
			tcp_close(c);
			return -ECONNREFUSED;
		}
	}
	c->cnt.reconnects = 0;
	return 0;
}

const struct bs_transport bs_tcp_transport = {
	.open = tcp_open,
	.post = tcp_post,
	.progress = tcp_progress,
	.close = tcp_close,
};
