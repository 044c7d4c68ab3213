/*
 * snap.h - filling diagnostic slots from the live objects, and the
 * one-line explanations of error completions.
 *
 * This is the one place that knows both the core objects (srn_qp, srn_mr,
 * ...) and the slot layout (shm.h), so the data path never copies fields
 * itself: it calls srn_diag_snap at the events that matter (create,
 * modify, error) and srn_diag_tick from the progress loop, which refreshes
 * every object at most every SRN_DIAG_TICK_NS.  Nothing here runs per
 * packet.  Everything must hold the device's nic->lock.
 */
#ifndef SRN_CORE_SNAP_H
#define SRN_CORE_SNAP_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#include "diag/shm.h"

struct srn_qp;
struct srn_swqe;

#define SRN_DIAG_TICK_NS 10000000ull   /* 10 ms: fresh to a human, free to the NIC */

/* Copy the owner's current state into its slot (by o->kind; owner as
 * given to srn_diag_obj_add).  Sink objects and owner-less ones: nothing. */
void srn_diag_snap(struct srn_diag_obj *o);
/* Refresh every object when SRN_DIAG_TICK_NS passed since the last
 * refresh (one comparison otherwise).  Call it wherever state changes in
 * bulk: the end of srn_progress_poll, post_send, post_recv, the progress
 * thread's timer wakeup. */
void srn_diag_tick(struct srn_diag *d, uint64_t now_ns);
/* When a tick was skipped since the last refresh, the time by which the
 * next one is due (else 0): the progress thread includes it in its sleep
 * so the slots do not stay stale once the application goes quiet.  No
 * lock needed. */
uint64_t srn_diag_deadline(struct srn_diag *d);
/* Refresh every object now (before the application sleeps). */
void srn_diag_refresh(struct srn_diag *d);

/* "RTS" for IBV_QPS_RTS, for state-change lines. */
const char *srn_diag_qp_state_name(enum ibv_qp_state s);
/* "RETRY_EXC_ERR" for IBV_WC_RETRY_EXC_ERR. */
const char *srn_diag_wc_status_name(enum ibv_wc_status st);
/* "ACK", "RNR NAK (timer 14)", "NAK remote access error", ... */
const char *srn_diag_syndrome_str(uint8_t syndrome, char *buf, size_t len);
/* "QP 0x001a2b at 127.0.0.2": the QP's peer as the slot knows it. */
void srn_diag_peer_str(const struct srn_qp *qp, char *buf, size_t len);
/* What the peer said last: "ACK PSN 0x000123 12.3 ms ago" or "nothing". */
void srn_diag_last_peer_str(struct srn_diag_obj *o, char *buf, size_t len);

/* Log the explanation of a send error completion at ERROR level, count it
 * in the QP's error_completions, and refresh the slot:
 *   "STATUS: OP wr_id 0x.. PSN 0x..[-0x..] [rkey 0x.. va 0x..] len N to
 *    QP 0x.. at ADDR: <fmt>"
 * fmt says why (e.g. "7 retries after local ACK timeout (67.1 ms), last
 * from peer: ACK PSN 0x.. 80.2 ms ago").  Call before the WQE completes. */
void srn_diag_explain_send(struct srn_diag_obj *o, const struct srn_qp *qp,
			   const struct srn_swqe *w, enum ibv_wc_status st, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* The same for a receive error completion:
 *   "STATUS: RECV wr_id 0x.. from QP 0x.. at ADDR: <fmt>" */
void srn_diag_explain_recv(struct srn_diag_obj *o, const struct srn_qp *qp, uint64_t wr_id,
			   enum ibv_wc_status st, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

#endif
