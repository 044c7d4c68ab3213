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
 *
 * softrnic_gsi_serve and softrnic_gsi_reroute serve QP1 behind a shared
 * address: the first lets the link ask the CM which process listens for
 * a REQ, the second passes on a REQ the CM held until a listener came in
 * another process.
 *
 * softrnic_peer_pid tells the CM which process on this host owns a peer's
 * QP, so it can watch that process die (a kernel's CM learns it from
 * the kernel; ours has no kernel): the owner named by the peer's inbox
 * locator, under the same checks the same-host link applies (our user,
 * mode 0600, this network namespace, alive).
 *
 * softrnic_cm_count lets the CM count its MADs in the device's counters,
 * so `softrnic stat` shows them with the rest; only the CM's counters.
 */
#include <errno.h>
#include <string.h>

#include "core/device.h"
#include "core/nic.h"
#include "core/qp.h"
#include "engine/nic.h"
#include "diag/counters.h"
#include "link/shm_file.h"
#include "link/udp.h"
#include "link/udp_group.h"
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

SRN_EXPORT int softrnic_gsi_serve(struct ibv_context *ctx, srn_gsi_listener_fn *listener);

/* The CM serves QP1 of this device (NULL: no more): it routes the REQs
 * that reach this process but are for another behind the same address
 * with `listener` (link/udp_group.h).  Returns the device's member number,
 * which the CM puts in the top byte of its communication IDs so the
 * other MADs route by themselves (wire/gsi_route.h); 0 when the address
 * is not shared. */
SRN_EXPORT int softrnic_gsi_serve(struct ibv_context *ctx, srn_gsi_listener_fn *listener)
{
	if (!ctx)
		return -EINVAL;
	struct srn_nic *nic = srn_ctx(ctx)->nic;
	srn_nic_lock(nic);
	srn_udp_group_set_gsi(&nic->link.udp, listener);
	int member = (int)srn_udp_member(&nic->link.udp);
	srn_nic_unlock(nic);
	return member;
}

SRN_EXPORT int softrnic_gsi_reroute(struct ibv_context *ctx, const uint8_t sgid[16], uint32_t comm_id,
				    long pid);

/* A REQ our CM holds for want of a listener found one in process pid,
 * behind the same address: the link passes the packet on
 * (srn_udp_group_reroute). */
SRN_EXPORT int softrnic_gsi_reroute(struct ibv_context *ctx, const uint8_t sgid[16], uint32_t comm_id,
				    long pid)
{
	if (!ctx || !sgid)
		return -EINVAL;
	struct srn_nic *nic = srn_ctx(ctx)->nic;
	srn_nic_lock(nic);
	int r = srn_udp_group_reroute(&nic->link.udp, sgid, comm_id, pid);
	srn_nic_unlock(nic);
	return r;
}

SRN_EXPORT int softrnic_peer_pid(struct ibv_context *ctx, const union ibv_gid *gid, uint32_t qpn);

/* The pid (> 0) of the live process on this host whose device has gid and
 * owns QP qpn (behind a shared address, its member number says which:
 * link/udp_group.h), or -ENOENT (another host, no inbox: SOFTRNIC_SHM=0),
 * -EINVAL. */
SRN_EXPORT int softrnic_peer_pid(struct ibv_context *ctx, const union ibv_gid *gid, uint32_t qpn)
{
	if (!ctx || !gid)
		return -EINVAL;
	struct srn_nic *nic = srn_ctx(ctx)->nic;
	struct sockaddr_storage dst;
	socklen_t len;
	/* The port and netns are set when the nic is created and never change. */
	if (srn_gid_to_sockaddr(gid->raw, nic->link.udp.port, nic->link.udp.family, &dst, &len))
		return -EINVAL;
	unsigned member = srn_qpn_member(qpn);
	for (unsigned k = 0; k < SRN_SHM_NAMES; k++) {
		struct srn_shm_locator loc;
		if (srn_shm_locator_read(nic->link.shm.netns, (struct sockaddr *)&dst, member, k,
					 &loc) == 0 &&
		    srn_shm_pid_alive(loc.pid))
			return loc.pid;
	}
	return -ENOENT;
}

SRN_EXPORT void softrnic_cm_count(struct ibv_context *ctx, unsigned counter);

SRN_EXPORT void softrnic_cm_count(struct ibv_context *ctx, unsigned counter)
{
	if (ctx && counter >= SRN_CNT_CM_FIRST && counter <= SRN_CNT_CM_LAST)
		srn_count(srn_ctx(ctx)->nic->diag.cnt, (enum srn_counter)counter, 1);
}
