/*
 * verbs_mem.c - protection domains and memory regions.
 */
#include <stdlib.h>

#include "core/direct_pub.h"
#include "core/device.h"
#include "core/mr.h"
#include "core/mr_map.h"
#include "core/mr_share.h"
#include "core/nic.h"
#include "engine/nic.h"
#include "verbs/verbs.h"

SRN_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct srn_pd *pd = calloc(1, sizeof(*pd));
	if (!pd)
		return srn_null_errno(-ENOMEM);
	pd->ibpd.context = context;
	pd->nic = srn_ctx(context)->nic;
	static _Atomic uint32_t handles;
	pd->ibpd.handle = ++handles;
	srn_nic_lock(pd->nic);
	pd->diag = srn_diag_obj_add(pd->nic->diag.seg, SRN_DIAG_PD, pd);
	srn_diag_snap(pd->diag);
	srn_nic_unlock(pd->nic);
	return &pd->ibpd;
}

SRN_EXPORT int ibv_dealloc_pd(struct ibv_pd *ibpd)
{
	struct srn_pd *pd = srn_pd(ibpd);
	if (pd->refs)
		return EBUSY;   /* objects still use it, as the kernel answers */
	srn_nic_lock(pd->nic);
	srn_diag_obj_del(pd->diag);
	srn_nic_unlock(pd->nic);
	free(pd);
	return 0;
}

static struct ibv_mr *reg(struct ibv_pd *ibpd, void *addr, size_t length, uint64_t iova,
			  unsigned access)
{
	struct srn_pd *pd = srn_pd(ibpd);
	if (length == 0 || (!addr && length))
		return srn_null_errno(-EINVAL);
	int ret = srn_mr_check_access(access);
	if (ret)
		return srn_null_errno(ret);
	if ((uintptr_t)addr + length < (uintptr_t)addr)
		return srn_null_errno(-EINVAL);
	struct srn_mr *mr = calloc(1, sizeof(*mr));
	if (!mr)
		return srn_null_errno(-ENOMEM);
	mr->pd = pd;
	mr->iova = iova;
	mr->base = addr;
	mr->at = addr;
	mr->length = length;
	mr->access = access;
	/* Tracked first, so an unmap racing with the check below revokes
	 * the region instead of slipping between check and insert. */
	srn_mr_track(mr);
	ret = srn_mr_map_check(addr, length, srn_mr_access_writable(access));
	if (!ret) {
		/* Pages onto a memfd the library keeps mapped (a pin), which
		 * peers may map for atomics and copies. */
		srn_mr_share_attach(mr);
		srn_nic_lock(pd->nic);
		ret = srn_mr_insert(pd->nic, mr);
		srn_nic_unlock(pd->nic);
	}
	if (ret) {
		srn_mr_untrack(mr);
		srn_mr_share_detach(mr);
		free(mr);
		return srn_null_errno(ret);
	}
	pd->refs++;
	mr->ibmr.context = ibpd->context;
	mr->ibmr.pd = ibpd;
	mr->ibmr.addr = addr;
	mr->ibmr.length = length;
	mr->ibmr.handle = mr->key;
	mr->ibmr.lkey = mr->key;
	mr->ibmr.rkey = mr->key;
	srn_nic_lock(pd->nic);
	mr->diag = srn_diag_obj_add(pd->nic->diag.seg, SRN_DIAG_MR, mr);
	srn_diag_snap(mr->diag);
	srn_diag_snap(pd->diag);
	srn_nic_unlock(pd->nic);
	return &mr->ibmr;
}

#undef ibv_reg_mr
SRN_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return reg(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}

#undef ibv_reg_mr_iova
SRN_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
					  uint64_t iova, int access)
{
	return reg(pd, addr, length, iova, (unsigned)access);
}

SRN_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
					   uint64_t iova, unsigned int access)
{
	return reg(pd, addr, length, iova, access);
}

SRN_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
					    uint64_t iova, int fd, int access)
{
	/* dma-buf memory belongs to a device driver; a user-space NIC
	 * cannot map it generally. */
	return srn_null_errno(-EOPNOTSUPP);
}

/* The new state of a region: what rereg checks before it applies it. */
struct rereg {
	struct srn_pd *pd;
	uint8_t *base;
	uint64_t iova, length;
	unsigned access;
	bool moves;                    /* CHANGE_TRANSLATION */
};

/* Check and apply under nic->lock; -errno leaves the region as it was. */
static int rereg_apply(struct srn_mr *mr, const struct rereg *n)
{
	struct srn_nic *nic = mr->pd->nic;
	bool writable = srn_mr_access_writable(n->access);
	int ret = 0;
	srn_nic_lock(nic);
	if (mr->mw_binds)
		ret = -EBUSY;          /* windows were checked against the old region */
	else if (mr->revoked)
		ret = -EFAULT;         /* its pages are gone; only dereg is left */
	/* The same check as registration, for the new range or for the old
	 * one when it must now be writable.  Under nic->lock: a hook that
	 * unmaps the range after this check waits for the lock and then
	 * revokes the region. */
	else if (n->moves || (writable && !srn_mr_access_writable(mr->access)))
		ret = srn_mr_map_check(n->base, n->length, writable);
	if (!ret && srn_mr_map_collected(mr))
		ret = -EFAULT;         /* a hook is taking pages of it right now */
	if (!ret) {
		if (n->pd != mr->pd) {
			n->pd->refs++;
			mr->pd->refs--;
			mr->pd = n->pd;
		}
		/* New translation or rights: no more shared pages (its atomics
		 * take the rings); peers see that at the publish below. */
		if ((n->moves || n->access != mr->access) && mr->share) {
			/* Peers stop using the span's mappings (fenced) before
			 * our own goes. */
			srn_direct_unpub_mr(nic, mr);
			srn_mr_share_detach(mr);
		}
		mr->access = n->access;
		if (n->moves) {
			mr->base = n->base;
			mr->at = n->base;
			mr->iova = n->iova;
			mr->length = n->length;
			srn_mr_rekey(nic, mr);
		}
		/* PD or rights changed: same-host peers see it before we return. */
		srn_direct_pub_mr(nic, mr);
		srn_diag_snap(mr->diag);
	}
	srn_nic_unlock(nic);
	return ret;
}

/*
 * ibv_rereg_mr as rdma-core and the kernel do it: input errors
 * (IBV_REREG_MR_ERR_INPUT, errno EINVAL) leave the region untouched; a
 * refused change (IBV_REREG_MR_ERR_CMD, errno as reg_mr would set it)
 * leaves it untouched too, which is more than the kernel promises.  PD and
 * access changes keep lkey and rkey (as rxe and mlx5's in-place update
 * do); a new translation gets new keys in the same slot, so keys handed out
 * for the old memory stop working, as after dereg and reg.
 */
SRN_EXPORT int ibv_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *ibpd, void *addr,
			    size_t length, int access)
{
	struct srn_mr *mr = srn_mr(ibmr);
	/* libibverbs' own checks, before the provider is asked. */
	if ((flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) ||
	    ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!length || !addr)) ||
	    (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	struct rereg n = {
		.pd = (flags & IBV_REREG_MR_CHANGE_PD) ? srn_pd(ibpd) : mr->pd,
		.base = mr->base, .iova = mr->iova, .length = mr->length,
		.access = (flags & IBV_REREG_MR_CHANGE_ACCESS) ? (unsigned)access : mr->access,
		.moves = flags & IBV_REREG_MR_CHANGE_TRANSLATION,
	};
	int ret = 0;
	/* The kernel's checks (ib_uverbs_rereg_mr): some change asked for, a
	 * PD of the same device, valid access, a range that does not wrap. */
	if (!flags || (n.moves && (uintptr_t)addr + length < (uintptr_t)addr))
		ret = -EINVAL;
	else if ((flags & IBV_REREG_MR_CHANGE_PD) &&
		 (!ibpd || srn_pd(ibpd)->nic != mr->pd->nic))
		ret = -EINVAL;
	else
		ret = srn_mr_check_access(n.access);
	if (!ret && n.moves) {
		n.base = addr;
		n.iova = (uintptr_t)addr;
		n.length = length;
		/* While it changes, the hooks watch old and new range. */
		uintptr_t lo = (uintptr_t)mr->base < (uintptr_t)addr ? (uintptr_t)mr->base
								      : (uintptr_t)addr;
		uintptr_t hi_old = (uintptr_t)mr->base + mr->length;
		uintptr_t hi_new = (uintptr_t)addr + length;
		srn_mr_map_set(mr, lo, (hi_old > hi_new ? hi_old : hi_new) - lo,
			       srn_mr_access_writable(mr->access | n.access));
	}
	if (!ret)
		ret = rereg_apply(mr, &n);
	/* What the hooks watch from now on: the region as it now is. */
	srn_mr_map_set(mr, (uintptr_t)mr->base, mr->length, srn_mr_access_writable(mr->access));
	if (ret) {
		errno = -ret;
		return IBV_REREG_MR_ERR_CMD;
	}
	ibmr->pd = &mr->pd->ibpd;
	ibmr->addr = mr->base;
	ibmr->length = mr->length;
	ibmr->lkey = ibmr->rkey = ibmr->handle = mr->key;
	return 0;
}

SRN_EXPORT int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	struct srn_mr *mr = srn_mr(ibmr);
	struct srn_nic *nic = mr->pd->nic;
	/* Every access to a region happens under nic->lock, so once the key
	 * is gone under that lock no access is in flight or can start. */
	srn_nic_lock(nic);
	if (mr->mw_binds) {
		/* Windows still bound to it: the kernel answers EBUSY. */
		srn_nic_unlock(nic);
		return EBUSY;
	}
	srn_mr_remove(nic, mr);
	srn_diag_obj_del(mr->diag);
	srn_nic_unlock(nic);
	srn_mr_untrack(mr);
	srn_mr_share_release(mr);
	mr->pd->refs--;
	free(mr);
	return 0;
}
