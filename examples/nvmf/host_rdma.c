/*
 * host_rdma.c - an NVMe/RDMA host queue on verbs + rdma_cm.
 *
 * The REQUEST private data asks for QID and sizes (HRQSIZE = depth,
 * HSQSIZE = depth - 1); the ACCEPT's CRQSIZE must cover our depth, a
 * REJECT's status is printed.  Per slot: a 64-byte capsule buffer and a
 * data buffer, both in one region the target may RDMA Read and Write.
 * A write whose data fits the controller's in-capsule size (IOCCSZ; 0 on
 * the admin queue, which takes keyed SGLs only) is sent as one Send of
 * SQE and data, adjacent in the slot, with an offset SGL; any other
 * transfer names the slot's buffer in a keyed SGL.  Completions arrive as
 * Sends into `depth` 16-byte receive buffers.  The queue has its own CQ,
 * polled; a sleeping perf arms it and waits on the completion channel
 * all queues share.
 *
 * With `invalidate` (perf --invalidate) keyed SGLs go as the Linux host
 * sends them with its FRMRs, here with type-2 memory windows: the region
 * has no remote rights of its own, each slot has a window, bound over
 * the command's data with a fresh key just before the command and named
 * in an SGL whose subtype asks for invalidation.  The response must come
 * as Send with Invalidate naming that key (checked per completion); the
 * window is then free to bind again.  A response that did not invalidate
 * it is counted bad and the next bind invalidates it locally first.
 *
 * Work request ids: [31:16] kind, [15:0] slot or receive buffer.
 */
#include "host.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

enum { K_SEND = 1, K_RECV = 2, K_MW = 3 };

int hq_rdma_last_reject;

/* One completion channel for every queue of the process, so a sleeping
 * perf waits on one fd (non-blocking: drained after each wake-up). */
static struct ibv_comp_channel *chan;
static unsigned chan_users;

/* A slot's window (invalidate).  A type-2 window binds only while free
 * (invalidated), so `bound` stays set until a Send with Invalidate or a
 * local invalidate frees it. */
struct hmw {
	struct ibv_mw *mw;
	uint32_t rkey; /* of the last bind: the key byte is ours to pick (ibv_inc_rkey) */
	bool asked;    /* the slot's command in flight asked to invalidate rkey */
	bool bound;    /* not known free: a local invalidate goes before the next bind */
	bool freed;    /* the last response invalidated rkey: the window is free, rkey stale */
};

struct hq {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_comp_channel *chan; /* the shared one, if this queue holds a use */
	uint8_t *mem;      /* depth x (capsule 64 | data) then depth x CQE */
	unsigned depth;
	uint32_t incap;
	unsigned events; /* CQ events taken, to acknowledge */
	bool broken;
	struct hmw *mw;  /* invalidate: one per slot; NULL: keyed SGLs name the region */
	uint64_t inv_ok, inv_bad;
};

#define SLOT_SIZE (64 + NVMF_MAX_DATA)

static uint8_t *capsule(struct hq *q, unsigned s) { return q->mem + (size_t)s * SLOT_SIZE; }
static void *slot_data(struct hq *q, unsigned s) { return capsule(q, s) + 64; }
static struct nvme_cqe *rx_cqe(struct hq *q, unsigned i)
{
	return (struct nvme_cqe *)(q->mem + (size_t)q->depth * SLOT_SIZE) + i;
}

static void *buf(struct hq *q, unsigned slot) { return slot_data(q, slot); }
static int wait_fd(struct hq *q) { return q->chan ? q->chan->fd : -1; }
static void arm(struct hq *q) { ibv_req_notify_cq(q->cq, 0); }

/* Take the channel's events (any queue's); acknowledged on close. */
static void drain(struct hq *q)
{
	struct ibv_cq *cq;
	void *ctx;
	while (q->chan && !ibv_get_cq_event(q->chan, &cq, &ctx))
		((struct hq *)ctx)->events++;
}
static void set_incap(struct hq *q, uint32_t incap) { q->incap = incap; }

static int post_recv(struct hq *q, unsigned i)
{
	struct ibv_sge sge = { (uintptr_t)rx_cqe(q, i), sizeof(struct nvme_cqe), q->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = (uint64_t)K_RECV << 16 | i, .sg_list = &sge,
				  .num_sge = 1 }, *bad;
	return ibv_post_recv(q->id->qp, &wr, &bad);
}

/* Wait for one CM event of the expected type (bounded). */
static int cm_wait(struct hq *q, enum rdma_cm_event_type want, int ms)
{
	struct pollfd p = { q->ch->fd, POLLIN, 0 };
	if (poll(&p, 1, ms) != 1)
		return -ETIMEDOUT;
	struct rdma_cm_event *ev;
	if (rdma_get_cm_event(q->ch, &ev))
		return -errno;
	int ret = ev->event == want ? 0 : -ECONNREFUSED;
	if (ev->event == RDMA_CM_EVENT_REJECTED) {
		const struct nvme_rdma_cm_rej *rej = ev->param.conn.private_data;
		hq_rdma_last_reject =
			rej && ev->param.conn.private_data_len >= sizeof(*rej) ? rej->sts : 0;
		fprintf(stderr, "nvmf host: rdma_cm REJECT, NVMe/RDMA status %d\n",
			hq_rdma_last_reject);
	} else if (ev->event == RDMA_CM_EVENT_ESTABLISHED && want == ev->event) {
		const struct nvme_rdma_cm_rep *rep = ev->param.conn.private_data;
		if (!rep || ev->param.conn.private_data_len < sizeof(*rep) || rep->recfmt ||
		    rep->crqsize < q->depth)
			ret = -EPROTO; /* the controller cannot take our depth */
	} else if (ret) {
		fprintf(stderr, "nvmf host: rdma_cm %s, wanted %s\n", rdma_event_str(ev->event),
			rdma_event_str(want));
	}
	rdma_ack_cm_event(ev);
	return ret;
}

static int resolve(struct hq *q, const struct host_opts *o)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST }, *dst, *src = NULL;
	char port[16];
	snprintf(port, sizeof(port), "%d", o->port);
	if (getaddrinfo(o->addr, port, &hints, &dst))
		return -EINVAL;
	if (o->src && getaddrinfo(o->src, NULL, &hints, &src)) {
		freeaddrinfo(dst);
		return -EINVAL;
	}
	int ret = rdma_resolve_addr(q->id, src ? src->ai_addr : NULL, dst->ai_addr, 2000);
	freeaddrinfo(dst);
	if (src)
		freeaddrinfo(src);
	if (ret || (ret = cm_wait(q, RDMA_CM_EVENT_ADDR_RESOLVED, 3000)))
		return ret ? ret : -EHOSTUNREACH;
	if (rdma_resolve_route(q->id, 2000) || cm_wait(q, RDMA_CM_EVENT_ROUTE_RESOLVED, 3000))
		return -EHOSTUNREACH;
	return 0;
}

/* One type-2 window per slot, in the queue's PD (bound on its QP). */
static int alloc_windows(struct hq *q)
{
	q->mw = calloc(q->depth, sizeof(*q->mw));
	if (!q->mw)
		return -ENOMEM;
	for (unsigned s = 0; s < q->depth; s++) {
		q->mw[s].mw = ibv_alloc_mw(q->pd, IBV_MW_TYPE_2);
		if (!q->mw[s].mw) {
			int err = errno ? errno : ENOMEM;
			fprintf(stderr, "nvmf host: ibv_alloc_mw(type 2): %s\n", strerror(err));
			return -err;
		}
		q->mw[s].rkey = q->mw[s].mw->rkey;
	}
	return 0;
}

static int setup(struct hq *q, const struct host_opts *o, uint16_t qid)
{
	int ret = resolve(q, o);
	if (ret)
		return ret;
	struct ibv_context *v = q->id->verbs;
	size_t len = (size_t)q->depth * (SLOT_SIZE + sizeof(struct nvme_cqe));
	q->pd = ibv_alloc_pd(v);
	if (!chan && (chan = ibv_create_comp_channel(v)))
		fcntl(chan->fd, F_SETFL, fcntl(chan->fd, F_GETFL) | O_NONBLOCK);
	if (chan)
		chan_users++;
	q->chan = chan;
	/* With windows a command is up to three work requests (local
	 * invalidate, bind, Send), unsignaled ones held until a later Send
	 * completes; a slot may carry its next command before the last
	 * one's Send completion is polled (as without windows): twice that. */
	unsigned extra = o->invalidate ? 4 * q->depth : 0;
	q->cq = q->pd && chan ? ibv_create_cq(v, 3 * q->depth + 4 + extra, q, chan, 0) : NULL;
	q->mem = q->cq ? calloc(1, len) : NULL;
	/* Windows: the region itself gives no remote rights, so a key that
	 * works at all is a window's. */
	int access = IBV_ACCESS_LOCAL_WRITE | (o->invalidate ? IBV_ACCESS_MW_BIND :
					       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
	q->mr = q->mem ? ibv_reg_mr(q->pd, q->mem, len, access) : NULL;
	if (!q->mr)
		return -ENOMEM;
	if (o->invalidate && (ret = alloc_windows(q)))
		return ret;
	struct ibv_qp_init_attr qa = {
		.send_cq = q->cq, .recv_cq = q->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 2 * q->depth + 4 + extra, .max_recv_wr = q->depth,
			 .max_send_sge = 2, .max_recv_sge = 1 },
	};
	if (rdma_create_qp(q->id, q->pd, &qa))
		return -errno;
	for (unsigned i = 0; i < q->depth; i++)
		if (post_recv(q, i))
			return -EIO;
	struct nvme_rdma_cm_req req = {
		.recfmt = 0,
		.qid = o->cm_qid >= 0 ? (uint16_t)o->cm_qid : qid,
		.hrqsize = (uint16_t)q->depth,
		.hsqsize = o->cm_hsqsize >= 0 ? (uint16_t)o->cm_hsqsize : (uint16_t)(q->depth - 1),
	};
	/* The target RDMA-Reads write data from us (responder resources);
	 * we never read, so initiator depth 0, as the kernel's host offers:
	 * a target that mixes the two up then fails here as with the kernel. */
	struct rdma_conn_param cp = { .private_data = &req, .private_data_len = sizeof(req),
				      .responder_resources = 16, .initiator_depth = 0,
				      .retry_count = 7, .rnr_retry_count = 7 };
	if (rdma_connect(q->id, &cp))
		return -errno;
	return cm_wait(q, RDMA_CM_EVENT_ESTABLISHED, 5000);
}

static void hq_close(struct hq *q)
{
	if (q->id) {
		if (q->id->qp) {
			rdma_disconnect(q->id);
			rdma_destroy_qp(q->id);
		}
		rdma_destroy_id(q->id);
	}
	/* Windows first: a region with windows bound does not deregister. */
	for (unsigned s = 0; q->mw && s < q->depth; s++)
		if (q->mw[s].mw)
			ibv_dealloc_mw(q->mw[s].mw);
	free(q->mw);
	if (q->mr)
		ibv_dereg_mr(q->mr);
	if (q->cq) {
		drain(q);
		ibv_ack_cq_events(q->cq, q->events);
		ibv_destroy_cq(q->cq);
	}
	if (q->chan && !--chan_users) {
		ibv_destroy_comp_channel(chan);
		chan = NULL;
	}
	if (q->pd)
		ibv_dealloc_pd(q->pd);
	if (q->ch)
		rdma_destroy_event_channel(q->ch);
	free(q->mem);
	free(q);
}

static int hq_open(struct hq **out, const struct host_opts *o, uint16_t qid, uint16_t depth)
{
	struct hq *q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->depth = depth;
	q->ch = rdma_create_event_channel();
	int ret = q->ch && !rdma_create_id(q->ch, &q->id, q, RDMA_PS_TCP) ? setup(q, o, qid)
									 : -ENODEV;
	if (ret) {
		hq_close(q);
		return ret;
	}
	*out = q;
	return 0;
}

static void put_le24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
}

/* Slot s's window over its first `len` data bytes under a fresh key,
 * with only the right the target's transfer needs (it Reads write data
 * and Writes read data); a local invalidate first if the last response
 * left it bound.  Both unsignaled, chained ahead of `send` (the capsule)
 * in one post: the send queue runs in order, so the key is live before
 * the target can see it.  Returns the chain's first work request. */
static struct ibv_send_wr *bind_window(struct hq *q, unsigned s, enum nvme_dir dir, uint32_t len,
				       struct ibv_send_wr wr[2], struct ibv_send_wr *send)
{
	struct hmw *m = &q->mw[s];
	struct ibv_send_wr *first = &wr[1];
	memset(wr, 0, 2 * sizeof(*wr));
	if (m->bound) {
		wr[0].wr_id = (uint64_t)K_MW << 16 | s;
		wr[0].opcode = IBV_WR_LOCAL_INV;
		wr[0].invalidate_rkey = m->rkey;
		wr[0].next = &wr[1];
		first = &wr[0];
	}
	m->rkey = ibv_inc_rkey(m->rkey);
	wr[1].wr_id = (uint64_t)K_MW << 16 | s;
	wr[1].opcode = IBV_WR_BIND_MW;
	wr[1].next = send;
	wr[1].bind_mw.mw = m->mw;
	wr[1].bind_mw.rkey = m->rkey;
	wr[1].bind_mw.bind_info = (struct ibv_mw_bind_info){
		.mr = q->mr, .addr = (uintptr_t)slot_data(q, s), .length = len,
		.mw_access_flags = dir == DIR_H2C ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE,
	};
	m->asked = m->bound = true;
	m->freed = false;
	return first;
}

/* The response to slot s came: did it invalidate what the command asked
 * to (Send with Invalidate naming the window's key), and nothing else? */
static void check_inv(struct hq *q, const struct ibv_wc *wc, unsigned s)
{
	struct hmw *m = &q->mw[s];
	bool inv = wc->wc_flags & IBV_WC_WITH_INV;
	if (m->asked && inv && wc->invalidated_rkey == m->rkey) {
		m->bound = false;
		m->freed = true;
		q->inv_ok++;
	} else if ((m->asked || inv) && ++q->inv_bad <= 5) {
		if (inv)
			fprintf(stderr, "nvmf host: response to CID %u invalidated rkey %#x, %s %#x\n",
				s, wc->invalidated_rkey, m->asked ? "asked for" : "none asked; window",
				m->rkey);
		else
			fprintf(stderr, "nvmf host: response to CID %u: no Send with Invalidate "
				"for rkey %#x\n", s, m->rkey);
	}
	m->asked = false;
}

static int submit(struct hq *q, unsigned s, struct nvme_sqe *sqe, uint32_t len, enum hq_mode mode)
{
	if (q->broken)
		return -ECONNRESET;
	sqe->cid = (uint16_t)s;
	enum nvme_dir dir = nvmf_sqe_dir(sqe);
	uint32_t incap = 0;
	struct ibv_send_wr wr = { .wr_id = (uint64_t)K_SEND << 16 | s, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr mw_wr[2], *first = &wr, *bad;
	if (mode == HQ_RAW) {
		incap = len;
	} else if (dir == DIR_H2C && len && len <= q->incap) {
		sqe->flags = 1 << 6; /* PSDT: SGL */
		memset(&sqe->sgl, 0, sizeof(sqe->sgl));
		sqe->sgl.type = SGL_DATA_OFFSET;
		memcpy(sqe->sgl.len, &len, 4);
		incap = len;
	} else {
		sqe->flags = 1 << 6;
		memset(&sqe->sgl, 0, sizeof(sqe->sgl));
		sqe->sgl.type = SGL_KEYED_ADDR;
		if (dir != DIR_NONE && len) {
			uint32_t key = q->mr->rkey;
			if (q->mw) {
				first = bind_window(q, s, dir, len, mw_wr, &wr);
				key = q->mw[s].rkey;
				sqe->sgl.type = SGL_KEYED_INV;
			}
			sqe->sgl.addr = (uintptr_t)slot_data(q, s);
			put_le24(sqe->sgl.len, len);
			memcpy(sqe->sgl.key, &key, 4);
		}
	}
	memcpy(capsule(q, s), sqe, 64);
	/* SQE and in-capsule data are adjacent in the slot: one SGE. */
	struct ibv_sge sge = { (uintptr_t)capsule(q, s), 64 + incap, q->mr->lkey };
	wr.sg_list = &sge;
	return ibv_post_send(q->id->qp, first, &bad) ? -EIO : 0;
}

static int hq_poll(struct hq *q, hq_cb cb, void *arg)
{
	struct ibv_wc wc[32];
	int n = ibv_poll_cq(q->cq, 32, wc), seen = 0;
	if (n < 0)
		return -EIO;
	for (int i = 0; i < n; i++) {
		if (wc[i].status != IBV_WC_SUCCESS) {
			q->broken = true;
			continue;
		}
		if ((wc[i].wr_id >> 16) != K_RECV)
			continue;
		unsigned r = wc[i].wr_id & 0xffff;
		struct nvme_cqe c = *rx_cqe(q, r);
		if (post_recv(q, r))
			q->broken = true;
		if (wc[i].byte_len < sizeof(c) || c.cid >= q->depth)
			continue; /* not a completion of ours */
		if (q->mw)
			check_inv(q, &wc[i], c.cid);
		cb(arg, c.cid, &c);
		seen++;
	}
	return q->broken ? -ECONNRESET : seen;
}

void hq_rdma_inv_counts(const struct hq *q, uint64_t *ok, uint64_t *bad)
{
	*ok = q->inv_ok;
	*bad = q->inv_bad;
}

int hq_rdma_stale_rkey(const struct hq *q, unsigned slot, uint32_t *rkey)
{
	if (!q->mw || slot >= q->depth || !q->mw[slot].freed)
		return -ENOENT;
	*rkey = q->mw[slot].rkey;
	return 0;
}

const struct hq_ops hq_rdma_ops = {
	.open = hq_open, .buf = buf, .submit = submit, .poll = hq_poll,
	.set_incap = set_incap, .close = hq_close,
	.wait_fd = wait_fd, .arm = arm, .drain = drain,
};
