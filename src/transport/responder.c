/*
 * responder.c - executing requests from the peer's requester.
 *
 * RC (IBTA ch. 9.7, rxe_resp.c for behaviour): a request with the expected
 * PSN executes; a later PSN means loss and earns one NAK-sequence-error
 * (then silence until the expected PSN arrives); an earlier PSN is a
 * duplicate that is re-acknowledged, never executed twice.  A SEND with no
 * receive posted earns an RNR NAK and is not consumed.  Errors in the
 * request itself (class C: opcode sequence, length, access) earn a NAK and
 * move this QP to ERR.  UC executes what arrives in order and silently
 * drops a message with a gap and what arrives behind the expected PSN (a
 * duplicate or a straggler); it never answers.
 *
 * READ and atomic requests take a responder resource (qp->res ring of
 * max_dest_rd_atomic entries).  READ responses are read from memory as
 * they are sent (zero copy), in slices of SRN_RESP_SLICE packets per
 * progress pass with nic->lock released between them (and later when the
 * link is full): the resource's next_psn is where the answer resumes.  A
 * duplicate READ re-reads memory from its PSN on;
 * a duplicate atomic is answered from the saved original value and never
 * executed again (IBTA 9.7.5.1.4, rxe duplicate_request).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>

#include "core/limits.h"
#include "core/mr.h"
#include "core/mw.h"
#include "core/nic.h"
#include "core/qp.h"
#include "core/srq.h"
#include "diag/shm.h"
#include "transport/complete.h"
#include "transport/ordered_copy.h"
#include "transport/qp_count.h"
#include "transport/responder.h"
#include "transport/tx.h"
#include "wire/roce_hdr.h"

/* READ responses have no ACK clock: nothing tells the responder what
 * arrived.  So a READ of more than SRN_RESP_SLICE packets leaves in
 * slices of that many, at most one per SRN_RESP_SLICE_GAP_NS; and a call
 * of srn_resp_push sends at most a slice for the QP, after which a
 * progress pass releases nic->lock.  128 packets is what a Write's window
 * reopens by (SRN_SEND_WINDOW_REOPEN), 512 KiB at MTU 4096: about a
 * millisecond's work under the lock.  The gap is the progress thread's
 * retry period for deferred transmits (progress.c SRN_TX_RETRY_NS); it
 * caps a READ at 128 packets per 50 us, without it a target polling in a
 * loop overran the requester's socket until the READ failed (ASan).
 * (Halving the slice on each repeated READ request was tried: random
 * loss then starved the stress test's READs into retry exhaustion.) */
#define SRN_RESP_SLICE 128
#define SRN_RESP_SLICE_GAP_NS 50000ull

/* Outcome of executing one request packet. */
enum exec_result {
	EXEC_OK,
	EXEC_RNR,                      /* no receive WQE: retry later */
	EXEC_NAK_INVALID,              /* malformed/out-of-order request */
	EXEC_NAK_ACCESS,               /* rkey, range or permission */
	EXEC_NAK_OP,                   /* the responder failed (bad receive WQE) */
};

/* Make sure a receive WQE is at hand for the message starting now: from
 * the SRQ if the QP has one, else from its own RQ.  False: none posted. */
static bool recv_take(struct srn_qp *qp)
{
	if (qp->resp.recv_valid)
		return true;
	struct srn_rq *rq = qp->srq ? &qp->srq->rq : &qp->rq;
	if (!srn_rq_take(rq, &qp->resp.recv, qp->resp.recv_sge))
		return false;
	qp->resp.recv_valid = true;
	if (qp->srq)
		srn_srq_check_limit(qp->srq);
	return true;
}

/* Copy len bytes of payload to offset off of the current receive WQE's
 * buffers.  -EMSGSIZE if they do not fit, -EACCES if an lkey does not
 * resolve. */
static int place_recv(struct srn_qp *qp, const uint8_t *src, uint32_t off, uint32_t len)
{
	const struct srn_rwqe *w = &qp->resp.recv;
	if (off > w->length || len > w->length - off)
		return -EMSGSIZE;
	return srn_sge_copy_in(qp->nic, qp->pd, qp->qpn, qp->resp.recv_sge, w->num_sge, off, src,
			       len);
}

/* Path-MTU payload rules of the responder (rxe check_length): FIRST and
 * MIDDLE packets carry exactly the MTU, LAST 1..MTU, ONLY 0..MTU. */
static bool length_ok(const struct srn_qp *qp, const struct srn_pkt *p)
{
	uint16_t f = p->info->flags;
	if (f & (SRN_OPF_FIRST | SRN_OPF_MIDDLE))
		return p->paylen == qp->path.mtu;
	if (f & SRN_OPF_LAST)
		return p->paylen >= 1 && p->paylen <= qp->path.mtu;
	return p->paylen <= qp->path.mtu;
}

/* Record why a request is refused (the explanation of the NAK and of any
 * error completion it causes here) and pass the verdict on. */
__attribute__((format(printf, 3, 4)))
static enum exec_result refuse(struct srn_qp *qp, enum exec_result r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(qp->err_why, sizeof(qp->err_why), fmt, ap);
	va_end(ap);
	return r;
}

#define SEQ_ERR(qp, p) refuse(qp, EXEC_NAK_INVALID, "%s out of sequence (%s a message)", \
			      srn_opcode_name((p)->opcode), (qp)->resp.in_msg ? "inside" : "outside")
#define LEN_ERR(qp, p) refuse(qp, EXEC_NAK_INVALID, "%s carries %u bytes; path MTU %u", \
			      srn_opcode_name((p)->opcode), (p)->paylen, (qp)->path.mtu)

static enum exec_result exec_send(struct srn_qp *qp, const struct srn_pkt *p)
{
	uint16_t f = p->info->flags;
	bool first = f & (SRN_OPF_FIRST | SRN_OPF_ONLY);
	bool last = f & (SRN_OPF_LAST | SRN_OPF_ONLY);

	if (first == qp->resp.in_msg)   /* FIRST inside a message, or MIDDLE/LAST outside one */
		return SEQ_ERR(qp, p);
	if (!length_ok(qp, p))
		return LEN_ERR(qp, p);
	if (first) {
		if (!recv_take(qp))
			return EXEC_RNR;
		qp->resp.off = 0;
		qp->resp.in_write = false;
	}
	int ret = place_recv(qp, p->payload, qp->resp.off, p->paylen);
	if (ret) {
		if (ret == -EMSGSIZE)
			refuse(qp, EXEC_NAK_INVALID, "SEND of at least %u bytes does not fit the "
			       "receive buffers (%u bytes) of wr_id 0x%llx", qp->resp.off + p->paylen,
			       qp->resp.recv.length, (unsigned long long)qp->resp.recv.wr_id);
		else
			refuse(qp, EXEC_NAK_OP, "a receive buffer's lkey does not resolve for "
			       "local write (deregistered?)");
		enum ibv_wc_status st = ret == -EMSGSIZE ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR;
		if (ret == -EMSGSIZE)
			srn_count(qp->nic->diag.cnt, SRN_CNT_LOC_LEN_ERR, 1);
		srn_complete_recv(qp, st, 0, 0, 0, false, IBV_WC_RECV);
		qp->resp.in_msg = false;
		return ret == -EMSGSIZE ? EXEC_NAK_INVALID : EXEC_NAK_OP;
	}
	qp->resp.off += p->paylen;
	qp->resp.in_msg = !last;
	if (last && (f & SRN_OPF_INV)) {
		/* Send with Invalidate: the named window dies before the
		 * completion says so (IBTA 10.6.7.2.5). */
		if (srn_mw_invalidate(qp, p->ieth_rkey)) {
			refuse(qp, EXEC_NAK_INVALID, "Send with Invalidate names rkey 0x%x, not a "
			       "type 2 window of this PD", p->ieth_rkey);
			srn_complete_recv(qp, IBV_WC_REM_INV_REQ_ERR, 0, 0, 0, false, IBV_WC_RECV);
			return EXEC_NAK_INVALID;
		}
		srn_complete_recv(qp, IBV_WC_SUCCESS, qp->resp.off, IBV_WC_WITH_INV, p->ieth_rkey,
				  p->se, IBV_WC_RECV);
		srn_count(qp->nic->diag.cnt, SRN_CNT_RDMA_RECVS, 1);
	} else if (last) {
		srn_complete_recv(qp, IBV_WC_SUCCESS, qp->resp.off,
				  (f & SRN_OPF_IMM) ? IBV_WC_WITH_IMM : 0, p->imm_be, p->se,
				  IBV_WC_RECV);
		srn_count(qp->nic->diag.cnt, SRN_CNT_RDMA_RECVS, 1);
	}
	return EXEC_OK;
}

static enum exec_result exec_write(struct srn_qp *qp, const struct srn_pkt *p)
{
	uint16_t f = p->info->flags;
	bool first = f & (SRN_OPF_FIRST | SRN_OPF_ONLY);
	bool last = f & (SRN_OPF_LAST | SRN_OPF_ONLY);
	const char *why;

	if (first == qp->resp.in_msg)
		return SEQ_ERR(qp, p);
	if (!length_ok(qp, p))
		return LEN_ERR(qp, p);
	if (first) {
		if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE))
			return refuse(qp, EXEC_NAK_ACCESS, "RDMA WRITE to a QP without "
				      "IBV_ACCESS_REMOTE_WRITE in its qp_access_flags");
		if (p->reth_len > SRN_MAX_MSG_SZ)
			return refuse(qp, EXEC_NAK_INVALID, "RDMA WRITE of %u bytes: more than "
				      "max_msg_sz (%u)", p->reth_len, SRN_MAX_MSG_SZ);
		/* A zero-length WRITE checks no key (IBTA 9.4.2.1). */
		if (p->reth_len &&
		    !srn_mr_resolve(qp->nic, qp->pd, qp->qpn, p->reth_rkey, p->reth_va, p->reth_len,
				    IBV_ACCESS_REMOTE_WRITE, &why))
			return refuse(qp, EXEC_NAK_ACCESS, "RDMA WRITE rkey 0x%x va 0x%llx len %u: %s",
				      p->reth_rkey, (unsigned long long)p->reth_va, p->reth_len, why);
		qp->resp.write_va = p->reth_va;
		qp->resp.write_rkey = p->reth_rkey;
		qp->resp.write_len = p->reth_len;
		qp->resp.off = 0;
		qp->resp.in_write = true;
	} else if (!qp->resp.in_write) {
		return SEQ_ERR(qp, p);
	}
	if (last && (f & SRN_OPF_IMM) && !recv_take(qp))
		return EXEC_RNR;
	if (p->paylen > qp->resp.write_len - qp->resp.off)
		return refuse(qp, EXEC_NAK_INVALID, "RDMA WRITE carries more than the %u bytes its "
			      "RETH announced", qp->resp.write_len);
	if (p->paylen) {
		void *dst = srn_mr_resolve(qp->nic, qp->pd, qp->qpn, qp->resp.write_rkey,
					   qp->resp.write_va + qp->resp.off, p->paylen,
					   IBV_ACCESS_REMOTE_WRITE, &why);
		if (!dst)   /* deregistered mid-message */
			return refuse(qp, EXEC_NAK_ACCESS, "RDMA WRITE rkey 0x%x va 0x%llx: %s "
				      "(changed during the message)", qp->resp.write_rkey,
				      (unsigned long long)(qp->resp.write_va + qp->resp.off), why);
		/* The message's last bytes land last, as from a NIC. */
		if (last)
			srn_copy_ordered(dst, p->payload, p->paylen);
		else
			memcpy(dst, p->payload, p->paylen);
	}
	/* The requester placed the data itself (transport/direct.c) and
	 * sends the immediate alone: the message counts all of it. */
	if (p->placed && !p->paylen && (f & SRN_OPF_ONLY) && (f & SRN_OPF_IMM))
		qp->resp.off = qp->resp.write_len;
	else
		qp->resp.off += p->paylen;
	qp->resp.in_msg = !last;
	if (last) {
		if (qp->resp.off != qp->resp.write_len) {
			qp->resp.in_msg = false;
			return refuse(qp, EXEC_NAK_INVALID, "RDMA WRITE carried %u bytes, its RETH "
				      "announced %u", qp->resp.off, qp->resp.write_len);
		}
		if (f & SRN_OPF_IMM)
			srn_complete_recv(qp, IBV_WC_SUCCESS, qp->resp.write_len, IBV_WC_WITH_IMM, p->imm_be,
					  p->se, IBV_WC_RECV_RDMA_WITH_IMM);
	}
	return EXEC_OK;
}

static struct srn_resp_res *res_alloc(struct srn_qp *qp)
{
	struct srn_resp_res *r = &qp->resp.res[qp->resp.res_head++ & (qp->resp.res_size - 1)];
	memset(r, 0, sizeof(*r));
	r->valid = true;
	return r;
}

/* Response packets (and PSNs) of a READ of len bytes.  In 64 bits: in 32,
 * len + mtu - 1 wrapped to a count of 0 for len > 2^32 - mtu, which stood
 * for 2^24 packets.  Callers keep len <= SRN_MAX_MSG_SZ, so the count is
 * at most 2^23 and fits the PSN space. */
static uint32_t read_npkts(const struct srn_qp *qp, uint32_t len)
{
	return len ? (uint32_t)(((uint64_t)len + qp->path.mtu - 1) / qp->path.mtu) : 1;
}

static enum exec_result exec_read(struct srn_qp *qp, const struct srn_pkt *p, bool dup)
{
	const char *why;
	/* A new READ cannot start inside a message; a resent one answers a
	 * request that came before that message, so the rule is not its. */
	if (qp->resp.in_msg && !dup)
		return SEQ_ERR(qp, p);
	if (qp->attr.max_dest_rd_atomic == 0)
		return refuse(qp, EXEC_NAK_INVALID, "RDMA READ to a QP with max_dest_rd_atomic 0");
	if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_READ))
		return refuse(qp, EXEC_NAK_ACCESS, "RDMA READ from a QP without "
			      "IBV_ACCESS_REMOTE_READ in its qp_access_flags");
	/* A message larger than the device's max_msg_sz is an invalid
	 * request (rxe check_length); it also keeps read_npkts in range. */
	if (p->reth_len > SRN_MAX_MSG_SZ)
		return refuse(qp, EXEC_NAK_INVALID, "RDMA READ of %u bytes: more than max_msg_sz "
			      "(%u)", p->reth_len, SRN_MAX_MSG_SZ);
	if (p->reth_len &&
	    !srn_mr_resolve(qp->nic, qp->pd, qp->qpn, p->reth_rkey, p->reth_va, p->reth_len,
			    IBV_ACCESS_REMOTE_READ, &why))
		return refuse(qp, EXEC_NAK_ACCESS, "RDMA READ rkey 0x%x va 0x%llx len %u: %s",
			      p->reth_rkey, (unsigned long long)p->reth_va, p->reth_len, why);
	struct srn_resp_res *r = res_alloc(qp);
	r->first_psn = r->next_psn = p->psn;
	r->last_psn = srn_psn_add(p->psn, read_npkts(qp, p->reth_len) - 1);
	r->va = p->reth_va;
	r->rkey = p->reth_rkey;
	r->len = p->reth_len;
	r->pending = true;
	qp->resp.tx_pending = true;
	srn_count(qp->nic->diag.cnt, SRN_CNT_RDMA_READS, 1);
	return EXEC_OK;
}

static enum exec_result exec_atomic(struct srn_qp *qp, const struct srn_pkt *p)
{
	const char *why;
	if (qp->resp.in_msg)
		return SEQ_ERR(qp, p);
	if (qp->attr.max_dest_rd_atomic == 0)
		return refuse(qp, EXEC_NAK_INVALID, "atomic to a QP with max_dest_rd_atomic 0");
	if (p->atm_va & 7)              /* atomics need 8-byte alignment */
		return refuse(qp, EXEC_NAK_INVALID, "atomic at va 0x%llx: not 8-byte aligned",
			      (unsigned long long)p->atm_va);
	if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC))
		return refuse(qp, EXEC_NAK_ACCESS, "atomic to a QP without "
			      "IBV_ACCESS_REMOTE_ATOMIC in its qp_access_flags");
	uint64_t *t = srn_mr_resolve(qp->nic, qp->pd, qp->qpn, p->atm_rkey, p->atm_va, 8,
				     IBV_ACCESS_REMOTE_ATOMIC, &why);
	if (!t)
		return refuse(qp, EXEC_NAK_ACCESS, "atomic rkey 0x%x va 0x%llx: %s", p->atm_rkey,
			      (unsigned long long)p->atm_va, why);
	/* Atomic against the target process's own CPU accesses too, hence
	 * the builtins rather than a plain read-modify-write.  Values are in
	 * host order in memory (as rxe and mlx5 on x86 treat them). */
	uint64_t orig;
	if ((p->opcode & SRN_OPCODE_OP_MASK) == SRN_OP_RC_COMPARE_SWAP) {
		orig = p->atm_compare;
		__atomic_compare_exchange_n(t, &orig, p->atm_swap_add, false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
	} else {
		orig = __atomic_fetch_add(t, p->atm_swap_add, __ATOMIC_SEQ_CST);
	}
	struct srn_resp_res *r = res_alloc(qp);
	r->is_atomic = true;
	r->first_psn = r->last_psn = p->psn;
	r->orig = orig;
	srn_count(qp->nic->diag.cnt, SRN_CNT_ATOMICS, 1);
	return EXEC_OK;
}

static enum exec_result execute(struct srn_qp *qp, const struct srn_pkt *p)
{
	uint16_t f = p->info->flags;
	if (f & SRN_OPF_SEND)
		return exec_send(qp, p);
	if (f & SRN_OPF_WRITE)
		return exec_write(qp, p);
	if (srn_qp_reliable(qp) && (f & SRN_OPF_READ_REQ))
		return exec_read(qp, p, false);
	if (srn_qp_reliable(qp) && (f & SRN_OPF_ATOMIC))
		return exec_atomic(qp, p);
	return refuse(qp, EXEC_NAK_INVALID, "%s is not supported",   /* FLUSH, ATOMIC_WRITE */
		      srn_opcode_name(p->opcode));
}

static int send_atomic_ack(struct srn_qp *qp, const struct srn_resp_res *r)
{
	struct srn_resp_src src = srn_resp_src_of(qp);
	struct srn_pkt a;
	srn_atomic_ack_pkt(&src, r->first_psn, r->orig, &a);
	return srn_xmit(qp, &a, NULL, 0);
}

/* Send READ response packets of one resource until it is answered, the
 * slice is spent (*budget packets; then -EBUSY) or the link has no room
 * (-EAGAIN).  r->next_psn is where it resumes: the next progress pass,
 * a duplicate request going back, or go-back-N all restart there. */
static int send_read(struct srn_qp *qp, struct srn_resp_res *r, uint32_t *budget)
{
	uint32_t n = srn_psn_diff(r->last_psn, r->first_psn) + 1;
	/* Only a READ larger than a slice is paced; a smaller one goes out
	 * whole as long as this call's budget lasts. */
	bool paced = n > SRN_RESP_SLICE;
	uint64_t now = 0;
	if (paced && r->next_slice_ns) {
		now = srn_now_ns();
		if ((int64_t)(now - r->next_slice_ns) < 0)
			return -EBUSY;      /* the previous slice left too recently */
	}
	uint32_t own = paced ? SRN_RESP_SLICE : UINT32_MAX, sent = 0;
	while (r->pending) {
		if (*budget == 0)
			return -EBUSY;      /* the next pass goes on */
		if (sent == own) {
			r->next_slice_ns = (now ? now : srn_now_ns()) + SRN_RESP_SLICE_GAP_NS;
			return -EBUSY;
		}
		uint32_t idx = srn_psn_diff(r->next_psn, r->first_psn);
		uint64_t off = (uint64_t)idx * qp->path.mtu;
		if (off > r->len) {     /* cannot happen while len <= max_msg_sz */
			r->pending = false;
			return 0;
		}
		uint32_t len = r->len - off < qp->path.mtu ? (uint32_t)(r->len - off) : qp->path.mtu;
		struct srn_resp_src src = srn_resp_src_of(qp);
		struct srn_pkt p;
		srn_read_resp_pkt(&src, r->first_psn, idx, n, len, &p);
		struct iovec iov = { NULL, len };
		if (len) {
			const char *why;
			iov.iov_base = srn_mr_resolve(qp->nic, qp->pd, qp->qpn, r->rkey, r->va + off, len,
						      IBV_ACCESS_REMOTE_READ, &why);
			if (!iov.iov_base) {
				/* Deregistered while the READ was answered. */
				r->pending = false;
				srn_ack_schedule(qp, SRN_AETH_NAK_REM_ACCESS, r->next_psn);
				srn_count(qp->nic->diag.cnt, SRN_CNT_RESP_REMOTE_ACCESS_ERR, 1);
				srn_qp_fail(qp, IBV_EVENT_QP_ACCESS_ERR);
				return 0;
			}
		}
		int ret = srn_xmit(qp, &p, &iov, len ? 1 : 0);
		if (ret)
			return ret;
		(*budget)--;
		sent++;
		if (r->next_psn == r->last_psn)
			r->pending = false;
		r->next_psn = srn_psn_add(r->next_psn, 1);
	}
	return 0;
}

bool srn_resp_push(struct srn_qp *qp)
{
	if (!qp->resp.tx_pending)
		return true;
	/* A READ is answered in slices, at most SRN_RESP_SLICE packets per
	 * call: the rest waits for the progress loop (srn_tx_resume), with
	 * nic->lock released in between, so a 1 GiB READ cannot hold the
	 * NIC (and every verbs call of the target) for seconds. */
	uint32_t budget = SRN_RESP_SLICE;
	/* Oldest first, so responses leave in PSN order: READ response
	 * packets and atomic ACKs alike wait for room behind older ones. */
	for (uint32_t i = 0; i < qp->resp.res_size; i++) {
		struct srn_resp_res *r = &qp->resp.res[(qp->resp.res_head + i) & (qp->resp.res_size - 1)];
		if (!r->valid || !r->pending)
			continue;
		int ret = r->is_atomic ? send_atomic_ack(qp, r) : send_read(qp, r, &budget);
		if (ret == -EAGAIN || ret == -EBUSY) {     /* link full, or slice spent */
			srn_tx_defer(qp);
			return false;
		}
		if (r->is_atomic)
			r->pending = false;     /* sent, or unbuildable: the requester retries */
	}
	qp->resp.tx_pending = false;
	return true;
}

/* Room for re-executing a duplicate READ: make resp.res_head point at a slot
 * that holds no atomic's saved result (those must survive until the
 * requester has its answer).  False if every slot holds one. */
static bool dup_read_slot(struct srn_qp *qp)
{
	for (uint32_t i = 0; i < qp->resp.res_size; i++) {
		uint32_t k = (qp->resp.res_head + i) & (qp->resp.res_size - 1);
		if (!qp->resp.res[k].valid || !qp->resp.res[k].is_atomic) {
			qp->resp.res_head += i;
			return true;
		}
	}
	return false;
}

/* A duplicate READ or atomic (PSN before ePSN). */
static void duplicate_rd_atomic(struct srn_qp *qp, const struct srn_pkt *p)
{
	for (uint32_t i = 0; i < qp->resp.res_size; i++) {
		struct srn_resp_res *r = &qp->resp.res[i];
		if (!r->valid || srn_psn_cmp(p->psn, r->first_psn) < 0 ||
		    srn_psn_cmp(p->psn, r->last_psn) > 0)
			continue;
		if (r->is_atomic && (p->info->flags & SRN_OPF_ATOMIC) && p->psn == r->first_psn) {
			srn_count(qp->nic->diag.cnt, SRN_CNT_DUP_ATOMIC, 1);
			r->pending = true;
			qp->resp.tx_pending = true;
			srn_resp_push(qp);
			return;
		}
		if (!r->is_atomic && (p->info->flags & SRN_OPF_READ_REQ) && p->reth_rkey == r->rkey) {
			/* The re-request must lie inside the original; if it
			 * does not, it is answered as asked below. */
			uint64_t off = (uint64_t)srn_psn_diff(p->psn, r->first_psn) * qp->path.mtu;
			if (off > r->len || p->reth_va != r->va + off || p->reth_len != r->len - off)
				break;
			srn_count(qp->nic->diag.cnt, SRN_CNT_DUP_READ, 1);
			r->next_psn = p->psn;
			r->pending = true;
			qp->resp.tx_pending = true;
			srn_resp_push(qp);
			return;
		}
	}
	/* No resource left for it (overwritten by newer ones).  A READ has no
	 * side effect, so it is executed again as asked (IBTA: a responder
	 * must be able to re-execute duplicate READs); an atomic without its
	 * saved result cannot be answered and is dropped. */
	if ((p->info->flags & SRN_OPF_READ_REQ) && dup_read_slot(qp) &&
	    exec_read(qp, p, true) == EXEC_OK) {
		srn_count(qp->nic->diag.cnt, SRN_CNT_DUP_READ, 1);
		srn_resp_push(qp);
	}
	qp->err_why[0] = 0;
}

/* A class-C NAK: the request is refused and this QP goes to ERR; say why
 * here, where the reason is known (the requester only learns the code). */
static void nak(struct srn_qp *qp, const struct srn_pkt *p, uint8_t syndrome, const char *what)
{
	srn_ack_schedule(qp, syndrome, p->psn);
	if (syndrome == SRN_AETH_NAK_REM_ACCESS)
		srn_count(qp->nic->diag.cnt, SRN_CNT_RESP_REMOTE_ACCESS_ERR, 1);
	srn_diag_log(qp->diag, SRN_LOG_ERROR, "NAK %s for %s PSN 0x%06x: %s", what,
		     srn_opcode_name(p->opcode), p->psn,
		     qp->err_why[0] ? qp->err_why : "no further detail recorded");
	qp->err_why[0] = 0;
}

static void rc_request(struct srn_qp *qp, const struct srn_pkt *p)
{
	int c = srn_psn_cmp(p->psn, qp->resp.epsn);

	if (c > 0) {
		srn_qp_count(qp, SRN_CNT_OUT_OF_SEQUENCE, SRN_QPC_OUT_OF_SEQUENCE, 1);
		if (!qp->resp.nak_sent) {
			qp->resp.nak_sent = true;
			srn_ack_schedule(qp, SRN_AETH_NAK_PSN_SEQ, qp->resp.epsn);
			srn_qp_count(qp, SRN_CNT_SEQ_NAK_SENT, SRN_QPC_SEQ_NAK_SENT, 1);
			srn_diag_log(qp->diag, SRN_LOG_INFO, "PSN 0x%06x arrived, 0x%06x expected: "
				     "NAK sequence error", p->psn, qp->resp.epsn);
		}
		return;
	}
	if (c < 0) {
		/* Duplicate: acknowledge up to the newest PSN executed so the
		 * requester stops resending; never execute again. */
		srn_qp_count(qp, SRN_CNT_DUPLICATE_REQUEST, SRN_QPC_DUPLICATE_REQUEST, 1);
		if (p->info->flags & (SRN_OPF_READ_REQ | SRN_OPF_ATOMIC))
			duplicate_rd_atomic(qp, p);
		else
			srn_ack_schedule(qp, SRN_AETH_ACK_UNLIMITED,
					 srn_psn_add(qp->resp.epsn, SRN_PSN_MASK));
		return;
	}
	bool last = p->info->flags & (SRN_OPF_LAST | SRN_OPF_ONLY);
	switch (execute(qp, p)) {
	case EXEC_OK:
		break;
	case EXEC_RNR:
		srn_qp_count(qp, SRN_CNT_SEND_RNR_ERR, SRN_QPC_SEND_RNR_ERR, 1);
		qp->resp.nak_sent = true;   /* stay silent about what follows */
		srn_ack_schedule(qp, SRN_AETH_RNR_NAK | (qp->attr.min_rnr_timer & SRN_AETH_VALUE_MASK), p->psn);
		return;
	case EXEC_NAK_INVALID:
		nak(qp, p, SRN_AETH_NAK_INVALID, "invalid request");
		srn_qp_fail(qp, IBV_EVENT_QP_REQ_ERR);
		return;
	case EXEC_NAK_ACCESS:
		nak(qp, p, SRN_AETH_NAK_REM_ACCESS, "remote access error");
		srn_qp_fail(qp, IBV_EVENT_QP_ACCESS_ERR);
		return;
	case EXEC_NAK_OP:
		nak(qp, p, SRN_AETH_NAK_REM_OP, "remote operational error");
		srn_qp_fail(qp, IBV_EVENT_QP_FATAL);
		return;
	}
	qp->resp.nak_sent = false;
	uint16_t f = p->info->flags;
	/* A READ consumes one PSN per response packet (IBTA 9.7.4.1.3). */
	qp->resp.epsn = srn_psn_add(qp->resp.epsn,
				    (f & SRN_OPF_READ_REQ) ? read_npkts(qp, p->reth_len) : 1);
	if (last)   /* MSN counts messages; READ counts on acceptance (C9-148) */
		qp->resp.msn = (qp->resp.msn + 1) & SRN_MSN_MASK;
	if (f & SRN_OPF_READ_REQ) {
		srn_resp_push(qp);
		return;             /* the responses are the acknowledgement */
	}
	if (f & SRN_OPF_ATOMIC) {
		/* Its ACK leaves in turn (srn_resp_push), kept owed if the
		 * link has no room now. */
		qp->resp.res[(qp->resp.res_head - 1) & (qp->resp.res_size - 1)].pending = true;
		qp->resp.tx_pending = true;
		srn_resp_push(qp);
		return;
	}
	if (p->ackreq)
		srn_ack_schedule(qp, SRN_AETH_ACK_UNLIMITED, p->psn);
}

static void uc_request(struct srn_qp *qp, const struct srn_pkt *p)
{
	uint16_t f = p->info->flags;
	int c = srn_psn_cmp(p->psn, qp->resp.epsn);
	if (c < 0) {
		/* Behind the expected PSN: a duplicate or a straggler overtaken
		 * on the wire.  Its message was delivered or given up; taking
		 * it now would deliver a message twice or out of order. */
		srn_qp_count(qp, SRN_CNT_DUPLICATE_REQUEST, SRN_QPC_DUPLICATE_REQUEST, 1);
		return;
	}
	if (c > 0) {
		/* A gap: the message in progress is lost as a whole. */
		srn_qp_count(qp, SRN_CNT_OUT_OF_SEQUENCE, SRN_QPC_OUT_OF_SEQUENCE, 1);
		qp->resp.in_msg = false;
	}
	qp->resp.epsn = srn_psn_add(p->psn, 1);
	if (!(f & (SRN_OPF_FIRST | SRN_OPF_ONLY)) && !qp->resp.in_msg)
		return;     /* tail of a message whose start was lost */
	if (execute(qp, p) != EXEC_OK)
		qp->resp.in_msg = false;   /* UC errors are silent drops */
	qp->err_why[0] = 0;
}

/* The 40 bytes a UD receive buffer starts with (IBV_WC_GRH): for RoCEv2
 * over IPv4 the IPv4 header in the last 20 of them, the first 20 zero
 * (rdma-core's and mlx5's convention); over IPv6 the IPv6 header. */
static void build_grh(const struct srn_qp *qp, const struct sockaddr *src, uint32_t paylen,
		      uint8_t grh[SRN_GRH_LEN])
{
	memset(grh, 0, SRN_GRH_LEN);
	uint16_t udp_len = (uint16_t)(8 + paylen);
	if (src->sa_family == AF_INET) {
		uint8_t *ip = grh + 20;
		uint16_t tot = htobe16((uint16_t)(20 + udp_len));
		ip[0] = 0x45;
		memcpy(ip + 2, &tot, 2);
		ip[6] = 0x40;           /* DF */
		ip[8] = 64;
		ip[9] = 17;
		memcpy(ip + 12, &((const struct sockaddr_in *)src)->sin_addr, 4);
		memcpy(ip + 16, &((const struct sockaddr_in *)&qp->nic->link.udp.local)->sin_addr, 4);
		uint32_t sum = 0;
		for (int i = 0; i < 20; i += 2)
			sum += (uint32_t)ip[i] << 8 | ip[i + 1];
		while (sum >> 16)
			sum = (sum & 0xffff) + (sum >> 16);
		uint16_t csum = htobe16((uint16_t)~sum);
		memcpy(ip + 10, &csum, 2);
	} else {
		uint16_t plen = htobe16(udp_len);
		grh[0] = 0x60;
		memcpy(grh + 4, &plen, 2);
		grh[6] = 17;
		grh[7] = 64;
		memcpy(grh + 8, &((const struct sockaddr_in6 *)src)->sin6_addr, 16);
		memcpy(grh + 24, &((const struct sockaddr_in6 *)&qp->nic->link.udp.local)->sin6_addr, 16);
	}
}

static void ud_request(struct srn_qp *qp, const struct srn_pkt *p, const struct sockaddr *src)
{
	struct srn_nic *nic = qp->nic;
	/* Q_Key must match the QP's (IBTA 10.2.4); mismatches are counted
	 * and dropped silently, as UD errors are. */
	if (p->deth_qkey != qp->attr.qkey) {
		srn_count(nic->diag.cnt, SRN_CNT_QKEY_VIOLATION, 1);
		return;
	}
	if (!recv_take(qp)) {
		srn_count(nic->diag.cnt, SRN_CNT_UD_NO_RECV, 1);
		return;
	}
	uint8_t grh[SRN_GRH_LEN];
	build_grh(qp, src, p->paylen + (uint32_t)p->info->hdr_len + srn_pad_of(p->paylen) +
				   SRN_ICRC_LEN, grh);
	int ret = place_recv(qp, grh, 0, SRN_GRH_LEN);
	if (!ret)
		ret = place_recv(qp, p->payload, SRN_GRH_LEN, p->paylen);
	if (ret) {
		srn_count(nic->diag.cnt, SRN_CNT_LOC_LEN_ERR, ret == -EMSGSIZE);
		srn_qp_why(qp, ret == -EMSGSIZE ? "datagram of %u bytes (+40 GRH) does not fit the "
			   "receive buffers" : "receive buffer lkey does not resolve (%u bytes)",
			   p->paylen);
		srn_complete_recv(qp, ret == -EMSGSIZE ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR, 0,
				  0, 0, false, IBV_WC_RECV);
		qp->err_why[0] = 0;
		return;
	}
	srn_count(nic->diag.cnt, SRN_CNT_RDMA_RECVS, 1);
	srn_complete_recv_ud(qp, SRN_GRH_LEN + p->paylen, p->info->flags & SRN_OPF_IMM, p->imm_be,
			     p->se, p->deth_sqpn);
}

/* An XRC receive QP takes each message into the SRQ its XRCETH names,
 * which must be an XRC SRQ of the QP's domain; that SRQ's PD checks keys
 * and its CQ gets the completion.  A bad number is the sender's error:
 * NAK invalid request (a duplicate just goes through rc_request). */
static bool xrc_target(struct srn_qp *qp, const struct srn_pkt *p)
{
	if (qp->srq && p->xrc_srqn == qp->srq->srqn)
		return true;
	struct srn_srq *srq = srn_srq_lookup(qp->nic, p->xrc_srqn);
	if (srq && srq->xrcd == qp->xrcd && !qp->resp.in_msg) {
		/* Bound until another SRQ is named or the QP is reset or
		 * destroyed: the SRQ cannot be destroyed meanwhile
		 * (ibv_destroy_srq: EBUSY). */
		srn_qp_bind_xrc_srq(qp, srq);
		return true;
	}
	if (srn_psn_cmp(p->psn, qp->resp.epsn) != 0)
		return true;    /* out of sequence or duplicate: rc_request decides */
	if (qp->resp.in_msg)    /* its receive WQE came from the SRQ it started in */
		refuse(qp, EXEC_NAK_INVALID, "XRC SRQ number %u inside a message that started "
		       "in SRQ %u", p->xrc_srqn, qp->srq ? qp->srq->srqn : 0);
	else
		refuse(qp, EXEC_NAK_INVALID, "XRC SRQ number %u is not an XRC SRQ of this "
		       "QP's domain", p->xrc_srqn);
	nak(qp, p, SRN_AETH_NAK_INVALID, "invalid request");
	srn_qp_fail(qp, IBV_EVENT_QP_REQ_ERR);
	return false;
}

void srn_resp_packet(struct srn_qp *qp, const struct srn_pkt *p, const struct sockaddr *src)
{
	if (qp->type == IBV_QPT_UD) {
		ud_request(qp, p, src);
		return;
	}
	if (qp->state == IBV_QPS_RTR && !qp->resp.comm_est) {
		qp->resp.comm_est = true;
		srn_qp_event(qp, IBV_EVENT_COMM_EST);
	}
	if (qp->type == IBV_QPT_XRC_RECV && !xrc_target(qp, p))
		return;
	if (srn_qp_reliable(qp))
		rc_request(qp, p);
	else if (qp->type == IBV_QPT_UC)
		uc_request(qp, p);
}
