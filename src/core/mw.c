/*
 * mw.c - memory window binding and invalidation (IBTA 10.6.7).
 */
#include "core/mw.h"

#include <errno.h>

#include "core/mr.h"
#include "core/nic.h"
#include "core/qp.h"

#define SRN_MW_RIGHTS (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)

static void unbind(struct srn_mr *mw)
{
	if (mw->bound)
		mw->bound->mw_binds--;
	mw->bound = NULL;
	mw->length = 0;
}

int srn_mw_bind(struct srn_qp *qp, struct srn_mr *mw, uint32_t new_rkey,
		const struct ibv_mw_bind_info *info)
{
	struct srn_nic *nic = qp->nic;
	if (!mw->is_mw || (new_rkey >> 8) != (mw->key >> 8))
		return -EINVAL;         /* the key index is the window's own */
	if (mw->pd != qp->pd)
		return -EPERM;
	/* A type-2 window is bound once; rebinding needs an invalidate. */
	if (mw->ibmw.type == IBV_MW_TYPE_2 && mw->bound)
		return -EINVAL;
	struct srn_mr *mr = info->mr ? (struct srn_mr *)info->mr : NULL;
	if (!mr) {
		if (info->length || mw->ibmw.type == IBV_MW_TYPE_2)
			return -EINVAL;
		unbind(mw);             /* type 1: zero-length bind unbinds */
		goto rekey;
	}
	if (srn_key_lookup(nic, mr->key) != mr || mr->is_mw || mr->pd != mw->pd)
		return -EINVAL;
	if (!(mr->access & IBV_ACCESS_MW_BIND))
		return -EINVAL;
	/* Local write is accepted and has no effect, as in rxe and mlx5: a
	 * window key is an rkey only, so only its remote rights mean
	 * anything (rdma-core's memory-window tests bind with
	 * LOCAL_WRITE | REMOTE_WRITE).  Zero-based windows are refused, as
	 * mlx5 refuses them for type 1 and rxe for type 1 (o10-36.2.2); type
	 * 2 zero-based windows (C10-75) are not implemented. */
	if (info->mw_access_flags & ~(unsigned)(SRN_MW_RIGHTS | IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	/* Remote write/atomic through a window needs local write on the
	 * region, as for a region itself. */
	if ((info->mw_access_flags & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(mr->access & IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	if (info->addr < mr->iova || info->addr - mr->iova > mr->length ||
	    info->length > mr->length - (info->addr - mr->iova))
		return -EINVAL;
	unbind(mw);
	mw->bound = mr;
	mr->mw_binds++;
	mw->iova = info->addr;
	mw->length = info->length;
	mw->access = (unsigned)info->mw_access_flags & SRN_MW_RIGHTS;
	mw->mw_qpn = qp->qpn;
rekey:
	mw->key = new_rkey;
	mw->ibmw.rkey = new_rkey;
	return 0;
}

int srn_mw_invalidate(struct srn_qp *qp, uint32_t rkey)
{
	struct srn_mr *mw = srn_key_lookup(qp->nic, rkey);
	if (!mw || !mw->is_mw || mw->ibmw.type != IBV_MW_TYPE_2 || mw->pd != qp->pd)
		return -EINVAL;
	unbind(mw);
	return 0;
}
