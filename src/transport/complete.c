/*
 * complete.c - completions and the error state.
 */
#include "transport/complete.h"

#include <stdarg.h>
#include <stdio.h>

#include "core/direct_pub.h"
#include "core/cq.h"
#include "core/device.h"
#include "core/nic.h"
#include "core/qp.h"
#include "diag/shm.h"
#include "transport/explain.h"

static enum ibv_wc_opcode wc_opcode_of(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	case IBV_WR_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
	case IBV_WR_BIND_MW:
		return IBV_WC_BIND_MW;
	case IBV_WR_TSO:
		return IBV_WC_TSO;
	default:
		return IBV_WC_SEND;
	}
}

static void push(struct srn_qp *qp, struct srn_cq *cq, const struct ibv_wc *wc, bool solicited)
{
	/* A queue without a CQ never holds work (srn_sq_fill; an XRC receive
	 * QP receives only once bound to an SRQ, whose CQ it uses): should
	 * that ever break, a flush drops the completion, never the process. */
	if (!cq)
		return;
	if (srn_cq_push(cq, wc, solicited) == -ENOSPC) {
		srn_count(qp->nic->diag.cnt, SRN_CNT_CQ_OVERFLOW, 1);
		struct ibv_async_event ev = { .element.cq = &cq->ibcq, .event_type = IBV_EVENT_CQ_ERR };
		srn_async_post(&cq->ctx->async, &ev, &cq->async_ref);
	}
}

void srn_qp_why(struct srn_qp *qp, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(qp->err_why, sizeof(qp->err_why), fmt, ap);
	va_end(ap);
}

/* The explanation of an error completion (not of a flush: those follow
 * the one error that caused them). */
static const char *take_why(struct srn_qp *qp, enum ibv_wc_status status)
{
	if (status == IBV_WC_SUCCESS || status == IBV_WC_WR_FLUSH_ERR)
		return NULL;
	if (!qp->err_why[0])
		snprintf(qp->err_why, sizeof(qp->err_why), "no further detail recorded");
	return qp->err_why;
}

/* mlx5's error-completion counters: a flush counts apart from the error
 * that caused it. */
static void count_error(struct srn_qp *qp, enum ibv_wc_status status, bool send)
{
	if (status == IBV_WC_SUCCESS)
		return;
	enum srn_counter c;
	if (status == IBV_WC_WR_FLUSH_ERR)
		c = send ? SRN_CNT_REQ_CQE_FLUSH_ERR : SRN_CNT_RESP_CQE_FLUSH_ERR;
	else
		c = send ? SRN_CNT_REQ_CQE_ERR : SRN_CNT_RESP_CQE_ERR;
	srn_count(qp->nic->diag.cnt, c, 1);
	if (!send && status == IBV_WC_LOC_LEN_ERR)
		srn_count(qp->nic->diag.cnt, SRN_CNT_RESP_LOCAL_LENGTH_ERR, 1);
}

void srn_complete_send(struct srn_qp *qp, enum ibv_wc_status status)
{
	struct srn_swqe *w = &qp->sq.wqe[qp->sq.tail & (qp->sq.size - 1)];
	count_error(qp, status, true);
	const char *why = take_why(qp, status);
	if (why) {
		srn_diag_explain_send(qp->diag, qp, w, status, "%s", why);
		qp->err_why[0] = 0;
	}
	qp->sq.tail++;
	if (status == IBV_WC_SUCCESS && !qp->sq_sig_all && !(w->send_flags & IBV_SEND_SIGNALED))
		return;
	struct ibv_wc wc = {
		.wr_id = w->wr_id,
		.status = status,
		.opcode = wc_opcode_of(w->opcode),
		.byte_len = w->length,
		.qp_num = qp->qpn,
		.vendor_err = status == IBV_WC_SUCCESS ? 0 : (uint32_t)status,
	};
	push(qp, qp->scq, &wc, false);
	if (qp->sq.drained_pending && qp->sq.tail == qp->sq.head) {
		qp->sq.drained_pending = false;
		srn_qp_event(qp, IBV_EVENT_SQ_DRAINED);
	}
}

void srn_complete_recv(struct srn_qp *qp, enum ibv_wc_status status, uint32_t byte_len,
		       unsigned wc_flags, uint32_t imm_or_rkey, bool solicited,
		       enum ibv_wc_opcode op)
{
	qp->resp.recv_valid = false;
	count_error(qp, status, false);
	/* The reason stays recorded: the NAK this error also causes (RC)
	 * explains itself with it and then clears it. */
	const char *why = take_why(qp, status);
	if (why)
		srn_diag_explain_recv(qp->diag, qp, qp->resp.recv.wr_id, status, "%s", why);
	struct ibv_wc wc = {
		.wr_id = qp->resp.recv.wr_id,
		.status = status,
		.opcode = op,
		.byte_len = byte_len,
		.qp_num = qp->qpn,
		.src_qp = qp->attr.dest_qp_num,
		.wc_flags = wc_flags,
		.imm_data = wc_flags ? imm_or_rkey : 0,   /* union with invalidated_rkey */
		.pkey_index = 0,
		.vendor_err = status == IBV_WC_SUCCESS ? 0 : (uint32_t)status,
	};
	push(qp, qp->rcq, &wc, solicited);
}

void srn_complete_recv_ud(struct srn_qp *qp, uint32_t byte_len, bool with_imm, uint32_t imm_be,
			  bool solicited, uint32_t src_qp)
{
	qp->resp.recv_valid = false;
	struct ibv_wc wc = {
		.wr_id = qp->resp.recv.wr_id,
		.status = IBV_WC_SUCCESS,
		.opcode = IBV_WC_RECV,
		.byte_len = byte_len,
		.qp_num = qp->qpn,
		.src_qp = src_qp,
		.wc_flags = IBV_WC_GRH | (with_imm ? IBV_WC_WITH_IMM : 0),
		.imm_data = with_imm ? imm_be : 0,
		/* RoCE has no SL; as mlx5 does, sl carries the L3 type of the
		 * packet (2: IPv4, 1: IPv6), which says where in the GRH area
		 * the destination address is. UCX's UD drops receives whose
		 * destination it cannot find among its GIDs. */
		.sl = qp->nic->link.udp.local.ss_family == AF_INET ? 2 : 1,
	};
	push(qp, qp->rcq, &wc, solicited);
}

void srn_qp_flush(struct srn_qp *qp)
{
	while (qp->sq.tail != qp->sq.head)
		srn_complete_send(qp, IBV_WC_WR_FLUSH_ERR);
	qp->req.cur = qp->req.sent_end = qp->sq.head;
	qp->req.cur_started = false;
	/* The receive a message was landing in is this QP's even when it
	 * came from an SRQ; the SRQ's other WQEs stay for other QPs. */
	if (qp->resp.recv_valid)
		srn_complete_recv(qp, IBV_WC_WR_FLUSH_ERR, 0, 0, 0, false, IBV_WC_RECV);
	while (srn_rq_take(&qp->rq, &qp->resp.recv, qp->resp.recv_sge)) {
		qp->resp.recv_valid = true;
		srn_complete_recv(qp, IBV_WC_WR_FLUSH_ERR, 0, 0, 0, false, IBV_WC_RECV);
	}
	qp->resp.in_msg = false;
}

void srn_qp_event(struct srn_qp *qp, enum ibv_event_type type)
{
	struct ibv_async_event ev = { .element.qp = &qp->ibqp_ex.qp_base, .event_type = type };
	srn_async_post(&qp->ctx->async, &ev, &qp->async_ref);
}

void srn_qp_fail(struct srn_qp *qp, int event)
{
	if (qp->state == IBV_QPS_ERR)
		return;
	qp->state = IBV_QPS_ERR;
	qp->ibqp_ex.qp_base.state = IBV_QPS_ERR;
	qp->attr.qp_state = IBV_QPS_ERR;
	srn_direct_pub_qp(qp);     /* same-host peers stop placing */
	uint32_t outstanding = (qp->sq.head - qp->sq.tail) + srn_rq_count(&qp->rq) +
			       qp->resp.recv_valid;
	srn_diag_log(qp->diag, SRN_LOG_WARN, "QP to ERR: %u outstanding work requests flushed",
		     outstanding);
	srn_qp_flush(qp);
	if (event >= 0)
		srn_qp_event(qp, (enum ibv_event_type)event);
	if (qp->srq)   /* IBTA 10.3.1: no more WQEs will be taken from the SRQ */
		srn_qp_event(qp, IBV_EVENT_QP_LAST_WQE_REACHED);
}
