/*
 * ids.c - rdma_cm ids, event channels and events.
 *
 * An event channel's fd is an eventfd that holds 1 exactly while events
 * wait in the channel, so poll/epoll see it readable then; whether
 * rdma_get_cm_event blocks follows the fd's O_NONBLOCK, as with the
 * kernel's rdma_cm fd.  Events handed out stay owned by their id
 * (nevents) until acked; destroying an id waits for that, as librdmacm
 * does, and drops its events nobody fetched.  Must hold srn_cm.lock
 * unless a function says otherwise.
 */
#include "cm/ids.h"
#include "cm/ports.h"
#include "cm/qp1.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct srn_cm_chan *srn_cm_chan_new(void)
{
	struct srn_cm_chan *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->ch.fd = eventfd(0, EFD_CLOEXEC);
	if (c->ch.fd < 0) {
		free(c);
		return NULL;
	}
	c->next_live = srn_cm.chans;
	srn_cm.chans = c;
	return c;
}

bool srn_cm_chan_live(const struct rdma_event_channel *ch)
{
	for (const struct srn_cm_chan *c = srn_cm.chans; c; c = c->next_live)
		if (&c->ch == ch)
			return true;
	return false;
}

static void chan_release(struct srn_cm_chan *c)
{
	if (c->destroyed && !c->nids && !c->waiters)
		free(c);
}

/* A CONNECT_REQUEST left its queue (fetched or dropped): its listener's
 * backlog has room again, as ucma_get_event gives it back. */
static void backlog_release(const struct srn_cm_event *e)
{
	struct srn_cm_id *l = e->owner->listener;
	if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && l && l->pending > 0)
		l->pending--;
}

/* Drop every event queued in c (their ids count them no more). */
static void drop_all(struct srn_cm_chan *c)
{
	while (c->head) {
		struct srn_cm_event *e = c->head;
		c->head = e->next;
		backlog_release(e);
		e->owner->nevents--;
		free(e);
	}
	c->tail = NULL;
}

/* Programs destroy a channel that one of their threads is still using:
 * Debian's rping (rdma-core 44) never joins its CM thread, which sleeps in
 * rdma_get_cm_event or is about to call it again after its last ack.  With
 * the kernel's fd that thread stays asleep (or reads a closed fd); here it
 * must never touch freed memory.  So the channel leaves the live list at
 * once, and its memory stays while an id or a sleeping thread uses it. */
void srn_cm_chan_free(struct srn_cm_chan *c)
{
	for (struct srn_cm_chan **pp = &srn_cm.chans; *pp; pp = &(*pp)->next_live)
		if (*pp == c) {
			*pp = c->next_live;
			break;
		}
	c->destroyed = true;
	drop_all(c);
	close(c->ch.fd);
	c->ch.fd = -1;
	pthread_cond_broadcast(&srn_cm.cond);   /* rdma_destroy_id may wait for dropped events */
	chan_release(c);
}

void srn_cm_chan_unref(struct srn_cm_chan *c)
{
	c->nids--;
	chan_release(c);
}

static void chan_level(struct srn_cm_chan *c, bool was_empty)
{
	uint64_t v = 1;
	if (c->ch.fd < 0) {
		/* destroyed: nothing is queued, no fd to level */
	} else if (was_empty && c->head) {
		if (write(c->ch.fd, &v, sizeof(v)) < 0) { /* cannot overflow from 0 */ }
	} else if (!was_empty && !c->head) {
		/* The count is 1 (we wrote it), so this read does not block. */
		if (read(c->ch.fd, &v, sizeof(v)) < 0) { /* already 0 */ }
	}
	pthread_cond_broadcast(&srn_cm.cond);
}

struct srn_cm_id *srn_cm_id_new(struct srn_cm_chan *chan, void *context, enum rdma_port_space ps,
				enum ibv_qp_type qpt)
{
	struct srn_cm_id *id = calloc(1, sizeof(*id));
	if (!id)
		return NULL;
	if (!chan) {
		chan = srn_cm_chan_new();
		if (!chan) {
			free(id);
			return NULL;
		}
		id->sync = true;
	}
	id->chan = chan;
	chan->nids++;
	id->id.channel = &chan->ch;
	id->id.context = context;
	id->id.ps = ps;
	id->id.qp_type = qpt;
	id->state = SRN_CMS_IDLE;
	id->next = srn_cm.ids;
	srn_cm.ids = id;
	return id;
}

struct srn_cm_id *srn_cm_child_new(struct srn_cm_id *l, struct srn_cm_dev *dev, const struct srn_cma_hdr *h,
				   const uint8_t gid[16], enum ibv_qp_type qpt)
{
	struct srn_cm_id *id = srn_cm_id_new(l->sync ? NULL : l->chan, l->id.context, l->id.ps, qpt);
	if (!id)
		return NULL;
	if (l->sync)
		id->req_chan = l->chan;
	id->dev = dev;
	id->id.verbs = dev->ctx;
	id->id.port_num = 1;
	id->id.pd = l->id.pd ? l->id.pd : dev->pd;   /* rdma-core: the device's PD */
	memcpy(&id->id.route.addr.src_storage, &h->dst, sizeof(h->dst));
	memcpy(&id->id.route.addr.dst_storage, &h->src, sizeof(h->src));
	memcpy(id->peer_gid, gid, 16);
	memcpy(id->id.route.addr.addr.ibaddr.sgid.raw, dev->gid, 16);
	memcpy(id->id.route.addr.addr.ibaddr.dgid.raw, gid, 16);
	id->id.route.addr.addr.ibaddr.pkey = htobe16(0xffff);
	return id;
}

/* Drop the id's events nobody fetched from c. */
static void drop_queued_in(struct srn_cm_id *id, struct srn_cm_chan *c)
{
	bool was_empty = !c->head;
	struct srn_cm_event **pp = &c->head, *last = NULL;
	while (*pp) {
		struct srn_cm_event *e = *pp;
		if (e->owner == id) {
			*pp = e->next;
			backlog_release(e);
			id->nevents--;
			free(e);
		} else {
			last = e;
			pp = &e->next;
		}
	}
	c->tail = last;
	chan_level(c, was_empty);
}

/* Drop the id's events nobody fetched; the caller waits for the rest. */
static void drop_queued(struct srn_cm_id *id)
{
	drop_queued_in(id, id->chan);
	if (id->req_chan && id->req_chan != id->chan)
		drop_queued_in(id, id->req_chan);
}

void srn_cm_id_free(struct srn_cm_id *id)
{
	srn_cm_port_release(id);
	drop_queued(id);
	for (struct srn_cm_id **pp = &srn_cm.ids; *pp; pp = &(*pp)->next)
		if (*pp == id) {
			*pp = id->next;
			break;
		}
	struct srn_cm_chan *c = id->chan;
	if (id->sync)
		srn_cm_chan_free(c);
	srn_cm_chan_unref(c);
	free(id->ep_attr);
	free(id);
}

struct srn_cm_event *srn_cm_event_queue(struct srn_cm_id *id, enum rdma_cm_event_type type,
					int status, const void *pdata, size_t plen)
{
	if (id->destroying)
		return NULL;
	struct srn_cm_event *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->owner = id;
	e->ev.id = &id->id;
	e->ev.event = type;
	e->ev.status = status;
	if (plen > sizeof(e->pdata))
		plen = sizeof(e->pdata);
	if (plen) {
		memcpy(e->pdata, pdata, plen);
		e->ev.param.conn.private_data = e->pdata;
		e->ev.param.conn.private_data_len = (uint8_t)(plen > 255 ? 255 : plen);
	}
	struct srn_cm_chan *c = type == RDMA_CM_EVENT_CONNECT_REQUEST && id->req_chan ? id->req_chan : id->chan;
	if (c->destroyed) {
		free(e);                /* nobody can fetch it */
		return NULL;
	}
	id->nevents++;
	bool was_empty = !c->head;
	if (c->tail)
		c->tail->next = e;
	else
		c->head = e;
	c->tail = e;
	chan_level(c, was_empty);
	return e;
}

/* A thread that asked a destroyed channel for events: asleep until the
 * process ends (see srn_cm_chan_free).  Must hold srn_cm.lock. */
static _Noreturn void sleep_forever(void)
{
	static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
	for (;;)
		pthread_cond_wait(&never, &srn_cm.lock);
}

/* Called without srn_cm.lock held; takes it.  c is the caller's pointer:
 * nothing is read through it before srn_cm_chan_live says it is ours. */
int srn_cm_get_event(struct srn_cm_chan *c, struct srn_cm_event **out)
{
	pthread_mutex_lock(&srn_cm.lock);
	if (!srn_cm_chan_live(&c->ch))
		sleep_forever();
	bool nonblock = fcntl(c->ch.fd, F_GETFL) & O_NONBLOCK;
	while (!c->head || c->destroyed) {
		if (nonblock) {
			pthread_mutex_unlock(&srn_cm.lock);
			return -EAGAIN;
		}
		c->waiters++;
		pthread_cond_wait(&srn_cm.cond, &srn_cm.lock);
		c->waiters--;
	}
	struct srn_cm_event *e = c->head;
	c->head = e->next;
	if (!c->head)
		c->tail = NULL;
	e->next = NULL;
	backlog_release(e);
	chan_level(c, false);
	/* id.event is not set here: it names the event a synchronous call
	 * holds (ucma_complete, rdma_get_request), which rdma_destroy_id acks.
	 * An asynchronous program's thread still holds this one. */
	pthread_mutex_unlock(&srn_cm.lock);
	*out = e;
	return 0;
}

void srn_cm_ack_event(struct srn_cm_event *e)
{
	struct srn_cm_id *id = e->owner;
	if (id->id.event == &e->ev)
		id->id.event = NULL;
	id->nevents--;
	pthread_cond_broadcast(&srn_cm.cond);
	free(e);
}
