/*
 * snap.c - copying live objects into their diagnostic slots, and the
 * explanations of error completions (see snap.h).
 *
 * Invariants: called with the device's nic->lock held, which guards every
 * field read here (qp.h, cq.h, rq.h say so for theirs; MR fields never
 * change after registration).  Each snapshot is one seqlock write section,
 * so a reader sees a QP's state and PSNs from the same moment.
 */
#include "core/snap.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/ah.h"
#include "core/cq.h"
#include "core/mr.h"
#include "core/nic.h"
#include "core/qp.h"
#include "core/srq.h"
#include "wire/roce_hdr.h"

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void set_bytes(uint8_t *dst, const uint8_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		SRN_DIAG_SET(dst[i], src[i]);
}

static void snap_pd(struct srn_diag_obj *o, const struct srn_pd *pd)
{
	srn_diag_obj_begin(o);
	SRN_DIAG_SET(o->s->pd.users, (uint32_t)atomic_load_explicit(
					     (_Atomic int *)&pd->refs, memory_order_relaxed));
	srn_diag_obj_end(o);
}

static void snap_mr(struct srn_diag_obj *o, const struct srn_mr *mr)
{
	struct srn_diag_mr *m = &o->s->mr;
	srn_diag_obj_begin(o);
	SRN_DIAG_SET(m->pd, srn_diag_handle(o->d, mr->pd));
	SRN_DIAG_SET(m->addr, mr->iova);
	SRN_DIAG_SET(m->length, mr->length);
	SRN_DIAG_SET(m->lkey, mr->ibmr.lkey);
	SRN_DIAG_SET(m->rkey, mr->ibmr.rkey);
	SRN_DIAG_SET(m->access, (uint32_t)mr->access);
	srn_diag_obj_end(o);
}

static void snap_cq(struct srn_diag_obj *o, const struct srn_cq *cq)
{
	struct srn_diag_cq *c = &o->s->cq;
	srn_diag_obj_begin(o);
	SRN_DIAG_SET(c->cqe, (uint32_t)cq->ibcq.cqe);
	SRN_DIAG_SET(c->size, cq->size);
	SRN_DIAG_SET(c->fill, cq->head - cq->tail);
	SRN_DIAG_SET(c->nqps, (uint32_t)cq->nqps);
	SRN_DIAG_SET(c->overflowed, (uint8_t)cq->overflowed);
	SRN_DIAG_SET(c->arm, (uint8_t)cq->arm);
	SRN_DIAG_SET(c->has_channel, (uint8_t)(cq->channel != NULL));
	srn_diag_obj_end(o);
}

static void snap_qp(struct srn_diag_obj *o, const struct srn_qp *qp)
{
	struct srn_diag_qp *q = &o->s->qp;
	struct srn_diag *d = o->d;
	const struct srn_rq *rq = qp->srq ? &qp->srq->rq : &qp->rq;
	uint32_t flags = (qp->rnr_wait ? SRN_DIAG_QPF_RNR_WAIT : 0) |
			 (qp->rewound ? SRN_DIAG_QPF_REWOUND : 0) |
			 (qp->req_blocked ? SRN_DIAG_QPF_TX_BLOCKED : 0) |
			 (qp->ack_deadline ? SRN_DIAG_QPF_ACK_TIMER : 0) |
			 (qp->resp_in_msg ? SRN_DIAG_QPF_IN_MSG : 0) |
			 (qp->sq_drained_pending ? SRN_DIAG_QPF_SQ_DRAINING : 0) |
			 (qp->nic && srn_shm_has_ring(&qp->nic->shm,
						      (const struct sockaddr *)&qp->peer, qp->peer_len)
				  ? SRN_DIAG_QPF_SHM : 0);

	srn_diag_obj_begin(o);
	SRN_DIAG_SET(q->qpn, qp->qpn);
	SRN_DIAG_SET(q->type, (uint32_t)qp->type);
	SRN_DIAG_SET(q->state, (uint32_t)qp->state);
	SRN_DIAG_SET(q->flags, flags);
	SRN_DIAG_SET(q->sq_psn, qp->req_psn & SRN_PSN_MASK);
	SRN_DIAG_SET(q->una_psn, qp->req_una & SRN_PSN_MASK);
	SRN_DIAG_SET(q->rq_psn, qp->resp_epsn & SRN_PSN_MASK);
	SRN_DIAG_SET(q->msn, qp->resp_msn);
	SRN_DIAG_SET(q->sq_size, qp->cap.max_send_wr);
	SRN_DIAG_SET(q->rq_size, rq->max_wr);
	SRN_DIAG_SET(q->sq_outstanding, qp->sq_head - qp->sq_tail);
	SRN_DIAG_SET(q->sq_unsent, qp->sq_head - qp->sq_cur);
	SRN_DIAG_SET(q->rq_posted, rq->wqe ? srn_rq_count(rq) : 0);
	SRN_DIAG_SET(q->rd_atomic_inflight, qp->rd_atomic_inflight);
	SRN_DIAG_SET(q->peer_qpn, qp->attr.dest_qp_num);
	set_bytes(q->peer_gid, qp->attr.ah_attr.grh.dgid.raw, 16);
	SRN_DIAG_SET(q->mtu, qp->mtu);
	SRN_DIAG_SET(q->retry_left, qp->retry_left);
	SRN_DIAG_SET(q->rnr_left, qp->rnr_left);
	SRN_DIAG_SET(q->timeout, qp->attr.timeout);
	SRN_DIAG_SET(q->retry_cnt, qp->attr.retry_cnt);
	SRN_DIAG_SET(q->rnr_retry, qp->attr.rnr_retry);
	SRN_DIAG_SET(q->min_rnr_timer, qp->attr.min_rnr_timer);
	SRN_DIAG_SET(q->max_rd_atomic, qp->attr.max_rd_atomic);
	SRN_DIAG_SET(q->max_dest_rd_atomic, qp->attr.max_dest_rd_atomic);
	SRN_DIAG_SET(q->port, qp->attr.port_num);
	SRN_DIAG_SET(q->pd, srn_diag_handle(d, qp->pd));
	SRN_DIAG_SET(q->scq, srn_diag_handle(d, qp->scq));
	SRN_DIAG_SET(q->rcq, srn_diag_handle(d, qp->rcq));
	SRN_DIAG_SET(q->srq, srn_diag_handle(d, qp->srq));
	SRN_DIAG_SET(q->ack_deadline_ns, qp->ack_deadline);
	SRN_DIAG_SET(q->rnr_deadline_ns, qp->rnr_deadline);
	srn_diag_obj_end(o);
}

static void snap_srq(struct srn_diag_obj *o, const struct srn_srq *srq)
{
	struct srn_diag_srq *s = &o->s->srq;
	srn_diag_obj_begin(o);
	SRN_DIAG_SET(s->pd, srn_diag_handle(o->d, srq->pd));
	SRN_DIAG_SET(s->max_wr, srq->rq.max_wr);
	SRN_DIAG_SET(s->posted, srq->rq.wqe ? srn_rq_count(&srq->rq) : 0);
	SRN_DIAG_SET(s->limit, srq->limit);
	SRN_DIAG_SET(s->nqps, (uint32_t)srq->nqps);
	srn_diag_obj_end(o);
}

static void snap_ah(struct srn_diag_obj *o, const struct srn_ah *ah)
{
	struct srn_diag_ah *a = &o->s->ah;
	const struct ibv_ah_attr *at = &ah->attr;
	srn_diag_obj_begin(o);
	SRN_DIAG_SET(a->pd, srn_diag_handle(o->d, ah->ibah.pd));
	set_bytes(a->dgid, at->grh.dgid.raw, 16);
	SRN_DIAG_SET(a->is_global, at->is_global);
	SRN_DIAG_SET(a->sgid_index, at->grh.sgid_index);
	SRN_DIAG_SET(a->hop_limit, at->grh.hop_limit);
	SRN_DIAG_SET(a->traffic_class, at->grh.traffic_class);
	SRN_DIAG_SET(a->flow_label, at->grh.flow_label);
	SRN_DIAG_SET(a->port, at->port_num);
	SRN_DIAG_SET(a->sl, at->sl);
	srn_diag_obj_end(o);
}

void srn_diag_snap(struct srn_diag_obj *o)
{
	if (!o || !o->owner || o->idx >= SRN_DIAG_SLOTS)
		return;
	switch (o->kind) {
	case SRN_DIAG_PD: snap_pd(o, o->owner); break;
	case SRN_DIAG_MR: snap_mr(o, o->owner); break;
	case SRN_DIAG_CQ: snap_cq(o, o->owner); break;
	case SRN_DIAG_QP: snap_qp(o, o->owner); break;
	case SRN_DIAG_SRQ: snap_srq(o, o->owner); break;
	case SRN_DIAG_AH: snap_ah(o, o->owner); break;
	default: break;
	}
}

void srn_diag_refresh(struct srn_diag *d)
{
	if (!d)
		return;
	for (struct srn_diag_obj *o = srn_diag_obj_next(d, NULL); o; o = srn_diag_obj_next(d, o))
		srn_diag_snap(o);
}

void srn_diag_tick(struct srn_diag *d, uint64_t now_ns)
{
	if (!d)
		return;
	struct srn_diag_clock *c = srn_diag_clock(d);
	uint64_t last = atomic_load_explicit(&c->last_ns, memory_order_relaxed);
	/* Signed: a caller's reading may predate one another thread stored. */
	if (last && (int64_t)(now_ns - last) < (int64_t)SRN_DIAG_TICK_NS) {
		/* Too soon: remember that something changed, so the idle
		 * progress thread refreshes once more (srn_diag_deadline). */
		if (!atomic_load_explicit(&c->due_ns, memory_order_relaxed))
			atomic_store_explicit(&c->due_ns, last + SRN_DIAG_TICK_NS,
					      memory_order_relaxed);
		return;
	}
	atomic_store_explicit(&c->last_ns, now_ns, memory_order_relaxed);
	atomic_store_explicit(&c->due_ns, 0, memory_order_relaxed);
	srn_diag_refresh(d);
}

uint64_t srn_diag_deadline(struct srn_diag *d)
{
	return d ? atomic_load_explicit(&srn_diag_clock(d)->due_ns, memory_order_relaxed) : 0;
}

const char *srn_diag_qp_state_name(enum ibv_qp_state s)
{
	static const char *const names[] = {
		[IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT", [IBV_QPS_RTR] = "RTR",
		[IBV_QPS_RTS] = "RTS",     [IBV_QPS_SQD] = "SQD",   [IBV_QPS_SQE] = "SQE",
		[IBV_QPS_ERR] = "ERR",
	};
	return (unsigned)s < sizeof(names) / sizeof(names[0]) && names[s] ? names[s] : "?";
}

static const char *const wc_status_names[] = {
	[IBV_WC_SUCCESS] = "SUCCESS",
	[IBV_WC_LOC_LEN_ERR] = "LOC_LEN_ERR",
	[IBV_WC_LOC_QP_OP_ERR] = "LOC_QP_OP_ERR",
	[IBV_WC_LOC_EEC_OP_ERR] = "LOC_EEC_OP_ERR",
	[IBV_WC_LOC_PROT_ERR] = "LOC_PROT_ERR",
	[IBV_WC_WR_FLUSH_ERR] = "WR_FLUSH_ERR",
	[IBV_WC_MW_BIND_ERR] = "MW_BIND_ERR",
	[IBV_WC_BAD_RESP_ERR] = "BAD_RESP_ERR",
	[IBV_WC_LOC_ACCESS_ERR] = "LOC_ACCESS_ERR",
	[IBV_WC_REM_INV_REQ_ERR] = "REM_INV_REQ_ERR",
	[IBV_WC_REM_ACCESS_ERR] = "REM_ACCESS_ERR",
	[IBV_WC_REM_OP_ERR] = "REM_OP_ERR",
	[IBV_WC_RETRY_EXC_ERR] = "RETRY_EXC_ERR",
	[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR_RETRY_EXC_ERR",
	[IBV_WC_LOC_RDD_VIOL_ERR] = "LOC_RDD_VIOL_ERR",
	[IBV_WC_REM_INV_RD_REQ_ERR] = "REM_INV_RD_REQ_ERR",
	[IBV_WC_REM_ABORT_ERR] = "REM_ABORT_ERR",
	[IBV_WC_INV_EECN_ERR] = "INV_EECN_ERR",
	[IBV_WC_INV_EEC_STATE_ERR] = "INV_EEC_STATE_ERR",
	[IBV_WC_FATAL_ERR] = "FATAL_ERR",
	[IBV_WC_RESP_TIMEOUT_ERR] = "RESP_TIMEOUT_ERR",
	[IBV_WC_GENERAL_ERR] = "GENERAL_ERR",
	[IBV_WC_TM_ERR] = "TM_ERR",
	[IBV_WC_TM_RNDV_INCOMPLETE] = "TM_RNDV_INCOMPLETE",
};

const char *srn_diag_wc_status_name(enum ibv_wc_status st)
{
	if ((unsigned)st < sizeof(wc_status_names) / sizeof(wc_status_names[0]) &&
	    wc_status_names[st])
		return wc_status_names[st];
	return "UNKNOWN_STATUS";
}

static const char *wr_opcode_name(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE: return "RDMA_WRITE";
	case IBV_WR_RDMA_WRITE_WITH_IMM: return "RDMA_WRITE_IMM";
	case IBV_WR_SEND: return "SEND";
	case IBV_WR_SEND_WITH_IMM: return "SEND_IMM";
	case IBV_WR_RDMA_READ: return "RDMA_READ";
	case IBV_WR_ATOMIC_CMP_AND_SWP: return "CMP_SWAP";
	case IBV_WR_ATOMIC_FETCH_AND_ADD: return "FETCH_ADD";
	case IBV_WR_LOCAL_INV: return "LOCAL_INV";
	case IBV_WR_BIND_MW: return "BIND_MW";
	case IBV_WR_SEND_WITH_INV: return "SEND_INV";
	case IBV_WR_TSO: return "TSO";
	default: return "WR";
	}
}

/* AETH syndrome (IBTA 9.7.5.2.1, table 45): type in bits 6..5, value in 4..0. */
const char *srn_diag_syndrome_str(uint8_t syn, char *buf, size_t len)
{
	static const char *const nak[] = {
		"NAK PSN sequence error", "NAK invalid request", "NAK remote access error",
		"NAK remote operational error", "NAK invalid RD request",
	};
	uint8_t v = syn & SRN_AETH_VALUE_MASK;
	switch (srn_aeth_type(syn)) {
	case SRN_AETH_TYPE_ACK:
		snprintf(buf, len, "ACK");
		break;
	case SRN_AETH_TYPE_RNR:
		snprintf(buf, len, "RNR NAK (timer %u: %.2f ms)", v, srn_rnr_timer_usec(v) / 1000.0);
		break;
	case SRN_AETH_TYPE_NAK:
		if (v < sizeof(nak) / sizeof(nak[0]))
			snprintf(buf, len, "%s", nak[v]);
		else
			snprintf(buf, len, "NAK code %u (reserved)", v);
		break;
	default:
		snprintf(buf, len, "reserved syndrome 0x%02x", syn);
	}
	return buf;
}

void srn_diag_peer_str(const struct srn_qp *qp, char *buf, size_t len)
{
	char addr[INET6_ADDRSTRLEN] = "?";
	const struct sockaddr *sa = (const struct sockaddr *)&qp->peer;
	if (!qp->peer_len) {
		snprintf(buf, len, "QP 0x%06x (no peer address yet)", qp->attr.dest_qp_num);
		return;
	}
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, addr, sizeof(addr));
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, addr, sizeof(addr));
	snprintf(buf, len, "QP 0x%06x at %s", qp->attr.dest_qp_num, addr);
}

void srn_diag_last_peer_str(struct srn_diag_obj *o, char *buf, size_t len)
{
	uint32_t syn = SRN_DIAG_GET(o->s->qp.last_peer_syndrome);
	if (syn == SRN_DIAG_PEER_NONE) {
		snprintf(buf, len, "nothing");
		return;
	}
	char s[48];
	uint64_t ago = mono_ns() - SRN_DIAG_GET(o->s->qp.last_peer_ns);
	snprintf(buf, len, "%s PSN 0x%06x %.1f ms ago", srn_diag_syndrome_str((uint8_t)syn, s, sizeof(s)),
		 SRN_DIAG_GET(o->s->qp.last_peer_psn), (double)ago / 1e6);
}

/* Was w transmitted (PSNs assigned)?  [tail, cur) were, cur if started. */
static bool wqe_started(const struct srn_qp *qp, const struct srn_swqe *w)
{
	uint32_t mask = qp->sq_size - 1;
	uint32_t rel = ((uint32_t)(w - qp->sq) - qp->sq_tail) & mask;
	uint32_t sent = qp->sq_cur - qp->sq_tail;
	return rel < sent || (rel == sent && qp->sq_cur_started);
}

void srn_diag_explain_send(struct srn_diag_obj *o, const struct srn_qp *qp,
			   const struct srn_swqe *w, enum ibv_wc_status st, const char *fmt, ...)
{
	if (!o)
		return;
	char why[SRN_DIAG_LOG_MSG], psn[32] = "", rkey[64] = "", peer[80];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (qp->sq && qp->sq_size && wqe_started(qp, w)) {
		if (w->first_psn == w->last_psn)
			snprintf(psn, sizeof(psn), " PSN 0x%06x", w->first_psn);
		else
			snprintf(psn, sizeof(psn), " PSN 0x%06x-0x%06x", w->first_psn, w->last_psn);
	}
	if (w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
	    srn_wr_is_rd_atomic(w->opcode))
		snprintf(rkey, sizeof(rkey), " rkey 0x%x va 0x%llx", w->rkey,
			 (unsigned long long)w->remote_addr);
	srn_diag_peer_str(qp, peer, sizeof(peer));
	srn_diag_qp_count(o, SRN_QPC_ERR_COMPLETIONS, 1);
	srn_diag_snap(o);
	srn_diag_log(o, SRN_LOG_ERROR, "%s: %s wr_id 0x%llx%s%s len %u to %s: %s",
		     srn_diag_wc_status_name(st), wr_opcode_name(w->opcode),
		     (unsigned long long)w->wr_id, psn, rkey, w->length, peer, why);
}

void srn_diag_explain_recv(struct srn_diag_obj *o, const struct srn_qp *qp, uint64_t wr_id,
			   enum ibv_wc_status st, const char *fmt, ...)
{
	if (!o)
		return;
	char why[SRN_DIAG_LOG_MSG], peer[80];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	srn_diag_peer_str(qp, peer, sizeof(peer));
	srn_diag_qp_count(o, SRN_QPC_ERR_COMPLETIONS, 1);
	srn_diag_snap(o);
	srn_diag_log(o, SRN_LOG_ERROR, "%s: RECV wr_id 0x%llx from %s: %s",
		     srn_diag_wc_status_name(st), (unsigned long long)wr_id, peer, why);
}
