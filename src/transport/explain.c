/*
 * explain.c - the one-line explanations of error completions (explain.h):
 * what the work request was, which PSNs it had been given, who the peer
 * is and what it said last.  Called by the completion path under
 * nic->lock, before the WQE completes.
 */
#include "transport/explain.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>

#include "core/qp.h"
#include "core/snap.h"
#include "diag/names.h"

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

void srn_diag_peer_str(const struct srn_qp *qp, char *buf, size_t len)
{
	char addr[INET6_ADDRSTRLEN] = "?";
	const struct sockaddr *sa = (const struct sockaddr *)&qp->path.peer;
	if (!qp->path.peer_len) {
		snprintf(buf, len, "QP 0x%06x (no peer address yet)", qp->attr.dest_qp_num);
		return;
	}
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, addr, sizeof(addr));
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, addr, sizeof(addr));
	snprintf(buf, len, "QP 0x%06x at %s", qp->attr.dest_qp_num, addr);
}

/* Was w transmitted (PSNs assigned)?  [tail, cur) were, cur if started. */
static bool wqe_started(const struct srn_qp *qp, const struct srn_swqe *w)
{
	uint32_t mask = qp->sq.size - 1;
	uint32_t rel = ((uint32_t)(w - qp->sq.wqe) - qp->sq.tail) & mask;
	uint32_t sent = qp->req.cur - qp->sq.tail;
	return rel < sent || (rel == sent && qp->req.cur_started);
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
	if (qp->sq.wqe && qp->sq.size && wqe_started(qp, w)) {
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
