/*
 * verbs_rate.c - QP rate limits: ibv_modify_qp_rate_limit (through
 * verbs_context, as mlx5 provides it), IBV_QP_RATE_LIMIT in
 * ibv_modify_qp, and the packet-pacing capabilities that advertise them.
 *
 * A limit is a ceiling for the QP's pacer and its DCQCN rate
 * (transport/cc.h): the requester never sends faster, and DCQCN recovers
 * up to it, not past it.  Checks follow rdma-core's mlx5 provider:
 * comp_mask must be 0, a burst or packet size needs a rate, and the rate
 * lies within the advertised range (0 removes the limit).  Unlike mlx5
 * (raw packet QPs only) softrnic paces RC, UC and UD QPs.
 */
#include <errno.h>

#include "core/device.h"
#include "core/nic.h"
#include "core/qp.h"
#include "engine/nic.h"
#include "transport/cc.h"
#include "verbs/verbs.h"

#define SRN_RATE_QPTS ((1u << IBV_QPT_RC) | (1u << IBV_QPT_UC) | (1u << IBV_QPT_UD))

void srn_verbs_pacing_caps(struct srn_nic *nic, struct ibv_packet_pacing_caps *c)
{
	c->qp_rate_limit_min = (uint32_t)(nic->cc->cfg.rpg_min_rate * 1000u);
	c->qp_rate_limit_max = (uint32_t)(nic->cc->cfg.line_rate * 1000u);
	c->supported_qpts = SRN_RATE_QPTS;
}

int srn_verbs_rate_check(struct srn_qp *qp, uint32_t kbps, uint32_t burst, uint16_t pkt_sz)
{
	struct ibv_packet_pacing_caps c;
	srn_verbs_pacing_caps(qp->nic, &c);
	if (!(c.supported_qpts & (1u << qp->type)))
		return -EINVAL;
	if ((burst || pkt_sz) && !kbps)
		return -EINVAL;
	if (kbps && (kbps < c.qp_rate_limit_min || kbps > c.qp_rate_limit_max))
		return -EINVAL;
	return 0;
}

int srn_verbs_rate_apply(struct srn_qp *qp, uint32_t kbps, uint32_t burst, uint16_t pkt_sz)
{
	int ret = srn_verbs_rate_check(qp, kbps, burst, pkt_sz);
	return ret ? ret : srn_cc_set_rate_limit(qp, kbps, burst);
}

int srn_verbs_modify_qp_rate_limit(struct ibv_qp *ibqp, struct ibv_qp_rate_limit_attr *attr)
{
	struct srn_qp *qp = srn_qp(ibqp);
	if (attr->comp_mask)
		return EINVAL;
	srn_nic_lock(qp->nic);
	int ret = srn_verbs_rate_apply(qp, attr->rate_limit, attr->max_burst_sz,
				       attr->typical_pkt_sz);
	srn_diag_snap(qp->diag);
	srn_nic_unlock(qp->nic);
	return -ret;
}
