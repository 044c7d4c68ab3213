/*
 * qp_rules.h - what ibv_modify_qp may do: the QP state machine, the
 * required/optional attribute mask of every transition, and the value
 * bounds of every attribute.
 *
 * Pure functions over a constant table; no QP object, no locking, no I/O.
 * The QP code calls srn_qp_check_transition() and
 * srn_qp_check_attr_values() before it changes anything, so a rejected
 * modify leaves the QP untouched.  Both return 0 or -EINVAL, the errno
 * rdma-core and the kernel (ib_modify_qp_is_ok, rxe_qp_chk_attr) give.
 *
 * Decisions where the sources leave room (see qp_rules.c for why):
 *  - rq_psn/sq_psn above 24 bits are accepted; the caller stores
 *    psn & SRN_PSN_MASK (24 bits), as the kernel core does (it masks and
 *    warns).
 *  - dest_qp_num above 24 bits is rejected: it cannot be put in a BTH.
 *  - IBV_QP_ALT_PATH is rejected whatever the table says: the kernel core
 *    bans alternate paths (APM) on RoCE ports.
 *  - IBV_QP_CUR_STATE is honoured only if attr->cur_qp_state equals the
 *    QP's real state; a caller cannot talk the QP into another state.
 *  - bits above IBV_QP_DEST_QPN (21..31) are not in any RC/UC/UD
 *    transition and get -EINVAL here, except RATE_LIMIT, optional where
 *    the kernel allows it for raw packet QPs (RTR->RTS, RTS->RTS) and
 *    here for RC, UC and UD (verbs/verbs_rate.c); rdma-core's rxe
 *    provider answers EOPNOTSUPP for them before the kernel sees them.
 *    srn_qp_mask_supported() tells the two apart for a caller that wants
 *    rxe's errno.
 */
#ifndef SRN_CORE_QP_RULES_H
#define SRN_CORE_QP_RULES_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag/qp_state.h"     /* srn_qp_state_name */

#define SRN_QP_NUM_STATES (IBV_QPS_ERR + 1)
#define SRN_QP_QPN_MASK 0xffffffu /* BTH DestQP is 24 bits */
/* Every attr_mask bit the verbs header has ever defined: 0..25. */
#define SRN_QP_ATTR_ALL_BITS ((int)((IBV_QP_RATE_LIMIT << 1) - 1))
/* The bits rdma-core's plain ibv_cmd_modify_qp passes to the kernel. */
#define SRN_QP_ATTR_CMD_BITS ((int)((IBV_QP_DEST_QPN << 1) - 1))

struct srn_qp_limits {
	enum ibv_mtu port_max_mtu;
	uint8_t max_rd_atomic;      /* device max_qp_init_rd_atom */
	uint8_t max_dest_rd_atomic; /* device max_qp_rd_atom */
	int gid_tbl_len;
	int pkey_tbl_len;
	uint32_t max_qp_wr;
	uint32_t max_sge;
	uint32_t max_inline;
};

/*
 * Is modifying a QP of `type` in state `cur` with `mask` legal?  The next
 * state is attr->qp_state if mask has IBV_QP_STATE, else cur.  Legal means:
 * the (cur, next) pair is in the table for this type, every required bit
 * is in mask, no bit outside required|optional|STATE is, and CUR_STATE (if
 * given) comes from RTR/RTS/SQD/SQE and equals cur.  Types: RC, UC, UD,
 * XRC_SEND, XRC_RECV.  Returns 0 or -EINVAL.
 */
int srn_qp_check_transition(enum ibv_qp_type type, enum ibv_qp_state cur,
			    const struct ibv_qp_attr *attr, int mask);

/*
 * Value checks for the attributes present in mask (port, pkey index, MTU,
 * timers, retry counts, rd_atomic depths, access flags, address vector,
 * QPN, migration state, SQD notify flag, caps).  Independent of state.
 * Returns 0 or -EINVAL.
 */
int srn_qp_check_attr_values(enum ibv_qp_type type, const struct ibv_qp_attr *attr,
			     int mask, const struct srn_qp_limits *lim);

/*
 * Queue sizes against device limits, for create_qp and for IBV_QP_CAP.
 * With an SRQ the receive sizes are not the QP's and are not checked.
 * Returns 0 or -EINVAL.
 */
int srn_qp_check_cap(const struct ibv_qp_cap *cap, bool has_srq,
		     const struct srn_qp_limits *lim);

/* -EOPNOTSUPP if mask has bits rdma-core's rxe provider refuses outright
 * (above IBV_QP_DEST_QPN), else 0. */
int srn_qp_mask_supported(int mask);

/* The required and optional masks of one transition; -EINVAL if the pair
 * is not legal for this type (outputs untouched then).  STATE is in
 * neither mask: it is implied by the transition. */
int srn_qp_transition_masks(enum ibv_qp_type type, enum ibv_qp_state cur,
			    enum ibv_qp_state next, int *required, int *optional);

/* "RC", "UC", "UD", "XRC_SEND", "XRC_RECV", ...; "?" if unknown. */
const char *srn_qp_type_name(enum ibv_qp_type t);
/* Name of one mask bit without the IBV_QP_ prefix ("PKEY_INDEX"); NULL if
 * `bit` is not a single defined bit. */
const char *srn_qp_attr_bit_name(int bit);
/* "PKEY_INDEX|PORT|..." into buf ("0" for no bits); returns buf. */
char *srn_qp_mask_str(int mask, char *buf, size_t len);

/*
 * Same verdict as srn_qp_check_transition, and on -EINVAL a sentence for
 * `softrnic explain` and error logs in buf, e.g.
 * "RC INIT->RTR: missing required PATH_MTU|DEST_QPN".  buf may be NULL.
 */
int srn_qp_explain_transition(enum ibv_qp_type type, enum ibv_qp_state cur,
			      const struct ibv_qp_attr *attr, int mask,
			      char *buf, size_t len);

/* Same verdict as srn_qp_check_attr_values, with the reason in buf. */
int srn_qp_explain_attr_values(enum ibv_qp_type type, const struct ibv_qp_attr *attr,
			       int mask, const struct srn_qp_limits *lim, char *buf, size_t len);

#endif
