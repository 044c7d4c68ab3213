/*
 * verbs_mw.c - memory window allocation and type-1 binding.
 */
#include <stdlib.h>
#include <string.h>

#include "core/caller_mem.h"
#include "core/device.h"
#include "core/mr.h"
#include "core/mw.h"
#include "core/nic.h"
#include "core/qp.h"
#include "engine/nic.h"
#include "verbs/verbs.h"

struct ibv_mw *srn_verbs_alloc_mw(struct ibv_pd *ibpd, enum ibv_mw_type type)
{
	struct srn_pd *pd = srn_pd(ibpd);
	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)
		return srn_null_errno(-EINVAL);
	struct srn_mr *mw = calloc(1, sizeof(*mw));
	if (!mw)
		return srn_null_errno(-ENOMEM);
	mw->is_mw = true;
	mw->pd = pd;
	srn_nic_lock(pd->nic);
	int ret = srn_mr_insert(pd->nic, mw);
	srn_nic_unlock(pd->nic);
	if (ret) {
		free(mw);
		return srn_null_errno(ret);
	}
	pd->refs++;
	mw->ibmw.context = ibpd->context;
	mw->ibmw.pd = ibpd;
	mw->ibmw.rkey = mw->key;
	mw->ibmw.handle = mw->key;
	mw->ibmw.type = type;
	return &mw->ibmw;
}

static struct srn_mr *mw_of(struct ibv_mw *m)
{
	return (struct srn_mr *)((char *)m - offsetof(struct srn_mr, ibmw));
}

int srn_verbs_dealloc_mw(struct ibv_mw *ibmw)
{
	struct srn_mr *mw = mw_of(ibmw);
	struct srn_nic *nic = mw->pd->nic;
	srn_nic_lock(nic);
	if (mw->bound)
		mw->bound->mw_binds--;
	srn_mr_remove(nic, mw);
	srn_nic_unlock(nic);
	mw->pd->refs--;
	free(mw);
	return 0;
}

/* Type 1: ibv_bind_mw posts a bind work request on the QP; the window's
 * new rkey (next key byte) is returned in mw->rkey at once, as rdma-core
 * providers do. */
int srn_verbs_bind_mw(struct ibv_qp *ibqp, struct ibv_mw *ibmw, struct ibv_mw_bind *b)
{
	struct ibv_mw_bind mb;          /* the caller's, at any alignment (core/caller_mem.h) */
	srn_caller_read(&mb, b, sizeof(mb));
	struct ibv_send_wr wr = {
		.wr_id = mb.wr_id,
		.opcode = IBV_WR_BIND_MW,
		.send_flags = mb.send_flags,
	};
	wr.bind_mw.mw = ibmw;
	wr.bind_mw.rkey = ibv_inc_rkey(ibmw->rkey);
	wr.bind_mw.bind_info = mb.bind_info;
	struct ibv_send_wr *bad;
	int ret = srn_verbs_post_send(ibqp, &wr, &bad);
	if (!ret)
		ibmw->rkey = wr.bind_mw.rkey;
	return ret;
}

/* Used by the requester when a bind work request executes. */
struct srn_mr *srn_mw_from_handle(struct ibv_mw *m)
{
	return mw_of(m);
}
