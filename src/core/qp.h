/*
 * qp.h - queue pairs: state, attributes, send and receive queues.
 *
 * The SQ and RQ are power-of-two rings of work requests copied at post
 * time, with free-running 32-bit indices:
 *
 *   SQ:  sq_tail <= sq_cur <= sq_head
 *        [tail, cur)  transmitted, waiting for acknowledgement
 *        cur          being transmitted (sq_cur_off bytes sent so far)
 *        (cur, head)  posted, not started
 *   RQ:  [rq_tail, rq_head) posted receives; rq_tail is the one the next
 *        (or current, if resp_in_msg) incoming SEND lands in.
 *
 * Scatter/gather entries are kept as posted (lkey, addr, length) and
 * resolved through the key table when the bytes move, so a region
 * deregistered after posting gives a protection error, never a stale
 * pointer.  All fields below the verbs handle are guarded by nic->lock.
 */
#ifndef SRN_CORE_QP_H
#define SRN_CORE_QP_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "wire/icrc.h"

struct srn_nic;
struct srn_context;
struct srn_cq;
struct srn_pd;
struct srn_srq;

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
	struct srn_ah *ah;                 /* UD */
	uint32_t first_psn, last_psn;  /* assigned when transmission starts */
};

struct srn_rwqe {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t length;               /* sum of sge lengths */
};

struct srn_qp {
	struct ibv_qp_ex ibqp_ex;      /* ibqp_ex.qp_base is the ibv_qp handed out */
	struct srn_nic *nic;
	struct srn_context *ctx;
	struct srn_pd *pd;
	struct srn_cq *scq, *rcq;
	struct srn_srq *srq;
	enum ibv_qp_type type;
	uint32_t qpn;
	bool sq_sig_all;

	/* Attributes as last set through modify (state lives in ibqp too). */
	enum ibv_qp_state state;
	struct ibv_qp_attr attr;
	struct ibv_qp_cap cap;

	/* Peer, from the address vector (RC/UC). */
	struct sockaddr_storage peer;
	socklen_t peer_len;
	struct srn_ip_meta tx_meta;    /* IP/UDP facts for the ICRC of what we send */
	uint32_t mtu;                  /* path MTU in bytes */

	/* Send queue */
	struct srn_swqe *sq;
	struct ibv_sge *sq_sge;        /* sq_size * cap.max_send_sge */
	uint8_t *sq_inline;            /* sq_size * cap.max_inline_data */
	uint32_t sq_size, sq_head, sq_cur, sq_tail;
	uint32_t sq_cur_off;           /* bytes of sq[sq_cur] already sent */
	bool sq_cur_started;           /* sq[sq_cur] has its PSNs assigned */
	uint32_t req_psn;              /* next PSN to send */
	uint32_t req_una;              /* oldest unacknowledged PSN */
	uint32_t req_pkts_since_ackreq;
	bool req_blocked;              /* socket full: resume from the progress loop */
	bool sq_drained_pending;       /* SQD: raise SQ_DRAINED once empty */

	/* Receive queue */
	struct srn_rwqe *rq;
	struct ibv_sge *rq_sge;        /* rq_size * cap.max_recv_sge */
	uint32_t rq_size, rq_head, rq_tail;

	/* Responder */
	uint32_t resp_epsn;            /* next expected PSN */
	uint32_t resp_msn;
	bool resp_in_msg;              /* inside a multi-packet SEND or WRITE */
	bool resp_in_write;            /* ... and it is a WRITE */
	uint32_t resp_off;             /* bytes of the current message placed */
	uint64_t resp_write_va;        /* current WRITE: RETH va, rkey, length */
	uint32_t resp_write_rkey, resp_write_len;
	bool resp_nak_sent;            /* NAK-sequence sent for this gap (once) */
	bool resp_comm_est;            /* first packet seen in RTR: COMM_EST raised */

	/* ACK owed to the peer, flushed at the end of a receive batch. */
	bool ack_pending;
	uint8_t ack_syndrome;
	uint32_t ack_psn;
	struct srn_qp *ack_next;

	/* Deferred transmit list (socket was full). */
	struct srn_qp *tx_next;
	bool on_tx_list;
};

static inline struct srn_qp *srn_qp(struct ibv_qp *q)
{
	return (struct srn_qp *)q;
}

/* qp.c; must hold nic->lock */
int srn_qp_alloc_queues(struct srn_qp *qp);
void srn_qp_free_queues(struct srn_qp *qp);
int srn_qp_apply(struct srn_qp *qp, const struct ibv_qp_attr *attr, int mask);
void srn_qp_unlink(struct srn_qp *qp);

#endif
