/*
 * direct.c - RDMA Write, Read and atomics between same-host softrnic
 * processes, executed by the requester itself (direct.h, link/direct.h).
 *
 * When a WQE may go direct:
 *  - RC, QP in RTS, an RDMA Write or Read of 1 .. max_msg_sz bytes (a
 *    Write-with-immediate's data; its immediate then goes alone as a
 *    zero-payload WRITE_ONLY_WITH_IMMEDIATE marked SRN_BTH_PLACED over
 *    the ring, whose RETH length the target's responder counts as
 *    placed: it consumes a receive and completes with the imm and the
 *    whole length, in order behind everything before it),
 *    or an 8-byte aligned atomic on a region whose pages the target put
 *    on a memfd (core/mr_share.h; others take the rings);
 *  - ordering: nothing before it on the send queue is outstanding (every
 *    earlier WQE is complete, so acknowledged, so executed by the target)
 *    and nothing of it was sent yet.  A Write behind a queued Send, a Read
 *    behind a Write still in flight, a fence: all wait like this or go
 *    as packets behind what precedes them;
 *  - the peer is a same-host device of our user with a ring (link/shm.h)
 *    and a direct table (link/direct.h), and no fault injector is on
 *    (every packet must meet it).  A packet trace (SOFTRNIC_PCAP) gets
 *    the packets the operation stands for (direct_trace.h).
 *
 * How the bytes move: through our mapping of the target's memfd when the
 * target shared the region's pages (core/mr_share.h: regions with remote
 * atomics, and large ones with remote write or read), a plain copy at
 * memory speed with no system call; else with process_vm_writev/readv
 * (one system call per message or per run of small Writes, about half
 * the speed for 1 MiB).
 *
 * The checks are the responder's (responder.c exec_write/exec_read):
 * the target QP exists under that QPN, is in RTR or RTS and takes direct
 * placement, its qp_access_flags allow the operation; the rkey names a
 * published region (not a window: those take the rings) of the QP's PD,
 * not revoked, with the right and the range (srn_mr_rights_range_ok, the
 * same function srn_mr_resolve uses).  Any check that fails sends the
 * WQE as packets: the target's responder then refuses it exactly as
 * today (NAK, its QP to ERR with the async event, REM_ACCESS_ERR here),
 * so an error looks the same whichever path was tried first.
 *
 * PSNs: a direct WQE takes none.  It got its range at post
 * (srn_req_number); since nothing is outstanding, that range starts at
 * req.psn == comp.una and nothing was sent in it, so the WQEs after it
 * (posted, never sent) are moved down by its size and next_psn with them.
 * The target's expected PSN never sees the gap.  A trace records the
 * WQE's packets with the PSNs it held, before they go back: the next
 * real packet reuses them.
 *
 * A dead target: nothing would refuse a copy into its pages (our mapping
 * keeps its memfd; a reaped pid may name another process), so its
 * liveness word (link/direct.h "Liveness") is read before any WQE goes
 * direct and again after each batch or piece has moved, behind a full
 * barrier: a completion is given only when the target was alive after the
 * bytes landed.  Otherwise the WQE takes the packets, which nobody
 * answers: retries, then RETRY_EXC_ERR, as for a responder that vanished.
 * A word, not a system call: per batch it costs a locked add on a line of
 * our own and one load of a line nobody writes until the death.
 */
#include "transport/direct.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "core/limits.h"
#include "core/mr.h"
#include "core/nic.h"
#include "core/qp.h"
#include "diag/memcheck.h"
#include "link/direct.h"
#include "link/shm.h"
#include "transport/complete.h"
#include "transport/direct_trace.h"
#include "transport/ordered_copy.h"
#include "wire/roce_hdr.h"

#define SRN_DIRECT_CHUNK (1u << 20)    /* bytes per placement: 0.1 ms at 10 GB/s */

/* Small Writes posted together go in one process_vm_writev: the system
 * call costs more than copying a few bytes, and one per Write held 8-byte
 * Writes to 1.2 M/s where the rings reach 2.5 M/s.  Bounded so a fence
 * waits for one batch at most, as for one chunk. */
#define SRN_DIRECT_BATCH 64            /* Writes per batch */
#define SRN_DIRECT_BATCH_BYTES (64u << 10)
#define SRN_DIRECT_BATCH_IOV 256       /* local pieces per batch */

/* Was the target alive after what we just placed?  Our stores (the
 * mapped copy, an atomic) are visible before the word is read (a full
 * barrier, link/direct.c), and the word turns only as the target's
 * threads exit, before the process counts as dead: "alive" means the
 * bytes landed in a live process.  (A system-call copy is complete when
 * the call returns.) */
static bool still_alive(struct srn_direct_peer *dp)
{
	return srn_direct_peer_alive_after(dp);
}

/* Our side of the transfer: the inline copy or the SGEs through their
 * lkeys (local write for a Read).  False: an lkey fails, and the packet
 * path reports the local protection error as it always does. */
static bool local_iov(struct srn_qp *qp, const struct srn_swqe *w, bool read,
		      struct iovec *iov, int *n)
{
	*n = 0;
	uint32_t idx = (uint32_t)(w - qp->sq.wqe);
	if (w->is_inline) {
		iov[0].iov_base = qp->sq.inline_buf + (size_t)idx * qp->cap.max_inline_data;
		iov[0].iov_len = w->length;
		*n = 1;
		return !read;
	}
	const struct ibv_sge *sge = qp->sq.sge + (size_t)idx * qp->cap.max_send_sge;
	uint32_t left = w->length;
	for (uint32_t i = 0; i < w->num_sge && left; i++) {
		uint32_t take = sge[i].length < left ? sge[i].length : left;
		if (!take)
			continue;
		const char *why;
		void *p = srn_mr_resolve(qp->nic, qp->pd, qp->qpn, sge[i].lkey, sge[i].addr, take,
					 read ? IBV_ACCESS_LOCAL_WRITE : 0, &why);
		if (!p)
			return false;
		iov[*n].iov_base = p;
		iov[*n].iov_len = take;
		(*n)++;
		left -= take;
	}
	return left == 0;
}

/* The responder's checks against the target's published QP: true when
 * it takes `need` from this QP; *q: its entry. */
static bool remote_qp_ok(const struct srn_direct_peer *dp, struct srn_qp *qp, unsigned need,
			 struct srn_direct_qp_ent *q)
{
	/* The kept copy while the record is unchanged (core/qp.h). */
	struct srn_direct_hint *h = &qp->req.direct;
	uint32_t qpn = qp->attr.dest_qp_num;
	if (h->q_ok && h->q.qpn == qpn && srn_direct_qp_unchanged(dp, qpn, h->q_seq))
		*q = h->q;
	else if ((h->q_ok = srn_direct_read_qp_seq(dp, qpn, &h->q, &h->q_seq)))
		*q = h->q;
	else
		return false;
	/* The target QP must be the one connected to this QP: our packets
	 * to any other would be dropped as not from its peer. */
	if (q->dest_qpn != qp->qpn ||
	    !(q->flags & SRN_DIRECT_QP_OK) ||
	    (q->state != IBV_QPS_RTR && q->state != IBV_QPS_RTS) || !(q->access & need))
		return false;
	/* Reads and atomics need a responder resource (exec_read/atomic). */
	return need == IBV_ACCESS_REMOTE_WRITE || q->max_dest_rd_atomic;
}

/* The region's part: the rkey names a published region of the QP's PD,
 * not revoked (*m: its entry, read unless `have`: read already in this
 * placement), with the right and the range.  Where [va, va+len) lies
 * in the target, or 0. */
static uint64_t remote_mr_at(const struct srn_direct_peer *dp, struct srn_qp *qp,
			     const struct srn_direct_qp_ent *q, uint32_t rkey, uint64_t va,
			     uint64_t len, unsigned need, bool have, struct srn_direct_mr_ent *m)
{
	const char *why;
	if (!have) {
		/* The kept copy while the record is unchanged (core/qp.h). */
		struct srn_direct_hint *h = &qp->req.direct;
		uint32_t slot = srn_mr_key_slot(rkey);
		if (h->m_ok && h->m.key == rkey && srn_direct_mr_unchanged(dp, slot, h->m_seq))
			*m = h->m;
		else if ((h->m_ok = srn_direct_read_mr_seq(dp, slot, rkey, &h->m, &h->m_seq)))
			*m = h->m;
		else
			return 0;
		if (m->pd != q->pd || (m->flags & SRN_DIRECT_MR_REVOKED))
			return 0;
	}
	if (!srn_mr_rights_range_ok(m->access, m->iova, m->length, need, va, len, &why))
		return 0;
	return m->base + (va - m->iova);
}

/* Both checks.  Returns where [va, va+len) lies in the target, or 0;
 * *m: the region. */
static uint64_t remote_addr(const struct srn_direct_peer *dp, struct srn_qp *qp, uint32_t rkey,
			    uint64_t va, uint64_t len, unsigned need, struct srn_direct_mr_ent *m)
{
	struct srn_direct_qp_ent q;
	if (!remote_qp_ok(dp, qp, need, &q))
		return 0;
	return remote_mr_at(dp, qp, &q, rkey, va, len, need, false, m);
}

/* Where a Write or Read of [at, at+len) in region m may be copied through
 * our mapping of the target's pages, or NULL: by system call then
 * (SOFTRNIC_DIRECT_MAP=0, or the region is not shared). */
static uint8_t *copy_ptr(struct srn_direct_peer *dp, const struct srn_qp *qp, uint32_t rkey,
			 const struct srn_direct_mr_ent *m, uint64_t at, uint64_t len)
{
	if (!qp->nic->link.direct_map_on)
		return NULL;
	return srn_direct_shared_ptr(dp, srn_mr_key_slot(rkey), m, at, len);
}

/* A Read through our mapping: into our iovecs. */
static void mapped_read(const uint8_t *src, const struct iovec *iov, int niov, uint64_t len)
{
	uint64_t off = 0;
	for (int i = 0; i < niov && off < len; i++) {
		uint64_t l = iov[i].iov_len < len - off ? iov[i].iov_len : len - off;
		memcpy(iov[i].iov_base, src + off, l);
		off += l;
	}
}

/* Move the message in pieces of SRN_DIRECT_CHUNK, each its own
 * placement (enter, check, copy, leave): a fence then waits for one piece
 * at most (about 0.1 ms), never for a whole large message.  Every piece
 * checks the whole message's range, as the responder checks it before
 * the first byte, so an invalid request places nothing; a key that stops
 * resolving mid-message stops it there (those bytes landed before the
 * dereg returned), and the packets then get the responder's refusal. */
static int place(struct srn_direct_peer *dp, struct srn_qp *qp, const struct srn_swqe *w,
		 bool write, const struct iovec *iov, int niov, unsigned *mapped)
{
	unsigned need = write ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ;
	uint64_t done = 0;
	size_t in = 0;          /* offset inside iov[i] */
	int i = 0;
	while (done < w->length) {
		uint64_t len = w->length - done < SRN_DIRECT_CHUNK ? w->length - done
								     : SRN_DIRECT_CHUNK;
		struct iovec part[SRN_MAX_SGE];
		int np = 0;
		for (uint64_t left = len; left && i < niov; np++) {
			size_t take = iov[i].iov_len - in < left ? iov[i].iov_len - in : left;
			part[np].iov_base = (uint8_t *)iov[i].iov_base + in;
			part[np].iov_len = take;
			left -= take;
			in += take;
			if (in == iov[i].iov_len) {
				i++;
				in = 0;
			}
		}
		struct srn_direct_mr_ent m;
		srn_direct_enter(dp);
		uint64_t at = remote_addr(dp, qp, w->rkey, w->remote_addr, w->length, need, &m);
		uint8_t *sh = at ? copy_ptr(dp, qp, w->rkey, &m, at + done, len) : NULL;
		int ret = -EACCES;
		if (sh) {
			if (write)
				srn_copy_ordered_iov(sh, part, np, len);
			else
				mapped_read(sh, part, np, len);
			*mapped = 1;
			ret = 0;
		} else if (at) {
			ret = srn_direct_copy(dp, write, part, np, at + done, len);
		}
		if (!ret && !still_alive(dp))
			ret = -EPIPE;   /* also the check before the next piece */
		srn_direct_leave(dp);
		if (ret)
			return ret;
		done += len;
	}
	return 0;
}

/* A run of plain RDMA Writes from the WQE at req.cur on (the first one
 * w, already admitted by srn_direct_try), each checked as the responder
 * would.  Into a shared region each is copied at once through our
 * mapping; otherwise the run is placed with one process_vm_writev.  The
 * run ends before the first WQE that is not a plain Write, is too big,
 * fails a check or would take the other way (that one then takes its own
 * turn).  Returns how many were placed (0: none, w's check or the copy
 * failed: the packets carry it). */
static unsigned place_writes(struct srn_direct_peer *dp, struct srn_qp *qp, struct srn_swqe *w,
			     const struct iovec *iov0, int niov0, unsigned *mapped)
{
	struct iovec lv[SRN_DIRECT_BATCH_IOV], rv[SRN_DIRECT_BATCH];
	int nl = 0;
	unsigned k = 0;
	uint64_t total = 0;
	bool by_map = false;
	/* The QP's entry, and a region's, are read once per batch: the whole
	 * batch is one placement (enter .. leave), which a change of either
	 * waits for (link/direct.h "Fencing"), so one look serves all of it
	 * as 64 looks would.  Each Write's range is still checked. */
	struct srn_direct_qp_ent q;
	struct srn_direct_mr_ent m;
	uint32_t m_key = 0;
	bool have_m = false;
	srn_direct_enter(dp);
	bool q_ok = remote_qp_ok(dp, qp, IBV_ACCESS_REMOTE_WRITE, &q);
	for (uint32_t idx = qp->req.cur; q_ok && idx != qp->sq.head && k < SRN_DIRECT_BATCH; idx++) {
		struct srn_swqe *x = &qp->sq.wqe[idx & (qp->sq.size - 1)];
		int n;
		if (x == w) {
			memcpy(lv, iov0, sizeof(*iov0) * (size_t)niov0);
			n = niov0;
		} else {
			if (x->opcode != IBV_WR_RDMA_WRITE || !x->length || x->placed ||
			    total + x->length > SRN_DIRECT_BATCH_BYTES ||
			    nl + (x->is_inline ? 1 : (int)x->num_sge) > SRN_DIRECT_BATCH_IOV ||
			    !local_iov(qp, x, false, lv + nl, &n))
				break;
		}
		have_m = have_m && m_key == x->rkey;
		uint64_t at = remote_mr_at(dp, qp, &q, x->rkey, x->remote_addr, x->length,
					   IBV_ACCESS_REMOTE_WRITE, have_m, &m);
		if (!at)
			break;
		have_m = true;
		m_key = x->rkey;
		uint8_t *sh = copy_ptr(dp, qp, x->rkey, &m, at, x->length);
		if (!k)
			by_map = sh != NULL;
		else if (by_map != (sh != NULL))
			break;
		if (sh) {
			srn_copy_ordered_iov(sh, lv + nl, n, x->length);
		} else {
			rv[k].iov_base = (void *)(uintptr_t)at;
			rv[k].iov_len = x->length;
		}
		nl += n;
		total += x->length;
		k++;
	}
	int ret = -EACCES;
	if (k && by_map) {
		ret = 0;
		*mapped += k;
	} else if (k) {
		/* The payload is read as by DMA (diag/memcheck.h). */
		SRN_DMA_READ_BEGIN();
		ssize_t got = process_vm_writev(dp->pid, lv, (unsigned long)nl, rv, k, 0);
		SRN_DMA_READ_END();
		ret = got == (ssize_t)total ? 0 : -EIO;
	}
	if (!ret && !still_alive(dp))
		ret = -EPIPE;
	srn_direct_leave(dp);
	return ret ? 0 : k;
}

/* A Compare-and-Swap or Fetch-and-Add on the target's page, mapped from
 * its memfd (link/direct.h "Atomics"), with the same instruction its
 * responder uses (responder.c exec_atomic: seq_cst, host order), so it is
 * atomic against the target's own CPU, its responder (ring and UDP
 * atomics) and other requesters.  Between enter and leave: a dereg or
 * revoke fences it like a copy.  0 with *orig, or -errno and nothing was
 * executed (an atomic cannot be retried: every check comes first). */
static int place_atomic(struct srn_direct_peer *dp, struct srn_qp *qp,
			const struct srn_swqe *w, uint64_t *orig)
{
	/* Misaligned: the responder's NAK (invalid request) from the packets. */
	if (w->remote_addr & 7)
		return -EINVAL;
	struct srn_direct_mr_ent m;
	srn_direct_enter(dp);
	uint64_t at = remote_addr(dp, qp, w->rkey, w->remote_addr, 8, IBV_ACCESS_REMOTE_ATOMIC, &m);
	/* The word must be aligned where it lies too (a region's iova need
	 * not share the alignment of its address, and the table is the
	 * peer's word): an atomic instruction on a misaligned word is no
	 * atomic.  The packets then carry it. */
	uint64_t *t = at && !(at & 7) ? srn_direct_shared_ptr(dp, srn_mr_key_slot(w->rkey), &m,
								 at, 8) : NULL;
	if (t) {
		if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
			*orig = w->compare_add;
			__atomic_compare_exchange_n(t, orig, w->swap, false, __ATOMIC_SEQ_CST,
						    __ATOMIC_SEQ_CST);
		} else {
			*orig = __atomic_fetch_add(t, w->compare_add, __ATOMIC_SEQ_CST);
		}
	}
	/* Executed in a process that died meanwhile: the packets carry it
	 * to nobody (it ran only if the target was alive just before, in
	 * srn_direct_try, so a live one never sees it twice). */
	bool alive = t && still_alive(dp);
	srn_direct_leave(dp);
	return !t ? -EACCES : alive ? 0 : -EPIPE;
}

/* The original value into the local buffer (8 bytes, host order, as the
 * completer scatters an atomic ACK's). */
static void scatter_orig(const struct iovec *iov, int niov, uint64_t orig)
{
	const uint8_t *src = (const uint8_t *)&orig;
	size_t left = sizeof(orig);
	for (int i = 0; i < niov && left; i++) {
		size_t take = iov[i].iov_len < left ? iov[i].iov_len : left;
		memcpy(iov[i].iov_base, src, take);
		src += take;
		left -= take;
	}
}

static void shift_later(struct srn_qp *qp, uint32_t from, uint32_t n);

/* The WQE at req.cur keeps only `keep` (0 or 1) of its PSNs: move the
 * later ones down. */
static void give_back_psns(struct srn_qp *qp, struct srn_swqe *w, uint32_t keep)
{
	uint32_t n = srn_psn_diff(w->last_psn, w->first_psn) + 1 - keep;
	if (keep)
		w->last_psn = w->first_psn;
	shift_later(qp, qp->req.cur + 1, n);
}

/* The same for a run of `count` WQEs from req.cur, none keeping any:
 * one pass over the queue behind them, not one per WQE (a deep queue of
 * small Writes would pay its depth on every one). */
static void give_back_run(struct srn_qp *qp, uint32_t count)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < count; i++) {
		const struct srn_swqe *x = &qp->sq.wqe[(qp->req.cur + i) & (qp->sq.size - 1)];
		n += srn_psn_diff(x->last_psn, x->first_psn) + 1;
	}
	shift_later(qp, qp->req.cur + count, n);
}

/* Move the PSNs of the WQEs from index `from` to the queue's head, and
 * next_psn, n down (modulo 2^24). */
static void shift_later(struct srn_qp *qp, uint32_t from, uint32_t n)
{
	if (!n)
		return;
	uint32_t back = SRN_PSN_MASK + 1 - (n & SRN_PSN_MASK);    /* - n, modulo 2^24 */
	for (uint32_t i = from; i != qp->sq.head; i++) {
		struct srn_swqe *later = &qp->sq.wqe[i & (qp->sq.size - 1)];
		later->first_psn = srn_psn_add(later->first_psn, back);
		later->last_psn = srn_psn_add(later->last_psn, back);
	}
	qp->req.next_psn = srn_psn_add(qp->req.next_psn, back);
}

/* The target's liveness word says it died: count it, forget its ring,
 * so the packets go where nobody answers and the retries count (link/shm.h
 * srn_shm_peer_gone), and its table and mappings.  Alive or unsure:
 * nothing to do. */
static void target_gone(struct srn_nic *nic, struct srn_shm_peer *sp, struct srn_direct_peer *dp)
{
	if (srn_direct_peer_life(dp) != SRN_DIRECT_DEAD) {
		/* A device closed in a live process: its table, liveness page
		 * and mappings go now (the next post looks it up again), not
		 * when the entry is needed for another target. */
		if (srn_direct_peer_closed(dp))
			srn_direct_peer_drop(dp);
		return;
	}
	srn_count(nic->diag.cnt, SRN_CNT_DIRECT_PEER_DEAD, 1);
	srn_shm_peer_gone(&nic->link.shm, sp);
	srn_direct_peer_drop(dp);       /* its mappings pin a dead process's memory */
}

/* The target's ring and table: the QP's kept pair while both entries
 * keep their generation, else looked up and kept.  A kept route skips
 * srn_shm_route's periodic look at the ring owner's pidfd: that look is
 * for the rings, and a placement reads the target's liveness word
 * before and after the bytes move anyway.  NULL: no direct target. */
static struct srn_direct_peer *target_of(struct srn_qp *qp, struct srn_shm_peer **spp)
{
	struct srn_direct_hint *h = &qp->req.direct;
	/* A target that closes its inbox closes its table too (at exit as
	 * at close), which every placement reads: the kept route needs no
	 * look at the inbox. */
	if (h->sp && h->sp->gen == h->sp_gen && h->dp->gen == h->dp_gen) {
		*spp = h->sp;
		return h->dp;
	}
	struct srn_nic *nic = qp->nic;
	struct srn_shm_peer *sp = srn_shm_route(&nic->link.shm, (const struct sockaddr *)&qp->path.peer,
						qp->path.peer_len,
						srn_qpn_member(qp->attr.dest_qp_num));
	if (!sp || !sp->seg || sp->direct_fd < 0)
		return NULL;
	struct srn_direct_peer *dp = srn_direct_peer_get(&nic->link.direct_req, sp->owner_pid,
							 sp->direct_fd, sp->cookie, 0);
	if (!dp)
		return NULL;
	*h = (struct srn_direct_hint){ .sp = sp, .dp = dp, .sp_gen = sp->gen, .dp_gen = dp->gen };
	*spp = sp;
	return dp;
}

/* May w go direct at all: an RC QP in RTS, a Write, Read or atomic the
 * packet path need not answer itself, and nothing outstanding before it. */
static bool may_place(const struct srn_qp *qp, const struct srn_swqe *w)
{
	if (!qp->nic->link.direct_on || qp->type != IBV_QPT_RC || qp->state != IBV_QPS_RTS)
		return false;
	if (w->opcode != IBV_WR_RDMA_WRITE && w->opcode != IBV_WR_RDMA_WRITE_WITH_IMM &&
	    w->opcode != IBV_WR_RDMA_READ && w->opcode != IBV_WR_ATOMIC_CMP_AND_SWP &&
	    w->opcode != IBV_WR_ATOMIC_FETCH_AND_ADD)
		return false;
	/* Zero-length and oversized requests: the responder's answers
	 * (IBTA 9.4.2.1, max_msg_sz) come from the packet path. */
	if (!w->length || w->length > SRN_MAX_MSG_SZ || w->placed)
		return false;
	return qp->sq.tail == qp->req.cur && qp->req.cur == qp->req.sent_end &&
	       !qp->req.cur_started && !qp->comp.rnr_wait && !qp->req.rd_atomic_inflight;
}

/* After a placement: count, trace and complete w (and the rest of its
 * batch), in order, as after the ACK or the last READ response. */
static void complete_placed(struct srn_qp *qp, struct srn_swqe *w, unsigned batch, bool atomic,
			    const struct iovec *iov, int niov, uint64_t orig)
{
	struct srn_nic *nic = qp->nic;
	bool write = w->opcode == IBV_WR_RDMA_WRITE;
	/* SOFTRNIC_PCAP: the packets it stood for, while the WQEs still hold
	 * their PSNs and their slots (completion frees a slot to an ibv_wr_*
	 * batch).  Without a trace, this one branch is all it costs. */
	if (__builtin_expect(nic->link.udp.pcap != NULL, 0))
		srn_direct_trace(qp, batch ? batch : 1, orig);
	/* The rest of a batch of Writes: each completes in turn, in order,
	 * as the first does below; their PSNs go back in one pass. */
	if (batch > 1)
		give_back_run(qp, batch);
	for (unsigned i = 1; i < batch; i++) {
		qp->req.cur++;
		qp->req.sent_end++;
		srn_count(nic->diag.cnt, SRN_CNT_DIRECT_WRITE, 1);
		srn_count(nic->diag.cnt, SRN_CNT_DIRECT_WRITE_BYTES, w->length);
		srn_complete_send(qp, IBV_WC_SUCCESS);
		w = &qp->sq.wqe[qp->req.cur & (qp->sq.size - 1)];
	}
	if (batch <= 1)
		give_back_psns(qp, w, 0);
	qp->req.cur++;
	qp->req.sent_end++;
	if (atomic) {
		/* Local buffer resolved with local write before the atomic ran
		 * (local_iov): this cannot fail now. */
		scatter_orig(iov, niov, orig);
		srn_count(nic->diag.cnt, SRN_CNT_DIRECT_ATOMIC, 1);
	} else {
		srn_count(nic->diag.cnt, write ? SRN_CNT_DIRECT_WRITE : SRN_CNT_DIRECT_READ, 1);
		srn_count(nic->diag.cnt,
			  write ? SRN_CNT_DIRECT_WRITE_BYTES : SRN_CNT_DIRECT_READ_BYTES, w->length);
	}
	/* Nothing was outstanding before it: complete now, in order, as
	 * after the ACK (or the last READ response). */
	srn_complete_send(qp, IBV_WC_SUCCESS);
}

bool srn_direct_try(struct srn_qp *qp, struct srn_swqe *w)
{
	struct srn_nic *nic = qp->nic;
	if (!may_place(qp, w))
		return false;
	/* Write-with-immediate: the data goes direct, then the immediate
	 * alone as one packet (the target's receive and CQ). */
	bool imm = w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
	bool write = w->opcode == IBV_WR_RDMA_WRITE || imm;
	bool atomic = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
		      w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
	/* For a post-mortem: the copy into the target faults in this thread. */
	srn_diag_busy(nic->diag.busy, SRN_DIAG_STAGE_DIRECT, qp->qpn, w->opcode, w->first_psn,
		      w->remote_addr, w->length);
	struct srn_shm_peer *sp;
	struct srn_direct_peer *dp = target_of(qp, &sp);
	if (!dp)
		return false;
	/* Before anything moves: a system-call copy must not reach a pid
	 * reaped and reused, an atomic must not run in a dead process. */
	if (srn_direct_peer_life(dp) != SRN_DIRECT_ALIVE) {
		target_gone(nic, sp, dp);
		return false;
	}
	struct iovec iov[SRN_MAX_SGE];
	int niov;
	if (!local_iov(qp, w, !write, iov, &niov))
		return false;

	uint64_t orig = 0;
	unsigned batch = 0, mapped = 0;
	int ret;
	if (write && !imm && w->length <= SRN_DIRECT_BATCH_BYTES) {
		batch = place_writes(dp, qp, w, iov, niov, &mapped);
		ret = batch ? 0 : -EACCES;
	} else {
		ret = atomic ? place_atomic(dp, qp, w, &orig)
			     : place(dp, qp, w, write, iov, niov, &mapped);
	}
	if (!ret && mapped)
		srn_count(nic->diag.cnt, SRN_CNT_DIRECT_MAPPED, mapped);
	if (ret) {
		/* A refused check or a failed copy (the target died, its
		 * pages went): the packets carry it and get the answer. */
		srn_count(nic->diag.cnt, SRN_CNT_DIRECT_FALLBACK, 1);
		target_gone(nic, sp, dp);
		return false;
	}
	qp->req.placed_direct = true;
	nic->link.direct_placed = true;
	if (imm) {
		/* The data is in place before the immediate's packet leaves:
		 * the target's completion finds it there.  That packet goes
		 * out now, in this WQE's one remaining PSN, and the WQE
		 * completes at its ACK as any Write does. */
		give_back_psns(qp, w, 1);
		w->placed = true;
		srn_count(nic->diag.cnt, SRN_CNT_DIRECT_WRITE, 1);
		srn_count(nic->diag.cnt, SRN_CNT_DIRECT_WRITE_BYTES, w->length);
		return false;
	}
	complete_placed(qp, w, batch, atomic, iov, niov, orig);
	return true;
}
