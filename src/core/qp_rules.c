/*
 * qp_rules.c - the QP state machine and attribute rules of ibv_modify_qp.
 *
 * One constant table, indexed [current state][next state], says whether a
 * transition exists and, per QP type, which attr_mask bits it requires and
 * which it allows.  The facts are those of the IBTA verbs chapter as the
 * Linux core enforces them (qp_state_table / ib_modify_qp_is_ok in
 * drivers/infiniband/core/verbs.c), and of rdma-core's ibv_modify_qp(3);
 * docs/wire.md §8 lists them.  Value bounds follow what rxe
 * (rxe_qp_chk_attr) and the core refuse with EINVAL.
 *
 * Invariants:
 *  - a transition absent from the table is illegal for every type; in
 *    particular RESET->ERR is absent, as in the kernel, although the IBTA
 *    diagram draws "any state -> Error".
 *  - IBV_QP_STATE is never in a required or optional mask: it is what
 *    selects the transition.  Any other bit outside required|optional,
 *    defined or not, makes the modify illegal.
 *  - everything here is a pure function of its arguments.
 */
#include "core/qp_rules.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "wire/roce_hdr.h"

/* Column of the table for each supported QP type. */
enum { T_RC, T_UC, T_UD, T_XRC_SEND, T_XRC_RECV, T_NUM };

/* Short names so that each table row reads like the spec's. */
enum {
	A_CUR = IBV_QP_CUR_STATE,
	A_NOTIFY = IBV_QP_EN_SQD_ASYNC_NOTIFY,
	A_ACC = IBV_QP_ACCESS_FLAGS,
	A_PKEY = IBV_QP_PKEY_INDEX,
	A_PORT = IBV_QP_PORT,
	A_QKEY = IBV_QP_QKEY,
	A_AV = IBV_QP_AV,
	A_MTU = IBV_QP_PATH_MTU,
	A_TMO = IBV_QP_TIMEOUT,
	A_RETRY = IBV_QP_RETRY_CNT,
	A_RNR_RETRY = IBV_QP_RNR_RETRY,
	A_RQ_PSN = IBV_QP_RQ_PSN,
	A_RD_ATOM = IBV_QP_MAX_QP_RD_ATOMIC,
	A_ALT = IBV_QP_ALT_PATH,
	A_RNRT = IBV_QP_MIN_RNR_TIMER,
	A_SQ_PSN = IBV_QP_SQ_PSN,
	A_DEST_ATOM = IBV_QP_MAX_DEST_RD_ATOMIC,
	A_MIG = IBV_QP_PATH_MIG_STATE,
	A_DQPN = IBV_QP_DEST_QPN,
	/* The kernel allows it for raw packet QPs only, where the send side
	 * starts, runs or resumes; softrnic paces RC, UC and UD (verbs/verbs_rate.c). */
	A_RATE = IBV_QP_RATE_LIMIT,
};

struct qp_transition {
	bool valid;
	int req[T_NUM];
	int opt[T_NUM];
};

/* Every state but RESET may be reset or errored with no attributes. */
#define TO_RESET_AND_ERR                                   \
	[IBV_QPS_RESET] = { .valid = true },               \
	[IBV_QPS_ERR] = { .valid = true }

static const struct qp_transition qp_table[SRN_QP_NUM_STATES][SRN_QP_NUM_STATES] = {
	[IBV_QPS_RESET] = {
		[IBV_QPS_RESET] = { .valid = true },
		/* The Q_Key is a datagram thing; connected QPs carry access
		 * rights instead. */
		[IBV_QPS_INIT] = { .valid = true, .req = {
			[T_RC] = A_PKEY | A_PORT | A_ACC,
			[T_UC] = A_PKEY | A_PORT | A_ACC,
			[T_UD] = A_PKEY | A_PORT | A_QKEY,
			[T_XRC_SEND] = A_PKEY | A_PORT | A_ACC,
			[T_XRC_RECV] = A_PKEY | A_PORT | A_ACC,
		} },
	},
	[IBV_QPS_INIT] = {
		TO_RESET_AND_ERR,
		[IBV_QPS_INIT] = { .valid = true, .opt = {
			[T_RC] = A_PKEY | A_PORT | A_ACC,
			[T_UC] = A_PKEY | A_PORT | A_ACC,
			[T_UD] = A_PKEY | A_PORT | A_QKEY,
			[T_XRC_SEND] = A_PKEY | A_PORT | A_ACC,
			[T_XRC_RECV] = A_PKEY | A_PORT | A_ACC,
		} },
		/* The receive side learns its peer.  Only QPs that answer
		 * READ/ATOMIC or send RNR NAKs (RC, XRC target) need the
		 * responder depth and the RNR timer. */
		[IBV_QPS_RTR] = { .valid = true, .req = {
			[T_RC] = A_AV | A_MTU | A_DQPN | A_RQ_PSN | A_DEST_ATOM | A_RNRT,
			[T_UC] = A_AV | A_MTU | A_DQPN | A_RQ_PSN,
			[T_XRC_SEND] = A_AV | A_MTU | A_DQPN | A_RQ_PSN,
			[T_XRC_RECV] = A_AV | A_MTU | A_DQPN | A_RQ_PSN | A_DEST_ATOM | A_RNRT,
		}, .opt = {
			[T_RC] = A_ALT | A_ACC | A_PKEY,
			[T_UC] = A_ALT | A_ACC | A_PKEY,
			[T_UD] = A_PKEY | A_QKEY,
			[T_XRC_SEND] = A_ALT | A_ACC | A_PKEY,
			[T_XRC_RECV] = A_ALT | A_ACC | A_PKEY,
		} },
	},
	[IBV_QPS_RTR] = {
		TO_RESET_AND_ERR,
		/* The send side starts: a PSN always, and for reliable
		 * requesters the retransmission policy and initiator depth. */
		[IBV_QPS_RTS] = { .valid = true, .req = {
			[T_RC] = A_SQ_PSN | A_TMO | A_RETRY | A_RNR_RETRY | A_RD_ATOM,
			[T_UC] = A_SQ_PSN,
			[T_UD] = A_SQ_PSN,
			[T_XRC_SEND] = A_SQ_PSN | A_TMO | A_RETRY | A_RNR_RETRY | A_RD_ATOM,
			[T_XRC_RECV] = A_SQ_PSN | A_TMO,
		}, .opt = {
			[T_RC] = A_CUR | A_ALT | A_ACC | A_RNRT | A_MIG | A_RATE,
			[T_UC] = A_CUR | A_ALT | A_ACC | A_MIG | A_RATE,
			[T_UD] = A_CUR | A_QKEY | A_RATE,
			[T_XRC_SEND] = A_CUR | A_ALT | A_ACC | A_MIG,
			[T_XRC_RECV] = A_CUR | A_ALT | A_ACC | A_RNRT | A_MIG,
		} },
	},
	[IBV_QPS_RTS] = {
		TO_RESET_AND_ERR,
		[IBV_QPS_RTS] = { .valid = true, .opt = {
			[T_RC] = A_CUR | A_ACC | A_ALT | A_MIG | A_RNRT | A_RATE,
			[T_UC] = A_CUR | A_ACC | A_ALT | A_MIG | A_RATE,
			[T_UD] = A_CUR | A_QKEY | A_RATE,
			[T_XRC_SEND] = A_CUR | A_ACC | A_ALT | A_MIG,
			[T_XRC_RECV] = A_CUR | A_ACC | A_ALT | A_MIG | A_RNRT,
		} },
		[IBV_QPS_SQD] = { .valid = true, .opt = {
			[T_RC] = A_NOTIFY,
			[T_UC] = A_NOTIFY,
			[T_UD] = A_NOTIFY,
			[T_XRC_SEND] = A_NOTIFY,
			[T_XRC_RECV] = A_NOTIFY,
		} },
	},
	[IBV_QPS_SQD] = {
		TO_RESET_AND_ERR,
		[IBV_QPS_RTS] = { .valid = true, .opt = {
			[T_RC] = A_CUR | A_ALT | A_ACC | A_RNRT | A_MIG | A_RATE,
			[T_UC] = A_CUR | A_ALT | A_ACC | A_MIG | A_RATE,
			[T_UD] = A_CUR | A_QKEY | A_RATE,
			[T_XRC_SEND] = A_CUR | A_ALT | A_ACC | A_MIG,
			[T_XRC_RECV] = A_CUR | A_ALT | A_ACC | A_RNRT | A_MIG,
		} },
		/* A drained send queue is the one moment the path and the
		 * retry policy of a live QP may be changed. */
		[IBV_QPS_SQD] = { .valid = true, .opt = {
			[T_RC] = A_PORT | A_AV | A_TMO | A_RETRY | A_RNR_RETRY | A_RD_ATOM |
				 A_DEST_ATOM | A_ALT | A_ACC | A_PKEY | A_RNRT | A_MIG,
			[T_UC] = A_AV | A_ALT | A_ACC | A_PKEY | A_MIG,
			[T_UD] = A_PKEY | A_QKEY,
			[T_XRC_SEND] = A_PORT | A_AV | A_TMO | A_RETRY | A_RNR_RETRY |
				       A_RD_ATOM | A_ALT | A_ACC | A_PKEY | A_MIG,
			[T_XRC_RECV] = A_PORT | A_AV | A_TMO | A_DEST_ATOM | A_ALT | A_ACC |
				       A_PKEY | A_RNRT | A_MIG,
		} },
	},
	[IBV_QPS_SQE] = {
		TO_RESET_AND_ERR,
		/* Only unreliable QPs enter SQE (a send completed in error
		 * without killing the QP).  The entry is valid for RC too,
		 * with nothing but STATE allowed, as in the kernel. */
		[IBV_QPS_RTS] = { .valid = true, .opt = {
			[T_UC] = A_CUR | A_ACC,
			[T_UD] = A_CUR | A_QKEY,
		} },
	},
	[IBV_QPS_ERR] = {
		TO_RESET_AND_ERR,
	},
};

_Static_assert(IBV_QPS_RESET == 0 && IBV_QPS_ERR == 6, "state numbering");

/* Names of attr_mask bits 0..25; 21..24 were kernel-only (SMAC, VID). */
static const char *const bit_names[] = {
	"STATE", "CUR_STATE", "EN_SQD_ASYNC_NOTIFY", "ACCESS_FLAGS", "PKEY_INDEX",
	"PORT", "QKEY", "AV", "PATH_MTU", "TIMEOUT", "RETRY_CNT", "RNR_RETRY",
	"RQ_PSN", "MAX_QP_RD_ATOMIC", "ALT_PATH", "MIN_RNR_TIMER", "SQ_PSN",
	"MAX_DEST_RD_ATOMIC", "PATH_MIG_STATE", "CAP", "DEST_QPN", "_SMAC",
	"_ALT_SMAC", "_VID", "_ALT_VID", "RATE_LIMIT",
};
_Static_assert(sizeof(bit_names) / sizeof(bit_names[0]) == 26, "one name per bit");
_Static_assert(IBV_QP_RATE_LIMIT == 1 << 25 && IBV_QP_DEST_QPN == 1 << 20, "bit numbering");

/* QP access flags rxe accepts (RXE_ACCESS_SUPPORTED_QP): the remote
 * rights that matter, plus flags that are meaningless on a QP but that
 * programs written for rxe pass anyway (LOCAL_WRITE is common), plus the
 * optional range, which by definition a device may ignore.  ZERO_BASED
 * and HUGETLB are refused.  FLUSH_GLOBAL/PERSISTENT are bits 8 and 9 in
 * later rdma-core headers; rdma-core 44 does not name them. */
#define SRN_ACCESS_FLUSH_GLOBAL (1u << 8)
#define SRN_ACCESS_FLUSH_PERSISTENT (1u << 9)
#define SRN_QP_ACCESS_OK                                                           \
	((unsigned)(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |             \
		    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |            \
		    IBV_ACCESS_MW_BIND | IBV_ACCESS_ON_DEMAND) |                   \
	 SRN_ACCESS_FLUSH_GLOBAL | SRN_ACCESS_FLUSH_PERSISTENT |                   \
	 (unsigned)IBV_ACCESS_OPTIONAL_RANGE)

static int type_col(enum ibv_qp_type t)
{
	switch (t) {
	case IBV_QPT_RC: return T_RC;
	case IBV_QPT_UC: return T_UC;
	case IBV_QPT_UD: return T_UD;
	case IBV_QPT_XRC_SEND: return T_XRC_SEND;
	case IBV_QPT_XRC_RECV: return T_XRC_RECV;
	default: return -1;
	}
}

static bool state_ok(int s)
{
	return s >= IBV_QPS_RESET && s <= IBV_QPS_ERR;
}

const char *srn_qp_type_name(enum ibv_qp_type t)
{
	switch (t) {
	case IBV_QPT_RC: return "RC";
	case IBV_QPT_UC: return "UC";
	case IBV_QPT_UD: return "UD";
	case IBV_QPT_RAW_PACKET: return "RAW_PACKET";
	case IBV_QPT_XRC_SEND: return "XRC_SEND";
	case IBV_QPT_XRC_RECV: return "XRC_RECV";
	case IBV_QPT_DRIVER: return "DRIVER";
	default: return "?";
	}
}

const char *srn_qp_attr_bit_name(int bit)
{
	unsigned b = (unsigned)bit;

	if (b == 0 || (b & (b - 1)) || b > (unsigned)IBV_QP_RATE_LIMIT)
		return NULL;
	return bit_names[__builtin_ctz(b)];
}

char *srn_qp_mask_str(int mask, char *buf, size_t len)
{
	unsigned m = (unsigned)mask;
	size_t used = 0;

	if (!buf || !len)
		return buf;
	buf[0] = '\0';
	if (!m) {
		snprintf(buf, len, "0");
		return buf;
	}
	for (unsigned b = 0; b < 32 && used < len; b++) {
		if (!(m & (1u << b)))
			continue;
		int n = b < 26 ? snprintf(buf + used, len - used, "%s%s", used ? "|" : "",
					  bit_names[b])
			       : snprintf(buf + used, len - used, "%s1<<%u", used ? "|" : "", b);
		if (n < 0)
			break;
		used += (size_t)n;
	}
	return buf;
}

int srn_qp_transition_masks(enum ibv_qp_type type, enum ibv_qp_state cur,
			    enum ibv_qp_state next, int *required, int *optional)
{
	int col = type_col(type);

	if (col < 0 || !state_ok((int)cur) || !state_ok((int)next) ||
	    !qp_table[cur][next].valid)
		return -EINVAL;
	if (required)
		*required = qp_table[cur][next].req[col];
	if (optional)
		*optional = qp_table[cur][next].opt[col];
	return 0;
}

/* Writes a reason into buf (if any) and returns -EINVAL, so that every
 * reject below is one line. */
__attribute__((format(printf, 3, 4)))
static int reject(char *buf, size_t len, const char *fmt, ...)
{
	if (buf && len) {
		va_list ap;

		va_start(ap, fmt);
		vsnprintf(buf, len, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

int srn_qp_explain_transition(enum ibv_qp_type type, enum ibv_qp_state cur,
			      const struct ibv_qp_attr *attr, int mask,
			      char *buf, size_t len)
{
	int col = type_col(type);
	const char *tn = srn_qp_type_name(type);
	char bits[256];

	if (buf && len)
		buf[0] = '\0';
	if (col < 0)
		return reject(buf, len, "QP type %d has no modify rules", (int)type);
	if (!state_ok((int)cur))
		return reject(buf, len, "%s: current state %d is not a QP state", tn, (int)cur);
	if ((mask & (IBV_QP_STATE | IBV_QP_CUR_STATE)) && !attr)
		return reject(buf, len, "%s: mask names state attributes but attr is NULL", tn);

	int next = (mask & IBV_QP_STATE) ? (int)attr->qp_state : (int)cur;
	if (!state_ok(next))
		return reject(buf, len, "%s %s: qp_state %d is not a QP state", tn,
			      srn_qp_state_name(cur), next);
	const char *cn = srn_qp_state_name(cur), *nn = srn_qp_state_name(next);

	/* CUR_STATE lets the caller assert what it believes the state is;
	 * only meaningful in the states from which the QP can move on its own
	 * (to SQE or ERR) behind the caller's back.  A belief that differs
	 * from the truth is refused, never obeyed. */
	if (mask & IBV_QP_CUR_STATE) {
		if (cur != IBV_QPS_RTR && cur != IBV_QPS_RTS && cur != IBV_QPS_SQD &&
		    cur != IBV_QPS_SQE)
			return reject(buf, len, "%s %s->%s: CUR_STATE is only accepted in RTR, RTS, SQD or SQE",
				      tn, cn, nn);
		if (attr->cur_qp_state != cur)
			return reject(buf, len, "%s %s->%s: cur_qp_state %s does not match the QP's state",
				      tn, cn, nn, srn_qp_state_name(attr->cur_qp_state));
	}

	const struct qp_transition *t = &qp_table[cur][next];
	if (!t->valid)
		return reject(buf, len, "%s %s->%s: no such transition", tn, cn, nn);

	int missing = t->req[col] & ~mask;
	if (missing)
		return reject(buf, len, "%s %s->%s: missing required %s", tn, cn, nn,
			      srn_qp_mask_str(missing, bits, sizeof(bits)));

	int extra = mask & ~(t->req[col] | t->opt[col] | IBV_QP_STATE);
	if (extra)
		return reject(buf, len, "%s %s->%s: not allowed in this transition: %s", tn, cn,
			      nn, srn_qp_mask_str(extra, bits, sizeof(bits)));
	return 0;
}

int srn_qp_check_transition(enum ibv_qp_type type, enum ibv_qp_state cur,
			    const struct ibv_qp_attr *attr, int mask)
{
	return srn_qp_explain_transition(type, cur, attr, mask, NULL, 0);
}

int srn_qp_mask_supported(int mask)
{
	return (mask & ~SRN_QP_ATTR_CMD_BITS) ? -EOPNOTSUPP : 0;
}

int srn_qp_check_cap(const struct ibv_qp_cap *cap, bool has_srq,
		     const struct srn_qp_limits *lim)
{
	if (cap->max_send_wr > lim->max_qp_wr || cap->max_send_sge > lim->max_sge ||
	    cap->max_inline_data > lim->max_inline)
		return -EINVAL;
	/* With an SRQ the receive queue is the SRQ's; the QP's receive
	 * sizes are ignored, as rxe ignores them. */
	if (!has_srq && (cap->max_recv_wr > lim->max_qp_wr || cap->max_recv_sge > lim->max_sge))
		return -EINVAL;
	return 0;
}

/* The address vector of a connected QP.  RoCE addresses by GID, so a
 * vector without a GRH names no one (the core's rdma_check_ah_attr). */
static const char *ah_fault(const struct ibv_ah_attr *ah, const struct srn_qp_limits *lim)
{
	if (!ah->is_global)
		return "ah_attr.is_global must be 1 on RoCE";
	if (ah->grh.sgid_index >= lim->gid_tbl_len)
		return "ah_attr.grh.sgid_index is beyond the GID table";
	if (ah->port_num != 1)
		return "ah_attr.port_num must be 1";
	return NULL;
}

static const char *value_fault(enum ibv_qp_type type, const struct ibv_qp_attr *a, int mask,
			       const struct srn_qp_limits *lim)
{
	if (type_col(type) < 0)
		return "QP type has no modify rules";
	if (!mask)
		return NULL;
	if (!a)
		return "attr is NULL";
	/* One port per device. */
	if ((mask & IBV_QP_PORT) && a->port_num != 1)
		return "port_num must be 1";
	if ((mask & IBV_QP_PKEY_INDEX) && (int)a->pkey_index >= lim->pkey_tbl_len)
		return "pkey_index is beyond the P_Key table";
	if (mask & IBV_QP_ACCESS_FLAGS) {
		/* Access rights govern incoming RDMA; datagram QPs take none. */
		if (type == IBV_QPT_UD)
			return "access flags are for connected QPs";
		if (a->qp_access_flags & ~SRN_QP_ACCESS_OK)
			return "qp_access_flags has flags a QP cannot take";
	}
	if (mask & IBV_QP_AV) {
		const char *f = ah_fault(&a->ah_attr, lim);
		if (f)
			return f;
	}
	/* The core bans alternate paths (APM) on RoCE ports: there is no
	 * second path to migrate to. */
	if (mask & IBV_QP_ALT_PATH)
		return "alternate paths do not exist on RoCE";
	if ((mask & IBV_QP_PATH_MTU) &&
	    ((unsigned)a->path_mtu < IBV_MTU_256 || (unsigned)a->path_mtu > (unsigned)lim->port_max_mtu))
		return "path_mtu is not between 256 and the port's MTU";
	/* 5-bit field: 4.096 us << timeout (IBTA 9.7.6.1.3). */
	if ((mask & IBV_QP_TIMEOUT) && a->timeout > SRN_ACK_TIMEOUT_MASK)
		return "timeout is a 5-bit value";
	/* 3-bit counters. */
	if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > SRN_RETRY_CNT_MAX)
		return "retry_cnt is a 3-bit value";
	if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > SRN_RNR_RETRY_MAX)
		return "rnr_retry is a 3-bit value";
	/* 5-bit code of the RNR NAK timer table. */
	if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > SRN_AETH_VALUE_MASK)
		return "min_rnr_timer is a 5-bit code";
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > lim->max_rd_atomic)
		return "max_rd_atomic exceeds the device's max_qp_init_rd_atom";
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > lim->max_dest_rd_atomic)
		return "max_dest_rd_atomic exceeds the device's max_qp_rd_atom";
	/* PSNs are not checked: the kernel masks them to 24 bits (with a
	 * warning) and programs rely on that, e.g. a PSN from rand(). */
	if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num > SRN_QP_QPN_MASK)
		return "dest_qp_num does not fit the 24-bit BTH field";
	if ((mask & IBV_QP_PATH_MIG_STATE) && (unsigned)a->path_mig_state > IBV_MIG_ARMED)
		return "path_mig_state is not MIGRATED, REARM or ARMED";
	if ((mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) && a->en_sqd_async_notify > 1)
		return "en_sqd_async_notify is a boolean";
	/* Whether an SRQ is attached is not known here; the receive sizes are
	 * left to srn_qp_check_cap at create time. */
	if (mask & IBV_QP_CAP) {
		struct ibv_qp_cap send_only = a->cap;

		send_only.max_recv_wr = 0;
		send_only.max_recv_sge = 0;
		if (srn_qp_check_cap(&send_only, false, lim))
			return "cap exceeds the device limits";
	}
	return NULL;
}

int srn_qp_check_attr_values(enum ibv_qp_type type, const struct ibv_qp_attr *attr,
			     int mask, const struct srn_qp_limits *lim)
{
	return value_fault(type, attr, mask, lim) ? -EINVAL : 0;
}

int srn_qp_explain_attr_values(enum ibv_qp_type type, const struct ibv_qp_attr *attr,
			       int mask, const struct srn_qp_limits *lim, char *buf, size_t len)
{
	const char *f = value_fault(type, attr, mask, lim);

	if (buf && len)
		buf[0] = '\0';
	return f ? reject(buf, len, "%s: %s", srn_qp_type_name(type), f) : 0;
}
