/*
 * verbs_gsi.c - the GSI QP (QP1) of a device, for softrnic's librdmacm.
 *
 * The IBTA connection manager talks to a peer's QP1 with UD datagrams
 * under the GSI Q_Key 0x80010000.  A kernel creates that QP itself; here
 * the connection manager (src/cm/, in librdmacm.so.1) asks for it through
 * this one private entry point, exported under SOFTRNIC_PRIVATE_CM_1 so
 * no rdma-core binary can bind to it by accident.  The QP is an ordinary
 * UD QP in every other way (same checks, same transport), numbered 1.
 * One per nic: a second call fails with EBUSY.
 */
#include "core/nic.h"
#include "core/qp.h"
#include "verbs/verbs.h"

SRN_EXPORT struct ibv_qp *softrnic_create_gsi_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init);

SRN_EXPORT struct ibv_qp *softrnic_create_gsi_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
	struct srn_qp *qp;
	if (!pd || !init || init->qp_type != IBV_QPT_UD)
		return srn_null_errno(-EINVAL);
	int ret = srn_qp_create_at(pd->context, pd, init, NULL, true, &qp);
	return ret ? srn_null_errno(ret) : &qp->ibqp_ex.qp_base;
}
