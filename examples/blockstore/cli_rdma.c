/*
 * cli_rdma.c - the client transport over RDMA (verbs + rdma_cm).
 *
 * Each connection is an RC QP set up through rdma_cm; the REP's private
 * data (bs_hello) gives the cache's address and rkey and this
 * connection's landing slots.  All QPs share one CQ and one completion
 * channel; all request buffers sit in one registered region.
 *
 *   write: RDMA Write (unsignaled) of the block into a landing slot, then
 *          a signaled inline Send of the bs_req, posted as one chain.  The
 *          reply names the slot's replacement and the cache slot that now
 *          holds the block, remembered as a hint for reads.
 *   read:  with a hint, RDMA Read of slot + tag; the tag check (proto.h)
 *          says whether the slot still held this block; if not, or
 *          without a hint, a Send asks the server, which answers with an
 *          RDMA Write with immediate (the request id) into our buffer.
 *
 * A connection is a small state machine driven by rdma_cm events:
 * DOWN -> ADDR -> ROUTE -> CONNECTING -> [WINDOW ->] UP (WINDOW: the
 * server's hello said the rkey is this connection's memory window, which
 * it binds after the connection is established; the BS_OP_WINDOW message
 * says it is bound, server --mw); any error event, DISCONNECTED
 * or failed completion sends it back to DOWN: its requests are queued
 * again, its id and QP destroyed, its incarnation bumped (completions of
 * an older incarnation are ignored), and it reconnects with backoff.
 * That is how a cache move on the server looks from here: a disconnect,
 * flushed requests, a reconnect with the new rkey, the requests again.
 *
 * Work request ids: [63:48] incarnation, [47:40] connection, [39:32]
 * kind, [31:0] request index or receive buffer.
 */
#include "client_priv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define RX_EXTRA 4
#define CQ_BATCH 32
#define RESOLVE_MS 2000

/* K_WRITE: the unsignaled Write of a block; it completes only when it
 * fails (a remote access error names it by its own id). */
enum kind { K_RECV, K_SEND_W, K_SEND, K_READ, K_WRITE };
enum rstate { R_DOWN, R_ADDR, R_ROUTE, R_CONNECTING, R_WINDOW, R_UP };

struct rconn {
	enum rstate state;
	struct rdma_cm_id *id;
	uint16_t inc;
	unsigned inflight, sq_used, sq_depth;
	uint32_t landing[BS_MAX_QP_DEPTH];
	unsigned nlanding;
	uint64_t raddr;
	uint32_t rkey;
	uint64_t down_since, retry_at;
	unsigned backoff_ms;
	bool window_ready; /* BS_OP_WINDOW arrived (it may beat the ESTABLISHED event) */
	struct bs_rep *rx;
};

struct rtp {
	struct rdma_event_channel *ch;
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_mr *buf_mr, *rx_mr;
	struct bs_rep *rx_all;
	int32_t *hint; /* lba -> cache slot last seen holding it, -1: none */
	uint64_t first_raddr; /* the first hello's cache (--stale-rkey keeps it) */
	uint32_t first_rkey;
	bool have_first;
	unsigned access_streak; /* remote access errors since the last good reply */
	uint32_t epoch;
	bool have_epoch;
	struct sockaddr_storage dst, src;
	bool have_src;
	unsigned nrx, rr;
	int ep;
	struct rconn *conns;
};

static struct rtp *tp(struct bs_client *c)
{
	return c->tp;
}

static uint64_t mkid(struct rconn *rc, unsigned ci, enum kind k, uint32_t idx)
{
	return (uint64_t)rc->inc << 48 | (uint64_t)ci << 40 | (uint64_t)k << 32 | idx;
}

static void conn_fail(struct bs_client *c, unsigned ci)
{
	struct rtp *t = tp(c);
	struct rconn *rc = &t->conns[ci];
	for (unsigned i = 0; i < c->nios; i++) {
		struct bs_io *io = &c->ios[i];
		if (io->busy && io->conn == (int)ci)
			bs_requeue(c, io, true);
	}
	if (rc->id) {
		if (rc->state >= R_WINDOW) /* connected */
			rdma_disconnect(rc->id);
		if (rc->id->qp)
			rdma_destroy_qp(rc->id);
		rdma_destroy_id(rc->id);
		rc->id = NULL;
	}
	uint64_t now = bs_client_now();
	if (!rc->down_since)
		rc->down_since = now;
	rc->state = R_DOWN;
	rc->window_ready = false;
	rc->inc++;
	rc->inflight = rc->sq_used = rc->nlanding = 0;
	rc->retry_at = now + (uint64_t)rc->backoff_ms * 1000000u;
	rc->backoff_ms = rc->backoff_ms ? (rc->backoff_ms * 2 > 200 ? 200 : rc->backoff_ms * 2) : 1;
}

static void conn_start(struct bs_client *c, unsigned ci)
{
	struct rtp *t = tp(c);
	struct rconn *rc = &t->conns[ci];
	if (rdma_create_id(t->ch, &rc->id, (void *)(uintptr_t)ci, RDMA_PS_TCP)) {
		rc->id = NULL;
		conn_fail(c, ci);
		return;
	}
	rc->state = R_ADDR;
	if (rdma_resolve_addr(rc->id, t->have_src ? (struct sockaddr *)&t->src : NULL,
			      (struct sockaddr *)&t->dst, RESOLVE_MS))
		conn_fail(c, ci);
}

/* PD, CQ and memory regions, once the first id knows its device. */
static int verbs_setup(struct bs_client *c, struct ibv_context *verbs)
{
	struct rtp *t = tp(c);
	if (t->verbs)
		return verbs == t->verbs ? 0 : -EXDEV;
	unsigned per = 2 * c->o.depth + RX_EXTRA + t->nrx;
	t->verbs = verbs;
	t->pd = ibv_alloc_pd(verbs);
	t->cc = t->pd ? ibv_create_comp_channel(verbs) : NULL;
	t->cq = t->cc ? ibv_create_cq(verbs, (int)(c->o.nconn * per), NULL, t->cc, 0) : NULL;
	t->buf_mr = t->cq ? ibv_reg_mr(t->pd, c->bufs, (size_t)c->nios * BS_SLOT_STRIDE,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
			  : NULL;
	t->rx_mr = t->buf_mr ? ibv_reg_mr(t->pd, t->rx_all,
					  (size_t)c->o.nconn * t->nrx * sizeof(struct bs_rep),
					  IBV_ACCESS_LOCAL_WRITE)
			     : NULL;
	if (!t->rx_mr)
		return -errno ? -errno : -ENOMEM;
	/* Non-blocking, for the reason given in srv_rdma.c's setup. */
	if (fcntl(t->cc->fd, F_SETFL, fcntl(t->cc->fd, F_GETFL) | O_NONBLOCK))
		return -errno;
	struct epoll_event e = { .events = EPOLLIN, .data.fd = t->cc->fd };
	epoll_ctl(t->ep, EPOLL_CTL_ADD, t->cc->fd, &e);
	return 0;
}

static int post_recv(struct rtp *t, struct rconn *rc, unsigned ci, unsigned i)
{
	struct ibv_sge sge = { (uintptr_t)&rc->rx[i], sizeof(struct bs_rep), t->rx_mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = mkid(rc, ci, K_RECV, i), .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;
	return ibv_post_recv(rc->id->qp, &wr, &bad);
}

static int on_route(struct bs_client *c, unsigned ci)
{
	struct rtp *t = tp(c);
	struct rconn *rc = &t->conns[ci];
	rc->sq_depth = 2 * c->o.depth + RX_EXTRA;
	struct ibv_qp_init_attr qa = {
		.send_cq = t->cq, .recv_cq = t->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = rc->sq_depth, .max_recv_wr = t->nrx, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = sizeof(struct bs_req) },
	};
	if (rdma_create_qp(rc->id, t->pd, &qa))
		return -errno;
	for (unsigned i = 0; i < t->nrx; i++)
		if (post_recv(t, rc, ci, i))
			return -EIO;
	struct bs_conn_req cr = { BS_MAGIC, c->o.depth };
	struct rdma_conn_param cp = { .private_data = &cr, .private_data_len = sizeof(cr),
				      .responder_resources = 1, .initiator_depth = 1,
				      .retry_count = 7, .rnr_retry_count = 7 };
	rc->state = R_CONNECTING;
	return rdma_connect(rc->id, &cp) ? -errno : 0;
}

static int on_established(struct bs_client *c, unsigned ci, const void *pd, unsigned len)
{
	struct rtp *t = tp(c);
	struct rconn *rc = &t->conns[ci];
	struct bs_hello h;
	if (len < sizeof(h))
		return -EPROTO;
	memcpy(&h, pd, sizeof(h));
	if (h.magic != BS_MAGIC || h.nlanding > BS_MAX_QP_DEPTH || !h.nblocks ||
	    (c->nblocks && h.nblocks != c->nblocks))
		return -EPROTO;
	if (!c->nblocks) {
		c->nblocks = h.nblocks;
		t->hint = malloc(h.nblocks * sizeof(*t->hint));
		if (!t->hint)
			return -ENOMEM;
		memset(t->hint, 0xff, h.nblocks * sizeof(*t->hint));
	}
	if (t->have_epoch && h.epoch != t->epoch)
		c->cnt.remaps_seen++;
	t->epoch = h.epoch;
	t->have_epoch = true;
	memcpy(rc->landing, h.landing, sizeof(rc->landing));
	rc->nlanding = h.nlanding;
	rc->raddr = h.addr;
	rc->rkey = h.rkey;
	if (!t->have_first) {
		t->first_raddr = h.addr;
		t->first_rkey = h.rkey;
		t->have_first = true;
	} else if (c->o.stale_rkey) {
		/* Deliberately wrong (the demo of `softrnic explain`): the
		 * key of a cache the server has since moved and released. */
		rc->raddr = t->first_raddr;
		rc->rkey = t->first_rkey;
	}
	if ((h.flags & BS_HELLO_WINDOW) && !rc->window_ready) {
		rc->state = R_WINDOW; /* up once the server says the window is bound */
		return 0;
	}
	rc->state = R_UP;
	rc->backoff_ms = 0;
	bs_note_up(c, &rc->down_since);
	return 0;
}

static void cm_events(struct bs_client *c)
{
	struct rtp *t = tp(c);
	struct pollfd p = { t->ch->fd, POLLIN, 0 };
	while (poll(&p, 1, 0) == 1) {
		struct rdma_cm_event *ev;
		if (rdma_get_cm_event(t->ch, &ev))
			return;
		unsigned ci = (unsigned)(uintptr_t)ev->id->context;
		struct rconn *rc = ci < c->o.nconn ? &t->conns[ci] : NULL;
		int ret = 0;
		if (!rc || rc->id != ev->id) {
			rdma_ack_cm_event(ev);
			continue;
		}
		switch (ev->event) {
		case RDMA_CM_EVENT_ADDR_RESOLVED:
			ret = verbs_setup(c, ev->id->verbs);
			if (!ret) {
				rc->state = R_ROUTE;
				ret = rdma_resolve_route(ev->id, RESOLVE_MS) ? -errno : 0;
			}
			break;
		case RDMA_CM_EVENT_ROUTE_RESOLVED: ret = on_route(c, ci); break;
		case RDMA_CM_EVENT_ESTABLISHED:
			ret = on_established(c, ci, ev->param.conn.private_data,
					     ev->param.conn.private_data_len);
			break;
		case RDMA_CM_EVENT_TIMEWAIT_EXIT: break;
		default: ret = -ECONNRESET; break; /* errors, REJECTED, DISCONNECTED */
		}
		/* Destroying an id waits for its events' acks: ack first. */
		rdma_ack_cm_event(ev);
		if (ret)
			conn_fail(c, ci);
	}
}

static void timers(struct bs_client *c)
{
	struct rtp *t = tp(c);
	uint64_t now = bs_client_now();
	for (unsigned i = 0; i < c->o.nconn; i++)
		if (t->conns[i].state == R_DOWN && t->conns[i].retry_at <= now)
			conn_start(c, i);
}

static struct bs_io *io_of(struct bs_client *c, uint32_t idx, unsigned ci)
{
	if (idx >= c->nios)
		return NULL;
	struct bs_io *io = &c->ios[idx];
	return io->busy && io->conn == (int)ci ? io : NULL;
}

static void on_reply(struct bs_client *c, unsigned ci, const struct bs_rep *rep)
{
	struct rtp *t = tp(c);
	struct rconn *rc = &t->conns[ci];
	if (rep->magic == BS_MAGIC && rep->op == BS_OP_REPLY && rep->req_op == BS_OP_WINDOW) {
		/* The server Sends it once the connection is established on its
		 * side, so it can arrive before our ESTABLISHED event. */
		rc->window_ready = true;
		if (rc->state == R_WINDOW) {
			rc->state = R_UP;
			rc->backoff_ms = 0;
			bs_note_up(c, &rc->down_since);
		}
		return;
	}
	struct bs_io *io = io_of(c, rep->id, ci);
	if (rep->magic != BS_MAGIC || rep->op != BS_OP_REPLY || !io || io->op != rep->req_op)
		return; /* not an answer to anything we asked on this connection */
	rc->inflight--;
	if (rep->req_op == BS_OP_WRITE) {
		if (rep->new_slot != BS_NO_SLOT && rc->nlanding < BS_MAX_QP_DEPTH)
			rc->landing[rc->nlanding++] = rep->new_slot;
		if (rep->status == -EBADMSG) { /* damaged on the way: send it again */
			c->cnt.crc_rejects++;
			bs_requeue(c, io, true);
			return;
		}
		if (!rep->status && rep->slot < INT32_MAX)
			t->hint[io->lba] = (int32_t)rep->slot;
		if (!rep->status)
			t->access_streak = 0;
	}
	if (rep->req_op == BS_OP_STATS)
		memcpy(io->v, rep->v, sizeof(io->v));
	if (rep->req_op == BS_OP_WRITE)
		io->seq = rep->seq;
	bs_complete(c, io, rep->status);
}

/* The server refused our key.  A correct client never sees this (the
 * server revokes, i.e. disconnects, before it releases a region, and the
 * reconnect brings the new key), so a few in a row mean our key is wrong
 * for good: fail the connection's requests (-EACCES) instead of sending
 * them again forever. */
#define ACCESS_ERR_LIMIT 3

static void access_error(struct bs_client *c, unsigned ci)
{
	struct rtp *t = tp(c);
	c->cnt.access_errors++;
	if (++t->access_streak < ACCESS_ERR_LIMIT)
		return;
	for (unsigned i = 0; i < c->nios; i++)
		if (c->ios[i].busy && c->ios[i].conn == (int)ci)
			bs_complete(c, &c->ios[i], -EACCES);
}

static void on_wc(struct bs_client *c, const struct ibv_wc *wc)
{
	struct rtp *t = tp(c);
	unsigned ci = (unsigned)(wc->wr_id >> 40) & 0xff;
	enum kind k = (enum kind)((wc->wr_id >> 32) & 0xff);
	uint32_t idx = (uint32_t)wc->wr_id;
	if (ci >= c->o.nconn)
		return;
	struct rconn *rc = &t->conns[ci];
	if ((uint16_t)(wc->wr_id >> 48) != rc->inc)
		return; /* an earlier incarnation of this connection */
	if (k == K_SEND_W)
		rc->sq_used -= 2;
	else if (k != K_RECV)
		rc->sq_used -= 1;
	if (wc->status != IBV_WC_SUCCESS) {
		if (wc->status == IBV_WC_REM_ACCESS_ERR)
			access_error(c, ci);
		conn_fail(c, ci);
		return;
	}
	if (k == K_READ) {
		struct bs_io *io = io_of(c, idx, ci);
		if (!io)
			return;
		rc->inflight--;
		if (bs_tag_ok(io->buf, io->lba)) {
			c->cnt.rdma_read_hits++;
			io->rdma_read = true;
			bs_complete(c, io, 0);
		} else { /* the slot moved on: ask the server */
			c->cnt.rdma_read_misses++;
			t->hint[io->lba] = -1;
			io->no_hint = true;
			bs_requeue(c, io, false);
		}
		return;
	}
	if (k != K_RECV)
		return;
	if (idx >= t->nrx)
		return;
	struct bs_rep rep = rc->rx[idx]; /* copy: the buffer goes back at once */
	if (post_recv(t, rc, ci, idx)) {
		conn_fail(c, ci);
		return;
	}
	if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
		struct bs_io *io = io_of(c, ntohl(wc->imm_data), ci);
		if (!io || io->op != BS_OP_READ)
			return;
		rc->inflight--;
		const struct bs_tag *tag = (const void *)(io->buf + BS_BLOCK);
		bs_complete(c, io, 0); /* checks the tag */
		if (!io->status && tag->slot < INT32_MAX)
			t->hint[io->lba] = (int32_t)tag->slot;
		return;
	}
	if (wc->byte_len == sizeof(rep))
		on_reply(c, ci, &rep);
}

static int poll_cq(struct bs_client *c)
{
	struct rtp *t = tp(c);
	if (!t->cq)
		return 0;
	struct ibv_wc wc[CQ_BATCH];
	int n = ibv_poll_cq(t->cq, CQ_BATCH, wc);
	for (int i = 0; i < n; i++)
		on_wc(c, &wc[i]);
	return n > 0 ? n : 0;
}

static int rdma_post(struct bs_client *c, struct bs_io *io)
{
	struct rtp *t = tp(c);
	bool alive = false;
	unsigned ci = 0;
	struct rconn *rc = NULL;
	uint64_t now = bs_client_now();
	for (unsigned n = 0; n < c->o.nconn; n++) {
		ci = (t->rr + n) % c->o.nconn;
		struct rconn *x = &t->conns[ci];
		if (x->state == R_UP || now - x->down_since < c->o.reconnect_ms * 1000000ull)
			alive = true;
		if (x->state == R_UP && x->inflight < c->o.depth && x->sq_used + 2 <= x->sq_depth &&
		    (io->op != BS_OP_WRITE || x->nlanding)) {
			rc = x;
			break;
		}
	}
	if (!rc)
		return alive ? -EAGAIN : -ENOTCONN;
	t->rr = ci + 1;
	struct bs_req req = { .magic = BS_MAGIC, .op = io->op, .id = io->index, .lba = io->lba };
	struct ibv_sge data = { (uintptr_t)io->buf, BS_BLOCK, t->buf_mr->lkey };
	struct ibv_sge msg = { (uintptr_t)&req, sizeof(req), 0 };
	struct ibv_send_wr wr[2], *bad;
	memset(wr, 0, sizeof(wr));
	wr[1] = (struct ibv_send_wr){ .wr_id = mkid(rc, ci, K_SEND, 0), .sg_list = &msg,
				      .num_sge = 1, .opcode = IBV_WR_SEND,
				      .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE };
	struct ibv_send_wr *first = &wr[1];
	unsigned used = 1;
	int32_t hint = t->hint ? t->hint[io->lba] : -1;
	if (io->op == BS_OP_WRITE) {
		req.slot = rc->landing[--rc->nlanding];
		req.len = BS_BLOCK;
		req.csum = io->csum;
		wr[0] = (struct ibv_send_wr){ .wr_id = mkid(rc, ci, K_WRITE, io->index),
					      .sg_list = &data, .num_sge = 1,
					      .opcode = IBV_WR_RDMA_WRITE, .next = &wr[1] };
		wr[0].wr.rdma.remote_addr = rc->raddr + (uint64_t)req.slot * BS_SLOT_STRIDE;
		wr[0].wr.rdma.rkey = rc->rkey;
		wr[1].wr_id = mkid(rc, ci, K_SEND_W, 0);
		first = &wr[0];
		used = 2;
	} else if (io->op == BS_OP_READ && !io->no_hint && hint >= 0) {
		data.length = BS_SLOT_STRIDE;
		wr[1] = (struct ibv_send_wr){ .wr_id = mkid(rc, ci, K_READ, io->index),
					      .sg_list = &data, .num_sge = 1,
					      .opcode = IBV_WR_RDMA_READ,
					      .send_flags = IBV_SEND_SIGNALED };
		wr[1].wr.rdma.remote_addr = rc->raddr + (uint64_t)hint * BS_SLOT_STRIDE;
		wr[1].wr.rdma.rkey = rc->rkey;
	} else if (io->op == BS_OP_READ) {
		req.addr = (uintptr_t)io->buf;
		req.rkey = t->buf_mr->rkey;
	}
	if (ibv_post_send(rc->id->qp, first, &bad)) {
		if (io->op == BS_OP_WRITE)
			rc->nlanding++;
		conn_fail(c, ci);
		return -EAGAIN;
	}
	rc->sq_used += used;
	rc->inflight++;
	io->conn = (int)ci;
	return 0;
}

static void rdma_progress(struct bs_client *c, int timeout_ms)
{
	struct rtp *t = tp(c);
	uint64_t spin_end = bs_client_now() + c->o.poll_us * 1000ull;
	for (unsigned k = 1;; k++) {
		if (poll_cq(c))
			return;
		bool spinning = bs_client_now() < spin_end;
		if (k % 64 == 0 || !spinning) {
			cm_events(c);
			timers(c);
			if (c->done)
				return;
		}
		if (!spinning)
			break;
	}
	if (t->cq) {
		ibv_req_notify_cq(t->cq, 0);
		if (poll_cq(c))
			return;
	}
	/* Sleep; wake for a reconnect timer within 10 ms. */
	int ms = timeout_ms < 10 ? timeout_ms : 10;
	struct epoll_event evs[2];
	int n = epoll_wait(t->ep, evs, 2, ms);
	for (int i = 0; i < n; i++) {
		if (t->cc && evs[i].data.fd == t->cc->fd) {
			struct ibv_cq *cq;
			void *ctx;
			if (!ibv_get_cq_event(t->cc, &cq, &ctx))
				ibv_ack_cq_events(cq, 1);
		}
	}
	cm_events(c);
	timers(c);
	poll_cq(c);
}

static int rdma_open(struct bs_client *c)
{
	struct rtp *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	c->tp = t;
	t->nrx = c->o.depth + RX_EXTRA;
	t->conns = calloc(c->o.nconn, sizeof(*t->conns));
	t->rx_all = calloc((size_t)c->o.nconn * t->nrx, sizeof(struct bs_rep));
	t->ch = rdma_create_event_channel();
	t->ep = epoll_create1(EPOLL_CLOEXEC);
	struct addrinfo hints = { .ai_flags = AI_NUMERICSERV, .ai_socktype = SOCK_STREAM }, *ai;
	char port[16];
	snprintf(port, sizeof(port), "%d", c->o.port);
	if (!t->conns || !t->rx_all || !t->ch || t->ep < 0 ||
	    getaddrinfo(c->o.host, port, &hints, &ai)) {
		c->t->close(c);
		return -EINVAL;
	}
	memcpy(&t->dst, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	if (c->o.src) {
		if (getaddrinfo(c->o.src, NULL, &hints, &ai)) {
			c->t->close(c);
			return -EINVAL;
		}
		memcpy(&t->src, ai->ai_addr, ai->ai_addrlen);
		t->have_src = true;
		freeaddrinfo(ai);
	}
	struct epoll_event e = { .events = EPOLLIN, .data.fd = t->ch->fd };
	epoll_ctl(t->ep, EPOLL_CTL_ADD, t->ch->fd, &e);
	for (unsigned i = 0; i < c->o.nconn; i++) {
		t->conns[i].rx = t->rx_all + (size_t)i * t->nrx;
		conn_start(c, i);
	}
	/* Every connection up, or give up after reconnect_ms. */
	uint64_t end = bs_client_now() + c->o.reconnect_ms * 1000000ull;
	for (;;) {
		unsigned up = 0;
		for (unsigned i = 0; i < c->o.nconn; i++)
			up += t->conns[i].state == R_UP;
		if (up == c->o.nconn)
			break;
		if (bs_client_now() > end) {
			c->t->close(c);
			return -ECONNREFUSED;
		}
		rdma_progress(c, 10);
	}
	for (unsigned i = 0; i < c->o.nconn; i++)
		t->conns[i].down_since = 0; /* the first connect is no reconnect */
	c->cnt.reconnects = 0;
	c->cnt.reconnect_max_us = 0;
	return 0;
}

static void rdma_close(struct bs_client *c)
{
	struct rtp *t = tp(c);
	for (unsigned i = 0; t->conns && i < c->o.nconn; i++) {
		struct rconn *rc = &t->conns[i];
		if (!rc->id)
			continue;
		if (rc->state >= R_WINDOW) /* connected */
			rdma_disconnect(rc->id);
		if (rc->id->qp)
			rdma_destroy_qp(rc->id);
		rdma_destroy_id(rc->id);
	}
	if (t->rx_mr)
		ibv_dereg_mr(t->rx_mr);
	if (t->buf_mr)
		ibv_dereg_mr(t->buf_mr);
	if (t->cq)
		ibv_destroy_cq(t->cq);
	if (t->cc)
		ibv_destroy_comp_channel(t->cc);
	if (t->pd)
		ibv_dealloc_pd(t->pd);
	if (t->ch)
		rdma_destroy_event_channel(t->ch);
	if (t->ep >= 0)
		close(t->ep);
	free(t->hint);
	free(t->rx_all);
	free(t->conns);
	free(t);
	c->tp = NULL;
}

const struct bs_transport bs_rdma_transport = {
	.open = rdma_open,
	.post = rdma_post,
	.progress = rdma_progress,
	.close = rdma_close,
};
