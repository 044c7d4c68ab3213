/*
 * ep.c - the QP, SRQ and endpoint helpers of librdmacm: rdma_create_qp
 * (with CQs and completion channels when the caller gives none, as
 * rdma-core's ucma_create_cqs), rdma_create_ep / rdma_get_request for the
 * synchronous rdma_server/rdma_client style, and rdma_getaddrinfo.
 *
 * XRC (rdma_xserver -c x): an id of type XRC_RECV gets its QP and its
 * SRQs in the device's one XRC domain (dev->xrcd), as rdma-core does.
 * The receive QP has no CQs; the XRC SRQ made on the id gets the id's
 * receive CQ, so rdma_get_recv_comp sees what arrives through it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_verbs.h>     /* the rdma_*_srq prototypes */

#include "cm/cm.h"
#include "rdmacm/export.h"
#include "rdmacm/rdmacm.h"

static int ret_errno(int neg)
{
	if (neg >= 0)
		return neg;
	errno = -neg;
	return -1;
}

static struct srn_cm_id *priv(struct rdma_cm_id *id) { return (struct srn_cm_id *)id; }

static struct ibv_pd *default_pd(struct srn_cm_id *p)
{
	return p->dev ? p->dev->pd : NULL;
}

/* Destroy the id's CQs and channels that nothing uses any more.  One
 * still in use stays (an XRC SRQ's CQ outlives the QP: rdma_destroy_ep
 * destroys the QP first), and rdma_destroy_srq comes back for it. */
static void destroy_cqs(struct rdma_cm_id *id)
{
	if (id->recv_cq && ibv_destroy_cq(id->recv_cq) == 0) {
		if (id->send_cq == id->recv_cq)
			id->send_cq = NULL;
		id->recv_cq = NULL;
	}
	if (id->send_cq && ibv_destroy_cq(id->send_cq) == 0)
		id->send_cq = NULL;
	if (id->recv_cq_channel && !id->recv_cq && ibv_destroy_comp_channel(id->recv_cq_channel) == 0) {
		if (id->send_cq_channel == id->recv_cq_channel)
			id->send_cq_channel = NULL;
		id->recv_cq_channel = NULL;
	}
	if (id->send_cq_channel && !id->send_cq && ibv_destroy_comp_channel(id->send_cq_channel) == 0)
		id->send_cq_channel = NULL;
}

/* The device's XRC domain, opened at the first use (ucma_get_xrcd). */
static struct ibv_xrcd *dev_xrcd(struct srn_cm_id *p)
{
	if (!p->dev)
		return NULL;
	pthread_mutex_lock(&srn_cm.lock);
	if (!p->dev->xrcd) {
		struct ibv_xrcd_init_attr xa = { .comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
						 .fd = -1, .oflags = O_CREAT };
		p->dev->xrcd = ibv_open_xrcd(p->dev->ctx, &xa);
	}
	struct ibv_xrcd *x = p->dev->xrcd;
	pthread_mutex_unlock(&srn_cm.lock);
	return x;
}

static int create_cqs(struct rdma_cm_id *id, uint32_t send_size, uint32_t recv_size)
{
	if (recv_size) {
		id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->recv_cq_channel)
			goto err;
		id->recv_cq = ibv_create_cq(id->verbs, (int)recv_size, id, id->recv_cq_channel, 0);
		if (!id->recv_cq)
			goto err;
	}
	if (send_size) {
		id->send_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->send_cq_channel)
			goto err;
		id->send_cq = ibv_create_cq(id->verbs, (int)send_size, id, id->send_cq_channel, 0);
		if (!id->send_cq)
			goto err;
	}
	return 0;
err:
	destroy_cqs(id);
	return -ENOMEM;
}

SRN_RDMACM_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	struct srn_cm_id *p = priv(id);
	if (!id->verbs || !attr)
		return ret_errno(-EINVAL);
	if (id->qp)
		return ret_errno(-EINVAL);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd ? id->pd : default_pd(p);
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
	}
	if (!attr->pd || attr->pd->context != id->verbs)
		return ret_errno(-EINVAL);
	bool xrc_recv = attr->qp_type == IBV_QPT_XRC_RECV;
	if (xrc_recv && (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd)) {
		if (!(attr->xrcd = dev_xrcd(p)))
			return -1;
		attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
	}
	bool own_cqs = false;
	/* An XRC receive QP has no queues: its SRQs' CQs take its work. */
	if (!xrc_recv && ((!attr->recv_cq && !attr->srq) || !attr->send_cq)) {
		if (create_cqs(id, attr->send_cq ? 0 : attr->cap.max_send_wr,
			       attr->recv_cq || attr->srq ? 0 : attr->cap.max_recv_wr))
			return ret_errno(-ENOMEM);
		own_cqs = true;
		if (!attr->send_cq)
			attr->send_cq = id->send_cq;
		if (!attr->recv_cq && !attr->srq)
			attr->recv_cq = id->recv_cq;
	}
	if (id->srq && !attr->srq && !xrc_recv && attr->qp_type != IBV_QPT_XRC_SEND)
		attr->srq = id->srq;
	struct ibv_qp *qp = ibv_create_qp_ex(id->verbs, attr);
	if (!qp) {
		int e = errno;
		if (own_cqs)
			destroy_cqs(id);
		return ret_errno(-e);
	}
	id->qp = qp;
	id->pd = attr->pd;
	id->qp_type = attr->qp_type;
	pthread_mutex_lock(&srn_cm.lock);
	int ret;
	if (attr->qp_type == IBV_QPT_UD) {
		ret = srn_cm_qp_to(p, IBV_QPS_INIT);
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR };
		if (!ret)
			ret = -ibv_modify_qp(qp, &a, IBV_QP_STATE);
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = 0;
		if (!ret)
			ret = -ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
		if (!ret)
			srn_rdmacm_mc_qp_created(p);
	} else {
		ret = srn_cm_qp_to(p, IBV_QPS_INIT);
		/* A passive id already knows its peer: RTR/RTS come at accept. */
	}
	pthread_mutex_unlock(&srn_cm.lock);
	if (ret) {
		ibv_destroy_qp(qp);
		id->qp = NULL;
		if (own_cqs)
			destroy_cqs(id);
		return ret_errno(ret);
	}
	return 0;
}

SRN_RDMACM_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	if (!qp_init_attr)
		return ret_errno(-EINVAL);
	struct ibv_qp_init_attr_ex ex = { 0 };
	memcpy(&ex, qp_init_attr, sizeof(*qp_init_attr));
	ex.comp_mask = pd ? IBV_QP_INIT_ATTR_PD : 0;
	ex.pd = pd;
	int ret = rdma_create_qp_ex(id, &ex);
	if (!ret) {
		qp_init_attr->send_cq = ex.send_cq;
		qp_init_attr->recv_cq = ex.recv_cq;
		qp_init_attr->srq = ex.srq;
		qp_init_attr->cap = ex.cap;
	}
	return ret;
}

SRN_RDMACM_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (id->qp)
		ibv_destroy_qp(id->qp);
	id->qp = NULL;
	destroy_cqs(id);
}

SRN_RDMACM_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	if (!id->verbs || !attr)
		return ret_errno(-EINVAL);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd ? id->pd : default_pd(priv(id));
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)) {
		attr->srq_type = IBV_SRQT_BASIC;
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_TYPE;
	}
	if (attr->srq_type != IBV_SRQT_BASIC && attr->srq_type != IBV_SRQT_XRC)
		return ret_errno(-EOPNOTSUPP);   /* tag matching */
	bool own_cq = false;
	if (attr->srq_type == IBV_SRQT_XRC) {
		/* rdma-core's rdma_create_srq_ex: the device's domain, and a
		 * receive CQ of the id's for the SRQ when none is given. */
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd) {
			if (!(attr->xrcd = dev_xrcd(priv(id))))
				return -1;
		}
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
			if (!id->recv_cq) {
				if (create_cqs(id, 0, attr->attr.max_wr))
					return ret_errno(-ENOMEM);
				own_cq = true;
			}
			attr->cq = id->recv_cq;
		}
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	}
	struct ibv_srq *srq = ibv_create_srq_ex(id->verbs, attr);
	if (!srq) {
		int e = errno;
		if (own_cq)
			destroy_cqs(id);
		return ret_errno(-e);
	}
	id->srq = srq;
	id->pd = attr->pd;
	return 0;
}

SRN_RDMACM_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	if (!attr)
		return ret_errno(-EINVAL);
	/* An XRC receive id's SRQ is an XRC SRQ (rdma-core's rdma_create_srq). */
	struct ibv_srq_init_attr_ex ex = { .srq_context = attr->srq_context, .attr = attr->attr,
					   .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | (pd ? IBV_SRQ_INIT_ATTR_PD : 0),
					   .srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC
											 : IBV_SRQT_BASIC,
					   .pd = pd };
	int ret = rdma_create_srq_ex(id, &ex);
	if (!ret)
		attr->attr = ex.attr;
	return ret;
}

SRN_RDMACM_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	if (id->srq)
		ibv_destroy_srq(id->srq);
	id->srq = NULL;
	destroy_cqs(id);               /* an XRC SRQ's CQ (rdma-core does the same) */
}

SRN_RDMACM_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
				     struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cm_id;
	if (!id || !res)
		return ret_errno(-EINVAL);
	if (rdma_create_id(NULL, &cm_id, NULL, (enum rdma_port_space)res->ai_port_space))
		return -1;
	cm_id->qp_type = (enum ibv_qp_type)res->ai_qp_type;
	int ret;
	if (res->ai_flags & RAI_PASSIVE) {
		ret = rdma_bind_addr(cm_id, res->ai_src_addr);
		if (!ret && qp_init_attr) {
			struct srn_cm_id *p = priv(cm_id);
			p->ep_attr = malloc(sizeof(*qp_init_attr));
			if (!p->ep_attr) {
				errno = ENOMEM;
				ret = -1;
			} else {
				*p->ep_attr = *qp_init_attr;
				p->ep_attr->qp_type = (enum ibv_qp_type)res->ai_qp_type;
			}
		}
		cm_id->pd = pd;
	} else {
		ret = rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000);
		if (!ret)
			ret = rdma_resolve_route(cm_id, 2000);
		if (!ret && qp_init_attr) {
			qp_init_attr->qp_type = (enum ibv_qp_type)res->ai_qp_type;
			ret = rdma_create_qp(cm_id, pd, qp_init_attr);
		}
	}
	if (ret) {
		int e = errno;
		rdma_destroy_ep(cm_id);
		errno = e;
		return -1;
	}
	*id = cm_id;
	return 0;
}

SRN_RDMACM_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	rdma_destroy_id(id);
}

SRN_RDMACM_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct srn_cm_id *l = priv(listen);
	struct rdma_cm_event *ev;
	if (!l->sync)
		return ret_errno(-EINVAL);
	if (listen->event) {
		rdma_ack_cm_event(listen->event);
		listen->event = NULL;
	}
	if (rdma_get_cm_event(listen->channel, &ev))
		return -1;
	if (ev->status) {
		int e = ev->status < 0 ? -ev->status : ev->status;
		rdma_ack_cm_event(ev);
		return ret_errno(-e);
	}
	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		rdma_ack_cm_event(ev);
		return ret_errno(-EINVAL);
	}
	if (l->ep_attr) {
		struct ibv_qp_init_attr attr = *l->ep_attr;
		if (rdma_create_qp(ev->id, listen->pd, &attr)) {
			int e = errno;
			rdma_reject(ev->id, NULL, 0);
			struct rdma_cm_id *child = ev->id;
			rdma_ack_cm_event(ev);
			rdma_destroy_id(child);
			return ret_errno(-e);
		}
	}
	*id = ev->id;
	(*id)->event = ev;
	return 0;
}

/* Copy of an address into a new buffer for an rdma_addrinfo field. */
static int addr_dup(struct sockaddr **dst, socklen_t *dst_len, const struct sockaddr *src, socklen_t len)
{
	if (len > sizeof(struct sockaddr_storage))
		return -EINVAL;
	struct sockaddr_storage *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	memcpy(a, src, len);
	*dst = (struct sockaddr *)a;
	*dst_len = len;
	return 0;
}

/* Addresses from node/service through getaddrinfo, or (neither given, as
 * libfabric's verbs provider asks on the active side) the hints' own
 * destination; a source in the hints is kept when none was found, as
 * rdma-core does. */
SRN_RDMACM_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
				       const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	if (!res || (!node && !service && !hints))
		return ret_errno(-EINVAL);
	struct addrinfo ah = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
	int flags = hints ? hints->ai_flags : 0;
	if (hints)
		ah.ai_family = hints->ai_family;
	if (flags & RAI_NUMERICHOST)
		ah.ai_flags |= AI_NUMERICHOST;
	if (flags & RAI_PASSIVE)
		ah.ai_flags |= AI_PASSIVE;
	if (ah.ai_family != AF_UNSPEC && ah.ai_family != AF_INET && ah.ai_family != AF_INET6)
		return ret_errno(-EAFNOSUPPORT);   /* AF_IB: no SA here */
	if (node || service) {
		int gai = getaddrinfo(node, service, &ah, &ai);
		if (gai) {
			errno = gai == EAI_SYSTEM ? errno : ENODEV;
			return gai;
		}
	}
	struct rdma_addrinfo *r = calloc(1, sizeof(*r));
	if (!r) {
		freeaddrinfo(ai);
		return ret_errno(-ENOMEM);
	}
	int ret = 0;
	r->ai_flags = flags;
	r->ai_family = ai ? ai->ai_family : ah.ai_family;
	r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
	r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type
		       : (r->ai_port_space == RDMA_PS_UDP || r->ai_port_space == RDMA_PS_IPOIB ? IBV_QPT_UD
											: IBV_QPT_RC);
	if (ai && (flags & RAI_PASSIVE))
		ret = addr_dup(&r->ai_src_addr, &r->ai_src_len, ai->ai_addr, ai->ai_addrlen);
	else if (ai)
		ret = addr_dup(&r->ai_dst_addr, &r->ai_dst_len, ai->ai_addr, ai->ai_addrlen);
	else if (hints->ai_dst_addr && hints->ai_dst_len)
		ret = addr_dup(&r->ai_dst_addr, &r->ai_dst_len, hints->ai_dst_addr, hints->ai_dst_len);
	if (!ret && !r->ai_src_addr && hints && hints->ai_src_addr && hints->ai_src_len)
		ret = addr_dup(&r->ai_src_addr, &r->ai_src_len, hints->ai_src_addr, hints->ai_src_len);
	if (!ret && r->ai_family == AF_UNSPEC && (r->ai_src_addr || r->ai_dst_addr))
		r->ai_family = (r->ai_src_addr ? r->ai_src_addr : r->ai_dst_addr)->sa_family;
	freeaddrinfo(ai);
	if (ret) {
		rdma_freeaddrinfo(r);
		return ret_errno(ret);
	}
	*res = r;
	return 0;
}

SRN_RDMACM_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *n = res->ai_next;
		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = n;
	}
}
