/*
 * verbs_mem.c - protection domains and memory regions.
 */
#include <stdlib.h>

#include "core/device.h"
#include "core/mr.h"
#include "core/mr_map.h"
#include "core/nic.h"
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
	pd->diag = srn_diag_obj_add(pd->nic->diag, SRN_DIAG_PD, pd);
	srn_diag_snap(pd->diag);
	pthread_mutex_unlock(&pd->nic->lock);
	return &pd->ibpd;
}

SRN_EXPORT int ibv_dealloc_pd(struct ibv_pd *ibpd)
{
	struct srn_pd *pd = srn_pd(ibpd);
	if (pd->refs)
		return EBUSY;   /* objects still use it, as the kernel answers */
	srn_nic_lock(pd->nic);
	srn_diag_obj_del(pd->diag);
	pthread_mutex_unlock(&pd->nic->lock);
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
	mr->length = length;
	mr->access = access;
	/* Tracked first, so an unmap racing with the check below revokes
	 * the region instead of slipping between check and insert. */
	srn_mr_track(mr);
	ret = srn_mr_map_check(addr, length, srn_mr_access_writable(access));
	if (!ret) {
		srn_nic_lock(pd->nic);
		ret = srn_mr_insert(pd->nic, mr);
		pthread_mutex_unlock(&pd->nic->lock);
	}
	if (ret) {
		srn_mr_untrack(mr);
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
	mr->diag = srn_diag_obj_add(pd->nic->diag, SRN_DIAG_MR, mr);
	srn_diag_snap(mr->diag);
	srn_diag_snap(pd->diag);
	pthread_mutex_unlock(&pd->nic->lock);
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

SRN_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
			    size_t length, int access)
{
	return IBV_REREG_MR_ERR_INPUT;   /* not supported yet; the old MR stays valid */
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
		pthread_mutex_unlock(&nic->lock);
		return EBUSY;
	}
	srn_mr_remove(nic, mr);
	srn_diag_obj_del(mr->diag);
	pthread_mutex_unlock(&nic->lock);
	srn_mr_untrack(mr);
	mr->pd->refs--;
	free(mr);
	return 0;
}
