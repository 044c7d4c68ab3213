/*
 * tgt_tcp.c - the NVMe/TCP transport (NVMe/TCP Transport Specification
 * 1.0) in the same target, on the same address and port over TCP.
 *
 * A connection starts with ICReq/ICResp (digests as the host asks, PDU
 * data aligned to nothing: CPDA 0, MAXH2CDATA TCP_MAX_H2C); then every
 * CapsuleCmd is one command.  Write data comes in the capsule when it
 * fits (SGL data block, offset subtype) or after an R2T for the whole
 * length, in H2CData PDUs that must arrive in order; read data leaves in
 * one C2HData PDU ahead of the CapsuleResp.  Header and data digests are
 * CRC32C when negotiated; a bad header digest ends the connection with a
 * C2HTermReq, a bad data digest fails the command (Transient Transport
 * Error).  Any PDU the state does not allow ends the connection with a
 * C2HTermReq naming the field (FES, FEI).
 *
 * Input is read in large chunks into a buffer holding up to two whole
 * PDUs and handled PDU by PDU; output is queued in a growing buffer and
 * written once per batch of input, so a pipeline of small commands costs
 * one recv and one send, not one per PDU.
 *
 * Threads (tgt.h): the listener is thread 0's, and every connection
 * starts there: TCP names the queue only in its Connect.  Once a Connect
 * made it an I/O queue the connection goes to the thread tgt_pick()
 * names, with what it has read and not yet handled and what it has not
 * yet sent: thread 0 takes it out of its epoll set and list and posts it
 * (place); the new owner puts it in its own and carries on (on_adopt).
 * The owner pointer changes under the core's lock, which is also what
 * a kill request holds when it reads it to wake the owner.
 */
#include "tgt.h"

#include "../blockstore/crc32c.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* PDO is one byte, so data starts within 255 bytes; then data and digest. */
#define PDU_MAX (256 + NVMF_MAX_DATA + TCP_DGST_LEN)
#define RX_CAP (2 * PDU_MAX)
#define NSLOTS (NVMF_MQES + 1)

struct tslot { /* a write waiting for its H2CData */
	bool busy, bad_digest;
	struct nvmf_req req;
	uint32_t got;
	uint8_t *buf;
};

struct tconn {
	struct tgt_watch w;
	struct ttgt *tt;
	struct tgt_thread *th; /* its owner; written under the core's lock */
	struct tgt_msg m;      /* the hand-over to another thread */
	int fd;
	struct nvmf_q q;
	bool ic_done, dead, hdgst, ddgst, want_out;
	bool placed;           /* an I/O queue, counted on th (tgt_place) */
	uint8_t *rx;
	uint32_t rx_have;
	uint8_t *tx;
	size_t tx_len, tx_off, tx_cap;
	uint8_t *scratch; /* C2H data of the command being run */
	struct tslot slots[NSLOTS];
	struct tconn *next;
};

/* Shared: the listener, thread 0's. */
struct ttgt {
	struct tgt *t;
	int lfd;
	struct tgt_watch lw;
};

/* One thread's connections. */
struct tthr {
	struct ttgt *tt;
	struct tgt_thread *th;
	struct tconn *conns;
};

static void conn_dead(struct tconn *c)
{
	if (c->dead)
		return;
	c->dead = true;
	nvmf_q_gone(&c->q);
}

/* The core, under its lock, from any thread: q->kill_req is set; the
 * owner closes the connection when it sees it (tcp_thr_kills). */
static void core_kill(struct nvmf_q *q)
{
	struct tconn *c = q->xport;
	tgt_poke(c->th);
}

void tcp_thr_kills(struct tthr *h)
{
	for (struct tconn *c = h->conns; c; c = c->next)
		if (!c->dead && __atomic_load_n(&c->q.kill_req, __ATOMIC_ACQUIRE))
			conn_dead(c);
}

/* ---- output ---- */

static uint8_t *tx_room(struct tconn *c, size_t n)
{
	if (c->tx_len + n > c->tx_cap) {
		size_t cap = c->tx_cap ? c->tx_cap : 65536;
		while (cap < c->tx_len + n)
			cap *= 2;
		uint8_t *p = realloc(c->tx, cap);
		if (!p)
			return NULL;
		c->tx = p;
		c->tx_cap = cap;
	}
	uint8_t *p = c->tx + c->tx_len;
	c->tx_len += n;
	return p;
}

/* Queue one PDU: header `h` (hlen bytes, its common header filled but for
 * flags, PDO and PLEN), then `dlen` bytes of data; digests as negotiated. */
static void tx_pdu(struct tconn *c, void *hdr, uint32_t hlen, const void *data, uint32_t dlen)
{
	struct nvme_tcp_hdr *h = hdr;
	bool ic = h->type == TCP_ICRESP || h->type == TCP_C2H_TERM;
	uint32_t hd = !ic && c->hdgst ? TCP_DGST_LEN : 0;
	uint32_t dd = !ic && c->ddgst && dlen ? TCP_DGST_LEN : 0;
	h->hlen = (uint8_t)hlen;
	h->flags |= (hd ? TCP_F_HDGST : 0) | (dd ? TCP_F_DDGST : 0);
	h->pdo = dlen && !ic ? (uint8_t)(hlen + hd) : 0;
	h->plen = hlen + hd + dlen + dd;
	uint8_t *p = tx_room(c, h->plen);
	if (!p) {
		conn_dead(c);
		return;
	}
	memcpy(p, hdr, hlen);
	if (hd) {
		uint32_t crc = bs_crc32c(0, p, hlen);
		memcpy(p + hlen, &crc, 4);
	}
	if (dlen)
		memcpy(p + hlen + hd, data, dlen);
	if (dd) {
		uint32_t crc = bs_crc32c(0, data, dlen);
		memcpy(p + hlen + hd + dlen, &crc, 4);
	}
}

static void tx_flush(struct tconn *c)
{
	while (c->tx_off < c->tx_len && !c->dead) {
		ssize_t n = send(c->fd, c->tx + c->tx_off, c->tx_len - c->tx_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			conn_dead(c);
			return;
		}
		c->tx_off += (size_t)n;
	}
	if (c->tx_off == c->tx_len)
		c->tx_off = c->tx_len = 0;
	/* A host may have SQSIZE commands outstanding, each answered with at
	 * most MDTS of data: more unread than twice that breaks the rules. */
	if (c->tx_len - c->tx_off > 2u * NSLOTS * (NVMF_MAX_DATA + 256)) {
		conn_dead(c);
		return;
	}
	bool want = c->tx_len != 0;
	if (want != c->want_out && !c->dead) {
		c->want_out = want;
		tgt_watch_mod(c->th, c->fd, &c->w, EPOLLIN | (want ? EPOLLOUT : 0));
	}
}

static void term(struct tconn *c, uint16_t fes, uint32_t fei, const uint8_t *pdu, uint32_t n)
{
	struct nvme_tcp_term t = { .h.type = TCP_C2H_TERM, .fes = fes, .fei = fei };
	uint8_t buf[sizeof(t) + 128];
	n = n > 128 ? 128 : n;
	memcpy(buf, &t, sizeof(t));
	memcpy(buf + sizeof(t), pdu, n);
	/* The offending header rides as the PDU's data (3.6.2.4). */
	struct nvme_tcp_hdr *h = (void *)buf;
	h->hlen = sizeof(t);
	h->plen = (uint32_t)sizeof(t) + n;
	uint8_t *p = tx_room(c, h->plen);
	if (p)
		memcpy(p, buf, h->plen);
	tx_flush(c);
	conn_dead(c);
}

static void respond(struct tconn *c, struct nvmf_req *r)
{
	if (r->xfer) {
		uint32_t n = r->xfer < r->len ? r->xfer : r->len;
		struct nvme_tcp_data d = { .h.type = TCP_C2H_DATA, .h.flags = TCP_F_LAST,
					   .cccid = r->sqe.cid, .datao = 0, .datal = n };
		tx_pdu(c, &d, sizeof(d), r->data, n);
	}
	struct nvme_tcp_rsp rsp = { .h.type = TCP_RSP, .cqe = r->cqe };
	tx_pdu(c, &rsp, sizeof(rsp), NULL, 0);
}

static void run(struct tconn *c, struct nvmf_req *r)
{
	if (nvmf_exec(&c->tt->t->core, &c->q, r) == NVMF_DONE)
		respond(c, r);
}

/* ---- input ---- */

static void on_icreq(struct tconn *c, const uint8_t *p)
{
	const struct nvme_tcp_icreq *ic = (const void *)p;
	if (c->ic_done) {
		term(c, TCP_FES_SEQUENCE, 0, p, sizeof(*ic));
		return;
	}
	if (ic->pfv != 0) {
		term(c, TCP_FES_UNSUPPORTED, offsetof(struct nvme_tcp_icreq, pfv), p, sizeof(*ic));
		return;
	}
	if (ic->hpda > 31 || (ic->dgst & ~3)) {
		term(c, TCP_FES_HDR_FIELD, ic->hpda > 31 ? 10 : 11, p, sizeof(*ic));
		return;
	}
	c->hdgst = ic->dgst & 1;
	c->ddgst = ic->dgst & 2;
	c->ic_done = true;
	struct nvme_tcp_icresp rsp = { .h.type = TCP_ICRESP, .pfv = 0, .cpda = 0,
				       .dgst = ic->dgst, .maxh2cdata = TCP_MAX_H2C };
	tx_pdu(c, &rsp, sizeof(rsp), NULL, 0);
}

static void on_cmd(struct tconn *c, uint8_t *p, const struct tcp_pdu_shape *sh, bool bad_dd)
{
	struct nvmf_req r = { .data = c->scratch };
	memcpy(&r.sqe, p + 8, sizeof(r.sqe));
	enum nvme_dir dir = nvmf_sqe_dir(&r.sqe);
	struct sgl_info sgl = { 0 };
	uint16_t st = 0;
	if (bad_dd)
		st = ST_TRANSIENT_XPORT; /* retryable: the data was damaged in flight */
	else if (dir == DIR_BIDI)
		st = ST_INVALID_FIELD | ST_DNR;
	else if (dir != DIR_NONE)
		st = (uint16_t)nvmf_sgl_parse(&r.sqe, sh->dlen, 0, &sgl);
	if (!st && dir == DIR_C2H && sgl.kind != SGLK_TRANSPORT)
		st = ST_SGL_TYPE_INVALID | ST_DNR; /* read data comes by C2HData */
	if (st) {
		nvmf_reject(&c->q, &r, st);
		respond(c, &r);
		return;
	}
	r.len = dir == DIR_NONE ? 0 : sgl.len;
	if (dir == DIR_H2C && sgl.kind == SGLK_INCAP) {
		r.data = p + sh->pdo + sgl.addr;
	} else if (dir == DIR_H2C && sgl.len) {
		unsigned s;
		for (s = 0; s < NSLOTS && c->slots[s].busy; s++)
			;
		if (s == NSLOTS) { /* more outstanding than the queue is deep */
			nvmf_reject(&c->q, &r, ST_INTERNAL);
			respond(c, &r);
			return;
		}
		struct tslot *sl = &c->slots[s];
		if (!sl->buf && !(sl->buf = malloc(NVMF_MAX_DATA))) {
			conn_dead(c);
			return;
		}
		sl->busy = true;
		sl->bad_digest = false;
		sl->got = 0;
		sl->req = r;
		sl->req.data = sl->buf;
		struct nvme_tcp_r2t r2t = { .h.type = TCP_R2T, .cccid = r.sqe.cid,
					    .ttag = (uint16_t)s, .r2to = 0, .r2tl = sgl.len };
		tx_pdu(c, &r2t, sizeof(r2t), NULL, 0);
		return;
	}
	run(c, &r);
}

static void on_h2c(struct tconn *c, uint8_t *p, const struct tcp_pdu_shape *sh, bool bad_dd)
{
	const struct nvme_tcp_data *d = (const void *)p;
	struct tslot *sl = d->ttag < NSLOTS ? &c->slots[d->ttag] : NULL;
	/* The tag must name a transfer we asked for, for that command. */
	if (!sl || !sl->busy || d->cccid != sl->req.sqe.cid) {
		term(c, TCP_FES_HDR_FIELD, offsetof(struct nvme_tcp_data, ttag), p, d->h.hlen);
		return;
	}
	/* In order, inside the R2T, and the header's length the real one. */
	if (d->datao != sl->got || d->datal != sh->dlen || d->datal > sl->req.len - sl->got) {
		term(c, TCP_FES_RANGE, offsetof(struct nvme_tcp_data, datao), p, d->h.hlen);
		return;
	}
	memcpy(sl->buf + sl->got, p + sh->pdo, d->datal);
	sl->got += d->datal;
	sl->bad_digest |= bad_dd;
	if (sl->got < sl->req.len)
		return;
	sl->busy = false;
	if (sl->bad_digest) {
		nvmf_reject(&c->q, &sl->req, ST_TRANSIENT_XPORT);
		respond(c, &sl->req);
		return;
	}
	run(c, &sl->req);
}

/* One whole PDU at p (its shape checked); digests verified here. */
static void on_pdu(struct tconn *c, uint8_t *p, const struct tcp_pdu_shape *sh)
{
	const struct nvme_tcp_hdr *h = (const void *)p;
	if (sh->hlen > h->hlen) {
		uint32_t crc = bs_crc32c(0, p, h->hlen), got;
		memcpy(&got, p + h->hlen, 4);
		if (crc != got) {
			term(c, TCP_FES_HDGST, 0, p, h->hlen);
			return;
		}
	}
	bool bad_dd = false;
	if (sh->ddgst && sh->dlen) {
		uint32_t got;
		memcpy(&got, p + sh->pdo + sh->dlen, 4);
		bad_dd = got != bs_crc32c(0, p + sh->pdo, sh->dlen);
	}
	if (h->type != TCP_ICREQ && !c->ic_done) {
		term(c, TCP_FES_SEQUENCE, 0, p, h->hlen);
		return;
	}
	switch (h->type) {
	case TCP_ICREQ: on_icreq(c, p); break;
	case TCP_CMD: on_cmd(c, p, sh, bad_dd); break;
	case TCP_H2C_DATA: on_h2c(c, p, sh, bad_dd); break;
	case TCP_H2C_TERM: conn_dead(c); break;
	default: term(c, TCP_FES_HDR_FIELD, 0, p, h->hlen); break;
	}
}

/* A Connect made this an I/O queue, and it has not been placed yet. */
static bool wants_placing(const struct tconn *c)
{
	return !c->placed && c->q.ctrl && c->q.qid;
}

/* Every whole PDU read so far; stops after a Connect that makes the
 * connection move (the rest goes with it). */
static void parse_rx(struct tconn *c)
{
	uint32_t off = 0;
	while (!c->dead && !wants_placing(c) && c->rx_have - off >= sizeof(struct nvme_tcp_hdr)) {
		struct tcp_pdu_shape sh;
		int fes = nvmf_tcp_pdu_check((const void *)(c->rx + off), 0,
					     c->ic_done && c->hdgst, c->ic_done && c->ddgst, &sh);
		if (fes) {
			term(c, (uint16_t)fes, 0, c->rx + off, c->rx_have - off);
			return;
		}
		if (c->rx_have - off < sh.plen)
			break;
		on_pdu(c, c->rx + off, &sh);
		off += sh.plen;
	}
	/* Keep the partial PDU; it fits, as PDU_MAX bounds every plen. */
	memmove(c->rx, c->rx + off, c->rx_have - off);
	c->rx_have -= off;
}

static void on_readable(struct tconn *c)
{
	ssize_t n = recv(c->fd, c->rx + c->rx_have, RX_CAP - c->rx_have, MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		conn_dead(c);
		return;
	}
	if (n < 0)
		return;
	c->rx_have += (uint32_t)n;
	parse_rx(c);
}

static void link_conn(struct tthr *h, struct tconn *c)
{
	c->next = h->conns;
	h->conns = c;
}

static void unlink_conn(struct tthr *h, struct tconn *c)
{
	for (struct tconn **pp = &h->conns; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			return;
		}
}

/* The new owner takes the connection over (posted by place()). */
static void on_adopt(struct tgt_thread *th, struct tgt_msg *m)
{
	struct tconn *c = (struct tconn *)((char *)m - offsetof(struct tconn, m));
	link_conn(th->tcp, c);
	if (tgt_watch_add(th, c->fd, &c->w, EPOLLIN | (c->want_out ? EPOLLOUT : 0))) {
		conn_dead(c);
		return;
	}
	parse_rx(c);
	tx_flush(c);
}

/* Thread 0, after the Connect of an I/O queue: to the thread tgt_pick()
 * names.  True if it went: then c is no longer this thread's to touch. */
static bool place(struct tconn *c)
{
	struct tgt *t = c->tt->t;
	struct tgt_thread *th = tgt_pick(t), *from = c->th;
	c->placed = true;
	pthread_mutex_lock(&t->core.lock);
	/* Marked already: its poke came here, so it dies here. */
	bool move = th != from && !__atomic_load_n(&c->q.kill_req, __ATOMIC_RELAXED);
	tgt_place(move ? th : from);
	if (move) {
		tgt_watch_del(from, c->fd);
		unlink_conn(from->tcp, c);
		c->th = th;
		c->q.thr = th->idx;
		c->m.fn = on_adopt;
		tgt_post(th, &c->m);
	}
	pthread_mutex_unlock(&t->core.lock);
	return move;
}

static void on_conn(struct tgt_watch *w, uint32_t events)
{
	struct tconn *c = (struct tconn *)w;
	if (c->dead)
		return;
	if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
		on_readable(c);
	if (wants_placing(c) && !c->dead) {
		if (place(c))
			return;
		parse_rx(c); /* it stays: what came after the Connect */
	}
	tx_flush(c);
}

static void on_accept(struct tgt_watch *w, uint32_t events)
{
	struct ttgt *tt = (struct ttgt *)((char *)w - offsetof(struct ttgt, lw));
	for (;;) {
		int fd = accept4(tt->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		struct tconn *c = calloc(1, sizeof(*c));
		if (c) {
			c->rx = malloc(RX_CAP);
			c->scratch = malloc(NVMF_MAX_DATA);
		}
		if (!c || !c->rx || !c->scratch) {
			if (c) {
				free(c->rx);
				free(c->scratch);
			}
			free(c);
			close(fd);
			continue;
		}
		struct tgt_thread *th0 = &tt->t->thr[0];
		c->w.fn = on_conn;
		c->tt = tt;
		c->th = th0;
		c->fd = fd;
		c->q.xport = c;
		c->q.kill = core_kill;
		c->q.cm_qid = c->q.cm_sqsize = -1; /* TCP has no QID before Connect */
		link_conn(th0->tcp, c);
		tgt_watch_add(th0, fd, &c->w, EPOLLIN);
	}
}

void tcp_thr_reap(struct tthr *h)
{
	for (struct tconn **pp = &h->conns; *pp;) {
		struct tconn *c = *pp;
		if (!c->dead) {
			pp = &c->next;
			continue;
		}
		*pp = c->next;
		tgt_watch_del(h->th, c->fd);
		close(c->fd);
		if (c->placed)
			tgt_unplace(h->th);
		for (unsigned s = 0; s < NSLOTS; s++)
			free(c->slots[s].buf);
		free(c->rx);
		free(c->tx);
		free(c->scratch);
		free(c);
	}
}

/* On its own thread (or thread 0, for one that never ran or a start
 * that failed). */
void tcp_thr_stop(struct tthr *h)
{
	for (struct tconn *c = h->conns; c; c = c->next)
		conn_dead(c);
	tcp_thr_reap(h);
	h->th->tcp = NULL;
	free(h);
}

/* After every thread's share is gone (tgt_threads_release). */
void tcp_tgt_stop(struct ttgt *tt)
{
	if (tt->lfd >= 0)
		close(tt->lfd);
	free(tt);
}

int tcp_tgt_start(struct tgt *t)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_PASSIVE,
				  .ai_socktype = SOCK_STREAM }, *ai;
	char port[16];
	snprintf(port, sizeof(port), "%d", t->o.port);
	if (getaddrinfo(t->o.addr, port, &hints, &ai))
		return -EINVAL;
	struct ttgt *tt = calloc(1, sizeof(*tt));
	if (!tt) {
		freeaddrinfo(ai);
		return -ENOMEM;
	}
	tt->t = t;
	tt->lfd = -1;
	for (unsigned i = 0; i < t->nthr; i++) {
		struct tthr *h = calloc(1, sizeof(*h));
		if (!h) {
			freeaddrinfo(ai);
			tgt_threads_release(t, TGT_TCP);
			tcp_tgt_stop(tt);
			return -ENOMEM;
		}
		h->tt = tt;
		h->th = &t->thr[i];
		t->thr[i].tcp = h;
	}
	tt->lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(tt->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	int ret = tt->lfd < 0 || bind(tt->lfd, ai->ai_addr, ai->ai_addrlen) || listen(tt->lfd, 64)
			  ? -errno
			  : 0;
	freeaddrinfo(ai);
	if (ret) {
		fprintf(stderr, "nvmf: cannot listen on TCP %s:%d: %s\n", t->o.addr, t->o.port,
			strerror(-ret));
		tgt_threads_release(t, TGT_TCP);
		tcp_tgt_stop(tt);
		return ret;
	}
	tt->lw.fn = on_accept;
	tgt_watch_add(&t->thr[0], tt->lfd, &tt->lw, EPOLLIN);
	t->tcp = tt;
	struct nvmf_port *p = &t->core.ports[t->core.nports++];
	p->trtype = TRTYPE_TCP;
	snprintf(p->traddr, sizeof(p->traddr), "%s", t->o.addr);
	snprintf(p->trsvcid, sizeof(p->trsvcid), "%d", t->o.port);
	return 0;
}
