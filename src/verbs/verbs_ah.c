/*
 * verbs_ah.c - address handles and multicast attach.
 *
 * Address handles are complete (validated, resolved to a UDP address and
 * the IP facts of the ICRC), multicast attach/detach (core/mcast.c).
 */
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>

#include "core/ah.h"
#include "core/device.h"
#include "core/mr.h"
#include "core/mcast.h"
#include "core/nic.h"
#include "core/qp.h"
#include "engine/nic.h"
#include "link/mcast.h"
#include "link/udp.h"
#include "verbs/verbs.h"

SRN_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *ibpd, struct ibv_ah_attr *attr)
{
	struct srn_pd *pd = srn_pd(ibpd);
	/* RoCE routes by GID: an AH without a GRH cannot be resolved (rxe
	 * and mlx5 refuse it too). */
	if (!attr->is_global || attr->port_num != 1 || attr->grh.sgid_index != 0)
		return srn_null_errno(-EINVAL);
	struct srn_ah *ah = calloc(1, sizeof(*ah));
	if (!ah)
		return srn_null_errno(-ENOMEM);
	if (srn_gid_to_sockaddr(attr->grh.dgid.raw, pd->nic->link.udp.port, pd->nic->link.udp.family,
				&ah->dst, &ah->dstlen)) {
		free(ah);
		return srn_null_errno(-EINVAL);
	}
	ah->attr = *attr;
	srn_ip_meta_for(pd->nic, (const struct sockaddr *)&ah->dst, &ah->meta);
	ah->ibah.context = ibpd->context;
	ah->ibah.pd = ibpd;
	pd->refs++;
	srn_nic_lock(pd->nic);
	ah->diag = srn_diag_obj_add(pd->nic->diag.seg, SRN_DIAG_AH, ah);
	srn_diag_snap(ah->diag);
	srn_nic_unlock(pd->nic);
	return &ah->ibah;
}

SRN_EXPORT int ibv_destroy_ah(struct ibv_ah *ibah)
{
	struct srn_ah *ah = (struct srn_ah *)ibah;
	struct srn_nic *nic = srn_pd(ibah->pd)->nic;
	srn_nic_lock(nic);
	srn_diag_obj_del(ah->diag);
	srn_nic_unlock(nic);
	srn_pd(ibah->pd)->refs--;
	free(ah);
	return 0;
}

/* The 40 bytes before a UD payload hold the GRH; for RoCEv2 over IPv4 the
 * IPv4 header sits in its last 20 bytes (rdma-core's convention), for
 * IPv6 it is the IPv6 header itself. */
SRN_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num,
				   struct ibv_wc *wc, struct ibv_grh *grh,
				   struct ibv_ah_attr *ah_attr)
{
	if (port_num != 1 || !(wc->wc_flags & IBV_WC_GRH) || !grh)
		return -1;
	memset(ah_attr, 0, sizeof(*ah_attr));
	const uint8_t *raw = (const uint8_t *)grh;
	uint8_t *dgid = ah_attr->grh.dgid.raw;
	if ((raw[20] >> 4) == 4) {
		memset(dgid, 0, 10);
		dgid[10] = dgid[11] = 0xff;
		memcpy(dgid + 12, raw + 20 + 12, 4);   /* IPv4 source address */
		ah_attr->grh.traffic_class = raw[20 + 1];
	} else {
		memcpy(dgid, grh->sgid.raw, 16);
		uint32_t vtf = be32toh(grh->version_tclass_flow);
		ah_attr->grh.traffic_class = (uint8_t)(vtf >> 20);
		ah_attr->grh.flow_label = vtf & 0xfffff;
	}
	ah_attr->is_global = 1;
	ah_attr->grh.sgid_index = 0;
	ah_attr->grh.hop_limit = 0xff;
	ah_attr->dlid = (uint16_t)wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	return 0;
}

SRN_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
						struct ibv_grh *grh, uint8_t port_num)
{
	struct ibv_ah_attr attr;
	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr))
		return srn_null_errno(-EINVAL);
	return ibv_create_ah(pd, &attr);
}

/* Multicast is for UD QPs, with a multicast GID (rdma-core and mlx5
 * answer EINVAL otherwise); lid is meaningless on RoCE. */
static int mcast_args(struct ibv_qp *ibqp, const union ibv_gid *gid)
{
	if (ibqp->qp_type != IBV_QPT_UD || !srn_gid_is_mcast(gid->raw))
		return EINVAL;
	return 0;
}

SRN_EXPORT int ibv_attach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid)
{
	int ret = mcast_args(ibqp, gid);
	if (ret)
		return ret;
	struct srn_qp *qp = srn_qp(ibqp);
	srn_nic_lock(qp->nic);
	ret = srn_mcast_attach(qp->nic, qp, gid->raw);
	srn_nic_unlock(qp->nic);
	return -ret;
}

SRN_EXPORT int ibv_detach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid)
{
	int ret = mcast_args(ibqp, gid);
	if (ret)
		return ret;
	struct srn_qp *qp = srn_qp(ibqp);
	srn_nic_lock(qp->nic);
	ret = srn_mcast_detach(qp->nic, qp, gid->raw);
	srn_nic_unlock(qp->nic);
	return -ret;
}
