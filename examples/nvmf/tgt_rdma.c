/*
 * tgt_rdma.c - the NVMe/RDMA transport binding (NVMe-oF 1.1, section 7.3)
 * on public verbs and rdma_cm.
 *
 * One RC QP per NVMe queue, set up by rdma_cm on port 4420: the REQUEST
 * private data names the queue (QID) and the host's queue sizes; the
 * ACCEPT answers with our receive queue size, a REJECT with a status
 * (nvme.h, CM_REJ_*).  Commands arrive as Send capsules of 64 bytes plus
 * up to NVMF_INCAP bytes of in-capsule data into posted receive buffers;
 * completions leave as 16-byte inline Sends (Send with Invalidate when
 * the host's keyed SGL asked for it).  Keyed SGL data: an RDMA Read pulls
 * write data into a slot buffer before the command runs; read data is
 * pushed by an RDMA Write posted just ahead of the completion's Send,
 * so RC ordering lands the data first.
 *
 * Buffers: `depth` (HSQSIZE + 1) receive buffers, one per command the
 * host may have outstanding, and `depth + SLOT_EXTRA` slots, each a
 * command's state and an MDTS-sized registered data buffer.  A slot is
 * free again only when its completion's Send has completed: until then
 * an RDMA Write from its buffer may still be read by the NIC.  A host
 * may send its next command as soon as it sees a completion, before our
 * Send completion is polled, so a capsule can find no free slot: it then
 * waits (its receive buffer not yet reposted) in `pend` until one frees.
 *
 * Work request ids: [55:48] queue index, [47:32] queue generation,
 * [23:16] kind, [15:0] receive buffer or slot.  Completions of a queue
 * that was reaped (generation changed) are ignored.
 *
 * Threads (tgt.h): each has its own CQ, completion channel, rdma_cm
 * event channel and table of queues (struct rthr); the protection domain
 * and the listener are shared (struct rtgt).  A CONNECT REQUEST arrives
 * on thread 0's channel (the listener's); an admin queue is served
 * there, an I/O queue by the thread tgt_pick() names: thread 0 moves the
 * cm_id to that thread's event channel (rdma_migrate_id) and posts it
 * the request (struct rconn), and that thread creates the QP on its CQ,
 * posts the receives and accepts.  From then on the queue's completions
 * and its cm_id's events reach only its thread.  An event that comes
 * for the id before the request was taken finds the rconn in the id's
 * context (both structs start with their kind) and marks it gone.
 */
#include "tgt.h"

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

#define MAX_RQ 64
#define RX_SIZE (64 + NVMF_INCAP)
#define SLOT_EXTRA 8
#define CQ_BATCH 32

enum kind { K_RECV = 1, K_READ = 2, K_WRITE = 3, K_SEND = 4 };

/* What a cm_id's context points at (the first member of both). */
enum rctx { RCTX_PENDING = 1, RCTX_QUEUE = 2 };

struct rslot {
	struct nvmf_req req;
	struct sgl_info sgl;
	enum nvme_dir dir;
};

struct rq {
	enum rctx kind;
	struct nvmf_q q;
	struct rthr *rt;  /* its thread's share */
	struct rdma_cm_id *id;
	uint16_t idx, gen;
	bool dead;
	bool placed;      /* an I/O queue tgt_pick() counted */
	uint64_t dead_since;
	unsigned depth, nslots;
	uint8_t *rx, *data;
	struct ibv_mr *rx_mr, *data_mr;
	struct rslot *slots;
	uint16_t *freel;
	unsigned nfree;
	uint32_t *pend; /* rx index << 16 | byte length - 64, FIFO */
	unsigned pend_head, pend_n;
	unsigned out;   /* work requests that will complete */
};

/* Shared, set up before the threads run: the listener is thread 0's. */
struct rtgt {
	struct tgt *t;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listen;
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	int cqe;
};

/* One thread's share; only that thread touches it once running. */
struct rthr {
	struct rtgt *r;
	struct tgt_thread *th;
	struct rdma_event_channel *ch; /* thread 0: the listener's */
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct tgt_watch cm_w, cc_w;
	struct rq *rqs[MAX_RQ];
	uint16_t next_gen;
	unsigned ndead;
};

/* A CONNECT REQUEST on its way to the thread that will serve it. */
struct rconn {
	enum rctx kind;
	struct tgt_msg m;
	struct rdma_cm_id *id;
	struct nvme_rdma_cm_req cr;
	uint8_t ini, rr;  /* initiator depth, responder resources to offer */
	bool placed;
	bool gone;        /* an event said the host went before the accept */
};

static uint64_t wr_id(const struct rq *q, enum kind k, unsigned aux)
{
	return (uint64_t)q->idx << 48 | (uint64_t)q->gen << 32 | (uint64_t)k << 16 | aux;
}

static void rq_kill(struct rq *q)
{
	if (q->dead)
		return;
	q->dead = true;
	q->dead_since = nvmf_now_ns();
	q->rt->ndead++;
	nvmf_q_gone(&q->q); /* an admin queue takes its controller's I/O queues along */
	rdma_disconnect(q->id); /* QP to ERR: everything outstanding flushes */
}

/* The core, under its lock, from any thread: q->kill_req is set; the
 * owner closes the queue when it sees it (rdma_thr_kills). */
static void core_kill(struct nvmf_q *nq)
{
	struct rq *q = nq->xport;
	tgt_poke(q->rt->th);
}

void rdma_thr_kills(struct rthr *r)
{
	for (unsigned i = 0; i < MAX_RQ; i++) {
		struct rq *q = r->rqs[i];
		if (q && !q->dead && __atomic_load_n(&q->q.kill_req, __ATOMIC_ACQUIRE))
			rq_kill(q);
	}
}

static int post_recv(struct rq *q, unsigned i)
{
	struct ibv_sge sge = { (uintptr_t)(q->rx + (size_t)i * RX_SIZE), RX_SIZE, q->rx_mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id(q, K_RECV, i), .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;
	if (ibv_post_recv(q->id->qp, &wr, &bad)) {
		rq_kill(q);
		return -1;
	}
	q->out++;
	return 0;
}

static uint8_t *slot_buf(struct rq *q, unsigned s)
{
	return q->data + (size_t)s * NVMF_MAX_DATA;
}

/* The completion, and the read data ahead of it (one post, RC order). */
static void respond(struct rq *q, unsigned s)
{
	struct rslot *sl = &q->slots[s];
	struct ibv_send_wr wr[2], *bad;
	struct ibv_sge dsge = { (uintptr_t)slot_buf(q, s), 0, q->data_mr->lkey };
	struct ibv_sge csge = { (uintptr_t)&sl->req.cqe, sizeof(sl->req.cqe), 0 };
	memset(wr, 0, sizeof(wr));
	struct ibv_send_wr *first = &wr[1];
	wr[1].wr_id = wr_id(q, K_SEND, s);
	wr[1].sg_list = &csge;
	wr[1].num_sge = 1;
	wr[1].opcode = IBV_WR_SEND;
	wr[1].send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	if (sl->sgl.kind == SGLK_KEYED && sl->sgl.invalidate && sl->sgl.len) {
		wr[1].opcode = IBV_WR_SEND_WITH_INV;
		wr[1].invalidate_rkey = sl->sgl.key;
	}
	if (sl->dir == DIR_C2H && sl->sgl.kind == SGLK_KEYED && sl->req.xfer) {
		dsge.length = sl->req.xfer < sl->sgl.len ? sl->req.xfer : sl->sgl.len;
		wr[0].wr_id = wr_id(q, K_WRITE, s);
		wr[0].sg_list = &dsge;
		wr[0].num_sge = 1;
		wr[0].opcode = IBV_WR_RDMA_WRITE;
		wr[0].wr.rdma.remote_addr = sl->sgl.addr;
		wr[0].wr.rdma.rkey = sl->sgl.key;
		wr[0].next = &wr[1];
		first = &wr[0];
	}
	if (ibv_post_send(q->id->qp, first, &bad)) {
		q->freel[q->nfree++] = (uint16_t)s;
		rq_kill(q);
		return;
	}
	q->out++;
}

static void exec_respond(struct rq *q, unsigned s)
{
	if (nvmf_exec(&q->rt->r->t->core, &q->q, &q->slots[s].req) == NVMF_HELD) {
		q->freel[q->nfree++] = (uint16_t)s; /* held: no completion now */
		return;
	}
	respond(q, s);
}

/* A capsule in receive buffer i, `incap` bytes after the SQE. */
static void start_cmd(struct rq *q, unsigned i, uint32_t incap)
{
	unsigned s = q->freel[--q->nfree];
	struct rslot *sl = &q->slots[s];
	uint8_t *cap = q->rx + (size_t)i * RX_SIZE;
	memset(sl, 0, sizeof(*sl));
	memcpy(&sl->req.sqe, cap, sizeof(sl->req.sqe));
	sl->req.data = slot_buf(q, s);
	sl->dir = nvmf_sqe_dir(&sl->req.sqe);
	uint16_t st = 0;
	if (sl->dir == DIR_BIDI)
		st = ST_INVALID_FIELD | ST_DNR;
	else if (sl->dir != DIR_NONE)
		st = (uint16_t)nvmf_sgl_parse(&sl->req.sqe, incap, 1, &sl->sgl);
	if (!st && sl->dir == DIR_C2H && sl->sgl.kind != SGLK_KEYED)
		st = ST_SGL_TYPE_INVALID; /* read data can only go by RDMA Write */
	if (st) {
		sl->sgl.kind = SGLK_NONE;
		nvmf_reject(&q->q, &sl->req, st | ST_DNR);
		if (!post_recv(q, i))
			respond(q, s);
		return;
	}
	sl->req.len = sl->dir == DIR_NONE ? 0 : sl->sgl.len;
	if (sl->dir == DIR_H2C && sl->sgl.kind == SGLK_INCAP) {
		/* Run straight from the receive buffer, then give it back. */
		sl->req.data = cap + 64 + sl->sgl.addr;
		if (nvmf_exec(&q->rt->r->t->core, &q->q, &sl->req) == NVMF_HELD) {
			q->freel[q->nfree++] = (uint16_t)s;
			post_recv(q, i);
			return;
		}
		if (!post_recv(q, i))
			respond(q, s);
		return;
	}
	if (post_recv(q, i))
		return;
	if (sl->dir == DIR_H2C && sl->sgl.len) {
		struct ibv_sge sge = { (uintptr_t)slot_buf(q, s), sl->sgl.len, q->data_mr->lkey };
		struct ibv_send_wr wr = { .wr_id = wr_id(q, K_READ, s), .sg_list = &sge,
					  .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;
		wr.wr.rdma.remote_addr = sl->sgl.addr;
		wr.wr.rdma.rkey = sl->sgl.key;
		if (ibv_post_send(q->id->qp, &wr, &bad)) {
			rq_kill(q);
			return;
		}
		q->out++;
		return; /* runs when the data is here */
	}
	exec_respond(q, s);
}

static void on_capsule(struct rq *q, unsigned i, uint32_t len)
{
	if (len < 64) {
		rq_kill(q); /* shorter than an SQE: not NVMe/RDMA (7.3.3) */
		return;
	}
	if (!q->nfree || q->pend_n) {
		q->pend[(q->pend_head + q->pend_n++) % q->depth] = (uint32_t)i << 16 | (len - 64);
		return;
	}
	start_cmd(q, i, len - 64);
}

static void slot_done(struct rq *q, unsigned s)
{
	q->freel[q->nfree++] = (uint16_t)s;
	while (q->nfree && q->pend_n && !q->dead) {
		uint32_t p = q->pend[q->pend_head];
		q->pend_head = (q->pend_head + 1) % q->depth;
		q->pend_n--;
		start_cmd(q, p >> 16, p & 0xffff);
	}
}

static void on_wc(struct rthr *r, const struct ibv_wc *wc)
{
	unsigned idx = (wc->wr_id >> 48) & 0xff, aux = wc->wr_id & 0xffff;
	uint16_t gen = (uint16_t)(wc->wr_id >> 32);
	enum kind k = (enum kind)((wc->wr_id >> 16) & 0xff);
	struct rq *q = idx < MAX_RQ ? r->rqs[idx] : NULL;
	if (!q || q->gen != gen)
		return; /* a queue already reaped */
	if (k != K_WRITE)
		q->out--;
	if (wc->status != IBV_WC_SUCCESS) {
		rq_kill(q);
		return;
	}
	if (q->dead)
		return;
	if (k == K_RECV && aux < q->depth)
		on_capsule(q, aux, wc->byte_len);
	else if (k == K_READ && aux < q->nslots)
		exec_respond(q, aux);
	else if (k == K_SEND && aux < q->nslots)
		slot_done(q, aux);
}

int rdma_thr_poll(struct rthr *r)
{
	struct ibv_wc wc[CQ_BATCH];
	int n = ibv_poll_cq(r->cq, CQ_BATCH, wc);
	for (int i = 0; i < n; i++)
		on_wc(r, &wc[i]);
	return n > 0 ? n : 0;
}

int rdma_thr_arm(struct rthr *r)
{
	ibv_req_notify_cq(r->cq, 0);
	return rdma_thr_poll(r);
}

static void rq_free(struct rthr *r, struct rq *q, bool destroy_id)
{
	if (q->id->qp)
		rdma_destroy_qp(q->id);
	if (destroy_id)
		rdma_destroy_id(q->id);
	if (q->rx_mr)
		ibv_dereg_mr(q->rx_mr);
	if (q->data_mr)
		ibv_dereg_mr(q->data_mr);
	free(q->rx);
	free(q->data);
	free(q->slots);
	free(q->freel);
	free(q->pend);
	if (q->dead)
		r->ndead--;
	if (q->placed)
		tgt_unplace(r->th);
	r->rqs[q->idx] = NULL;
	free(q);
}

void rdma_thr_reap(struct rthr *r, bool force)
{
	for (unsigned i = 0; r->ndead && i < MAX_RQ; i++) {
		struct rq *q = r->rqs[i];
		if (q && q->dead &&
		    (force || !q->out || nvmf_now_ns() - q->dead_since > 2000000000ull))
			rq_free(r, q, true);
	}
}

static struct rq *rq_new(struct rthr *r, struct rdma_cm_id *id, const struct nvme_rdma_cm_req *cr)
{
	unsigned idx;
	for (idx = 0; idx < MAX_RQ && r->rqs[idx]; idx++)
		;
	if (idx == MAX_RQ)
		return NULL;
	struct rq *q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	q->kind = RCTX_QUEUE;
	q->rt = r;
	q->id = id;
	q->idx = (uint16_t)idx;
	q->gen = ++r->next_gen;
	q->depth = cr->hsqsize + 1u;
	q->nslots = q->depth + SLOT_EXTRA;
	q->q.thr = r->th->idx;
	q->q.xport = q;
	q->q.kill = core_kill;
	q->q.cm_qid = cr->qid;
	q->q.cm_sqsize = cr->hsqsize;
	r->rqs[idx] = q;
	q->rx = malloc((size_t)q->depth * RX_SIZE);
	q->data = malloc((size_t)q->nslots * NVMF_MAX_DATA);
	q->slots = calloc(q->nslots, sizeof(*q->slots));
	q->freel = calloc(q->nslots, sizeof(*q->freel));
	q->pend = calloc(q->depth, sizeof(*q->pend));
	if (!q->rx || !q->data || !q->slots || !q->freel || !q->pend)
		return q;
	for (unsigned s = 0; s < q->nslots; s++)
		q->freel[q->nfree++] = (uint16_t)(q->nslots - 1 - s);
	q->rx_mr = ibv_reg_mr(r->r->pd, q->rx, (size_t)q->depth * RX_SIZE, IBV_ACCESS_LOCAL_WRITE);
	q->data_mr = ibv_reg_mr(r->r->pd, q->data, (size_t)q->nslots * NVMF_MAX_DATA,
				IBV_ACCESS_LOCAL_WRITE);
	return q;
}

static void reject(struct rdma_cm_id *id, uint16_t sts)
{
	struct nvme_rdma_cm_rej rej = { .recfmt = 0, .sts = sts };
	rdma_reject(id, &rej, sizeof(rej));
}

/* On the serving thread: QP on its CQ, receives posted, ACCEPT; or a
 * REJECT and the id destroyed.  Frees rc. */
static void rq_accept(struct rthr *r, struct rconn *rc)
{
	struct rdma_cm_id *id = rc->id;
	struct rq *q = rq_new(r, id, &rc->cr);
	if (!q || !q->rx_mr || !q->data_mr)
		goto fail;
	id->context = q;
	/* Send queue: per command at most an RDMA Read or Write, and a Send. */
	struct ibv_qp_init_attr qa = {
		.send_cq = r->cq, .recv_cq = r->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 2 * q->nslots + 4, .max_recv_wr = q->depth,
			 .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = sizeof(struct nvme_cqe) },
	};
	if (rdma_create_qp(id, r->r->pd, &qa))
		goto fail;
	for (unsigned i = 0; i < q->depth; i++)
		if (post_recv(q, i))
			goto fail;
	struct nvme_rdma_cm_rep rep = { .recfmt = 0, .crqsize = (uint16_t)q->depth };
	struct rdma_conn_param cp = { .private_data = &rep, .private_data_len = sizeof(rep),
				      .initiator_depth = rc->ini, .responder_resources = rc->rr,
				      .rnr_retry_count = 7 };
	if (rdma_accept(id, &cp))
		goto fail;
	q->placed = rc->placed;
	free(rc);
	return;
fail:
	if (q) {
		/* Never reached the core. */
		id->context = NULL;
		rq_free(r, q, false);
	}
	reject(id, CM_REJ_NO_RESOURCES);
	rdma_destroy_id(id);
	if (rc->placed)
		tgt_unplace(r->th);
	free(rc);
}

/* A request posted by thread 0 (tgt_post). */
static void on_rconn(struct tgt_thread *th, struct tgt_msg *m)
{
	struct rconn *rc = (struct rconn *)((char *)m - offsetof(struct rconn, m));
	if (!rc->gone && !__atomic_load_n(&th->t->stop, __ATOMIC_RELAXED)) {
		rq_accept(th->rdma, rc);
		return;
	}
	rc->id->context = NULL;
	reject(rc->id, CM_REJ_NO_RESOURCES);
	rdma_destroy_id(rc->id);
	if (rc->placed)
		tgt_unplace(th);
	free(rc);
}

/* Where a checked request goes: an admin queue stays on thread 0, an
 * I/O queue goes where tgt_pick() says, unless its id cannot move. */
static void place(struct rthr *r0, struct rconn *rc)
{
	struct tgt_thread *th = rc->placed ? tgt_pick(r0->r->t) : r0->th;
	if (th != r0->th) {
		rc->id->context = rc;
		/* softrnic refuses (EBUSY) while an event for the id is
		 * queued here: then this thread serves it, and sees that
		 * event.  rdma-core moves queued events along instead. */
		if (!rdma_migrate_id(rc->id, th->rdma->ch)) {
			tgt_place(th);
			tgt_post(th, &rc->m);
			return;
		}
		rc->id->context = NULL;
		th = r0->th;
	}
	if (rc->placed)
		tgt_place(th);
	rq_accept(r0, rc);
}

/* Thread 0: check the REQUEST's private data before anything is made. */
static void on_connect_request(struct rthr *r0, struct rdma_cm_event *ev)
{
	struct rdma_cm_id *id = ev->id;
	struct nvme_rdma_cm_req cr;
	int sts = nvmf_cm_req_parse(ev->param.conn.private_data,
				    ev->param.conn.private_data_len, NVMF_MAX_QUEUES, &cr);
	struct rconn *rc = sts ? NULL : calloc(1, sizeof(*rc));
	if (!sts && (!rc || id->verbs != r0->r->verbs))
		sts = CM_REJ_NO_RESOURCES;
	/* The event's parameters are already seen from our side (as the
	 * kernel's rdma_cm reports them): initiator_depth is how many RDMA
	 * Reads we may have outstanding (the REQ's responder resources; the
	 * kernel host offers 128 and never reads itself, so its initiator
	 * depth, our responder_resources, is 0). */
	uint8_t ini = ev->param.conn.initiator_depth, rr = ev->param.conn.responder_resources;
	rdma_ack_cm_event(ev);
	if (sts) {
		reject(id, (uint16_t)sts);
		rdma_destroy_id(id);
		free(rc);
		return;
	}
	*rc = (struct rconn){ .kind = RCTX_PENDING, .m.fn = on_rconn, .id = id, .cr = cr,
			      .ini = ini < 16 ? ini : 16, .rr = rr < 16 ? rr : 16,
			      .placed = cr.qid != 0 };
	place(r0, rc);
}

/* An event for one of this thread's ids (any but a CONNECT REQUEST). */
static void on_id_event(void *ctx, enum rdma_cm_event_type type)
{
	if (!ctx)
		return;
	switch (type) {
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL: break;
	default: return;
	}
	if (*(enum rctx *)ctx == RCTX_PENDING)
		((struct rconn *)ctx)->gone = true;
	else
		rq_kill(ctx);
}

static void on_cm(struct tgt_watch *w, uint32_t events)
{
	struct rthr *r = (struct rthr *)((char *)w - offsetof(struct rthr, cm_w));
	struct pollfd p = { r->ch->fd, POLLIN, 0 };
	while (poll(&p, 1, 0) == 1) {
		struct rdma_cm_event *ev;
		if (rdma_get_cm_event(r->ch, &ev))
			return;
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			on_connect_request(r, ev); /* acknowledges it */
			continue;
		}
		void *ctx = ev->id->context;
		enum rdma_cm_event_type type = ev->event;
		rdma_ack_cm_event(ev);
		on_id_event(ctx, type);
	}
}

static void on_cc(struct tgt_watch *w, uint32_t events)
{
	struct rthr *r = (struct rthr *)((char *)w - offsetof(struct rthr, cc_w));
	struct ibv_cq *cq;
	void *ctx;
	if (!ibv_get_cq_event(r->cc, &cq, &ctx))
		ibv_ack_cq_events(cq, 1);
	rdma_thr_poll(r);
}

static int set_nonblock(int fd)
{
	return fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) ? -errno : 0;
}

static int setup(struct rtgt *r, struct tgt *t)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_PASSIVE }, *ai;
	char port[16];
	snprintf(port, sizeof(port), "%d", t->o.port);
	if (getaddrinfo(t->o.addr, port, &hints, &ai))
		return -EINVAL;
	r->ch = rdma_create_event_channel();
	/* No context: a REQUEST's new id inherits it, and reads as a queue. */
	int ret = r->ch ? rdma_create_id(r->ch, &r->listen, NULL, RDMA_PS_TCP) : -1;
	if (!ret)
		ret = rdma_bind_addr(r->listen, ai->ai_addr);
	freeaddrinfo(ai);
	if (ret || !r->listen->verbs)
		return -EADDRNOTAVAIL;
	r->verbs = r->listen->verbs;
	struct ibv_device_attr da;
	if (ibv_query_device(r->verbs, &da))
		return -EIO;
	r->cqe = MAX_RQ * (3 * (NVMF_MQES + 1 + SLOT_EXTRA) + 4);
	if (r->cqe > da.max_cqe)
		r->cqe = da.max_cqe;
	r->pd = ibv_alloc_pd(r->verbs);
	if (!r->pd)
		return -EIO;
	/* Non-blocking: epoll may report an event already withdrawn. */
	return set_nonblock(r->ch->fd);
}

/* Thread th's share: its CQ and completion channel, its event channel
 * (thread 0's is the listener's), both in its epoll set. */
static int thr_setup(struct rtgt *r, struct tgt_thread *th)
{
	struct rthr *rt = calloc(1, sizeof(*rt));
	if (!rt)
		return -ENOMEM;
	rt->r = r;
	rt->th = th;
	th->rdma = rt;
	rt->ch = th->idx ? rdma_create_event_channel() : r->ch;
	rt->cc = rt->ch ? ibv_create_comp_channel(r->verbs) : NULL;
	rt->cq = rt->cc ? ibv_create_cq(r->verbs, r->cqe, NULL, rt->cc, 0) : NULL;
	if (!rt->cq)
		return -EIO;
	int ret = set_nonblock(rt->cc->fd);
	if (!ret && th->idx)
		ret = set_nonblock(rt->ch->fd);
	if (ret)
		return ret;
	rt->cm_w.fn = on_cm;
	rt->cc_w.fn = on_cc;
	if (tgt_watch_add(th, rt->ch->fd, &rt->cm_w, EPOLLIN) ||
	    tgt_watch_add(th, rt->cc->fd, &rt->cc_w, EPOLLIN))
		return -errno;
	return 0;
}

/* On its own thread (or thread 0, for one that never ran or a start
 * that failed): close every queue, wait a little for their flushes, free
 * the share. */
void rdma_thr_stop(struct rthr *r)
{
	for (unsigned i = 0; i < MAX_RQ; i++)
		if (r->rqs[i])
			rq_kill(r->rqs[i]);
	uint64_t t0 = nvmf_now_ns();
	while (r->ndead && nvmf_now_ns() - t0 < 500000000ull) {
		rdma_thr_poll(r);
		rdma_thr_reap(r, false);
	}
	rdma_thr_reap(r, true);
	if (r->cq)
		ibv_destroy_cq(r->cq);
	if (r->cc)
		ibv_destroy_comp_channel(r->cc);
	if (r->ch && r->ch != r->r->ch)
		rdma_destroy_event_channel(r->ch);
	r->th->rdma = NULL;
	free(r);
}

/* After every thread's share is gone (tgt_threads_release). */
void rdma_tgt_stop(struct rtgt *r)
{
	if (r->pd)
		ibv_dealloc_pd(r->pd);
	if (r->listen)
		rdma_destroy_id(r->listen);
	if (r->ch)
		rdma_destroy_event_channel(r->ch);
	free(r);
}

int rdma_tgt_start(struct tgt *t)
{
	struct rtgt *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->t = t;
	int ret = setup(r, t);
	for (unsigned i = 0; !ret && i < t->nthr; i++)
		ret = thr_setup(r, &t->thr[i]);
	if (!ret && rdma_listen(r->listen, 64))
		ret = -errno;
	if (ret) {
		tgt_threads_release(t, TGT_RDMA);
		rdma_tgt_stop(r);
		return ret;
	}
	t->rdma = r;
	struct nvmf_port *p = &t->core.ports[t->core.nports++];
	p->trtype = TRTYPE_RDMA;
	snprintf(p->traddr, sizeof(p->traddr), "%s", t->o.addr);
	snprintf(p->trsvcid, sizeof(p->trsvcid), "%d", t->o.port);
	return 0;
}
