/*
 * counters.c - counter names and the plain-text dump.
 */
#include "diag/counters.h"

#include <inttypes.h>
#include <stdio.h>

const char *const srn_counter_names[SRN_CNT__MAX] = {
	[SRN_CNT_SENT_PKTS] = "sent_pkts",
	[SRN_CNT_RCVD_PKTS] = "rcvd_pkts",
	[SRN_CNT_SENT_BYTES] = "sent_bytes",
	[SRN_CNT_RCVD_BYTES] = "rcvd_bytes",
	[SRN_CNT_RDMA_SENDS] = "rdma_sends",
	[SRN_CNT_RDMA_RECVS] = "rdma_recvs",
	[SRN_CNT_DUPLICATE_REQUEST] = "duplicate_request",
	[SRN_CNT_OUT_OF_SEQUENCE] = "out_of_sequence",
	[SRN_CNT_RCVD_SEQ_ERR] = "packet_seq_err",
	[SRN_CNT_SEQ_NAK_SENT] = "seq_nak_sent",
	[SRN_CNT_RCVD_RNR_ERR] = "rcvd_rnr_err",
	[SRN_CNT_SEND_RNR_ERR] = "send_rnr_err",
	[SRN_CNT_ACKS_SENT] = "acks_sent",
	[SRN_CNT_ACKS_RCVD] = "acks_rcvd",
	[SRN_CNT_BAD_ICRC] = "bad_icrc",
	[SRN_CNT_ICRC_ID_SOLVED] = "icrc_ipv4_id_solved",
	[SRN_CNT_MALFORMED] = "malformed_pkts",
	[SRN_CNT_UNKNOWN_QP] = "unknown_qp_pkts",
	[SRN_CNT_ADDR_MISMATCH] = "addr_mismatch_pkts",
	[SRN_CNT_QP_STATE_DROP] = "qp_state_drops",
	[SRN_CNT_RX_TRUNCATED] = "rx_truncated",
	[SRN_CNT_TX_EAGAIN] = "tx_eagain",
	[SRN_CNT_TX_ERR] = "tx_err",
	[SRN_CNT_SEND_ERR] = "send_err",
	[SRN_CNT_LOC_LEN_ERR] = "loc_len_err",
	[SRN_CNT_CQ_OVERFLOW] = "cq_overflow",
	[SRN_CNT_RDMA_READS] = "rdma_reads",
	[SRN_CNT_ATOMICS] = "atomics",
	[SRN_CNT_RETRANSMITS] = "retransmits",
	[SRN_CNT_LOCAL_ACK_TIMEOUT] = "local_ack_timeout_err",
	[SRN_CNT_RETRY_EXCEEDED] = "retry_exceeded_err",
	[SRN_CNT_RNR_RETRY_EXCEEDED] = "rnr_retry_exceeded_err",
	[SRN_CNT_IMPLIED_NAK] = "implied_nak_seq_err",
	[SRN_CNT_DUP_READ] = "duplicate_read",
	[SRN_CNT_DUP_ATOMIC] = "duplicate_atomic",
	[SRN_CNT_QKEY_VIOLATION] = "qkey_violation",
	[SRN_CNT_UD_NO_RECV] = "ud_no_recv_drops",
	[SRN_CNT_BG_WAKEUPS] = "progress_thread_wakeups",
	[SRN_CNT_APP_PROGRESS] = "app_driven_progress",
	[SRN_CNT_ACKS_HELD] = "acks_held_for_post",
	[SRN_CNT_SHM_SENT_PKTS] = "shm_sent_pkts",
	[SRN_CNT_SHM_RCVD_PKTS] = "shm_rcvd_pkts",
	[SRN_CNT_SHM_RING_FULL] = "shm_ring_full",
	[SRN_CNT_SHM_DOORBELLS] = "shm_doorbells",
	[SRN_CNT_REQ_REMOTE_ACCESS_ERR] = "req_remote_access_errors",
	[SRN_CNT_REQ_REMOTE_INVALID_REQ] = "req_remote_invalid_request",
	[SRN_CNT_RESP_REMOTE_ACCESS_ERR] = "resp_remote_access_errors",
	[SRN_CNT_RESP_LOCAL_LENGTH_ERR] = "resp_local_length_error",
	[SRN_CNT_REQ_CQE_ERR] = "req_cqe_error",
	[SRN_CNT_RESP_CQE_ERR] = "resp_cqe_error",
	[SRN_CNT_REQ_CQE_FLUSH_ERR] = "req_cqe_flush_error",
	[SRN_CNT_RESP_CQE_FLUSH_ERR] = "resp_cqe_flush_error",
	[SRN_CNT_ACK_DEFERRED] = "ack_deferred",
	[SRN_CNT_COMPLETER_RETRY_ERR] = "completer_retry_err",
	[SRN_CNT_LINK_DOWNED] = "link_downed",
	[SRN_CNT_NP_CNP_SENT] = "np_cnp_sent",
	[SRN_CNT_RP_CNP_HANDLED] = "rp_cnp_handled",
	[SRN_CNT_NP_ECN_MARKED] = "np_ecn_marked_roce_packets",
	[SRN_CNT_FAULT_TX_DROPPED] = "fault_tx_dropped",
	[SRN_CNT_FAULT_TX_DUPLICATED] = "fault_tx_duplicated",
	[SRN_CNT_FAULT_TX_REORDERED] = "fault_tx_reordered",
	[SRN_CNT_FAULT_TX_DELAYED] = "fault_tx_delayed",
	[SRN_CNT_FAULT_TX_CORRUPTED] = "fault_tx_corrupted",
	[SRN_CNT_FAULT_RX_DROPPED] = "fault_rx_dropped",
	[SRN_CNT_FAULT_RX_DUPLICATED] = "fault_rx_duplicated",
	[SRN_CNT_FAULT_RX_REORDERED] = "fault_rx_reordered",
	[SRN_CNT_FAULT_RX_DELAYED] = "fault_rx_delayed",
	[SRN_CNT_FAULT_RX_CORRUPTED] = "fault_rx_corrupted",
};

_Static_assert(sizeof(srn_counter_names) / sizeof(srn_counter_names[0]) == SRN_CNT__MAX,
	       "every counter needs a name");

void srn_counters_dump(const struct srn_counters *c, const char *devname, int fd)
{
	for (int i = 0; i < SRN_CNT__MAX; i++) {
		uint64_t v = srn_counter_read(c, i);
		if (v)
			dprintf(fd, "softrnic %s %-26s %" PRIu64 "\n", devname,
				srn_counter_names[i] ? srn_counter_names[i] : "?", v);
	}
}
