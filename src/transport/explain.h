/*
 * explain.h - one-line explanations of error completions, logged in the
 * QP's diagnostic log (explain.c).  Must hold nic->lock.
 */
#ifndef SRN_TRANSPORT_EXPLAIN_H
#define SRN_TRANSPORT_EXPLAIN_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#include "diag/shm.h"

struct srn_qp;
struct srn_swqe;

/* "QP 0x001a2b at 127.0.0.2": the QP's peer as the slot knows it. */
void srn_diag_peer_str(const struct srn_qp *qp, char *buf, size_t len);
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
