/*
 * api.c - librdmacm's rdma_* entry points (RDMACM_1.0 .. 1.3) on softrnic's
 * connection manager (src/cm/).  Argument checks and librdmacm's
 * conventions live here: -errno from the CM becomes -1 + errno, and ids
 * created without a channel are synchronous (each call waits for its
 * event, as rdma-core's ucma_complete does).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cm/cm.h"
#include "rdmacm/export.h"
#include "rdmacm/rdmacm.h"
#include "wire/roce_hdr.h"

static int ret_errno(int neg)
{
	if (neg >= 0)
		return neg;
	errno = -neg;
	return -1;
}

static struct srn_cm_id *priv(struct rdma_cm_id *id)
{
	return (struct srn_cm_id *)id;   /* id is the first member */
}

static void lock(void) { pthread_mutex_lock(&srn_cm.lock); }
static void unlock(void) { pthread_mutex_unlock(&srn_cm.lock); }

/* A synchronous id's call waits for its event (ucma_complete). */
static int complete(struct srn_cm_id *p)
{
	if (!p->sync)
		return 0;
	if (p->id.event) {
		rdma_ack_cm_event(p->id.event);
		p->id.event = NULL;
	}
	struct srn_cm_event *e;
	int ret = srn_cm_get_event(p->chan, &e);
	if (ret)
		return ret_errno(ret);
	p->id.event = &e->ev;
	if (e->ev.status) {
		if (e->ev.event == RDMA_CM_EVENT_REJECTED)
			return ret_errno(-ECONNREFUSED);
		return ret_errno(e->ev.status < 0 ? e->ev.status : -e->ev.status);
	}
	return 0;
}

int srn_rdmacm_complete(struct srn_cm_id *p)
{
	return complete(p);
}

SRN_RDMACM_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	lock();
	int ret = srn_cm_init();
	struct srn_cm_chan *c = ret ? NULL : srn_cm_chan_new();
	unlock();
	if (!c) {
		errno = ret ? -ret : ENOMEM;
		return NULL;
	}
	return &c->ch;
}

SRN_RDMACM_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	if (!channel)
		return;
	lock();
	if (srn_cm_chan_live(channel))   /* destroyed twice: nothing left to do */
		srn_cm_chan_free((struct srn_cm_chan *)channel);
	unlock();
}

static enum ibv_qp_type qpt_of(enum rdma_port_space ps)
{
	return ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;
}

SRN_RDMACM_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
				     void *context, enum rdma_port_space ps)
{
	if (!id || (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP && ps != RDMA_PS_IPOIB && ps != RDMA_PS_IB))
		return ret_errno(-EINVAL);
	lock();
	int ret = srn_cm_init();
	struct srn_cm_id *p = NULL;
	if (!ret && channel && !srn_cm_chan_live(channel))
		ret = -EINVAL;          /* destroyed, or never ours */
	if (!ret) {
		p = srn_cm_id_new((struct srn_cm_chan *)channel, context, ps, qpt_of(ps));
		if (!p)
			ret = -ENOMEM;
	}
	unlock();
	if (ret)
		return ret_errno(ret);
	*id = &p->id;
	return 0;
}

SRN_RDMACM_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct srn_cm_id *p = priv(id);
	if (p->id.event) {
		rdma_ack_cm_event(p->id.event);
		p->id.event = NULL;
	}
	lock();
	srn_cm_abort(p);
	/* Children with a CONNECT_REQUEST nobody fetched go with the listener. */
	for (struct srn_cm_id *c = srn_cm.ids, *n; c; c = n) {
		n = c->next;
		if (c->listener == p && c->nevents > 0 && !c->destroying) {
			struct srn_cm_event *e;
			bool queued = false;
			for (e = c->req_chan ? c->req_chan->head : c->chan->head; e; e = e->next)
				queued |= e->owner == c;
			if (queued && c->nevents == 1) {
				srn_cm_abort(c);
				srn_cm_id_free(c);
			}
		}
	}
	p->destroying = true;
	for (struct srn_cm_id *c = srn_cm.ids; c; c = c->next) {
		if (c->listener == p)
			c->listener = NULL;
		if (p->sync && c->req_chan == p->chan)
			c->req_chan = NULL;    /* the listener's channel goes with it */
	}
	/* Events nobody fetched go with the id; fetched ones must be acked. */
	for (;;) {
		int queued = 0;
		for (struct srn_cm_event *e = p->chan->head; e; e = e->next)
			queued += e->owner == p;
		if (p->req_chan && p->req_chan != p->chan)
			for (struct srn_cm_event *e = p->req_chan->head; e; e = e->next)
				queued += e->owner == p;
		if (p->nevents <= queued)
			break;
		pthread_cond_wait(&srn_cm.cond, &srn_cm.lock);
	}
	srn_rdmacm_mc_forget(p);
	srn_cm_id_free(p);
	unlock();
	return 0;
}

SRN_RDMACM_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct srn_cm_id *p = priv(id);
	if (!addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
		return ret_errno(addr ? -EAFNOSUPPORT : -EINVAL);
	lock();
	int ret = 0;
	struct sockaddr_storage ss = { 0 };
	memcpy(&ss, addr, addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
	struct srn_cm_dev *dev = NULL;
	bool any = addr->sa_family == AF_INET ? ((struct sockaddr_in *)addr)->sin_addr.s_addr == 0
		   : IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)addr)->sin6_addr);
	if (p->state != SRN_CMS_IDLE)
		ret = -EINVAL;
	else if (!any && !(dev = srn_cm_dev_by_addr(addr)) && !srn_cm_bind_without_dev(addr))
		ret = -EADDRNOTAVAIL;   /* no softrnic device has this address */
	else
		ret = srn_cm_port_alloc(p, (struct sockaddr *)&ss);
	if (!ret) {
		memcpy(&p->id.route.addr.src_storage, &ss, sizeof(ss));
		/* An explicit port is also held against this user's other
		 * processes (ports.c). */
		if (((struct sockaddr_in *)addr)->sin_port)
			ret = srn_cm_port_reserve(p, false);
		if (ret) {
			memset(&p->id.route.addr.src_storage, 0, sizeof(ss));
			p->owns_port = false;
		}
	}
	if (!ret) {
		p->dev = dev;
		if (dev) {
			p->id.verbs = dev->ctx;
			p->id.pd = p->id.pd ? p->id.pd : dev->pd;   /* rdma-core: the device's PD */
			p->id.port_num = 1;
			memcpy(p->id.route.addr.addr.ibaddr.sgid.raw, dev->gid, 16);
		}
		p->state = SRN_CMS_ADDR_BOUND;
	}
	unlock();
	return ret_errno(ret);
}

SRN_RDMACM_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src,
					struct sockaddr *dst, int timeout_ms)
{
	struct srn_cm_id *p = priv(id);
	if (!dst || (dst->sa_family != AF_INET && dst->sa_family != AF_INET6))
		return ret_errno(dst ? -EAFNOSUPPORT : -EINVAL);
	if (src && p->state == SRN_CMS_IDLE && rdma_bind_addr(id, src))
		return -1;
	lock();
	int ret = 0;
	if (p->state != SRN_CMS_IDLE && p->state != SRN_CMS_ADDR_BOUND) {
		unlock();
		return ret_errno(-EINVAL);
	}
	const struct sockaddr *bound = p->state == SRN_CMS_ADDR_BOUND ? &p->id.route.addr.src_addr : NULL;
	struct srn_cm_dev *dev = srn_cm_dev_route(bound, dst);
	memcpy(&p->id.route.addr.dst_storage, dst,
	       dst->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
	if (!dev || dev->addr.ss_family != dst->sa_family) {
		/* Nothing reaches it: the kernel reports that as an event too. */
		p->state = bound ? SRN_CMS_ADDR_BOUND : SRN_CMS_IDLE;
		srn_cm_event_queue(p, RDMA_CM_EVENT_ADDR_ERROR, -EHOSTUNREACH, NULL, 0);
		unlock();
		return complete(p);
	}
	struct sockaddr_storage ss = dev->addr;
	if (bound)
		((struct sockaddr_in *)&ss)->sin_port = ((const struct sockaddr_in *)bound)->sin_port;
	if (!((struct sockaddr_in *)&ss)->sin_port)
		ret = srn_cm_port_alloc(p, (struct sockaddr *)&ss);
	if (!ret) {
		memcpy(&p->id.route.addr.src_storage, &ss, sizeof(ss));
		p->dev = dev;
		p->id.verbs = dev->ctx;
		p->id.pd = p->id.pd ? p->id.pd : dev->pd;
		p->id.port_num = 1;
		srn_cm_addr_to_gid(dst, p->peer_gid);
		memcpy(p->id.route.addr.addr.ibaddr.sgid.raw, dev->gid, 16);
		memcpy(p->id.route.addr.addr.ibaddr.dgid.raw, p->peer_gid, 16);
		p->id.route.addr.addr.ibaddr.pkey = htobe16(0xffff);
		p->state = SRN_CMS_ADDR_RESOLVED;
		srn_cm_event_queue(p, RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, 0);
	}
	unlock();
	return ret ? ret_errno(ret) : complete(p);
}

SRN_RDMACM_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct srn_cm_id *p = priv(id);
	lock();
	if (p->state != SRN_CMS_ADDR_RESOLVED) {
		unlock();
		return ret_errno(-EINVAL);
	}
	srn_cm_fill_path(p, p->dev->mtu);
	p->state = SRN_CMS_ROUTE_RESOLVED;
	srn_cm_event_queue(p, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, 0);
	unlock();
	return complete(p);
}

SRN_RDMACM_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct srn_cm_id *p = priv(id);
	if (p->state == SRN_CMS_IDLE) {
		struct sockaddr_in any = { .sin_family = AF_INET };
		if (rdma_bind_addr(id, (struct sockaddr *)&any))
			return -1;
	}
	lock();
	int ret = 0;
	if (p->state != SRN_CMS_ADDR_BOUND)
		ret = -EINVAL;
	else    /* a listener holds its port alone, here and in our other processes */
		ret = srn_cm_listen_check(p);
	if (!ret) {
		/* ucma: a backlog out of (0, max_backlog) is max_backlog, 1024 */
		p->backlog = backlog > 0 && backlog < 1024 ? backlog : 1024;
		p->state = SRN_CMS_LISTEN;
		srn_cm_held_replay();
	}
	unlock();
	return ret_errno(ret);
}

static void default_param(struct srn_cm_id *p, const struct rdma_conn_param *in, struct rdma_conn_param *out)
{
	if (in)
		*out = *in;
	else
		*out = (struct rdma_conn_param){ .responder_resources = RDMA_MAX_RESP_RES,
			.initiator_depth = RDMA_MAX_INIT_DEPTH, .retry_count = SRN_RETRY_CNT_MAX,
			.rnr_retry_count = SRN_RNR_RETRY_INFINITE };
	if (out->responder_resources == RDMA_MAX_RESP_RES)
		out->responder_resources = p->dev->max_rd_atomic;
	if (out->initiator_depth == RDMA_MAX_INIT_DEPTH)
		out->initiator_depth = p->dev->max_rd_atomic;
}

SRN_RDMACM_EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	struct srn_cm_id *p = priv(id);
	struct rdma_conn_param cp;
	lock();
	int ret = -EINVAL;
	if (p->dev) {
		default_param(p, conn_param, &cp);
		if (cp.responder_resources > p->dev->max_rd_atomic ||
		    cp.initiator_depth > p->dev->max_rd_atomic)
			ret = -EINVAL;     /* ucma_valid_param */
		else
			ret = srn_cm_connect(p, &cp);
	}
	unlock();
	return ret ? ret_errno(ret) : complete(p);
}

SRN_RDMACM_EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	struct srn_cm_id *p = priv(id);
	struct rdma_conn_param cp;
	lock();
	int ret = -EINVAL;
	if (p->dev) {
		if (conn_param)
			cp = *conn_param;
		else
			cp = (struct rdma_conn_param){ .responder_resources = p->resp_res,
				.initiator_depth = p->init_depth,
				.rnr_retry_count = SRN_RNR_RETRY_INFINITE };
		ret = srn_cm_accept(p, &cp);
	}
	unlock();
	/* A UD accept is one SIDR_REP and no event (librdmacm does not wait). */
	if (ret || p->id.qp_type == IBV_QPT_UD)
		return ret_errno(ret);
	return complete(p);
}

SRN_RDMACM_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t len)
{
	lock();
	int ret = srn_cm_reject(priv(id), private_data, len);
	unlock();
	return ret_errno(ret);
}

SRN_RDMACM_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data, uint8_t len)
{
	return rdma_reject(id, private_data, len);
}

SRN_RDMACM_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	lock();
	int ret = srn_cm_establish(priv(id));
	unlock();
	return ret_errno(ret);
}

SRN_RDMACM_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	struct srn_cm_id *p = priv(id);
	lock();
	/* Data arrived before the RTU (IBV_EVENT_COMM_EST): established. */
	if (event == IBV_EVENT_COMM_EST && p->state == SRN_CMS_REP_SENT) {
		srn_cm_timer_stop(p);
		p->state = SRN_CMS_ESTABLISHED;
		srn_cm_event_queue(p, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0);
	}
	unlock();
	return 0;
}

SRN_RDMACM_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	struct srn_cm_id *p = priv(id);
	lock();
	bool wait = (p->state == SRN_CMS_ESTABLISHED || p->state == SRN_CMS_REP_SENT ||
		     p->state == SRN_CMS_DREQ_RCVD) && p->id.qp_type != IBV_QPT_UD;
	int ret = srn_cm_disconnect(p);
	unlock();
	if (ret)
		return ret_errno(ret);
	return wait ? complete(p) : 0;
}

SRN_RDMACM_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
					int *qp_attr_mask)
{
	lock();
	int ret = srn_cm_init_qp_attr(priv(id), qp_attr, qp_attr_mask);
	unlock();
	return ret_errno(ret);
}

SRN_RDMACM_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	if (!channel || !event)
		return ret_errno(-EINVAL);
	struct srn_cm_event *e;
	int ret = srn_cm_get_event((struct srn_cm_chan *)channel, &e);
	if (ret)
		return ret_errno(ret);
	*event = &e->ev;
	return 0;
}

SRN_RDMACM_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (!event)
		return ret_errno(-EINVAL);
	lock();
	srn_cm_ack_event((struct srn_cm_event *)event);
	unlock();
	return 0;
}

SRN_RDMACM_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return id->route.addr.src_sin.sin_port;
}

SRN_RDMACM_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return id->route.addr.dst_sin.sin_port;
}

SRN_RDMACM_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	lock();
	int ret = srn_cm_init();
	struct ibv_context **list = ret ? NULL : calloc((size_t)srn_cm.ndev + 1, sizeof(*list));
	if (list)
		for (int i = 0; i < srn_cm.ndev; i++)
			list[i] = srn_cm.dev[i].ctx;
	if (num_devices)
		*num_devices = list ? srn_cm.ndev : 0;
	unlock();
	if (!list)
		errno = ret ? -ret : ENOMEM;
	return list;
}

SRN_RDMACM_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}

SRN_RDMACM_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const names[] = {
		"RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ADDR_ERROR",
		"RDMA_CM_EVENT_ROUTE_RESOLVED", "RDMA_CM_EVENT_ROUTE_ERROR",
		"RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
		"RDMA_CM_EVENT_CONNECT_ERROR", "RDMA_CM_EVENT_UNREACHABLE",
		"RDMA_CM_EVENT_REJECTED", "RDMA_CM_EVENT_ESTABLISHED",
		"RDMA_CM_EVENT_DISCONNECTED", "RDMA_CM_EVENT_DEVICE_REMOVAL",
		"RDMA_CM_EVENT_MULTICAST_JOIN", "RDMA_CM_EVENT_MULTICAST_ERROR",
		"RDMA_CM_EVENT_ADDR_CHANGE", "RDMA_CM_EVENT_TIMEWAIT_EXIT",
	};
	if ((unsigned)event < sizeof(names) / sizeof(names[0]))
		return names[event];
	return "UNKNOWN EVENT";
}

SRN_RDMACM_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval,
				      size_t optlen)
{
	struct srn_cm_id *p = priv(id);
	if (!optval)
		return ret_errno(-EINVAL);
	if (level != RDMA_OPTION_ID)
		return ret_errno(-EOPNOTSUPP);   /* RDMA_OPTION_IB_PATH: no SA paths on RoCE here */
	lock();
	int ret = 0;
	switch (optname) {
	case RDMA_OPTION_ID_TOS:
		if (optlen != sizeof(uint8_t)) { ret = -EINVAL; break; }
		p->tos = *(uint8_t *)optval;
		p->tos_set = true;
		break;
	case RDMA_OPTION_ID_REUSEADDR:
		if (optlen != sizeof(int)) { ret = -EINVAL; break; }
		p->reuseaddr = *(int *)optval != 0;
		break;
	case RDMA_OPTION_ID_AFONLY:
		if (optlen != sizeof(int)) { ret = -EINVAL; break; }
		p->afonly = *(int *)optval != 0;
		break;
	case RDMA_OPTION_ID_ACK_TIMEOUT:
		if (optlen != sizeof(uint8_t)) { ret = -EINVAL; break; }
		p->ack_timeout = *(uint8_t *)optval & SRN_ACK_TIMEOUT_MASK;
		p->ack_timeout_set = true;
		break;
	default:
		ret = -ENOSYS;
	}
	unlock();
	return ret_errno(ret);
}

SRN_RDMACM_EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	struct srn_cm_id *p = priv(id);
	/* A synchronous id still holds the event of its last call (libfabric
	 * migrates one right after rdma_resolve_addr): ack it, as rdma-core
	 * does, so it does not count as outstanding below. */
	if (p->sync && id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	lock();
	if (channel && !srn_cm_chan_live(channel)) {
		unlock();
		return ret_errno(-EINVAL);
	}
	struct srn_cm_chan *to = channel ? (struct srn_cm_chan *)channel : srn_cm_chan_new();
	int ret = 0;
	if (!to) {
		ret = -ENOMEM;
	} else if (p->nevents > 0) {
		ret = -EBUSY;          /* events outstanding: rdma-core waits; refuse instead */
		if (!channel)
			srn_cm_chan_free(to);
	} else {
		struct srn_cm_chan *from = p->chan;
		if (p->sync)
			srn_cm_chan_free(from);
		srn_cm_chan_unref(from);
		p->chan = to;
		to->nids++;
		p->sync = channel == NULL;
		p->id.channel = &to->ch;
	}
	unlock();
	return ret_errno(ret);
}
