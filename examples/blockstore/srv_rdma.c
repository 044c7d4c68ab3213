/*
 * srv_rdma.c - the server over RDMA (verbs + rdma_cm).
 *
 * The cache region is registered once, for remote read and write, and
 * every connection learns its address and rkey in the REP's private data
 * together with BS_MAX_QP_DEPTH (or fewer) landing slots of its own.
 *
 *   write: the client RDMA-Writes the block into one of its landing slots
 *          and Sends a bs_req; the server checks the CRC, makes the slot
 *          the cached copy and answers with a Send that names the landing
 *          slot replacing it.  The server's CPU reads the block once (CRC)
 *          and never copies it.
 *   read:  a client that knows the slot RDMA-Reads it (block + tag) with
 *          no server CPU at all; otherwise it Sends a bs_req and the server
 *          RDMA-Writes-with-immediate block + tag into the client's buffer:
 *          the block from the pinned slot, the tag from the cache's sent
 *          copy (bs_cache_sent_tags), not from the slot.  A write of the
 *          same LBA committed while that Write is still in flight kills
 *          the slot's tag in the region, and the NIC may read (or, after a
 *          loss, read again) the source of a work request until it
 *          completes.
 *
 * Moving the cache (SIGUSR1), the rkey lifecycle: 1. revoke: every
 * connection is disconnected (rdma_disconnect moves its QP to ERR, so no
 * packet that arrives later can touch the region); 2. wait: until every
 * send the server posted from the region (reads served with RDMA Write)
 * has completed or flushed, bounded; 3. copy the region, register the
 * copy, deregister the old region, unmap it.  Clients see the disconnect
 * and flushed work requests, reconnect, receive the new rkey, and retry.
 *
 * With --mw each connection gets a type-2 memory window over the cache
 * instead of the region's rkey: allocated at the connect request, its
 * key (the window's next, ibv_inc_rkey) sent in the hello with
 * BS_HELLO_WINDOW, bound by the connection's own QP once it is
 * established, then announced with a BS_OP_WINDOW message (after the
 * bind in the send queue, so the window is bound when the client hears
 * of it).  A type-2 window works only through the QP that bound it, so a
 * key is useless on any other connection, and SIGUSR2 revokes one
 * connection alone: a Local Invalidate of its window, whose next access
 * then fails (REM_ACCESS_ERR) and that client reconnects for a new one;
 * the others go on untouched.  Windows are deallocated with their
 * connection, before the region they cover can be deregistered.
 *
 * Work request ids: [63:40] connection generation, [39:32] connection
 * index, [31:30] kind, [29:0] receive buffer or cache slot.  A completion
 * of an earlier generation only releases its slot pin.
 */
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define RX_EXTRA 4 /* receive buffers beyond the depth: a STATS next to a full window */
#define CQ_BATCH 32

enum wr_kind { K_RECV = 0, K_REPLY = 1, K_SLOT = 2 };

struct conn {
	bool used, dead;
	uint32_t gen;
	struct rdma_cm_id *id;
	struct bs_req *rx;
	struct ibv_mr *rx_mr;
	unsigned depth, nrx;
	unsigned sends_out, recvs_out;
	uint32_t landing[BS_MAX_QP_DEPTH];
	unsigned nlanding;
	uint64_t dead_since;
	struct ibv_mw *mw;    /* --mw: this connection's window over the cache */
	uint32_t mw_rkey;     /* its key once bound */
};

struct rsrv {
	struct bs_server *s;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listen;
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_mr *cache_mr;
	struct ibv_mr *tags_mr; /* the cache's sent tags (served reads), local only */
	struct conn conns[BS_MAX_CONNS];
	uint32_t next_gen;
	unsigned ndead;
	unsigned landing_reserved;
};

static uint64_t wr_id(const struct rsrv *r, const struct conn *c, enum wr_kind k, uint32_t aux)
{
	return (uint64_t)(c->gen & 0xffffff) << 40 | (uint64_t)(c - r->conns) << 32 |
	       (uint64_t)k << 30 | (aux & 0x3fffffff);
}

static void conn_kill(struct rsrv *r, struct conn *c)
{
	if (c->dead)
		return;
	c->dead = true;
	c->dead_since = bs_now_ns();
	r->ndead++;
	rdma_disconnect(c->id); /* QP to ERR first: nothing lands after this */
}

/* Release everything a connection holds; its QP is in ERR or never left
 * INIT, so no peer reaches its landing slots any more. */
static void conn_free(struct rsrv *r, struct conn *c, bool destroy_id)
{
	for (unsigned i = 0; i < c->nlanding; i++)
		bs_cache_release(r->s->cache, c->landing[i]);
	r->landing_reserved -= c->depth;
	if (c->id->qp)
		rdma_destroy_qp(c->id);
	if (destroy_id)
		rdma_destroy_id(c->id);
	if (c->rx_mr)
		ibv_dereg_mr(c->rx_mr);
	if (c->mw)
		ibv_dealloc_mw(c->mw); /* before the region it covers can go */
	free(c->rx);
	if (c->dead)
		r->ndead--;
	uint32_t gen = c->gen;
	*c = (struct conn){ .gen = gen };
}

/* Free a dead connection once its work requests have all come back (or a
 * bound has passed: then late completions are recognised as stale). */
static void conn_reap(struct rsrv *r, struct conn *c, bool force)
{
	if (!c->used || !c->dead)
		return;
	if (!force && (c->sends_out || c->recvs_out) &&
	    bs_now_ns() - c->dead_since < 2000000000ull)
		return;
	conn_free(r, c, true);
}

static void reap_all(struct rsrv *r, bool force)
{
	for (unsigned i = 0; r->ndead && i < BS_MAX_CONNS; i++)
		conn_reap(r, &r->conns[i], force);
}

static int post_recv(struct rsrv *r, struct conn *c, unsigned i)
{
	struct ibv_sge sge = { (uintptr_t)&c->rx[i], sizeof(c->rx[i]), c->rx_mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id(r, c, K_RECV, i), .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;
	int ret = ibv_post_recv(c->id->qp, &wr, &bad);
	if (!ret)
		c->recvs_out++;
	return ret;
}

static void reply(struct rsrv *r, struct conn *c, struct bs_rep *rep)
{
	struct ibv_sge sge = { (uintptr_t)rep, sizeof(*rep), 0 };
	struct ibv_send_wr wr = { .wr_id = wr_id(r, c, K_REPLY, 0), .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE };
	struct ibv_send_wr *bad;
	if (ibv_post_send(c->id->qp, &wr, &bad))
		conn_kill(r, c);
	else
		c->sends_out++;
	r->s->ios++;
}

/* Serve a READ: RDMA Write block + tag into the client's buffer, with the
 * request id as immediate data.  The slot stays pinned until the send
 * completes, so it cannot be recycled under the transfer, and its block
 * does not change; its tag in the region does once a newer write of the
 * LBA is committed, so the tag goes from the sent copy, which does not. */
static int serve_read(struct rsrv *r, struct conn *c, const struct bs_req *req)
{
	uint32_t slot;
	int hit;
	int ret = bs_cache_get(r->s->cache, req->lba, &slot, &hit);
	if (ret)
		return ret;
	uint8_t *src = bs_cache_mem(r->s->cache) + (size_t)slot * BS_SLOT_STRIDE;
	struct ibv_sge sge[2] = {
		{ (uintptr_t)src, BS_BLOCK, r->cache_mr->lkey },
		{ (uintptr_t)&bs_cache_sent_tags(r->s->cache)[slot], BS_TAG_LEN, r->tags_mr->lkey },
	};
	struct ibv_send_wr wr = { .wr_id = wr_id(r, c, K_SLOT, slot), .sg_list = sge,
				  .num_sge = 2, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
				  .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(req->id) };
	wr.wr.rdma.remote_addr = req->addr;
	wr.wr.rdma.rkey = req->rkey;
	struct ibv_send_wr *bad;
	if (ibv_post_send(c->id->qp, &wr, &bad)) {
		bs_cache_unpin(r->s->cache, slot);
		conn_kill(r, c);
		return 0;
	}
	c->sends_out++;
	r->s->ios++;
	return 0;
}

static void serve_write(struct rsrv *r, struct conn *c, const struct bs_req *req,
			struct bs_rep *rep)
{
	unsigned j;
	for (j = 0; j < c->nlanding && c->landing[j] != req->slot; j++)
		;
	if (j == c->nlanding) { /* not a slot this connection may write */
		rep->status = -EPERM;
		return;
	}
	int ret = bs_cache_commit(r->s->cache, req->slot, req->lba, req->csum, &rep->seq);
	rep->slot = req->slot;
	if (ret) { /* the slot stays this connection's landing slot */
		rep->status = (int16_t)ret;
		rep->new_slot = req->slot;
		return;
	}
	uint32_t fresh;
	if (bs_cache_alloc(r->s->cache, &fresh)) {
		c->landing[j] = c->landing[--c->nlanding]; /* one credit fewer */
		rep->new_slot = BS_NO_SLOT;
	} else {
		c->landing[j] = fresh;
		rep->new_slot = fresh;
	}
}

static void on_request(struct rsrv *r, struct conn *c, unsigned i, uint32_t len)
{
	struct bs_req req = c->rx[i]; /* private copy: the buffer is reposted below */
	if (post_recv(r, c, i)) {
		conn_kill(r, c);
		return;
	}
	struct bs_rep rep = { .magic = BS_MAGIC, .op = BS_OP_REPLY, .req_op = req.op,
			      .id = req.id, .new_slot = BS_NO_SLOT };
	int ret = len == sizeof(req) ? bs_server_check_req(r->s, &req) : -EPROTO;
	if (!ret) {
		switch (req.op) {
		case BS_OP_WRITE: serve_write(r, c, &req, &rep); break;
		case BS_OP_READ:
			ret = serve_read(r, c, &req);
			if (!ret)
				return; /* answered by the Write with immediate */
			break;
		case BS_OP_FLUSH: ret = bs_cache_flush(r->s->cache); break;
		case BS_OP_STATS: bs_server_stats(r->s, &rep); break;
		}
	}
	if (ret)
		rep.status = (int16_t)ret;
	reply(r, c, &rep);
}

static void on_wc(struct rsrv *r, const struct ibv_wc *wc)
{
	uint32_t ci = (uint32_t)(wc->wr_id >> 32) & 0xff, gen = (uint32_t)(wc->wr_id >> 40);
	enum wr_kind k = (enum wr_kind)((wc->wr_id >> 30) & 3);
	uint32_t aux = (uint32_t)wc->wr_id & 0x3fffffff;
	if (k == K_SLOT)
		bs_cache_unpin(r->s->cache, aux);
	struct conn *c = ci < BS_MAX_CONNS ? &r->conns[ci] : NULL;
	if (!c || !c->used || (c->gen & 0xffffff) != gen)
		return; /* a connection already reaped */
	if (k == K_RECV)
		c->recvs_out--;
	else
		c->sends_out--;
	if (wc->status != IBV_WC_SUCCESS) {
		conn_kill(r, c);
		return;
	}
	if (k == K_RECV && !c->dead)
		on_request(r, c, aux, wc->byte_len);
}

static int poll_cq(struct rsrv *r)
{
	struct ibv_wc wc[CQ_BATCH];
	int n = ibv_poll_cq(r->cq, CQ_BATCH, wc);
	for (int i = 0; i < n; i++)
		on_wc(r, &wc[i]);
	return n;
}

/* Accept or reject a connection; returns an id to destroy once the event is
 * acknowledged (librdmacm waits for the ack when destroying its id). */
static struct rdma_cm_id *on_connect_request(struct rsrv *r, struct rdma_cm_event *ev)
{
	struct rdma_cm_id *id = ev->id;
	const struct bs_conn_req *cr = ev->param.conn.private_data;
	struct conn *c = NULL;
	if (ev->param.conn.private_data_len < sizeof(*cr) || cr->magic != BS_MAGIC ||
	    !cr->depth || id->verbs != r->verbs)
		goto reject;
	unsigned depth = cr->depth < BS_MAX_QP_DEPTH ? cr->depth : BS_MAX_QP_DEPTH;
	/* Landing slots are reserved: keep at least half the cache for data. */
	if (r->landing_reserved + depth > bs_cache_nslots(r->s->cache) / 2)
		goto reject;
	for (unsigned i = 0; i < BS_MAX_CONNS && !c; i++)
		if (!r->conns[i].used)
			c = &r->conns[i];
	if (!c)
		goto reject;
	*c = (struct conn){ .used = true, .gen = ++r->next_gen, .id = id, .depth = depth,
			    .nrx = depth + RX_EXTRA };
	r->landing_reserved += depth;
	id->context = c;
	struct ibv_qp_init_attr qa = {
		.send_cq = r->cq, .recv_cq = r->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 2 * depth + RX_EXTRA, .max_recv_wr = c->nrx,
			 .max_send_sge = 2, .max_recv_sge = 1, .max_inline_data = sizeof(struct bs_rep) },
	};
	c->rx = calloc(c->nrx, sizeof(*c->rx));
	if (!c->rx || rdma_create_qp(id, r->pd, &qa))
		goto undo;
	c->rx_mr = ibv_reg_mr(r->pd, c->rx, c->nrx * sizeof(*c->rx), IBV_ACCESS_LOCAL_WRITE);
	if (!c->rx_mr)
		goto undo;
	for (unsigned i = 0; i < c->nrx; i++)
		if (post_recv(r, c, i))
			goto undo;
	struct bs_hello h = { .magic = BS_MAGIC, .epoch = r->s->epoch,
			      .addr = (uintptr_t)bs_cache_mem(r->s->cache),
			      .nblocks = bs_store_nblocks(r->s->st), .rkey = r->cache_mr->rkey,
			      .nslots = bs_cache_nslots(r->s->cache) };
	if (r->s->o.mw) {
		c->mw = ibv_alloc_mw(r->pd, IBV_MW_TYPE_2);
		if (!c->mw)
			goto undo;
		/* The key the window will have once bound: the server picks it. */
		c->mw_rkey = ibv_inc_rkey(c->mw->rkey);
		h.rkey = c->mw_rkey;
		h.flags = BS_HELLO_WINDOW;
	}
	for (; c->nlanding < depth; c->nlanding++)
		if (bs_cache_alloc(r->s->cache, &c->landing[c->nlanding]))
			goto undo;
	memcpy(h.landing, c->landing, sizeof(h.landing));
	h.nlanding = (uint16_t)c->nlanding;
	struct rdma_conn_param cp = { .private_data = &h, .private_data_len = sizeof(h),
				      .responder_resources = 1, .initiator_depth = 1,
				      .rnr_retry_count = 7 };
	if (rdma_accept(id, &cp))
		goto undo;
	return NULL;
undo:
	conn_free(r, c, false);
reject:
	rdma_reject(id, NULL, 0);
	return id;
}

/* Established: bind this connection's window over the cache, then tell
 * the client (the Send follows the bind in the send queue). */
static void bind_window(struct rsrv *r, struct conn *c)
{
	static const struct bs_rep ready = { .magic = BS_MAGIC, .op = BS_OP_REPLY,
					     .req_op = BS_OP_WINDOW };
	struct ibv_sge sge = { (uintptr_t)&ready, sizeof(ready), 0 };
	struct ibv_send_wr wr[2], *bad;
	memset(wr, 0, sizeof(wr));
	wr[0].wr_id = wr_id(r, c, K_REPLY, 0);
	wr[0].opcode = IBV_WR_BIND_MW;
	wr[0].send_flags = IBV_SEND_SIGNALED;
	wr[0].next = &wr[1];
	wr[0].bind_mw.mw = c->mw;
	wr[0].bind_mw.rkey = c->mw_rkey;
	wr[0].bind_mw.bind_info = (struct ibv_mw_bind_info){
		.mr = r->cache_mr, .addr = (uintptr_t)bs_cache_mem(r->s->cache),
		.length = bs_cache_len(r->s->cache),
		.mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ };
	wr[1] = (struct ibv_send_wr){ .wr_id = wr_id(r, c, K_REPLY, 0), .sg_list = &sge,
				      .num_sge = 1, .opcode = IBV_WR_SEND,
				      .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE };
	if (ibv_post_send(c->id->qp, wr, &bad)) {
		conn_kill(r, c);
		return;
	}
	c->sends_out += 2;
}

/* SIGUSR2: invalidate the window of the longest-standing live connection
 * (the lowest generation), and only that one. */
static void revoke_one(struct rsrv *r)
{
	struct conn *c = NULL;
	for (unsigned i = 0; i < BS_MAX_CONNS; i++) {
		struct conn *x = &r->conns[i];
		if (x->used && !x->dead && x->mw && (!c || x->gen < c->gen))
			c = x;
	}
	if (!c) {
		fprintf(stderr, "blockstore: no connection with a window to revoke\n");
		return;
	}
	struct ibv_send_wr wr = { .wr_id = wr_id(r, c, K_REPLY, 0), .opcode = IBV_WR_LOCAL_INV,
				  .send_flags = IBV_SEND_SIGNALED,
				  .invalidate_rkey = c->mw_rkey }, *bad;
	if (ibv_post_send(c->id->qp, &wr, &bad)) {
		conn_kill(r, c);
		return;
	}
	c->sends_out++;
	fprintf(stderr, "blockstore: revoked the window (rkey %#x) of connection %u\n",
		c->mw_rkey, (unsigned)(c - r->conns));
}

static void on_cm_events(struct rsrv *r)
{
	struct pollfd p = { r->ch->fd, POLLIN, 0 };
	while (poll(&p, 1, 0) == 1) {
		struct rdma_cm_event *ev;
		if (rdma_get_cm_event(r->ch, &ev))
			return;
		struct rdma_cm_event copy = *ev;
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			/* The private data lives in the event: use it before the ack. */
			struct rdma_cm_id *gone = on_connect_request(r, ev);
			rdma_ack_cm_event(ev);
			if (gone)
				rdma_destroy_id(gone);
			continue;
		}
		rdma_ack_cm_event(ev);
		struct conn *c = copy.id != r->listen ? copy.id->context : NULL;
		if (!c)
			continue;
		switch (copy.event) {
		case RDMA_CM_EVENT_ESTABLISHED:
			if (c->mw && !c->dead)
				bind_window(r, c);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_REJECTED:
		case RDMA_CM_EVENT_DEVICE_REMOVAL: conn_kill(r, c); break;
		default: break;
		}
	}
}

/* The rkey lifecycle (file comment): revoke, wait, move, re-register. */
static int move_cache(struct rsrv *r)
{
	uint64_t t0 = bs_now_ns();
	for (unsigned i = 0; i < BS_MAX_CONNS; i++)
		if (r->conns[i].used)
			conn_kill(r, &r->conns[i]);
	/* Every send the server posted from the region must be back before the
	 * region goes: a flushed RDMA Write never read it; a completed one is
	 * done with it.  Receives do not matter here (their buffers are not in
	 * the region); their late flushes are recognised as stale. */
	for (;;) {
		unsigned out = 0;
		for (unsigned i = 0; i < BS_MAX_CONNS; i++)
			out += r->conns[i].used ? r->conns[i].sends_out : 0;
		if (!out || bs_now_ns() - t0 > 2000000000ull)
			break;
		poll_cq(r);
	}
	reap_all(r, true);
	uint8_t *mem = bs_cache_move_begin(r->s->cache);
	if (!mem)
		return -ENOMEM;
	struct ibv_mr *mr = ibv_reg_mr(r->pd, mem, bs_cache_len(r->s->cache),
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
	if (!mr) {
		int ret = -errno;
		bs_cache_move_end(r->s->cache, NULL); /* keep the old region */
		munmap(mem, bs_cache_len(r->s->cache));
		return ret;
	}
	uint32_t old_rkey = r->cache_mr->rkey;
	ibv_dereg_mr(r->cache_mr); /* no QP can reach it any more */
	r->cache_mr = mr;
	bs_cache_move_end(r->s->cache, mem);
	r->s->epoch++;
	r->s->remaps++;
	fprintf(stderr, "blockstore: cache moved (rkey %#x -> %#x) in %.1f ms\n", old_rkey,
		mr->rkey, (double)(bs_now_ns() - t0) / 1e6);
	return 0;
}

static int setup(struct rsrv *r)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_PASSIVE }, *ai;
	char port[16];
	snprintf(port, sizeof(port), "%d", r->s->o.port);
	if (getaddrinfo(r->s->o.addr, port, &hints, &ai)) {
		fprintf(stderr, "blockstore: bad address %s\n", r->s->o.addr);
		return -EINVAL;
	}
	r->ch = rdma_create_event_channel();
	int ret = r->ch ? rdma_create_id(r->ch, &r->listen, r, RDMA_PS_TCP) : -1;
	if (!ret)
		ret = rdma_bind_addr(r->listen, ai->ai_addr);
	freeaddrinfo(ai);
	if (ret || !r->listen->verbs) {
		fprintf(stderr, "blockstore: cannot bind %s:%d on an RDMA device: %s\n",
			r->s->o.addr, r->s->o.port, strerror(errno));
		return -EADDRNOTAVAIL;
	}
	r->verbs = r->listen->verbs;
	r->pd = ibv_alloc_pd(r->verbs);
	r->cc = r->pd ? ibv_create_comp_channel(r->verbs) : NULL;
	r->cq = r->cc ? ibv_create_cq(r->verbs, BS_MAX_CONNS * (3 * BS_MAX_QP_DEPTH + 2 * RX_EXTRA),
				      NULL, r->cc, 0)
		      : NULL;
	r->cache_mr = r->cq ? ibv_reg_mr(r->pd, bs_cache_mem(r->s->cache),
					 bs_cache_len(r->s->cache),
					 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
						 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND)
			    : NULL;
	r->tags_mr = r->cache_mr ? ibv_reg_mr(r->pd, bs_cache_sent_tags(r->s->cache),
					      (size_t)bs_cache_nslots(r->s->cache) * BS_TAG_LEN,
					      IBV_ACCESS_LOCAL_WRITE)
				 : NULL;
	/* Non-blocking: epoll may report the channel readable for an event
	 * that is no longer there (softrnic withdraws the event of a CQ that
	 * was polled empty in the meantime); a blocking ibv_get_cq_event
	 * would then sleep until the next completion. */
	if (r->cc && fcntl(r->cc->fd, F_SETFL, fcntl(r->cc->fd, F_GETFL) | O_NONBLOCK))
		return -errno;
	if (!r->tags_mr || rdma_listen(r->listen, BS_MAX_CONNS)) {
		fprintf(stderr, "blockstore: RDMA setup failed: %s\n", strerror(errno));
		return -EIO;
	}
	return 0;
}

static void teardown(struct rsrv *r)
{
	for (unsigned i = 0; i < BS_MAX_CONNS; i++)
		if (r->conns[i].used)
			conn_kill(r, &r->conns[i]);
	uint64_t t0 = bs_now_ns();
	while (r->ndead && bs_now_ns() - t0 < 1000000000ull) {
		poll_cq(r);
		reap_all(r, false);
	}
	reap_all(r, true);
	if (r->tags_mr)
		ibv_dereg_mr(r->tags_mr);
	if (r->cache_mr)
		ibv_dereg_mr(r->cache_mr);
	if (r->cq)
		ibv_destroy_cq(r->cq);
	if (r->cc)
		ibv_destroy_comp_channel(r->cc);
	if (r->pd)
		ibv_dealloc_pd(r->pd);
	if (r->listen)
		rdma_destroy_id(r->listen);
	if (r->ch)
		rdma_destroy_event_channel(r->ch);
}

int bs_server_rdma(struct bs_server *s)
{
	struct rsrv *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->s = s;
	int ret = setup(r);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (!ret) {
		struct epoll_event e = { .events = EPOLLIN };
		e.data.fd = r->cc->fd;
		epoll_ctl(ep, EPOLL_CTL_ADD, r->cc->fd, &e);
		e.data.fd = r->ch->fd;
		epoll_ctl(ep, EPOLL_CTL_ADD, r->ch->fd, &e);
		e.data.fd = s->sigfd;
		epoll_ctl(ep, EPOLL_CTL_ADD, s->sigfd, &e);
		bs_server_ready(s);
	}
	uint64_t last_work = bs_now_ns();
	unsigned idle_polls = 0;
	while (!ret && !s->stop) {
		if (poll_cq(r) > 0) {
			last_work = bs_now_ns();
			idle_polls = 0;
			continue;
		}
		/* Control work (connections, signals, reaping) every 64 idle polls. */
		if (++idle_polls % 64 == 0 || bs_now_ns() - last_work > s->o.poll_us * 1000ull) {
			on_cm_events(r);
			bs_server_signals(s);
			if (r->ndead)
				reap_all(r, false);
			if (s->remap_wanted) {
				s->remap_wanted = false;
				if (move_cache(r))
					fprintf(stderr, "blockstore: cache move failed\n");
			}
			if (s->revoke_wanted) {
				s->revoke_wanted = false;
				revoke_one(r);
			}
		}
		if (bs_now_ns() - last_work <= s->o.poll_us * 1000ull)
			continue;
		/* Idle: arm the CQ, look once more (a completion may have slipped in
		 * before the arm), then sleep in epoll. */
		ibv_req_notify_cq(r->cq, 0);
		if (poll_cq(r) > 0) {
			last_work = bs_now_ns();
			continue;
		}
		struct epoll_event evs[4];
		int n = epoll_wait(ep, evs, 4, r->ndead ? 100 : 1000);
		for (int i = 0; i < n; i++) {
			if (evs[i].data.fd == r->cc->fd) {
				struct ibv_cq *cq;
				void *ctx;
				if (!ibv_get_cq_event(r->cc, &cq, &ctx))
					ibv_ack_cq_events(cq, 1);
			}
		}
		last_work = bs_now_ns();
		idle_polls = 0;
	}
	teardown(r);
	close(ep);
	free(r);
	return ret;
}
