/*
 * core.c - controllers: Fabrics Connect, Property Get/Set, keep-alive,
 * and the dispatch of every command to admin.c or io.c.
 *
 * A command's path: nvmf_exec() fills the completion's identity (CID,
 * SQID, SQHD), checks that the queue may run it (Connect first; the
 * admin queue for admin commands; an enabled controller for I/O), then
 * runs it.  Every failure is a status in the completion, never a crash
 * or a dropped command: a transport sends back whatever this returns.
 *
 * Locking (core.h): Connect, Property Get/Set, admin commands, the
 * keep-alive tick and a queue's going run under t->lock; I/O commands
 * run without it.  The helpers below that touch a controller's shared
 * state say "Must hold t->lock".
 */
#include "core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t nvmf_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void nvmf_set_status(struct nvmf_req *r, uint16_t st)
{
	r->cqe.status = nvmf_status(st);
}

void nvmf_tgt_init(struct nvmf_tgt *t)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
	struct nvmf_subsys *d = &t->ss[0];
	snprintf(d->nqn, sizeof(d->nqn), "%s", NVMF_DISC_NQN);
	d->discovery = true;
	d->allow_any = true; /* the discovery log lists only what a host may see */
	t->next_cntlid = 1;
}

struct nvmf_subsys *nvmf_subsys_add(struct nvmf_tgt *t, const char *nqn)
{
	if (t->nss >= NVMF_MAX_SUBSYS || strlen(nqn) > NVMF_NQN_LEN || !strcmp(nqn, NVMF_DISC_NQN))
		return NULL;
	struct nvmf_subsys *s = &t->ss[++t->nss];
	snprintf(s->nqn, sizeof(s->nqn), "%s", nqn);
	/* A serial number per subsystem: the host tells subsystems apart by it. */
	uint32_t h = 2166136261u;
	for (const char *p = nqn; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	snprintf(s->sn, sizeof(s->sn), "SRN%08x", h);
	return s;
}

/* ---- controllers ---- */

static uint32_t csts_get(const struct nvmf_ctrl *c)
{
	return __atomic_load_n(&c->csts, __ATOMIC_RELAXED);
}

/* Must hold t->lock (the only writers). */
static void csts_set(struct nvmf_ctrl *c, uint32_t v)
{
	__atomic_store_n(&c->csts, v, __ATOMIC_RELAXED);
}

/* Must hold t->lock. */
static struct nvmf_ctrl *ctrl_find(struct nvmf_tgt *t, uint16_t cntlid)
{
	for (unsigned i = 0; i < NVMF_MAX_CTRL; i++)
		if (t->ctrls[i] && t->ctrls[i]->cntlid == cntlid)
			return t->ctrls[i];
	return NULL;
}

/* Must hold t->lock. */
static struct nvmf_ctrl *ctrl_new(struct nvmf_tgt *t)
{
	for (unsigned i = 0; i < NVMF_MAX_CTRL; i++) {
		if (t->ctrls[i])
			continue;
		struct nvmf_ctrl *c = calloc(1, sizeof(*c));
		if (!c)
			return NULL;
		/* Dynamic controller model: IDs 1..0xffef, never one in use. */
		do {
			c->cntlid = t->next_cntlid++;
			if (t->next_cntlid > 0xffef)
				t->next_cntlid = 1;
		} while (ctrl_find(t, c->cntlid));
		c->t = t;
		c->nioq = NVMF_MAX_QUEUES;
		t->ctrls[i] = c;
		return c;
	}
	return NULL;
}

/* Queue `q` is now the controller's queue q->qid (its owner calls this,
 * in Connect).  Must hold t->lock. */
static void ctrl_attach(struct nvmf_ctrl *c, struct nvmf_q *q, uint16_t qid)
{
	c->q[qid] = q;
	c->nref++;
	q->ctrl = c;
	q->qid = qid;
}

/* The controller lets go of queue slot i: the queue's commands fail from
 * now on and its owner is asked to close it; the owner's nvmf_q_gone()
 * drops the reference later.  Must hold t->lock (which keeps the queue
 * alive here: its owner frees it only after nvmf_q_gone()). */
static void ctrl_release(struct nvmf_ctrl *c, unsigned i, struct nvmf_q *keep)
{
	struct nvmf_q *q = c->q[i];
	if (!q)
		return;
	c->q[i] = NULL;
	if (q == keep)
		return; /* its transport is already tearing it down */
	__atomic_store_n(&q->kill_req, 1, __ATOMIC_RELEASE);
	if (q->kill)
		q->kill(q);
}

/* Out of the controller table, every queue released (all but `keep`,
 * whose transport is already tearing it down); freed by the last
 * queue's nvmf_q_gone().  Must hold t->lock. */
static void ctrl_destroy(struct nvmf_ctrl *c, struct nvmf_q *keep)
{
	struct nvmf_tgt *t = c->t;
	c->dead = true;
	csts_set(c, 0);
	for (unsigned i = 0; i <= NVMF_MAX_QUEUES; i++)
		ctrl_release(c, i, keep);
	for (unsigned i = 0; i < NVMF_MAX_CTRL; i++)
		if (t->ctrls[i] == c)
			t->ctrls[i] = NULL;
}

void nvmf_q_gone(struct nvmf_q *q)
{
	struct nvmf_ctrl *c = q->ctrl;
	if (!c)
		return;
	struct nvmf_tgt *t = c->t;
	pthread_mutex_lock(&t->lock);
	if (q->qid == 0 && !c->dead)
		ctrl_destroy(c, q); /* the association ends with its admin queue */
	/* A slot CC.EN's reset or a teardown emptied may hold a newer queue. */
	if (c->q[q->qid] == q)
		c->q[q->qid] = NULL;
	q->ctrl = NULL;
	if (--c->nref == 0 && c->dead)
		free(c);
	pthread_mutex_unlock(&t->lock);
}

/* Keep Alive (NVMe Base 3.9): a controller that heard nothing for a
 * whole KATO period is torn down.  Checked at KATO granularity, so the
 * grace is between one and two periods. */
void nvmf_tick(struct nvmf_tgt *t, uint64_t now_ns)
{
	pthread_mutex_lock(&t->lock);
	t->now_ns = now_ns;
	for (unsigned i = 0; i < NVMF_MAX_CTRL; i++) {
		struct nvmf_ctrl *c = t->ctrls[i];
		if (!c || !c->kato || now_ns < c->ka_check_ns)
			continue;
		/* Paired with finish()'s store: any command, on any thread. */
		if (!__atomic_exchange_n(&c->ka_seen, false, __ATOMIC_RELAXED)) {
			fprintf(stderr, "nvmf: controller %u (%s): keep-alive expired\n", c->cntlid,
				c->hostnqn);
			t->ka_expired++;
			ctrl_destroy(c, NULL);
			continue;
		}
		c->ka_check_ns = now_ns + (uint64_t)c->kato * 1000000ull;
	}
	pthread_mutex_unlock(&t->lock);
}

/* ---- Connect (NVMe-oF 3.3) ---- */

static bool host_allowed(const struct nvmf_subsys *s, const char *hostnqn)
{
	if (s->allow_any)
		return true;
	for (unsigned i = 0; i < s->nallow; i++)
		if (!strcmp(s->allow[i], hostnqn))
			return true;
	return false;
}

static uint16_t connect_invalid(struct nvmf_req *r, bool in_data, uint16_t ipo)
{
	r->cqe.dw0 = (in_data ? 1u << 16 : 0) | ipo; /* IATTR, IPO */
	return ST_CONNECT_INVALID | ST_DNR;
}

static struct nvmf_subsys *subsys_find(struct nvmf_tgt *t, const char *nqn)
{
	for (unsigned i = 0; i <= t->nss; i++)
		if (!strcmp(t->ss[i].nqn, nqn))
			return &t->ss[i];
	return NULL;
}

static uint16_t connect_admin(struct nvmf_tgt *t, struct nvmf_q *q, struct nvmf_req *r,
			      struct nvmf_subsys *s, const struct nvmf_connect_data *d,
			      const char *hostnqn)
{
	uint16_t sqsize = r->sqe.cdw11 & 0xffff;
	if (sqsize + 1 < NVMF_AQ_MIN || sqsize > NVMF_MQES ||
	    (q->cm_sqsize >= 0 && sqsize != q->cm_sqsize))
		return connect_invalid(r, false, CONNECT_IPO_SQSIZE);
	struct nvmf_ctrl *c = ctrl_new(t);
	if (!c)
		return ST_CONNECT_BUSY;
	c->ss = s;
	snprintf(c->hostnqn, sizeof(c->hostnqn), "%s", hostnqn);
	memcpy(c->hostid, d->hostid, 16);
	c->kato = r->sqe.cdw12;
	c->ka_check_ns = t->now_ns + (uint64_t)c->kato * 1000000ull;
	ctrl_attach(c, q, 0);
	q->sqsize = sqsize;
	r->cqe.dw0 = c->cntlid;
	return ST_OK;
}

static uint16_t connect_io(struct nvmf_tgt *t, struct nvmf_q *q, struct nvmf_req *r,
			   struct nvmf_subsys *s, const struct nvmf_connect_data *d,
			   const char *hostnqn, uint16_t qid)
{
	struct nvmf_ctrl *c = ctrl_find(t, d->cntlid);
	/* The controller must be this host's, on this subsystem. */
	if (!c || c->ss != s || strcmp(c->hostnqn, hostnqn) || memcmp(c->hostid, d->hostid, 16))
		return connect_invalid(r, true, CONNECT_IPO_CNTLID);
	if (s->discovery || qid > c->nioq || c->q[qid])
		return connect_invalid(r, false, CONNECT_IPO_QID);
	uint16_t sqsize = r->sqe.cdw11 & 0xffff;
	if (!sqsize || sqsize > NVMF_MQES || (q->cm_sqsize >= 0 && sqsize != q->cm_sqsize))
		return connect_invalid(r, false, CONNECT_IPO_SQSIZE);
	if (!(csts_get(c) & CSTS_RDY))
		return ST_CMD_SEQ_ERROR; /* I/O queues after CC.EN (Base 3.5.1) */
	ctrl_attach(c, q, qid);
	q->sqsize = sqsize;
	r->cqe.dw0 = c->cntlid;
	return ST_OK;
}

static uint16_t do_connect(struct nvmf_tgt *t, struct nvmf_q *q, struct nvmf_req *r)
{
	if (q->ctrl)
		return ST_CMD_SEQ_ERROR; /* a second Connect on one queue */
	if (r->len < sizeof(struct nvmf_connect_data))
		return ST_SGL_LEN_INVALID;
	if ((r->sqe.cdw10 & 0xffff) != 0)
		return ST_CONNECT_FORMAT | ST_DNR; /* RECFMT 0 only */
	uint16_t qid = (uint16_t)(r->sqe.cdw10 >> 16);
	if (q->cm_qid >= 0 && qid != q->cm_qid)
		return connect_invalid(r, false, CONNECT_IPO_QID);
	const struct nvmf_connect_data *d = (const void *)r->data;
	char subnqn[NVMF_NQN_LEN + 1], hostnqn[NVMF_NQN_LEN + 1];
	/* NQNs are NUL-terminated within 256 bytes; the copy bounds them. */
	if (!memchr(d->subnqn, 0, sizeof(d->subnqn)) || strlen(d->subnqn) > NVMF_NQN_LEN)
		return connect_invalid(r, true, CONNECT_IPO_SUBNQN);
	if (!memchr(d->hostnqn, 0, sizeof(d->hostnqn)) || strlen(d->hostnqn) > NVMF_NQN_LEN ||
	    !d->hostnqn[0])
		return connect_invalid(r, true, CONNECT_IPO_HOSTNQN);
	snprintf(subnqn, sizeof(subnqn), "%s", d->subnqn);
	snprintf(hostnqn, sizeof(hostnqn), "%s", d->hostnqn);
	struct nvmf_subsys *s = subsys_find(t, subnqn);
	if (!s)
		return connect_invalid(r, true, CONNECT_IPO_SUBNQN);
	if (!host_allowed(s, hostnqn)) {
		fprintf(stderr, "nvmf: host %s not allowed on %s\n", hostnqn, subnqn);
		return ST_CONNECT_HOST | ST_DNR;
	}
	q->no_sqflow = (r->sqe.cdw11 >> 16) & 4;
	return qid == 0 ? connect_admin(t, q, r, s, d, hostnqn)
			: connect_io(t, q, r, s, d, hostnqn, qid);
}

/* ---- properties (NVMe-oF 3.4, 3.5) ---- */

static uint64_t prop_cap(void)
{
	return (uint64_t)NVMF_MQES | 1ull << 16 /* CQR */ | 15ull << 24 /* TO: 7.5 s */ |
	       1ull << 37 /* CSS: NVM */;
}

static uint16_t prop_get(struct nvmf_ctrl *c, struct nvmf_req *r)
{
	uint64_t v;
	switch (r->sqe.cdw11) {
	case PROP_CAP: v = prop_cap(); break;
	case PROP_VS: v = 0x00010300; break; /* 1.3: all it has of 1.4 is optional there */
	case PROP_CC: v = c->cc; break;
	case PROP_CSTS: v = csts_get(c); break;
	default: return ST_INVALID_FIELD | ST_DNR;
	}
	r->cqe.dw0 = (uint32_t)v;
	r->cqe.dw1 = (r->sqe.cdw10 & 7) == 1 ? (uint32_t)(v >> 32) : 0;
	return ST_OK;
}

/* CC.EN 1 -> 0: the I/O queues go away (Base 3.7.2).  Must hold t->lock. */
static void ctrl_reset(struct nvmf_ctrl *c)
{
	csts_set(c, 0);
	for (unsigned i = 1; i <= NVMF_MAX_QUEUES; i++)
		ctrl_release(c, i, NULL);
}

static uint16_t prop_set(struct nvmf_ctrl *c, struct nvmf_req *r)
{
	if (r->sqe.cdw11 != PROP_CC)
		return ST_INVALID_FIELD | ST_DNR; /* CC is the only writable one */
	uint32_t cc = r->sqe.cdw12, old = c->cc;
	if ((cc & CC_EN) && !(old & CC_EN)) {
		/* The entry sizes must be the 64-byte SQE and 16-byte CQE. */
		if (!c->ss->discovery && (((cc >> 16) & 0xf) != 6 || ((cc >> 20) & 0xf) != 4))
			return ST_INVALID_FIELD | ST_DNR;
		csts_set(c, csts_get(c) | CSTS_RDY);
	}
	if (!(cc & CC_EN) && (old & CC_EN))
		ctrl_reset(c);
	if (cc & CC_SHN_MASK)
		csts_set(c, csts_get(c) | CSTS_SHST_DONE); /* nothing to write back: done at once */
	else
		csts_set(c, csts_get(c) & ~CSTS_SHST_DONE);
	c->cc = cc;
	return ST_OK;
}

static uint16_t do_fabrics(struct nvmf_tgt *t, struct nvmf_q *q, struct nvmf_req *r)
{
	uint8_t fct = SQE_FCTYPE(&r->sqe);
	if (fct == FCT_CONNECT)
		return do_connect(t, q, r);
	if (!q->ctrl || q->ctrl->dead)
		return ST_CMD_SEQ_ERROR;
	if (fct == FCT_PROP_GET || fct == FCT_PROP_SET) {
		if (q->qid != 0)
			return ST_INVALID_FIELD | ST_DNR; /* admin queue only */
		return fct == FCT_PROP_GET ? prop_get(q->ctrl, r) : prop_set(q->ctrl, r);
	}
	return ST_INVALID_OPCODE | ST_DNR; /* Disconnect, authentication: not offered */
}

/* The completion's identity and SQ head (NVMe-oF 3.1: SQ flow control
 * unless the host turned it off at Connect). */
static void finish(struct nvmf_q *q, struct nvmf_req *r, uint16_t st)
{
	r->cqe.cid = r->sqe.cid;
	r->cqe.sqid = q->qid;
	/* Any command counts as traffic.  Looked at first, so the I/O threads
	 * write the shared line once per keep-alive period, not per command. */
	if (q->ctrl && !__atomic_load_n(&q->ctrl->ka_seen, __ATOMIC_RELAXED))
		__atomic_store_n(&q->ctrl->ka_seen, true, __ATOMIC_RELAXED);
	if (q->no_sqflow) {
		r->cqe.sqhd = 0xffff;
	} else if (q->ctrl) {
		q->sqhd = (uint16_t)((q->sqhd + 1) % (q->sqsize + 1u));
		r->cqe.sqhd = q->sqhd;
	}
	if (st != ST_OK)
		r->xfer = 0;
	nvmf_set_status(r, st);
}

void nvmf_reject(struct nvmf_q *q, struct nvmf_req *r, uint16_t st)
{
	memset(&r->cqe, 0, sizeof(r->cqe));
	finish(q, r, st);
}

/* Fabrics and admin commands: under the lock, on a live controller. */
static uint16_t exec_locked(struct nvmf_tgt *t, struct nvmf_q *q, struct nvmf_req *r, int *held)
{
	pthread_mutex_lock(&t->lock);
	uint16_t st;
	if (r->sqe.opc == OPC_FABRICS)
		st = do_fabrics(t, q, r);
	else if (q->ctrl->dead)
		st = ST_CMD_SEQ_ERROR; /* torn down; its owner closes the queue soon */
	else
		st = nvmf_admin(q->ctrl, r, held);
	pthread_mutex_unlock(&t->lock);
	return st;
}

int nvmf_exec(struct nvmf_tgt *t, struct nvmf_q *q, struct nvmf_req *r)
{
	uint16_t st;
	int held = 0;
	memset(&r->cqe, 0, sizeof(r->cqe));
	r->xfer = 0;
	if (r->sqe.opc != OPC_FABRICS && !q->ctrl)
		st = ST_CMD_SEQ_ERROR; /* nothing before Connect (NVMe-oF 3.3) */
	else if (r->sqe.opc != OPC_FABRICS && (r->sqe.flags & 3))
		st = ST_INVALID_FIELD | ST_DNR; /* fused commands: not supported */
	else if (r->sqe.opc == OPC_FABRICS || q->qid == 0)
		st = exec_locked(t, q, r, &held);
	else if (__atomic_load_n(&q->kill_req, __ATOMIC_ACQUIRE))
		st = ST_CMD_SEQ_ERROR; /* its controller let go of it: no more I/O */
	else
		st = nvmf_io(q->ctrl, &t->stats[q->thr % NVMF_MAX_THREADS], r);
	finish(q, r, st);
	return held ? NVMF_HELD : NVMF_DONE;
}
