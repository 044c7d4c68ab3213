/*
 * qp_up.h - RESET -> INIT -> RTR -> RTS for one RC, UC or UD QP: the one
 * bring-up that the tools (`softrnic perf`), the tests and the benchmarks
 * share, instead of a copy of the three ibv_modify_qp calls each.
 *
 * It uses the public verbs API only (libibverbs.so.1, ours or
 * rdma-core's), so a program that links it reaches nothing inside the
 * library.  Built as the static library srn_qp_up (tools/CMakeLists.txt).
 */
#ifndef SRN_TOOLS_COMMON_QP_UP_H
#define SRN_TOOLS_COMMON_QP_UP_H

#include <infiniband/verbs.h>
#include <stdint.h>

/* How to bring a QP up; srn_qp_up_defaults() and change what differs. */
struct srn_qp_up_attr {
	uint8_t port;                  /* 1 */
	uint8_t sgid_index;            /* 0 */
	uint8_t hop_limit;             /* 64 */
	enum ibv_mtu mtu;              /* IBV_MTU_1024 (RC, UC) */
	unsigned access;               /* remote access granted to the peer (RC, UC): 0 */
	uint8_t max_rd_atomic;         /* RC: READs/atomics in flight, both ways: 1 */
	uint8_t min_rnr_timer;         /* RC: 1 (0.01 ms) */
	uint8_t timeout;               /* RC: 14 (4.096 us << 14 = 67 ms) */
	uint8_t retry_cnt;             /* RC: 7 */
	uint8_t rnr_retry;             /* RC: 7 = retry forever */
	uint32_t qkey;                 /* UD: 0x11111111 (perftest's) */
};

/* The peer's side of the connection (RC, UC; unused for UD). */
struct srn_qp_up_peer {
	uint32_t qpn;
	uint32_t psn;                  /* the PSN it sends with: our rq_psn */
	uint16_t lid;                  /* 0 on RoCE */
	union ibv_gid gid;             /* RoCE routes by the GRH */
};

struct srn_qp_up_attr srn_qp_up_defaults(void);

/* Bring qp to RTS, sending from sq_psn.  RC and UC get the peer's
 * address and PSN; a UD QP gets port, P_Key index 0 and a->qkey (its
 * peers are named per send, by address handles).  0, or -errno with
 * *step naming the transition that failed ("INIT", "RTR", "RTS"). */
int srn_qp_up(struct ibv_qp *qp, const struct srn_qp_up_attr *a, uint32_t sq_psn,
	      const struct srn_qp_up_peer *peer, const char **step);

/* The address handle attributes towards peer that RTR (RC, UC) and UD
 * sends use. */
void srn_qp_up_ah_attr(struct ibv_ah_attr *ah, const struct srn_qp_up_attr *a,
		       const struct srn_qp_up_peer *peer);

#endif
