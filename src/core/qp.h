/*
 * qp.h - queue pairs: state, attributes, send and receive queues.
 *
 * State is grouped by who writes it, as rxe's qp->req/resp/comp are:
 *
 *   (top)  identity, written at create; state, attr, cap at modify
 *   path   the peer and path MTU, written at modify
 *   sq     the send queue ring: head by the poster, tail by the completer
 *   req    the requester: transmit cursor and PSNs
 *   comp   the completer and the timers: what is acknowledged, retries
 *   rq     the receive queue (core/rq.h): head by the poster
 *   resp   the responder: expected PSN, message in progress, READ/atomic
 *          resources, the ACK it owes
 *
 * Send queue: a power-of-two ring of work requests copied at post time,
 * free-running 32-bit indices compared as distances from sq.tail:
 *
 *   sq.tail <= req.cur <= req.sent_end <= sq.head
 *
 *   [sq.tail, req.sent_end)   started, waiting for acknowledgement;
 *                             completed in order from sq.tail
 *   req.cur                   being transmitted (req.cur_off bytes sent);
 *                             go-back-N puts it back on sq.tail, and an
 *                             ACK that moves sq.tail past it pulls it along
 *   [req.sent_end, sq.head)   posted, never transmitted
 *
 * PSNs (24 bits, compared with srn_psn_cmp) are given at post time
 * (srn_req_number): the WQEs of [sq.tail, sq.head) own consecutive ranges
 * [first_psn, last_psn] (a READ one PSN per response packet, a local
 * BIND_MW/LOCAL_INV none), which never change, however often resent.
 *
 *   comp.una <= req.psn <= req.psn_max <= req.next_psn
 *
 *   comp.una       oldest unacknowledged PSN (the completer's)
 *   req.psn        next PSN to send
 *   req.psn_max    one past the highest PSN sent (a READ's: one past the
 *                  last response PSN it reserved): go-back-N puts req.psn
 *                  behind it; an ACK is valid for [comp.una - 1, psn_max)
 *   req.next_psn   first PSN of the next WQE posted (the poster's)
 *
 * Receive side: the responder moves a receive WQE out of the RQ or SRQ
 * into resp.recv when a message starts and completes it from there.
 *
 * Scatter/gather entries are kept as posted (lkey, addr, length) and
 * resolved through the key table when the bytes move, so a region
 * deregistered after posting gives a protection error, never a stale
 * pointer.  All fields below the verbs handle are guarded by nic->lock
 * (and the free SQ slots by sq.lock while an ibv_wr_* batch fills them).
 */
#ifndef SRN_CORE_QP_H
#define SRN_CORE_QP_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core/async.h"
#include "core/limits.h"
#include "core/rq.h"
#include "link/direct.h"
#include "wire/icrc.h"

struct srn_nic;
struct srn_context;
struct srn_cq;
struct srn_pd;
struct srn_srq;
struct srn_xrcd;
struct srn_qp_cc;

struct srn_swqe {
	uint64_t wr_id;
	enum ibv_wr_opcode opcode;
	unsigned send_flags;
	uint32_t imm_be;               /* imm_data (network order) or invalidate rkey */
	uint32_t length;               /* total payload bytes */
	uint32_t num_sge;
	bool is_inline;                /* payload copied into the slot's inline buffer */
	uint64_t remote_addr;
	uint32_t rkey;
	uint64_t compare_add, swap;
	uint32_t remote_qpn, remote_qkey;  /* UD */
	uint32_t xrc_srqn;                 /* XRC: the target SRQ */
	struct srn_ah *ah;                 /* UD */
	struct srn_mr *mw;                 /* BIND_MW */
	struct ibv_mw_bind_info bind;      /* BIND_MW */
	bool local_done;                   /* BIND_MW/LOCAL_INV executed (go-back-N skips it) */
	bool placed;                       /* WRITE_WITH_IMM: data placed directly (transport/direct.c),
					    * one packet carries the immediate alone */
	uint32_t first_psn, last_psn;  /* assigned at post (srn_req_number);
					* a READ owns one PSN per response packet */
};

/* Work requests the NIC executes itself, sending nothing. */
static inline bool srn_wr_is_local(enum ibv_wr_opcode op)
{
	return op == IBV_WR_BIND_MW || op == IBV_WR_LOCAL_INV;
}

static inline bool srn_wr_is_rd_atomic(enum ibv_wr_opcode op)
{
	return op == IBV_WR_RDMA_READ || op == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* Responder resource (IBTA 9.7.5.1.4): an accepted READ or atomic, kept so
 * a duplicate READ can be re-executed and a duplicate atomic answered
 * from the saved result without executing it twice.  A ring of
 * max_dest_rd_atomic entries; the oldest is overwritten. */
struct srn_resp_res {
	bool valid;
	bool is_atomic;
	bool pending;                  /* READ responses still to send */
	uint32_t first_psn, last_psn;
	uint32_t next_psn;             /* next READ response to send */
	uint64_t va;                   /* READ: RETH va of first_psn */
	uint32_t rkey, len;
	uint64_t orig;                 /* atomic: original value */
	uint64_t next_slice_ns;        /* READ pacing: the next slice not before (responder.c) */
};

/* The send queue ring (qp->sq), the work requests as posted.  The
 * poster (verbs, under nic->lock or sq.lock) writes head and the slots
 * past it; the completer and the flush write tail; the requester reads
 * the slots.  Its transmit cursor is qp->req.cur. */
struct srn_sq {
	struct srn_swqe *wqe;
	struct ibv_sge *sge;           /* size * cap.max_send_sge */
	uint8_t *inline_buf;           /* size * cap.max_inline_data */
	uint32_t size, head, tail;
	uint32_t reset_gen;            /* counts resets: an ibv_wr_* batch opened before
					* one is refused (head alone may look unmoved) */
	bool drained_pending;          /* SQD: raise SQ_DRAINED once empty */
	/* ibv_wr_* staging (verbs_ex.c), allocated for QPs created with
	 * send_ops_flags.  Such a QP also has sq.lock (error-checking): held
	 * by a batch from ibv_wr_start to ibv_wr_complete/abort while it
	 * writes WQEs into free SQ slots past head without nic->lock, and
	 * by ibv_post_send on that QP.  Order: sq.lock before nic->lock. */
	struct srn_wr_stage *wr_stage;
	pthread_mutex_t lock;
};
/* Where this QP's direct placements go (transport/direct.c): the route
 * to the target's ring and the target's table, kept while both entries
 * keep the generation they had (link/shm.h, link/direct.h), so a small
 * Write does not search both tables again; and copies of the target
 * QP's entry and of the region's entry used last, kept while their
 * records keep their change number.  Emptied by every modify (the
 * destination may change), the copies when the table does.  Under
 * nic->lock. */
struct srn_shm_peer;
struct srn_direct_hint {
	struct srn_shm_peer *sp;
	struct srn_direct_peer *dp;
	uint32_t sp_gen, dp_gen;
	bool q_ok, m_ok;
	uint64_t q_seq, m_seq;
	struct srn_direct_qp_ent q;
	struct srn_direct_mr_ent m;
};

/* The requester (transport/requester.c): where transmission stands in
 * the send queue and the PSN space.  Also written: next_psn by the
 * poster (srn_req_number); cur and psn by the completer when an ACK
 * overtakes them; rd_atomic_inflight decremented by the completer; cur
 * and sent_end by the flush. */
struct srn_req {
	uint32_t cur;                  /* the WQE being transmitted */
	uint32_t cur_off;              /* bytes of sq.wqe[cur] already sent */
	bool cur_started;              /* psn lies in sq.wqe[cur]'s range: a packet
					* of it went out, or go-back-N restarted it */
	uint32_t sent_end;             /* one past the newest WQE ever started */
	uint32_t psn;                  /* next PSN to send */
	uint32_t next_psn;             /* PSN the next posted WQE will start at */
	uint32_t psn_max;              /* one past the highest PSN ever sent (go-back-N
					* may put psn behind it) */
	uint32_t pkts_since_ackreq;
	bool blocked;                  /* a same-host ring was full: resume from the
					* progress loop (nic->lists.tx) */
	bool win_full;                 /* wait for SRN_SEND_WINDOW_REOPEN free PSNs */
	bool placed_direct;            /* a WQE went straight into a same-host peer (transport/direct.c) */
	uint32_t rd_atomic_inflight;   /* READ/atomic WQEs sent, not completed */
	struct srn_direct_hint direct; /* last: cold beside the fields above */
};
/* The completer (transport/completer.c) and the retransmission timers
 * (transport/timers.c): what the peer acknowledged and how many retries
 * are left.  una is written only by the completer; the retry counts and
 * the rewound mark also by go-back-N (srn_req_retry) and the timers. */
struct srn_comp {
	uint32_t una;                  /* oldest unacknowledged PSN */
	uint8_t ack_from_peer;         /* AETH syndrome of the last ACK/NAK received */
	uint32_t msn_from_peer;        /* and its MSN (a same-host target's for the
					* trace of direct operations, direct_trace.c) */
	uint32_t retry_left, rnr_left; /* reset whenever an ACK makes progress */
	bool rnr_wait;                 /* stalled until rnr_deadline */
	uint32_t rnr_psn;              /* where to resume after the RNR wait */
	bool rewound;                  /* went back to rewound_psn, no progress since */
	uint32_t rewound_psn;
	uint64_t ack_deadline;         /* local ACK timeout, 0 = not armed */
	uint64_t rnr_deadline;
	struct srn_qp *timer_next;     /* on nic->lists.timer */
	bool on_timer_list;
};
/* The responder (transport/responder.c): the PSN it expects, the
 * message in progress, the READ/atomic resources and the ACK it owes.
 * Written by the responder and tx.c's ACK queue (srn_ack_schedule and
 * srn_ack_flush, on the responder's behalf); reset and flush clear it. */
struct srn_resp {
	uint32_t epsn;                 /* next expected PSN */
	uint32_t msn;
	bool comm_est;                 /* first packet seen in RTR: COMM_EST raised */
	bool nak_sent;                 /* NAK-sequence sent for this gap (once) */
	/* The message in progress, and the receive WQE it lands in, taken
	 * out of the RQ or SRQ when its first packet arrived. */
	bool in_msg;                   /* inside a multi-packet SEND or WRITE */
	bool in_write;                 /* ... and it is a WRITE */
	uint32_t off;                  /* bytes of the current message placed */
	uint64_t write_va;             /* current WRITE: RETH va, rkey, length */
	uint32_t write_rkey, write_len;
	bool recv_valid;
	struct srn_rwqe recv;
	struct ibv_sge recv_sge[SRN_MAX_SGE];
	/* READ/atomic resources */
	struct srn_resp_res *res;      /* ring of res_size responder resources */
	uint32_t res_size, res_head;   /* res_head: next slot to (over)write */
	bool tx_pending;               /* READ responses wait for socket room */
	/* ACK owed to the peer, flushed at the end of a receive batch. */
	bool ack_pending;
	uint8_t ack_syndrome;
	uint32_t ack_psn;
	struct srn_qp *ack_next;       /* on nic->lists.ack */
};
/* Where the QP sends (RC/UC), from the address vector: written only by
 * modify (core/qp.c, srn_qp_apply), read by every stage. */
struct srn_path {
	struct sockaddr_storage peer;
	socklen_t peer_len;
	struct srn_ip_meta tx_meta;    /* IP/UDP facts for the ICRC of what we send */
	uint32_t mtu;                  /* path MTU in bytes */
	/* The UDP source port the peer QP sends from, learned by rx.c from
	 * its packets the transport took in sequence; 0 until then.  A CNP
	 * must come from it (or from the peer device's port, or port 0). */
	uint16_t peer_sport;
};

struct srn_qp {
	struct ibv_qp_ex ibqp_ex;      /* ibqp_ex.qp_base is the ibv_qp handed out */
	struct srn_nic *nic;
	struct srn_context *ctx;
	struct srn_async_ref async_ref; /* its events read, not yet acknowledged */
	struct srn_pd *pd;
	struct srn_cq *scq, *rcq;
	struct srn_srq *srq;               /* XRC receive QPs: the SRQ of the message in progress */
	struct srn_xrcd *xrcd;             /* XRC receive QPs */
	enum ibv_qp_type type;
	uint32_t qpn;
	bool sq_sig_all;

	/* Attributes as last set through modify (state lives in ibqp too). */
	enum ibv_qp_state state;
	struct ibv_qp_attr attr;
	struct ibv_qp_cap cap;

	struct srn_path path;

	/* Send queue: the ring, its requester, its completer. */
	struct srn_sq sq;
	struct srn_req req;
	struct srn_comp comp;

	/* Receive queue (unused when the QP takes from an SRQ): the poster
	 * writes its head, the responder its tail (core/rq.h). */
	struct srn_rq rq;
	struct srn_resp resp;

	/* Congestion control (transport/cc.h): NULL until the QP first
	 * meets it (a CE mark, a CNP, a rate limit), so a QP that never
	 * does pays one NULL test per packet.  cc_rate_mbps: the rate it is
	 * paced at now, 0 = not paced (for the diagnostic slot). */
	struct srn_qp_cc *cc;
	uint32_t cc_rate_mbps;

	/* On nic->lists.tx: transmission deferred (socket was full). */
	struct srn_qp *tx_next;
	bool on_tx_list;
	struct srn_diag_obj *diag;
	/* Why the next error completion happens, written by the code that
	 * detects the error (srn_qp_why) and turned into the completion's
	 * one-line explanation by transport/complete.c. */
	char err_why[160];
};

/* RC and XRC: acknowledged, retransmitted, with READ and atomics. */
static inline bool srn_qp_reliable(const struct srn_qp *qp)
{
	return qp->type == IBV_QPT_RC || qp->type == IBV_QPT_XRC_SEND ||
	       qp->type == IBV_QPT_XRC_RECV;
}

/* The opcode group its packets use (bits 7..5 of the BTH opcode). */
static inline uint8_t srn_qp_transport(const struct srn_qp *qp)
{
	switch (qp->type) {
	case IBV_QPT_UC:
		return 0x20;
	case IBV_QPT_UD:
		return 0x60;
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		return 0xa0;
	default:
		return 0x00;
	}
}

static inline struct srn_qp *srn_qp(struct ibv_qp *q)
{
	return (struct srn_qp *)q;
}

/* Take qp->sq.lock (QPs with sq.wr_stage only): 0, or -EDEADLK when this
 * thread already holds it (a post inside its own ibv_wr_* batch). */
static inline int srn_sq_lock(struct srn_qp *qp)
{
	return -pthread_mutex_lock(&qp->sq.lock);
}

/* qp.c; must hold nic->lock */
int srn_qp_alloc_queues(struct srn_qp *qp);
void srn_qp_free_queues(struct srn_qp *qp);
/* Apply a checked transition and its attributes to the QP's fields; no
 * transport effect (transport/qp_effects.h: srn_qp_modify calls this). */
int srn_qp_apply(struct srn_qp *qp, const struct ibv_qp_attr *attr, int mask);
/* An XRC receive QP takes the messages into the SRQ their XRCETH names
 * (NULL: none), using that SRQ's PD and CQ.  It counts as a user of the
 * SRQ it is bound to (srq->nqps, as a QP created on an SRQ does), so the
 * SRQ, and with it that PD and CQ, cannot be destroyed under it. */
void srn_qp_bind_xrc_srq(struct srn_qp *qp, struct srn_srq *srq);

#endif
