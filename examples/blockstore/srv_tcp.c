/*
 * srv_tcp.c - the TCP twin of srv_rdma.c: the same requests, replies,
 * cache, checks and threads, over a byte stream.
 *
 *   write: bs_req, then the 4 KiB block.  The server takes a landing slot
 *          when the header arrives and receives the block straight into
 *          it (the kernel copies it there), then commits it exactly as the
 *          RDMA server does (CRC check included).
 *   read:  bs_req; the answer is a bs_rep followed by block + tag, sent
 *          from the cache slot (pinned while the kernel copies it).
 *
 * The I/O thread spins over epoll_wait(0) for poll_us before sleeping,
 * like the RDMA server over its CQ.  Receives never block (a half-sent
 * request waits in its connection's state); replies are sent blocking,
 * bounded by SO_SNDTIMEO, so a peer that stops reading is dropped.
 * SIGUSR1 moves the cache here too: nothing outside the process can
 * reach it, so the move needs no revocation; a block being received
 * into a slot is found again by slot number, never by pointer.
 */
#include "server.h"
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
	struct bs_req req;
	unsigned got;  /* bytes of the current request (header, then block) */
	uint32_t slot; /* landing slot while the block is being received */
};

struct tsrv {
	struct bs_server *s;
	int lfd, ep;
	struct tconn *conns[BS_MAX_CONNS];
};

static void tconn_close(struct tsrv *t, unsigned i)
{
	struct tconn *c = t->conns[i];
	if (c->slot != BS_NO_SLOT)
		bs_cache_release(t->s->cache, c->slot);
	epoll_ctl(t->ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c);
	t->conns[i] = NULL;
}

/* A whole request is here (and its block, for a write): answer it. */
static int serve(struct tsrv *t, struct tconn *c)
{
	struct bs_server *s = t->s;
	struct bs_rep rep = { .magic = BS_MAGIC, .op = BS_OP_REPLY, .req_op = c->req.op,
			      .id = c->req.id, .new_slot = BS_NO_SLOT, .slot = BS_NO_SLOT };
	struct iovec iov[2] = { { &rep, sizeof(rep) } };
	int n = 1, ret = 0;
	uint32_t pinned = BS_NO_SLOT;
	switch (c->req.op) {
	case BS_OP_WRITE:
		ret = bs_cache_commit(s->cache, c->slot, c->req.lba, c->req.csum, &rep.seq);
		if (ret)
			bs_cache_release(s->cache, c->slot);
		else
			rep.slot = c->slot;
		c->slot = BS_NO_SLOT;
		break;
	case BS_OP_READ: {
		int hit;
		ret = bs_cache_get(s->cache, c->req.lba, &pinned, &hit);
		if (!ret) {
			iov[1].iov_base = bs_cache_mem(s->cache) + (size_t)pinned * BS_SLOT_STRIDE;
			iov[1].iov_len = BS_SLOT_STRIDE;
			n = 2;
		}
		break;
	}
	case BS_OP_FLUSH: ret = bs_cache_flush(s->cache); break;
	case BS_OP_STATS: bs_server_stats(s, &rep); break;
	}
	rep.status = (int16_t)ret;
	s->ios++;
	ret = bs_send_all(c->fd, iov, n);
	if (pinned != BS_NO_SLOT)
		bs_cache_unpin(s->cache, pinned);
	return ret;
}

/* Read what the socket has; answer every request completed. */
static int on_readable(struct tsrv *t, struct tconn *c)
{
	for (;;) {
		uint8_t *dst;
		size_t want;
		if (c->got < sizeof(c->req)) {
			dst = (uint8_t *)&c->req + c->got;
			want = sizeof(c->req) - c->got;
		} else {
			dst = bs_cache_mem(t->s->cache) + (size_t)c->slot * BS_SLOT_STRIDE +
			      (c->got - sizeof(c->req));
			want = sizeof(c->req) + BS_BLOCK - c->got;
		}
		ssize_t k = recv(c->fd, dst, want, MSG_DONTWAIT);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (k <= 0)
			return -EPIPE;
		c->got += (unsigned)k;
		if (c->got == sizeof(c->req)) {
			int ret = bs_server_check_req(t->s, &c->req);
			if (ret)
				return ret; /* a stream out of step cannot be resynchronised */
			if (c->req.op == BS_OP_WRITE) {
				ret = bs_cache_alloc(t->s->cache, &c->slot);
				if (ret)
					return ret;
				continue;
			}
		} else if (c->got < sizeof(c->req) + BS_BLOCK) {
			continue;
		}
		c->got = 0;
		if (serve(t, c))
			return -EPIPE;
	}
}

static void on_accept(struct tsrv *t)
{
	int fd = accept4(t->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	unsigned i;
	for (i = 0; i < BS_MAX_CONNS && t->conns[i]; i++)
		;
	struct tconn *c = i < BS_MAX_CONNS ? calloc(1, sizeof(*c)) : NULL;
	struct bs_hello h = { .magic = BS_MAGIC, .epoch = t->s->epoch,
			      .nblocks = bs_store_nblocks(t->s->st),
			      .nslots = bs_cache_nslots(t->s->cache) };
	int one = 1;
	struct timeval tmo = { .tv_sec = 2 };
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tmo, sizeof(tmo));
	struct iovec iov = { &h, sizeof(h) };
	struct epoll_event e = { .events = EPOLLIN, .data.u32 = i };
	if (!c || bs_send_all(fd, &iov, 1) || epoll_ctl(t->ep, EPOLL_CTL_ADD, fd, &e)) {
		free(c);
		close(fd);
		return;
	}
	c->fd = fd;
	c->slot = BS_NO_SLOT;
	t->conns[i] = c;
}

static int setup(struct tsrv *t)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_PASSIVE,
				  .ai_socktype = SOCK_STREAM },
			*ai;
	char port[16];
	snprintf(port, sizeof(port), "%d", t->s->o.port);
	if (getaddrinfo(t->s->o.addr, port, &hints, &ai))
		return -EINVAL;
	int one = 1;
	t->lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(t->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	int ret = bind(t->lfd, ai->ai_addr, ai->ai_addrlen) || listen(t->lfd, 64) ? -errno : 0;
	freeaddrinfo(ai);
	if (ret) {
		fprintf(stderr, "blockstore: cannot listen on %s:%d: %s\n", t->s->o.addr,
			t->s->o.port, strerror(-ret));
		return ret;
	}
	t->ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event e = { .events = EPOLLIN, .data.u32 = BS_MAX_CONNS };
	epoll_ctl(t->ep, EPOLL_CTL_ADD, t->lfd, &e);
	e.data.u32 = BS_MAX_CONNS + 1;
	epoll_ctl(t->ep, EPOLL_CTL_ADD, t->s->sigfd, &e);
	return 0;
}

static void move_cache(struct tsrv *t)
{
	uint64_t t0 = bs_now_ns();
	uint8_t *mem = bs_cache_move_begin(t->s->cache);
	if (!mem)
		return;
	bs_cache_move_end(t->s->cache, mem);
	t->s->epoch++;
	t->s->remaps++;
	fprintf(stderr, "blockstore: cache moved in %.1f ms\n", (double)(bs_now_ns() - t0) / 1e6);
}

int bs_server_tcp(struct bs_server *s)
{
	struct tsrv t = { .s = s, .lfd = -1, .ep = -1 };
	int ret = setup(&t);
	if (!ret)
		bs_server_ready(s);
	uint64_t last_work = bs_now_ns();
	while (!ret && !s->stop) {
		struct epoll_event evs[16];
		bool spin = bs_now_ns() - last_work <= s->o.poll_us * 1000ull;
		int n = epoll_wait(t.ep, evs, 16, spin ? 0 : 1000);
		if (n > 0)
			last_work = bs_now_ns();
		else if (!spin)
			last_work = bs_now_ns(); /* woke from a sleep: spin again */
		for (int i = 0; i < n; i++) {
			uint32_t k = evs[i].data.u32;
			if (k == BS_MAX_CONNS)
				on_accept(&t);
			else if (k == BS_MAX_CONNS + 1)
				bs_server_signals(s);
			else if (t.conns[k] && on_readable(&t, t.conns[k]))
				tconn_close(&t, k);
		}
		if (s->remap_wanted) {
			s->remap_wanted = false;
			move_cache(&t);
		}
		s->revoke_wanted = false; /* windows are RDMA's (--mw) */
	}
	for (unsigned i = 0; i < BS_MAX_CONNS; i++)
		if (t.conns[i])
			tconn_close(&t, i);
	if (t.lfd >= 0)
		close(t.lfd);
	if (t.ep >= 0)
		close(t.ep);
	return ret;
}
