/*
 * qp_up.c - one QP from RESET to RTS (see qp_up.h).  The attribute masks
 * are the ones each transition requires or allows for the QP's type
 * (IBTA 11.2.4.2, rdma-core's qp_state_table): RC adds the READ/atomic
 * depth and its timers, UC only the path, UD only the Q_Key.
 */
#include "qp_up.h"

#include <stdbool.h>
#include <string.h>

struct srn_qp_up_attr srn_qp_up_defaults(void)
{
	return (struct srn_qp_up_attr){
		.port = 1, .sgid_index = 0, .hop_limit = 64, .mtu = IBV_MTU_1024,
		.access = 0, .max_rd_atomic = 1, .min_rnr_timer = 1, .timeout = 14,
		.retry_cnt = 7, .rnr_retry = 7, .qkey = 0x11111111u,
	};
}

void srn_qp_up_ah_attr(struct ibv_ah_attr *ah, const struct srn_qp_up_attr *a,
		       const struct srn_qp_up_peer *peer)
{
	memset(ah, 0, sizeof(*ah));
	/* RoCE: the GRH carries the address, so is_global is mandatory. */
	ah->is_global = 1;
	ah->grh.dgid = peer->gid;
	ah->grh.sgid_index = a->sgid_index;
	ah->grh.hop_limit = a->hop_limit;
	ah->dlid = peer->lid;
	ah->port_num = a->port;
}

/* UD: no peer in the QP, no path MTU, no ACKs; only the Q_Key that
 * incoming datagrams must carry (INIT) and the first PSN (RTS). */
static int ud_up(struct ibv_qp *qp, const struct srn_qp_up_attr *a, uint32_t sq_psn,
		 const char **step)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = a->port, .qkey = a->qkey,
	};
	*step = "INIT";
	int ret = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				IBV_QP_QKEY);
	if (ret)
		return -ret;
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	*step = "RTR";
	ret = ibv_modify_qp(qp, &attr, IBV_QP_STATE);
	if (ret)
		return -ret;
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = sq_psn;
	*step = "RTS";
	ret = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
	return ret ? -ret : 0;
}

int srn_qp_up(struct ibv_qp *qp, const struct srn_qp_up_attr *a, uint32_t sq_psn,
	      const struct srn_qp_up_peer *peer, const char **step)
{
	if (qp->qp_type == IBV_QPT_UD)
		return ud_up(qp, a, sq_psn, step);
	bool rc = qp->qp_type == IBV_QPT_RC;
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = a->port,
		.qp_access_flags = a->access,
	};
	*step = "INIT";
	int ret = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				IBV_QP_ACCESS_FLAGS);
	if (ret)
		return -ret;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	attr.path_mtu = a->mtu;
	attr.dest_qp_num = peer->qpn;
	attr.rq_psn = peer->psn;
	srn_qp_up_ah_attr(&attr.ah_attr, a, peer);
	int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	if (rc) {
		attr.max_dest_rd_atomic = a->max_rd_atomic;
		attr.min_rnr_timer = a->min_rnr_timer;
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	}
	*step = "RTR";
	ret = ibv_modify_qp(qp, &attr, mask);
	if (ret)
		return -ret;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = sq_psn;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (rc) {
		attr.timeout = a->timeout;
		attr.retry_cnt = a->retry_cnt;
		attr.rnr_retry = a->rnr_retry;
		attr.max_rd_atomic = a->max_rd_atomic;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	}
	*step = "RTS";
	ret = ibv_modify_qp(qp, &attr, mask);
	return ret ? -ret : 0;
}
