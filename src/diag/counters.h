/*
 * counters.h - device-wide event counters.
 *
 * One enum, one name table (counters.c) and a static assert that they
 * match.  Names follow Linux rxe / mlx5 where such a name exists, so a
 * user who knows `rdma statistic` recognises them.  Counters are plain
 * relaxed atomics: cheap enough to stay on in the fast path, and safe to
 * read from another thread while the data path runs.
 */
#ifndef SRN_DIAG_COUNTERS_H
#define SRN_DIAG_COUNTERS_H

#include <stdatomic.h>
#include <stdint.h>

enum srn_counter {
	SRN_CNT_SENT_PKTS,          /* sent_pkts */
	SRN_CNT_RCVD_PKTS,          /* rcvd_pkts */
	SRN_CNT_SENT_BYTES,
	SRN_CNT_RCVD_BYTES,
	SRN_CNT_RDMA_SENDS,         /* rdma_sends: first packets of SENDs sent (resends too) */
	SRN_CNT_RDMA_RECVS,         /* rdma_recvs: SEND messages delivered */
	SRN_CNT_DUPLICATE_REQUEST,  /* duplicate_request: a request the responder had (also a stale
				     * ACK/NAK or response the completer drops) */
	SRN_CNT_OUT_OF_SEQUENCE,    /* out_of_sequence (rxe: rcvd_seq_err): responder saw a PSN gap */
	SRN_CNT_RCVD_SEQ_ERR,       /* packet_seq_err: NAK-sequence received (requester) */
	SRN_CNT_SEQ_NAK_SENT,       /* NAK-sequence sent */
	SRN_CNT_RCVD_RNR_ERR,       /* rcvd_rnr_err: RNR NAK received */
	SRN_CNT_SEND_RNR_ERR,       /* send_rnr_err: RNR NAK sent */
	SRN_CNT_ACKS_SENT,
	SRN_CNT_ACKS_RCVD,
	SRN_CNT_BAD_ICRC,           /* ICRC mismatch, dropped */
	SRN_CNT_ICRC_ID_SOLVED,     /* ICRC matched after solving a foreign IPv4 ID */
	SRN_CNT_MALFORMED,          /* failed header validation */
	SRN_CNT_UNKNOWN_QP,         /* destination QP does not exist */
	SRN_CNT_ADDR_MISMATCH,      /* packet not from the QP's peer */
	SRN_CNT_QP_STATE_DROP,      /* QP in a state that takes no packets */
	SRN_CNT_RX_TRUNCATED,       /* datagram larger than the receive buffer */
	SRN_CNT_TX_EAGAIN,          /* socket buffer full at flush: packets dropped (RC resends) */
	SRN_CNT_TX_ERR,             /* a send or doorbell the kernel refused: packets dropped */
	SRN_CNT_SEND_ERR,           /* send_err: requester error completions */
	SRN_CNT_LOC_LEN_ERR,
	SRN_CNT_CQ_OVERFLOW,
	SRN_CNT_RDMA_READS,         /* RDMA READ requests executed as responder */
	SRN_CNT_ATOMICS,            /* atomics executed as responder */
	SRN_CNT_RETRANSMITS,        /* go-back-N rewinds */
	SRN_CNT_LOCAL_ACK_TIMEOUT,  /* local_ack_timeout_err */
	SRN_CNT_RETRY_EXCEEDED,     /* retry_exceeded_err */
	SRN_CNT_RNR_RETRY_EXCEEDED, /* rnr_retry_exceeded_err */
	SRN_CNT_IMPLIED_NAK,        /* implied_nak_seq_err */
	SRN_CNT_DUP_READ,           /* duplicate READ re-executed */
	SRN_CNT_DUP_ATOMIC,         /* duplicate atomic answered from saved result */
	SRN_CNT_QKEY_VIOLATION,     /* UD: Q_Key mismatch, dropped */
	SRN_CNT_UD_NO_RECV,         /* UD: no receive posted, dropped */
	SRN_CNT_BG_WAKEUPS,         /* progress thread woke to do work */
	SRN_CNT_APP_PROGRESS,       /* progress driven by an application call */
	SRN_CNT_ACKS_HELD,          /* ACK rounds held for the application's next post */
	SRN_CNT_SHM_SENT_PKTS,      /* packets sent through a same-host ring (also in sent_pkts) */
	SRN_CNT_SHM_RCVD_PKTS,      /* packets received from a same-host ring (also in rcvd_pkts) */
	SRN_CNT_SHM_RING_FULL,      /* a same-host ring had no room: transmit deferred */
	SRN_CNT_SHM_DOORBELLS,      /* a sleeping same-host receiver woken (bell or datagram) */
	SRN_CNT_SHM_SLOW_PEER_WAITS, /* ACK timeouts not counted as retries: our packets sat unread in a live peer's ring */
	/* A shared address (link/udp_group.h), mirrored from the link once
	 * per progress round: packets the kernel gave this process for
	 * another one's QP, passed on; and such packets passed to us. */
	SRN_CNT_GRP_FORWARDED,
	SRN_CNT_GRP_FWD_RCVD,
	SRN_CNT_DIRECT_WRITE,       /* RDMA Writes this requester placed directly in a same-host target */
	SRN_CNT_DIRECT_WRITE_BYTES,
	SRN_CNT_DIRECT_READ,        /* RDMA Reads this requester served directly from a same-host target */
	SRN_CNT_DIRECT_READ_BYTES,
	SRN_CNT_DIRECT_ATOMIC,      /* CAS/FAA this requester executed on a same-host target's shared page */
	SRN_CNT_DIRECT_MAPPED,      /* of the direct Writes and Reads: copied through a mapping of the target's pages */
	SRN_CNT_DIRECT_FALLBACK,    /* eligible Writes/Reads that took the rings after all (a check failed) */
	SRN_CNT_DIRECT_FENCE_WAITS, /* dereg/revoke/QP changes that waited for a peer's placement */
	SRN_CNT_DIRECT_FENCE_TIMEOUTS, /* ... and gave up on a stopped peer (SRN_DIRECT_FENCE_MAX_NS) */
	SRN_CNT_DIRECT_PEER_DEAD,   /* direct placements refused or undone: the target's process died */
	SRN_CNT_RX_PAUSE,           /* rx_pause (mlx5): pauses the emulated switch sent us (link/pause.h) */
	SRN_CNT_RX_PAUSE_DURATION,  /* rx_pause_duration (mlx5): microseconds the link was paused */
	/* Names mlx5 uses for error completions by cause (`rdma statistic`)
	 * and two of rxe's, so tools written for those find them.  The
	 * mlx5 ones are counted (transport/complete.c, completer.c,
	 * responder.c); rxe's two stay 0: coalesced ACKs and completer
	 * retries are not counted apart (see retry_* and gobackn). */
	SRN_CNT_REQ_REMOTE_ACCESS_ERR,   /* req_remote_access_errors: NAK remote access received */
	SRN_CNT_REQ_REMOTE_INVALID_REQ,  /* req_remote_invalid_request: NAK invalid request received */
	SRN_CNT_RESP_REMOTE_ACCESS_ERR,  /* resp_remote_access_errors: NAK remote access sent */
	SRN_CNT_RESP_LOCAL_LENGTH_ERR,   /* resp_local_length_error: message too long for the receive */
	SRN_CNT_REQ_CQE_ERR,             /* req_cqe_error: requester error completions (not flush) */
	SRN_CNT_RESP_CQE_ERR,            /* resp_cqe_error: responder error completions (not flush) */
	SRN_CNT_REQ_CQE_FLUSH_ERR,       /* req_cqe_flush_error */
	SRN_CNT_RESP_CQE_FLUSH_ERR,      /* resp_cqe_flush_error */
	SRN_CNT_ACK_DEFERRED,            /* ack_deferred (rxe): ACKs coalesced into a later one */
	SRN_CNT_COMPLETER_RETRY_ERR,     /* completer_retry_err (rxe): retries started by the completer */
	/* What the fault injector (SOFTRNIC_FAULTS) did, mirrored from the
	 * link layer once per progress round (engine/progress.c), in this
	 * order (TX then RX, struct srn_fault_stats). */
	SRN_CNT_FAULT_TX_DROPPED,
	SRN_CNT_FAULT_TX_DUPLICATED,
	SRN_CNT_FAULT_TX_REORDERED,
	SRN_CNT_FAULT_TX_DELAYED,
	SRN_CNT_FAULT_TX_CORRUPTED,
	SRN_CNT_FAULT_RX_DROPPED,
	SRN_CNT_FAULT_RX_DUPLICATED,
	SRN_CNT_FAULT_RX_REORDERED,
	SRN_CNT_FAULT_RX_DELAYED,
	SRN_CNT_FAULT_RX_CORRUPTED,
	/* Always 0: softrnic has no link to lose; kept so tools written for
	 * mlx5 find the name they look for. */
	SRN_CNT_LINK_DOWNED,             /* link_downed */
	/* DCQCN (transport/cc.c), mlx5's names and meanings. */
	SRN_CNT_NP_CNP_SENT,             /* np_cnp_sent: CNPs this notification point sent */
	SRN_CNT_RP_CNP_HANDLED,          /* rp_cnp_handled: CNPs the reaction point acted on */
	SRN_CNT_NP_ECN_MARKED,           /* np_ecn_marked_roce_packets: CE-marked packets received */
	SRN_CNT_RP_CNP_IGNORED,          /* rp_cnp_ignored: CNPs received with the RP off (or for
					  * a QP it does not pace: not RC/UC, unknown, not its peer) */
	SRN_CNT_RP_CNP_BAD_SOURCE,       /* of those: from the peer's address but a UDP source
					  * port its QP does not send from (forged, transport/rx.c) */
	/* The connection manager's MADs (librdmacm, src/cm/), by type in
	 * attribute-ID order (0x10 REQ .. 0x18 SIDR_REP), each sent, received,
	 * and received but dropped (no such connection, a state that takes no
	 * such MAD, a full backlog); the CM counts them through
	 * softrnic_cm_count (verbs/verbs_gsi.c). */
	SRN_CNT_CM_REQ_SENT,
	SRN_CNT_CM_REQ_RCVD,
	SRN_CNT_CM_REQ_DROPPED,
	SRN_CNT_CM_MRA_SENT,
	SRN_CNT_CM_MRA_RCVD,
	SRN_CNT_CM_MRA_DROPPED,
	SRN_CNT_CM_REJ_SENT,
	SRN_CNT_CM_REJ_RCVD,
	SRN_CNT_CM_REJ_DROPPED,
	SRN_CNT_CM_REP_SENT,
	SRN_CNT_CM_REP_RCVD,
	SRN_CNT_CM_REP_DROPPED,
	SRN_CNT_CM_RTU_SENT,
	SRN_CNT_CM_RTU_RCVD,
	SRN_CNT_CM_RTU_DROPPED,
	SRN_CNT_CM_DREQ_SENT,
	SRN_CNT_CM_DREQ_RCVD,
	SRN_CNT_CM_DREQ_DROPPED,
	SRN_CNT_CM_DREP_SENT,
	SRN_CNT_CM_DREP_RCVD,
	SRN_CNT_CM_DREP_DROPPED,
	SRN_CNT_CM_SIDR_REQ_SENT,
	SRN_CNT_CM_SIDR_REQ_RCVD,
	SRN_CNT_CM_SIDR_REQ_DROPPED,
	SRN_CNT_CM_SIDR_REP_SENT,
	SRN_CNT_CM_SIDR_REP_RCVD,
	SRN_CNT_CM_SIDR_REP_DROPPED,
	SRN_CNT_CM_MALFORMED,              /* refused by the CM's MAD parser */
	/* librdmacm's datagram rsockets (src/rsocket/dgram*.c), counted
	 * through the same export: UD messages and UDP datagrams dropped
	 * for a header that is no rsocket's. */
	SRN_CNT_RS_DGRAM_MALFORMED,
	SRN_CNT_THREAD_FATAL,              /* an internal thread could not go on (engine/progress.c) */
	/* Completion events queued on a channel, by who ran the pass that
	 * made them: the progress thread (a wake-up of its own first, then
	 * the application's) or an application thread (core/cq.c). */
	SRN_CNT_EVENTS_BY_PROGRESS,
	SRN_CNT_EVENTS_BY_APP,
	/* Blocked ibv_get_cq_event calls that served the device themselves
	 * (engine/wait.c), and their wake-ups: with progress_thread_wakeups,
	 * the wake-ups behind each completion event. */
	SRN_CNT_WAITS_SERVING,
	SRN_CNT_WAITER_WAKEUPS,
	SRN_CNT_SHM_BELLS_EVENTFD,         /* of shm_doorbells: the receiver's eventfd written */
	SRN_CNT__MAX
};
#define SRN_CNT_CM_FIRST SRN_CNT_CM_REQ_SENT
#define SRN_CNT_CM_LAST SRN_CNT_RS_DGRAM_MALFORMED   /* what softrnic_cm_count may bump */

struct srn_counters {
	_Atomic uint64_t v[SRN_CNT__MAX];
};

extern const char *const srn_counter_names[SRN_CNT__MAX];

/* SRN_NO_COUNTERS builds the library without counting (for measuring
 * what counting costs; see README, performance). */
static inline void srn_count(struct srn_counters *c, enum srn_counter i, uint64_t n)
{
#ifdef SRN_NO_COUNTERS
	(void)c, (void)i, (void)n;
#else
	atomic_fetch_add_explicit(&c->v[i], n, memory_order_relaxed);
#endif
}

static inline uint64_t srn_counter_read(const struct srn_counters *c, enum srn_counter i)
{
	return atomic_load_explicit(&c->v[i], memory_order_relaxed);
}

/* Print non-zero counters, one "name value" per line (SOFTRNIC_STATS=1 at exit). */
void srn_counters_dump(const struct srn_counters *c, const char *devname, int fd);

#endif
