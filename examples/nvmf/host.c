/*
 * host.c - bringing a controller up from the host side, transport-blind:
 * the admin queue's Connect, CAP and CC.EN, waiting for CSTS.RDY,
 * Identify Controller (IOCCSZ) and Namespace (size), Set Features Number
 * of Queues, then one Connect per I/O queue with the controller ID.
 */
#include "host.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

uint64_t host_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint16_t cqe_status(const struct nvme_cqe *c)
{
	return (c->status >> 1) & 0x7ff;
}

void host_default_ids(struct host_opts *o)
{
	/* A fixed host ID per host NQN: the target pairs them per controller. */
	uint64_t h = 1469598103934665603ull;
	for (const char *p = o->hostnqn; *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ull;
	memcpy(o->hostid, &h, 8);
	memcpy(o->hostid + 8, &h, 8);
}

struct sync_wait {
	bool done;
	struct nvme_cqe cqe;
};

static void sync_cb(void *arg, unsigned slot, const struct nvme_cqe *cqe)
{
	struct sync_wait *w = arg;
	if (slot == 0) {
		w->done = true;
		w->cqe = *cqe;
	}
}

/* One command on slot 0, waited for: the control path only. */
int host_sync(struct host *h, struct hq *q, struct nvme_sqe *sqe, uint32_t len,
	      enum hq_mode mode, struct nvme_cqe *cqe, int timeout_ms)
{
	struct sync_wait w = { 0 };
	int ret = h->ops->submit(q, 0, sqe, len, mode);
	if (ret)
		return ret;
	uint64_t end = host_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	while (!w.done) {
		if (h->ops->poll(q, sync_cb, &w) < 0) {
			h->dead = true;
			return -ECONNRESET;
		}
		if (host_now_ns() > end) {
			h->dead = true; /* slot 0 may still be answered: the queue is done */
			return -ETIMEDOUT;
		}
	}
	if (cqe)
		*cqe = w.cqe;
	h->last_status = cqe_status(&w.cqe);
	return h->last_status ? -EPROTO : 0;
}

int host_connect_queue(struct host *h, struct hq *q, uint16_t qid, uint16_t sqsize,
		       struct nvme_cqe *cqe)
{
	struct nvmf_connect_data *d = h->ops->buf(q, 0);
	memset(d, 0, sizeof(*d));
	memcpy(d->hostid, h->o.hostid, 16);
	d->cntlid = qid ? h->cntlid : 0xffff;
	snprintf(d->subnqn, sizeof(d->subnqn), "%s", h->o.subnqn);
	snprintf(d->hostnqn, sizeof(d->hostnqn), "%s", h->o.hostnqn);
	struct nvme_sqe s = { .opc = OPC_FABRICS };
	((uint8_t *)&s)[4] = FCT_CONNECT;
	s.cdw10 = (uint32_t)qid << 16;
	s.cdw11 = sqsize;
	s.cdw12 = qid ? 0 : h->o.kato;
	return host_sync(h, q, &s, sizeof(*d), HQ_AUTO, cqe, 5000);
}

static int prop(struct host *h, bool set, uint32_t off, uint64_t *v)
{
	struct nvme_sqe s = { .opc = OPC_FABRICS };
	struct nvme_cqe c;
	((uint8_t *)&s)[4] = set ? FCT_PROP_SET : FCT_PROP_GET;
	s.cdw10 = off == PROP_CAP ? 1 : 0; /* 8 bytes for CAP */
	s.cdw11 = off;
	if (set)
		s.cdw12 = (uint32_t)*v;
	int ret = host_sync(h, h->aq, &s, 0, HQ_AUTO, &c, 2000);
	if (!ret && !set)
		*v = c.dw0 | (uint64_t)c.dw1 << 32;
	return ret;
}

static int identify(struct host *h, uint8_t cns, uint32_t nsid)
{
	struct nvme_sqe s = { .opc = OPC_IDENTIFY, .nsid = nsid, .cdw10 = cns };
	return host_sync(h, h->aq, &s, 4096, HQ_AUTO, NULL, 2000);
}

/* Admin bring-up; --nsid, or the subsystem's first namespace, becomes
 * h->nsid. */
static int admin_up(struct host *h, unsigned nioq)
{
	struct nvme_cqe c;
	int ret = host_connect_queue(h, h->aq, 0, NVMF_AQ_MIN - 1, &c);
	if (ret) {
		fprintf(stderr, "nvmf host: admin Connect failed: status %#x (%s)\n",
			h->last_status, ret == -EPROTO ? "refused" : strerror(-ret));
		return ret;
	}
	h->cntlid = (uint16_t)c.dw0;
	uint64_t cap, cc = CC_EN | 6u << 16 | 4u << 20, csts = 0;
	if ((ret = prop(h, false, PROP_CAP, &cap)) || (ret = prop(h, true, PROP_CC, &cc)))
		return ret;
	uint64_t end = host_now_ns() + 2000000000ull;
	while (!(csts & CSTS_RDY)) {
		if ((ret = prop(h, false, PROP_CSTS, &csts)))
			return ret;
		if (host_now_ns() > end)
			return -ETIMEDOUT;
	}
	if ((ret = identify(h, 1, 0)))
		return ret;
	const uint8_t *id = h->ops->buf(h->aq, 0);
	uint32_t ioccsz;
	memcpy(&ioccsz, id + 1792, 4);
	h->ioccs = ioccsz * 16 > 64 ? ioccsz * 16 - 64 : 0;
	h->incap = h->o.no_incap ? 0 : h->ioccs;
	if (!strcmp(h->o.subnqn, NVMF_DISC_NQN))
		return 0;
	if ((ret = identify(h, 2, 0)))
		return ret;
	memcpy(&h->nsid, h->ops->buf(h->aq, 0), 4);
	if (h->o.nsid)
		h->nsid = h->o.nsid; /* Identify Namespace says whether it exists */
	if (!h->nsid || (ret = identify(h, 0, h->nsid)))
		return h->nsid ? ret : -ENODEV;
	memcpy(&h->nlb, h->ops->buf(h->aq, 0), 8);
	if (nioq) {
		struct nvme_sqe s = { .opc = OPC_SET_FEAT, .cdw10 = FEAT_NUM_QUEUES,
				      .cdw11 = (nioq - 1) | (nioq - 1) << 16 };
		if ((ret = host_sync(h, h->aq, &s, 0, HQ_AUTO, &c, 2000)))
			return ret;
		if ((c.dw0 & 0xffff) + 1 < nioq)
			return -ENOSPC;
	}
	return 0;
}

int host_start(struct host *h, const struct host_opts *o, unsigned nioq, uint16_t depth)
{
	memset(h, 0, sizeof(*h));
	h->o = *o;
	h->ops = o->xport == HX_RDMA ? &hq_rdma_ops : &hq_tcp_ops;
	int ret = h->ops->open(&h->aq, o, 0, NVMF_AQ_MIN);
	if (ret)
		return ret;
	if ((ret = admin_up(h, nioq)))
		return ret;
	for (unsigned i = 0; i < nioq; i++) {
		if ((ret = h->ops->open(&h->ioq[i], o, (uint16_t)(i + 1), depth)))
			return ret;
		h->nioq++;
		/* The Connect data rides in the capsule even with --no-incap,
		 * as the Linux host sends it: Linux 6.1's nvmet-tcp waits for
		 * in-capsule data for a write within its inline size and
		 * never sends the R2T (tests/interop/README.md). */
		h->ops->set_incap(h->ioq[i], h->ioccs);
		struct nvme_cqe c;
		if ((ret = host_connect_queue(h, h->ioq[i], (uint16_t)(i + 1), depth - 1, &c))) {
			fprintf(stderr, "nvmf host: I/O queue %u Connect failed: status %#x\n",
				i + 1, h->last_status);
			return ret;
		}
		h->ops->set_incap(h->ioq[i], h->incap);
	}
	return 0;
}

void host_stop(struct host *h)
{
	for (unsigned i = 0; i < h->nioq; i++)
		h->ops->close(h->ioq[i]);
	h->nioq = 0;
	if (h->aq) {
		/* A clean shutdown: CC.SHN normal, the queues then go. */
		uint64_t cc = CC_EN | 6u << 16 | 4u << 20 | 1u << 14;
		if (h->cntlid && !h->dead)
			prop(h, true, PROP_CC, &cc);
		h->ops->close(h->aq);
		h->aq = NULL;
	}
}
