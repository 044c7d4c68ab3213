/*
 * qp_effects.c - what a QP state transition sets off in the transport.
 *
 * core/qp.c applies a transition to the QP's fields (the state table and
 * the attribute checks are core/qp_rules.c); what follows from it here is
 * the transport's: work requests flushed on entering Error, the QP taken
 * off the ACK, transmit and timer lists, the asynchronous events
 * (LAST_WQE_REACHED, SQ_DRAINED), and transmission resumed in RTS.  Must
 * hold nic->lock.
 *
 * RESET also takes the QP's completions out of its CQs, unread ones
 * included, as libmlx5 and libmlx4 do (mlx5_modify_qp: mlx5_cq_clean):
 * a QP restated after an error must not hand its flushes to the next
 * round (rdma-core's test_mr_rereg_pd and _addr poll after a restate
 * and fail on them).
 */
#include "transport/qp_effects.h"

#include "core/cq.h"
#include "core/nic.h"
#include "core/qp.h"
#include "transport/complete.h"
#include "transport/requester.h"
#include "transport/timers.h"

static void unlink_lists(struct srn_qp *qp)
{
	struct srn_nic *nic = qp->nic;
	for (struct srn_qp **pp = &nic->lists.ack; *pp; pp = &(*pp)->resp.ack_next)
		if (*pp == qp) {
			*pp = qp->resp.ack_next;
			break;
		}
	qp->resp.ack_pending = false;
	for (struct srn_qp **pp = &nic->lists.tx; *pp; pp = &(*pp)->tx_next)
		if (*pp == qp) {
			*pp = qp->tx_next;
			break;
		}
	qp->on_tx_list = false;
	qp->req.blocked = false;
	qp->req.win_full = false;
	for (struct srn_qp **pp = &nic->lists.timer; *pp; pp = &(*pp)->comp.timer_next)
		if (*pp == qp) {
			*pp = qp->comp.timer_next;
			break;
		}
	qp->comp.on_timer_list = false;
	srn_timer_stop(qp);
}

int srn_qp_modify(struct srn_qp *qp, const struct ibv_qp_attr *attr, int mask)
{
	enum ibv_qp_state cur = qp->state;
	int ret = srn_qp_apply(qp, attr, mask);
	if (ret)
		return ret;
	enum ibv_qp_state next = qp->state;

	if (next == IBV_QPS_RESET) {
		unlink_lists(qp);       /* no transport state survives RESET */
		if (cur != IBV_QPS_RESET) {
			if (qp->rcq)
				srn_cq_clean(qp->rcq, qp->qpn);
			if (qp->scq && qp->scq != qp->rcq)
				srn_cq_clean(qp->scq, qp->qpn);
		}
		return 0;
	}
	if (next == IBV_QPS_ERR && cur != IBV_QPS_ERR) {
		srn_qp_flush(qp);
		unlink_lists(qp);
		/* IBTA 11.6.3: a QP on an SRQ that enters Error will take no
		 * more WQEs from it, whatever moved it there. */
		if (qp->srq)
			srn_qp_event(qp, IBV_EVENT_QP_LAST_WQE_REACHED);
	}
	if (next == IBV_QPS_SQD && cur == IBV_QPS_RTS) {
		if (qp->attr.en_sqd_async_notify) {
			if (qp->sq.tail == qp->sq.head)
				srn_qp_event(qp, IBV_EVENT_SQ_DRAINED);
			else
				qp->sq.drained_pending = true;
		}
	}
	if (next == IBV_QPS_RTS)
		srn_req_push(qp);   /* work posted while in SQD resumes */
	return 0;
}

void srn_qp_unlink(struct srn_qp *qp)
{
	unlink_lists(qp);
	/* The QP is going away: its SRQ may now be destroyed (the caller
	 * releases the SRQ of other QP types, which hold it from creation). */
	if (qp->type == IBV_QPT_XRC_RECV)
		srn_qp_bind_xrc_srq(qp, NULL);
}
