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

struct rslot {
	struct nvmf_req req;
	struct sgl_info sgl;
	enum nvme_dir dir;
};

struct rq {
	struct nvmf_q q;
	struct rtgt *rt;
	struct rdma_cm_id *id;
	uint16_t idx, gen;
	bool dead;
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

struct rtgt {
	struct tgt *t;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listen;
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct tgt_watch cm_w, cc_w;
	struct rq *rqs[MAX_RQ];
	uint16_t next_gen;
	unsigned ndead;
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

static void core_kill(struct nvmf_q *nq)
{
	rq_kill(nq->xport);
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
	if (nvmf_exec(&q->rt->t->core, &q->q, &q->slots[s].req) == NVMF_HELD) {
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
		if (nvmf_exec(&q->rt->t->core, &q->q, &sl->req) == NVMF_HELD) {
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

static void on_wc(struct rtgt *r, const struct ibv_wc *wc)
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

int rdma_tgt_poll(struct rtgt *r)
{
	struct ibv_wc wc[CQ_BATCH];
	int n = ibv_poll_cq(r->cq, CQ_BATCH, wc);
	for (int i = 0; i < n; i++)
		on_wc(r, &wc[i]);
	return n > 0 ? n : 0;
}

int rdma_tgt_arm(struct rtgt *r)
{
	ibv_req_notify_cq(r->cq, 0);
	return rdma_tgt_poll(r);
}

static void rq_free(struct rtgt *r, struct rq *q, bool destroy_id)
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
	r->rqs[q->idx] = NULL;
	free(q);
}

void rdma_tgt_reap(struct rtgt *r, bool force)
{
	for (unsigned i = 0; r->ndead && i < MAX_RQ; i++) {
		struct rq *q = r->rqs[i];
		if (q && q->dead &&
		    (force || !q->out || nvmf_now_ns() - q->dead_since > 2000000000ull))
			rq_free(r, q, true);
	}
}

static struct rq *rq_new(struct rtgt *r, struct rdma_cm_id *id, const struct nvme_rdma_cm_req *cr)
{
	unsigned idx;
	for (idx = 0; idx < MAX_RQ && r->rqs[idx]; idx++)
		;
	if (idx == MAX_RQ)
		return NULL;
	struct rq *q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	q->rt = r;
	q->id = id;
	q->idx = (uint16_t)idx;
	q->gen = ++r->next_gen;
	q->depth = cr->hsqsize + 1u;
	q->nslots = q->depth + SLOT_EXTRA;
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
	q->rx_mr = ibv_reg_mr(r->pd, q->rx, (size_t)q->depth * RX_SIZE, IBV_ACCESS_LOCAL_WRITE);
	q->data_mr = ibv_reg_mr(r->pd, q->data, (size_t)q->nslots * NVMF_MAX_DATA,
				IBV_ACCESS_LOCAL_WRITE);
	return q;
}

static void reject(struct rdma_cm_id *id, uint16_t sts)
{
	struct nvme_rdma_cm_rej rej = { .recfmt = 0, .sts = sts };
	rdma_reject(id, &rej, sizeof(rej));
}

/* Returns an id to destroy after the event is acknowledged, or NULL. */
static struct rdma_cm_id *on_connect_request(struct rtgt *r, struct rdma_cm_event *ev)
{
	struct nvme_rdma_cm_req cr;
	int sts = nvmf_cm_req_parse(ev->param.conn.private_data,
				    ev->param.conn.private_data_len, NVMF_MAX_QUEUES, &cr);
	if (sts) {
		reject(ev->id, (uint16_t)sts);
		return ev->id;
	}
	if (ev->id->verbs != r->verbs) {
		reject(ev->id, CM_REJ_NO_RESOURCES);
		return ev->id;
	}
	struct rq *q = rq_new(r, ev->id, &cr);
	if (!q || !q->rx_mr || !q->data_mr)
		goto fail;
	ev->id->context = q;
	/* Send queue: per command at most an RDMA Read or Write, and a Send. */
	struct ibv_qp_init_attr qa = {
		.send_cq = r->cq, .recv_cq = r->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 2 * q->nslots + 4, .max_recv_wr = q->depth,
			 .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = sizeof(struct nvme_cqe) },
	};
	if (rdma_create_qp(ev->id, r->pd, &qa))
		goto fail;
	for (unsigned i = 0; i < q->depth; i++)
		if (post_recv(q, i))
			goto fail;
	struct nvme_rdma_cm_rep rep = { .recfmt = 0, .crqsize = (uint16_t)q->depth };
	/* The event's parameters are already seen from our side (as the
	 * kernel's rdma_cm reports them): initiator_depth is how many RDMA
	 * Reads we may have outstanding (the REQ's responder resources; the
	 * kernel host offers 128 and never reads itself, so its initiator
	 * depth, our responder_resources, is 0). */
	uint8_t ini = ev->param.conn.initiator_depth, rr = ev->param.conn.responder_resources;
	struct rdma_conn_param cp = { .private_data = &rep, .private_data_len = sizeof(rep),
				      .initiator_depth = ini < 16 ? ini : 16,
				      .responder_resources = rr < 16 ? rr : 16,
				      .rnr_retry_count = 7 };
	if (rdma_accept(ev->id, &cp))
		goto fail;
	return NULL;
fail:
	if (q) {
		/* Never reached the core; the id goes with the event's ack. */
		ev->id->context = NULL;
		rq_free(r, q, false);
	}
	reject(ev->id, CM_REJ_NO_RESOURCES);
	return ev->id;
}

static void on_cm(struct tgt_watch *w, uint32_t events)
{
	struct rtgt *r = (struct rtgt *)((char *)w - offsetof(struct rtgt, cm_w));
	struct pollfd p = { r->ch->fd, POLLIN, 0 };
	while (poll(&p, 1, 0) == 1) {
		struct rdma_cm_event *ev;
		if (rdma_get_cm_event(r->ch, &ev))
			return;
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			struct rdma_cm_id *gone = on_connect_request(r, ev);
			rdma_ack_cm_event(ev);
			if (gone)
				rdma_destroy_id(gone);
			continue;
		}
		struct rq *q = ev->id != r->listen ? ev->id->context : NULL;
		enum rdma_cm_event_type type = ev->event;
		rdma_ack_cm_event(ev);
		if (!q)
			continue;
		switch (type) {
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_REJECTED:
		case RDMA_CM_EVENT_DEVICE_REMOVAL: rq_kill(q); break;
		default: break;
		}
	}
}

static void on_cc(struct tgt_watch *w, uint32_t events)
{
	struct rtgt *r = (struct rtgt *)((char *)w - offsetof(struct rtgt, cc_w));
	struct ibv_cq *cq;
	void *ctx;
	if (!ibv_get_cq_event(r->cc, &cq, &ctx))
		ibv_ack_cq_events(cq, 1);
	rdma_tgt_poll(r);
}

static int setup(struct rtgt *r, struct tgt *t)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_PASSIVE }, *ai;
	char port[16];
	snprintf(port, sizeof(port), "%d", t->o.port);
	if (getaddrinfo(t->o.addr, port, &hints, &ai))
		return -EINVAL;
	r->ch = rdma_create_event_channel();
	int ret = r->ch ? rdma_create_id(r->ch, &r->listen, r, RDMA_PS_TCP) : -1;
	if (!ret)
		ret = rdma_bind_addr(r->listen, ai->ai_addr);
	freeaddrinfo(ai);
	if (ret || !r->listen->verbs)
		return -EADDRNOTAVAIL;
	r->verbs = r->listen->verbs;
	struct ibv_device_attr da;
	if (ibv_query_device(r->verbs, &da))
		return -EIO;
	int cqe = MAX_RQ * (3 * (NVMF_MQES + 1 + SLOT_EXTRA) + 4);
	if (cqe > da.max_cqe)
		cqe = da.max_cqe;
	r->pd = ibv_alloc_pd(r->verbs);
	r->cc = r->pd ? ibv_create_comp_channel(r->verbs) : NULL;
	r->cq = r->cc ? ibv_create_cq(r->verbs, cqe, NULL, r->cc, 0) : NULL;
	if (!r->cq)
		return -EIO;
	/* Non-blocking: epoll may report an event already withdrawn. */
	if (fcntl(r->cc->fd, F_SETFL, fcntl(r->cc->fd, F_GETFL) | O_NONBLOCK) ||
	    fcntl(r->ch->fd, F_SETFL, fcntl(r->ch->fd, F_GETFL) | O_NONBLOCK))
		return -errno;
	if (rdma_listen(r->listen, 64))
		return -errno;
	r->cm_w.fn = on_cm;
	r->cc_w.fn = on_cc;
	tgt_watch_add(t, r->ch->fd, &r->cm_w, EPOLLIN);
	tgt_watch_add(t, r->cc->fd, &r->cc_w, EPOLLIN);
	return 0;
}

void rdma_tgt_stop(struct rtgt *r)
{
	for (unsigned i = 0; i < MAX_RQ; i++)
		if (r->rqs[i])
			rq_kill(r->rqs[i]);
	uint64_t t0 = nvmf_now_ns();
	while (r->ndead && nvmf_now_ns() - t0 < 500000000ull) {
		rdma_tgt_poll(r);
		rdma_tgt_reap(r, false);
	}
	rdma_tgt_reap(r, true);
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
	free(r);
}

int rdma_tgt_start(struct tgt *t)
{
	struct rtgt *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->t = t;
	int ret = setup(r, t);
	if (ret) {
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
