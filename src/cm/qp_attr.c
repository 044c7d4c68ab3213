/*
 * qp_attr.c - the QP attributes a connection gives its QP, and the moves
 * through INIT, RTR and RTS that librdmacm makes with them
 * (rdma_init_qp_attr; rdma-core's ucma_modify_qp_rtr/rts).
 *
 * Which attributes each QP type takes follows the kernel's CM
 * (cm_init_qp_init_attr, cm_init_qp_rtr_attr, cm_init_qp_rts_attr) and
 * the IBTA attribute table our verbs enforce (core/qp_rules.c):
 *
 *   type       RTR adds                          RTS adds
 *   RC         responder: max_dest_rd_atomic,    requester: timeout, retry,
 *              min_rnr_timer                     rnr_retry, max_rd_atomic
 *   UC         -                                 -
 *   XRC_SEND   - (it never responds)             requester, as RC
 *   XRC_RECV   responder, as RC                  timeout only (it never sends
 *                                                requests, only ACKs)
 *
 * All functions here must hold srn_cm.lock.
 */
#include "cm/qp_attr.h"
#include "cm/qp1.h"

#include <errno.h>
#include <string.h>

/* Does this QP type answer requests (RDMA Read/Atomic resources, RNR)? */
static bool is_responder(enum ibv_qp_type t)
{
	return t == IBV_QPT_RC || t == IBV_QPT_XRC_RECV;
}

/* Does this QP type send requests that are acknowledged and retried? */
static bool is_requester(enum ibv_qp_type t)
{
	return t == IBV_QPT_RC || t == IBV_QPT_XRC_SEND;
}

uint32_t srn_cm_ud_qkey(const struct srn_cm_id *id)
{
	return id->qkey ? id->qkey : RDMA_UDP_QKEY;
}

/* UD QPs (cma_ib_init_qp_attr, ucma_init_ud_qp): INIT takes P_Key index,
 * port and the id's Q_Key; RTR nothing more; RTS an SQ PSN of 0.  (The
 * kernel answers every state with the INIT set, whose port a QP in INIT
 * would refuse; these are what the transitions need.) */
int srn_cm_ud_init_qp_attr(struct srn_cm_id *id, struct ibv_qp_attr *a, int *mask)
{
	switch (a->qp_state) {
	case IBV_QPS_INIT:
		a->pkey_index = 0;
		a->port_num = 1;
		a->qkey = srn_cm_ud_qkey(id);
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
		return 0;
	case IBV_QPS_RTR:
		*mask = IBV_QP_STATE;
		return 0;
	case IBV_QPS_RTS:
		a->sq_psn = 0;
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		return 0;
	default:
		return -EINVAL;
	}
}

void srn_cm_fill_path(struct srn_cm_id *id, enum ibv_mtu mtu)
{
	struct ibv_sa_path_rec *p = &id->path;
	memset(p, 0, sizeof(*p));
	memcpy(p->sgid.raw, id->dev->gid, 16);
	memcpy(p->dgid.raw, id->peer_gid, 16);
	p->hop_limit = 64;
	p->traffic_class = id->tos;
	p->reversible = 1;
	p->pkey = htobe16(0xffff);
	p->mtu_selector = 2;
	p->mtu = mtu;
	p->rate_selector = 2;
	p->rate = 3;
	p->packet_life_time_selector = 2;
	p->packet_life_time = CMA_PACKET_LIFETIME;
	id->id.route.path_rec = p;
	id->id.route.num_paths = 1;
}

int srn_cm_init_qp_attr(struct srn_cm_id *id, struct ibv_qp_attr *a, int *mask)
{
	enum ibv_qp_type t = id->id.qp_type;
	if (t == IBV_QPT_UD)
		return srn_cm_ud_init_qp_attr(id, a, mask);
	bool conn = id->state >= SRN_CMS_REQ_SENT;
	switch (a->qp_state) {
	case IBV_QPS_INIT:
		a->pkey_index = 0;
		a->port_num = 1;
		/* Before a connection: no remote access (cma_ib_init_qp_attr);
		 * with one: the CM's (cm_init_qp_init_attr). */
		a->qp_access_flags = !conn ? 0 : IBV_ACCESS_REMOTE_WRITE |
			(id->resp_res ? IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC : 0);
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		return 0;
	case IBV_QPS_RTR:
		if (!conn)
			return -EINVAL;
		memset(&a->ah_attr, 0, sizeof(a->ah_attr));
		a->ah_attr.is_global = 1;
		a->ah_attr.port_num = 1;
		memcpy(a->ah_attr.grh.dgid.raw, id->peer_gid, 16);
		a->ah_attr.grh.hop_limit = 64;
		a->ah_attr.grh.traffic_class = id->tos;
		a->path_mtu = id->mtu;
		a->dest_qp_num = id->remote_qpn;
		a->rq_psn = id->recv_psn;
		*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (is_responder(t)) {
			a->max_dest_rd_atomic = id->resp_res;
			a->min_rnr_timer = 0;   /* rdma_cm's default (655 ms) */
			*mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
		return 0;
	case IBV_QPS_RTS:
		if (!conn)
			return -EINVAL;
		a->sq_psn = id->send_psn;
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		if (is_requester(t)) {
			a->retry_cnt = id->retry_count;
			a->rnr_retry = id->rnr_retry;
			a->max_rd_atomic = id->init_depth;
			*mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
		}
		if (is_requester(t) || t == IBV_QPT_XRC_RECV) {
			a->timeout = id->ack_timeout;
			*mask |= IBV_QP_TIMEOUT;
		}
		return 0;
	default:
		return -EINVAL;
	}
}

/* Move the id's QP (librdmacm's ucma_modify_qp_rtr/rts/err): INIT is
 * refreshed before RTR so the access rights follow the connection. */
int srn_cm_qp_to(struct srn_cm_id *id, enum ibv_qp_state s)
{
	struct ibv_qp *qp = id->id.qp;
	struct ibv_qp_attr a;
	int mask, ret;
	if (!qp)
		return 0;
	if (s == IBV_QPS_ERR) {
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_ERR;
		return -ibv_modify_qp(qp, &a, IBV_QP_STATE);
	}
	if (s == IBV_QPS_RTR) {
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_INIT;
		if ((ret = srn_cm_init_qp_attr(id, &a, &mask)) || (ret = -ibv_modify_qp(qp, &a, mask)))
			return ret;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = s;
	if ((ret = srn_cm_init_qp_attr(id, &a, &mask)))
		return ret;
	return -ibv_modify_qp(qp, &a, mask);
}
