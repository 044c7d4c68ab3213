/*
 * test_trust_verbs_peer.h - setup shared by the two-process tests of the
 * verbs corners that rdma-core's own test suite found (issue 10, items
 * 11 and 12): one device, PD and CQ per process, and RC QPs created with
 * ibv_create_qp_ex and the ibv_wr_* operations, connected to the peer's
 * QPs over the out-of-band socket of rc_test_conn.h.
 */
#ifndef SRN_TESTS_TRUST_VERBS_PEER_H
#define SRN_TESTS_TRUST_VERBS_PEER_H

#include "rc_test_conn.h"

#define TV_MAX_QP 4

struct tv_side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	union ibv_gid gid;
};

/* Open the device and a PD. */
void tv_open(struct tv_side *s);

/* An RC QP with every ibv_wr_* operation softrnic has, its own CQ of
 * depth cq_depth, and room for depth send work requests. */
struct ibv_qp *tv_qp_ex(struct tv_side *s, int depth, int cq_depth);

/* Exchange GID and QPNs with the peer and connect qp[i] to the peer's
 * qp[i] (both sides pass the same n), with remote write/read/atomic. */
void tv_connect(struct tv_side *s, int fd, struct ibv_qp **qp, int n);

/* Poll one completion of cq within 10 s and check its status and wr_id. */
struct ibv_wc tv_expect(struct ibv_cq *cq, enum ibv_wc_status st, uint64_t wr_id);

/* fork; the child runs child(fd), the parent parent(fd); 0 if both
 * returned 0.  SIGALRM after 90 s ends a deadlock as a failure. */
int tv_main(int (*child)(int fd), int (*parent)(int fd));

#endif
