/*
 * mcast.c - rdma_join_multicast, rdma_join_multicast_ex and
 * rdma_leave_multicast on RoCE.
 *
 * RoCE has no subnet administrator: as the kernel's rdma_cm does for
 * RoCEv2 (cma_iboe_join_multicast), the group's MGID is the IP multicast
 * address itself (IPv4-mapped for IPv4, the address for IPv6) and the
 * join happens at the IP level.  Here the IP join is the QP's: attaching
 * the id's UD QP to the MGID (ibv_attach_mcast) opens the device's socket
 * on the group (link/mcast.c), and detaching the last QP leaves it.  A
 * send-only member attaches nothing; it only needs the address handle.
 *
 * The MULTICAST_JOIN event carries what a sender needs (param.ud): an
 * ah_attr to the MGID, the multicast QPN 0xFFFFFF and the id's Q_Key
 * (RDMA_UDP_QKEY), with the join's context as private_data, as
 * librdmacm's ucma_process_join hands it out.  librdmacm attaches the QP
 * when the program fetches that event; here the attach happens at the
 * join, or at rdma_create_qp for groups joined before the QP existed, so
 * a QP is a member as soon as either exists.
 *
 * Each id keeps its joins in a list (srn_cm_id.mcs) under srn_cm.lock.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cm/cm.h"
#include "rdmacm/export.h"
#include "rdmacm/rdmacm.h"
#include "wire/roce_hdr.h"

struct srn_cm_mc {
	struct srn_cm_mc *next;
	struct sockaddr_storage addr;  /* as the caller named the group */
	union ibv_gid mgid;
	void *context;
	bool sendonly;
	bool attached;                 /* the id's QP is a member */
};

/* RoCEv2 hop limit of a group's address handle (IPV6_DEFAULT_HOPLIMIT,
 * as cma_iboe_join_multicast gives IPv4 groups). */
#define MC_HOP_LIMIT 64

static int ret_errno(int neg)
{
	if (neg >= 0)
		return neg;
	errno = -neg;
	return -1;
}

static size_t addr_len(const struct sockaddr *a)
{
	if (!a)
		return 0;
	if (a->sa_family == AF_INET)
		return sizeof(struct sockaddr_in);
	if (a->sa_family == AF_INET6)
		return sizeof(struct sockaddr_in6);
	return 0;                      /* AF_IB: no SA-assigned groups on RoCE */
}

/* The MGID of an IP multicast address (cma_iboe_set_mgid, RoCEv2). */
static int mgid_of(const struct sockaddr *a, union ibv_gid *mgid)
{
	memset(mgid, 0, sizeof(*mgid));
	if (a->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)a;
		if (!IN_MULTICAST(ntohl(s->sin_addr.s_addr)))
			return -EINVAL;
		mgid->raw[10] = mgid->raw[11] = 0xff;
		memcpy(mgid->raw + 12, &s->sin_addr, 4);
		return 0;
	}
	const struct sockaddr_in6 *s6 = (const void *)a;
	if (!IN6_IS_ADDR_MULTICAST(&s6->sin6_addr))
		return -EINVAL;
	memcpy(mgid->raw, &s6->sin6_addr, 16);
	return 0;
}

static int attach(struct srn_cm_id *p, struct srn_cm_mc *mc)
{
	if (mc->sendonly || mc->attached || !p->id.qp)
		return 0;
	int ret = ibv_attach_mcast(p->id.qp, &mc->mgid, 0);
	if (ret)
		return -ret;
	mc->attached = true;
	return 0;
}

static void fill_join_event(struct srn_cm_id *p, struct srn_cm_mc *mc, struct rdma_cm_event *ev)
{
	struct rdma_ud_param *ud = &ev->param.ud;
	ud->private_data = mc->context;
	ud->private_data_len = 0;
	srn_cm_ud_ah_attr(p, mc->mgid.raw, &ud->ah_attr);
	ud->ah_attr.grh.hop_limit = MC_HOP_LIMIT;
	ud->qp_num = SRN_QPN_MULTICAST;
	ud->qkey = srn_cm_ud_qkey(p);
}

static int join(struct rdma_cm_id *id, struct sockaddr *addr, bool sendonly, void *context)
{
	struct srn_cm_id *p = (struct srn_cm_id *)id;
	size_t len = addr_len(addr);
	if (!len)
		return ret_errno(-EINVAL);
	struct srn_cm_mc *mc = calloc(1, sizeof(*mc));
	if (!mc)
		return ret_errno(-ENOMEM);
	memcpy(&mc->addr, addr, len);
	mc->context = context;
	mc->sendonly = sendonly;
	pthread_mutex_lock(&srn_cm.lock);
	int ret = 0;
	/* rdma_join_multicast: a UD id with a device, bound or resolved. */
	if (id->qp_type != IBV_QPT_UD || !p->dev ||
	    (p->state != SRN_CMS_ADDR_BOUND && p->state != SRN_CMS_ADDR_RESOLVED))
		ret = -EINVAL;
	else if (addr->sa_family != p->dev->addr.ss_family)
		ret = -EINVAL;         /* the group's family is the device's */
	if (!ret)
		ret = mgid_of(addr, &mc->mgid);
	if (!ret)
		ret = attach(p, mc);
	struct srn_cm_event *e = NULL;
	if (!ret) {
		e = srn_cm_event_queue(p, RDMA_CM_EVENT_MULTICAST_JOIN, 0, NULL, 0);
		if (!e)
			ret = -ENOMEM;
	}
	if (ret) {
		if (mc->attached)
			ibv_detach_mcast(p->id.qp, &mc->mgid, 0);
		pthread_mutex_unlock(&srn_cm.lock);
		free(mc);
		return ret_errno(ret);
	}
	fill_join_event(p, mc, &e->ev);
	mc->next = p->mcs;
	p->mcs = mc;
	pthread_mutex_unlock(&srn_cm.lock);
	return srn_rdmacm_complete(p);
}

SRN_RDMACM_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	return join(id, addr, false, context);
}

SRN_RDMACM_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *attr,
					     void *context)
{
	/* librdmacm's checks, in its order. */
	if (!attr)
		return ret_errno(-EINVAL);
	if (attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED)
		return ret_errno(-ENOTSUP);
	if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS))
		return ret_errno(-EINVAL);
	if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
	    attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
		return ret_errno(-EINVAL);
	return join(id, attr->addr, attr->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER, context);
}

SRN_RDMACM_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct srn_cm_id *p = (struct srn_cm_id *)id;
	size_t len = addr_len(addr);
	if (!len)
		return ret_errno(-EINVAL);
	pthread_mutex_lock(&srn_cm.lock);
	struct srn_cm_mc **pp = &p->mcs;
	while (*pp && memcmp(&(*pp)->addr, addr, len) != 0)
		pp = &(*pp)->next;
	struct srn_cm_mc *mc = *pp;
	if (mc)
		*pp = mc->next;
	pthread_mutex_unlock(&srn_cm.lock);
	if (!mc)
		return ret_errno(-EADDRNOTAVAIL);
	/* The QP leaves the group; the last member's leave closes the socket. */
	if (mc->attached && id->qp)
		ibv_detach_mcast(id->qp, &mc->mgid, 0);
	free(mc);
	return 0;
}

void srn_rdmacm_mc_qp_created(struct srn_cm_id *p)
{
	for (struct srn_cm_mc *mc = p->mcs; mc; mc = mc->next)
		attach(p, mc);         /* a failure leaves this one group unjoined */
}

void srn_rdmacm_mc_forget(struct srn_cm_id *p)
{
	while (p->mcs) {
		struct srn_cm_mc *mc = p->mcs;
		p->mcs = mc->next;
		free(mc);
	}
}
