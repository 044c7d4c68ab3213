/*
 * direct_pub.c - publishing QPs and regions for same-host direct placement
 * (direct_pub.h, link/direct.h).
 *
 * A QP accepts direct placement when it is RC and this device has direct
 * placement on; every other QP is published too (so a peer's read finds
 * it and sees "no"), and its QPN, state and rights say the rest.  Only
 * regions with a remote right are published: a key without one could
 * only fail, and the rings give that failure its NAK and its async event.
 */
#include "core/direct_pub.h"

#include <string.h>

#include "core/mr.h"
#include "core/mr_share.h"
#include "core/nic.h"
#include "core/qp.h"
#include "diag/memcheck.h"

#define REMOTE_RIGHTS (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)

static void fence(struct srn_nic *nic)
{
	uint64_t timeouts = nic->link.direct.fence_timeouts;
	if (srn_direct_own_fence(&nic->link.direct))
		srn_count(nic->diag.cnt, SRN_CNT_DIRECT_FENCE_WAITS, 1);
	/* A peer stopped inside a placement (SIGSTOP, a debugger) for
	 * longer than the bound: we went on; say so. */
	if (nic->link.direct.fence_timeouts != timeouts)
		srn_count(nic->diag.cnt, SRN_CNT_DIRECT_FENCE_TIMEOUTS, 1);
}

void srn_direct_pub_qp(struct srn_qp *qp)
{
	struct srn_nic *nic = qp->nic;
	if (!nic->link.direct.tab)
		return;
	struct srn_direct_qp_ent e = {
		.qpn = qp->qpn,
		.state = (uint32_t)qp->state,
		.access = qp->attr.qp_access_flags,
		.flags = qp->type == IBV_QPT_RC && nic->link.direct_on ? SRN_DIRECT_QP_OK : 0,
		.dest_qpn = qp->attr.dest_qp_num,
		.max_dest_rd_atomic = qp->attr.max_dest_rd_atomic,
		.pd = (uint64_t)(uintptr_t)qp->pd,
	};
	srn_direct_own_set_qp(&nic->link.direct, qp->qpn & (SRN_QP_TABLE_SIZE - 1), &e);
	/* Rights may have gone (state, access): nothing that read the old
	 * entry may still run when the verb returns. */
	fence(nic);
}

void srn_direct_unpub_qpn(struct srn_nic *nic, uint32_t qpn)
{
	if (!nic->link.direct.tab)
		return;
	struct srn_direct_qp_ent e;
	memset(&e, 0, sizeof(e));
	srn_direct_own_set_qp(&nic->link.direct, qpn & (SRN_QP_TABLE_SIZE - 1), &e);
	fence(nic);
}

void srn_direct_pub_mr(struct srn_nic *nic, const struct srn_mr *mr)
{
	if (!nic->link.direct.tab || mr->is_mw)
		return;
	struct srn_direct_mr_ent e;
	memset(&e, 0, sizeof(e));
	if (mr->access & REMOTE_RIGHTS) {
		e.key = mr->key;
		e.access = mr->access;
		e.flags = mr->revoked ? SRN_DIRECT_MR_REVOKED : 0;
		e.pd = (uint64_t)(uintptr_t)mr->pd;
		e.iova = mr->iova;
		e.length = mr->length;
		/* Where its keys resolve (a system-call copy goes there): the
		 * library's mapping of a moved span, not the program's. */
		e.base = (uint64_t)(uintptr_t)mr->at;
		/* From now on a same-host peer may write this memory from
		 * its own process (an RDMA Write or an atomic placed
		 * directly), which valgrind in ours cannot see, as it cannot
		 * see a NIC's DMA: under memcheck the program would be told
		 * that the bytes it reads there are uninitialised.  So they
		 * count as written from here on, as far as the program may
		 * address them (diag/memcheck.h).  With SOFTRNIC_DIRECT=0
		 * every Write arrives as packets our responder copies, and
		 * memcheck follows each byte. */
		if (nic->link.direct_on &&
		    (mr->access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)))
			SRN_MEM_DEFINED_IF_ADDRESSABLE(mr->base, mr->length);
		/* Its memfd (core/mr_share.h): peers map it for atomics and
		 * copies, where this side allows them to; file offset 0 is
		 * share_base in the addresses base is given in. */
		if (mr->share && mr->share->peers_map) {
			e.share_fd = mr->share->fd + 1;
			e.share_ino = mr->share->ino;
			e.share_base = (uint64_t)(uintptr_t)mr->share->alias;
			e.share_len = mr->share->len;
		}
	}
	srn_direct_own_set_mr(&nic->link.direct, srn_mr_key_slot(mr->key), &e);
	fence(nic);
}

void srn_direct_unpub_mr(struct srn_nic *nic, const struct srn_mr *mr)
{
	if (!nic->link.direct.tab || mr->is_mw)
		return;
	struct srn_direct_mr_ent e;
	memset(&e, 0, sizeof(e));
	srn_direct_own_set_mr(&nic->link.direct, srn_mr_key_slot(mr->key), &e);
	fence(nic);
}
