/*
 * verbs_xrc.c - XRC domains, ibv_create_srq_ex (basic and XRC SRQs) and
 * SRQ numbers.
 *
 * An XRC domain groups XRC SRQs and XRC receive QPs: a sender's XRC send
 * QP reaches one receive QP at the target, and each message names (in its
 * XRCETH) the SRQ of that domain that takes it.  A domain opened with a
 * file descriptor is shared by every open naming the same file in this
 * process (processes do not share softrnic objects).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "core/cq.h"
#include "core/device.h"
#include "core/mr.h"
#include "core/nic.h"
#include "core/snap.h"
#include "core/srq.h"
#include "diag/shm.h"
#include "engine/nic.h"
#include "verbs/verbs.h"

struct ibv_xrcd *srn_verbs_open_xrcd(struct ibv_context *c, struct ibv_xrcd_init_attr *a)
{
	struct srn_nic *nic = srn_ctx(c)->nic;
	if (a->comp_mask & ~(uint32_t)(IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS))
		return srn_null_errno(-EINVAL);
	int fd = (a->comp_mask & IBV_XRCD_INIT_ATTR_FD) ? a->fd : -1;
	int oflags = (a->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS) ? a->oflags : 0;
	if (oflags & ~(O_CREAT | O_EXCL))
		return srn_null_errno(-EINVAL);
	struct stat st = { 0 };
	if (fd >= 0 && fstat(fd, &st))
		return srn_null_errno(-errno);
	if (fd < 0 && !(oflags & O_CREAT))
		return srn_null_errno(-EINVAL);   /* a private domain must be created */

	srn_nic_lock(nic);
	struct srn_xrcd *x = NULL;
	if (fd >= 0)
		for (x = nic->tables.xrcds; x; x = x->next)
			if (x->dev == st.st_dev && x->ino == st.st_ino)
				break;
	int err = 0;
	if (x && (oflags & O_EXCL))
		err = EEXIST;
	else if (!x && fd >= 0 && !(oflags & O_CREAT))
		err = ENOENT;
	else if (x)
		x->refs++;
	else if (!(x = calloc(1, sizeof(*x))))
		err = ENOMEM;
	else {
		x->nic = nic;
		x->dev = fd >= 0 ? st.st_dev : 0;
		x->ino = fd >= 0 ? st.st_ino : 0;
		x->refs = 1;
		x->ibxrcd.context = c;
		x->next = nic->tables.xrcds;
		nic->tables.xrcds = x;
	}
	srn_nic_unlock(nic);
	if (err)
		return srn_null_errno(-err);
	return &x->ibxrcd;
}

int srn_verbs_close_xrcd(struct ibv_xrcd *ibx)
{
	struct srn_xrcd *x = (struct srn_xrcd *)ibx;
	struct srn_nic *nic = x->nic;
	srn_nic_lock(nic);
	if (x->refs == 1 && x->users) {
		srn_nic_unlock(nic);
		return EBUSY;
	}
	bool last = --x->refs == 0;
	if (last)
		for (struct srn_xrcd **pp = &nic->tables.xrcds; *pp; pp = &(*pp)->next)
			if (*pp == x) {
				*pp = x->next;
				break;
			}
	srn_nic_unlock(nic);
	if (last)
		free(x);
	return 0;
}

struct ibv_srq *srn_verbs_create_srq_ex(struct ibv_context *c, struct ibv_srq_init_attr_ex *a)
{
	uint32_t known = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
			 IBV_SRQ_INIT_ATTR_CQ;
	if (a->comp_mask & ~known)
		return srn_null_errno(-EOPNOTSUPP);     /* tag matching */
	enum ibv_srq_type type = (a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? a->srq_type
									: IBV_SRQT_BASIC;
	if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd)
		return srn_null_errno(-EINVAL);
	if (type == IBV_SRQT_TM)
		return srn_null_errno(-EOPNOTSUPP);
	if (type == IBV_SRQT_XRC &&
	    (!(a->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !a->xrcd ||
	     !(a->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !a->cq))
		return srn_null_errno(-EINVAL);
	struct ibv_srq_init_attr init = { .srq_context = a->srq_context, .attr = a->attr };
	struct ibv_srq *ibsrq = ibv_create_srq(a->pd, &init);
	if (!ibsrq)
		return NULL;
	a->attr = init.attr;
	if (type != IBV_SRQT_XRC)
		return ibsrq;

	struct srn_srq *srq = srn_srq(ibsrq);
	struct srn_nic *nic = srq->nic;
	srn_nic_lock(nic);
	uint32_t n = 0;
	for (uint32_t i = 0; i < SRN_MAX_SRQ; i++) {
		uint32_t k = (nic->tables.srqn_next + i) % SRN_MAX_SRQ;
		if (k && !nic->tables.srq_by_num[k]) {   /* 0 is never a valid number */
			n = k;
			break;
		}
	}
	if (n) {
		nic->tables.srq_by_num[n] = srq;
		nic->tables.srqn_next = n + 1;
		srq->srqn = n;
		srq->xrcd = (struct srn_xrcd *)a->xrcd;
		srq->xrcd->users++;
		srq->cq = srn_cq(a->cq);
		srq->cq->nqps++;
	}
	srn_nic_unlock(nic);
	if (!n) {
		ibv_destroy_srq(ibsrq);
		return srn_null_errno(-ENOMEM);
	}
	return ibsrq;
}

int srn_verbs_get_srq_num(struct ibv_srq *ibsrq, uint32_t *num)
{
	struct srn_srq *srq = srn_srq(ibsrq);
	if (!srq->xrcd)
		return EINVAL;          /* only XRC SRQs have numbers */
	*num = srq->srqn;
	return 0;
}
