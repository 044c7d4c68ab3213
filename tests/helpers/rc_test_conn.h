/*
 * rc_test_conn.h - plumbing shared by the two-process RC tests
 * (test_rc_stress, test_rc_passive, test_rc_dereg).
 *
 * The test forks before any verbs call, so each process opens its own
 * softrnic device and binds its own 127.0.0.N (srn_tc_fork asks for
 * addr=auto,share=0 unless SOFTRNIC_DEVICES is set): the two sides talk real
 * RoCEv2, through the same-host shared-memory rings, or over UDP through
 * the kernel with SOFTRNIC_SHM=0 or a fault injector.  A socketpair created before the
 * fork is the out-of-band channel (QPN, PSN, GID, addresses, rkeys,
 * barriers), like the TCP exchange of ibv_rc_pingpong.
 *
 * Invariants: every wait here is bounded in time; a failed CHECK prints
 * where it failed and exits 1 (the parent then reaps or kills the child).
 */
#ifndef SRN_TESTS_RC_TEST_CONN_H
#define SRN_TESTS_RC_TEST_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <infiniband/verbs.h>

/* "parent" or "child": prefixes failure messages so the side is known. */
extern const char *srn_tc_role;

/* A failed check ends this side at once, named (tests/lib/check.h). */
#define SRN_CHECK_FATAL
#define SRN_CHECK_TAG srn_tc_role
#include "check.h"


/* Connection parameters of one RC QP (both ends use the same). */
struct srn_tc_qp_opts {
	enum ibv_mtu mtu;
	uint8_t timeout;          /* local ACK timeout: 4.096 us << timeout */
	uint8_t retry_cnt;
	uint8_t rnr_retry;        /* 7 = infinite */
	uint8_t min_rnr_timer;
	uint8_t rd_atomic;        /* max_rd_atomic and max_dest_rd_atomic */
	int access;               /* qp_access_flags */
};

/* What one side tells the other about one QP. */
struct srn_tc_qp_info {
	uint32_t qpn;
	uint32_t psn;             /* the PSN this side sends with */
};

/* socketpair + fork.  Returns the child's pid in the parent and 0 in the
 * child; *fd is this process's end.  The child dies with the parent. */
pid_t srn_tc_fork(int *fd);

/* Reap the child within timeout_s (SIGKILL after that).  Returns its exit
 * status, or 1 if it was killed or died by a signal. */
int srn_tc_wait_child(pid_t pid, int timeout_s);

/* Exact-length send / receive on the out-of-band channel; a receive gives
 * up after timeout_ms or when the peer closes.  Both exit(1) on failure. */
void srn_tc_send(int fd, const void *p, size_t len);
void srn_tc_recv(int fd, void *p, size_t len, int timeout_ms);

/* Send mine, then receive theirs (same length). */
void srn_tc_xchg(int fd, const void *mine, void *theirs, size_t len, int timeout_ms);

/* Non-blocking: has the peer closed its end (exited or died)?  Data the
 * peer sent early is left in place. */
int srn_tc_peer_closed(int fd);

/* Both sides call it with the same tag; checks the peer reached the same. */
void srn_tc_barrier(int fd, uint32_t tag, int timeout_ms);

/* Open the first device and return its GID index 0 in *gid. */
struct ibv_context *srn_tc_open(union ibv_gid *gid);

/* Default options: MTU 4096, timeout 14 (67 ms), retry_cnt 7, rnr_retry 7,
 * min_rnr_timer 1, rd_atomic 16, remote write/read/atomic. */
struct srn_tc_qp_opts srn_tc_default_opts(void);

/* RESET -> INIT -> RTR -> RTS towards (dgid, dqpn). */
void srn_tc_connect(struct ibv_qp *qp, const union ibv_gid *dgid, uint32_t dqpn,
		    uint32_t rq_psn, uint32_t sq_psn, const struct srn_tc_qp_opts *o);

/* An RC QP on pd with cq for both queues, one SGE each way; exits on
 * failure. */
struct ibv_qp *srn_tc_rc_qp(struct ibv_pd *pd, struct ibv_cq *cq, uint32_t send_wr,
			    uint32_t recv_wr);

/* Is p inside one of softrnic's memfd mappings ("/memfd:softrnic-mr",
 * shared): the pin moved the region there (core/mr_share.c)? */
bool srn_tc_on_memfd(const void *p);

/* A device counter of this process by its name in `softrnic stat`
 * (e.g. "local_ack_timeout_err"), read from the diagnostic file as that
 * command reads it; exits if the file or the name is missing. */
uint64_t srn_tc_dev_counter(struct ibv_context *ctx, const char *name);

/* Poll one completion, giving up (exit 1) after timeout_s seconds. */
struct ibv_wc srn_tc_poll_one(struct ibv_cq *cq, double timeout_s);

/* CLOCK_MONOTONIC in seconds. */
double srn_tc_now(void);

/* CPU seconds (user + system, all threads) this process has used. */
double srn_tc_cpu_s(void);

/* Environment value as a positive integer, or dflt. */
unsigned long srn_tc_env_ul(const char *name, unsigned long dflt);

#endif
