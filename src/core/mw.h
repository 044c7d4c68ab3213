/*
 * mw.h - memory windows: binding a window to part of a region and
 * invalidating it.  Must hold nic->lock.
 */
#ifndef SRN_CORE_MW_H
#define SRN_CORE_MW_H

#include <infiniband/verbs.h>
#include <stdint.h>

struct srn_nic;
struct srn_mr;
struct srn_qp;

/* Bind (or, with no region and zero length, unbind) the window to
 * [addr, addr+length) of the region with the given remote rights; its key
 * becomes new_rkey (same table slot, new key byte).  -EINVAL for a bad
 * key/range/rights (IBV_WC_MW_BIND_ERR), -EPERM for a PD mismatch. */
int srn_mw_bind(struct srn_qp *qp, struct srn_mr *mw, uint32_t new_rkey,
		const struct ibv_mw_bind_info *info);
/* Invalidate a type-2 window by its rkey (local invalidate or Send with
 * Invalidate).  -EINVAL if rkey names no window this QP may invalidate. */
int srn_mw_invalidate(struct srn_qp *qp, uint32_t rkey);

#endif
