/*
 * perf_run.h - the measurement engine of `softrnic perf`: the verbs
 * resources of one side (device, PD, one MR, one CQ, N QPs) and the loops
 * that measure latency and bandwidth over them.
 *
 * Memory layout, identical on both sides so each can address the other's
 * buffer: one registered buffer, one `stride` per QP, each holding
 *   tx    max_size bytes   what this side sends, writes, or lets be read
 *   grh   40 bytes, UD only: the GRH that heads every UD receive
 *   rx    max_size bytes   where the peer's sends/writes (or our reads) land
 *   slots (1 + tx_depth) x 8  slot 0: the counter the peer's atomics hit
 *                          (target side); then one result slot per WR
 *                          in flight (initiator side)
 * each part page-aligned (grh and rx together), so `rx` is where the
 * message itself starts for every QP type and the data checks need not
 * know about the GRH.
 *
 * Who does what in one run of one size (the control protocol that starts
 * and ends runs lives in cmd_perf.c):
 *   lat, write/send: both sides ping-pong (srn_perf_client_run and
 *       srn_perf_serve); the client times each round trip.
 *   lat, read/cas/faa and every bw test: the client drives; the server
 *       only receives (send) or stays passive (one-sided ops).
 * UD (send only) runs the same loops: each QP talks to one peer QP
 * through an address handle, and every message fits in one packet.
 * Every data movement is verified: tx holds a pattern derived from the
 * run's seed, and the receiving side checks rx against it; atomics check
 * every returned value and the target's final counter (which equals the
 * number of atomics the client posted in the session).
 *
 * All functions return 0 or -errno and leave a message in ctx->err.
 */
#ifndef SRN_TOOLS_PERF_RUN_H
#define SRN_TOOLS_PERF_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "diag/clock.h"
#include "perf_conn.h"

enum srn_perf_op {
	SRN_PERF_WRITE,
	SRN_PERF_SEND,
	SRN_PERF_READ,
	SRN_PERF_CAS,
	SRN_PERF_FAA,
	SRN_PERF_NOPS
};

enum srn_perf_test { SRN_PERF_LAT, SRN_PERF_BW };

/* Limits of the tool (not of the device): keep buffers and tables sane. */
#define SRN_PERF_MAX_QPS 64
#define SRN_PERF_MAX_SIZE (64u << 20)
#define SRN_PERF_MAX_DEPTH 4096
#define SRN_PERF_MAX_LAT_ITERS 2000000ull     /* one 8-byte sample each */
#define SRN_PERF_MAX_BW_ITERS 1000000000ull
#define SRN_PERF_ATOMIC_SIZE 8
/* A UD receive places the 40-byte GRH ahead of the message, in the first
 * bytes of the scatter list (ibv_post_recv(3)); wc.byte_len counts it. */
#define SRN_PERF_UD_GRH 40

/* The test as the client asked for it; the server adopts it. */
struct srn_perf_params {
	enum srn_perf_op op;
	enum ibv_qp_type qp_type;   /* IBV_QPT_RC, IBV_QPT_UC or IBV_QPT_UD */
	enum srn_perf_test test;
	uint32_t qps;
	uint32_t mtu;               /* bytes; 0 = the port's active MTU (UD: the
				     * client always sends the MTU it resolved,
				     * so both sides hold sizes to the same) */
	uint32_t inline_size;
	uint32_t tx_depth;          /* outstanding WRs per QP (bw) */
	uint32_t rx_depth;          /* receive WRs kept posted per QP (send) */
	uint32_t cq_mod;            /* one signaled WR in cq_mod (bw) */
	uint32_t post_list;         /* WRs chained per ibv_post_send (bw) */
	uint32_t max_size;          /* largest message of the session */
};

/* What each side tells the other about one of its QPs. */
struct srn_perf_peer_qp {
	struct srn_conn_qp addr;
	uint64_t tx, rx, slots;     /* addresses in the sender's buffer */
};

struct srn_perf_qp {
	struct ibv_qp *qp;
	struct ibv_ah *ah;          /* UD: the way to the peer's QP */
	struct srn_conn_qp local;
	struct srn_perf_peer_qp remote;
	uint8_t *tx, *rx;
	uint64_t *slots;
	uint32_t rx_posted;         /* receive WRs outstanding */
	/* Sends over the whole session, never reset: a completion that
	 * arrives after its run ended still lands on the right count.  In an
	 * atomics session send n finds the peer's counter at n. */
	uint64_t posted, completed;
	/* per-run state */
	uint64_t run_base;          /* `posted` when the run began */
	uint64_t target, uses;
	uint64_t received;          /* send bw: messages that arrived (UC and
				     * UD may lose some) */
	bool final_posted;
};

struct srn_perf_ctx {
	struct srn_perf_params p;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t buf_len, stride, rx_off, slots_off;
	uint32_t grh;               /* bytes ahead of rx a receive fills first:
				     * SRN_PERF_UD_GRH for UD, else 0 */
	uint32_t remote_rkey;
	uint8_t ib_port;
	int gid_index;
	enum ibv_mtu mtu;
	char dev_name[64];
	struct srn_perf_qp *qps;
	uint64_t *samples;          /* client lat: round trips, ns */
	size_t samples_cap;
	char err[320];
};

/* One run: one size, a message count or a duration. */
struct srn_perf_run {
	uint32_t size;
	uint32_t seed;              /* pattern of this run, never 0 */
	uint64_t iters;             /* messages (lat: round trips); a cap with duration */
	uint64_t duration_ns;       /* 0: run exactly `iters` */
	uint64_t stall_ns;          /* fail after this long with no progress */
	/* Called about every millisecond by waiting loops: nonzero means the
	 * peer sent a control message, and the loop returns -EINTR. */
	int (*peer_poll)(void *arg);
	/* Called at most every 100 ms by the client. */
	void (*progress)(void *arg, uint64_t done, uint64_t total, uint64_t elapsed_ns);
	void *arg;
};

struct srn_perf_result {
	uint64_t iters;             /* messages (lat: round trips) measured */
	uint64_t elapsed_ns;
	uint64_t *samples;          /* lat: `iters` round-trip times, ns */
	uint64_t received;          /* send bw: messages the peer received */
};

const char *srn_perf_op_name(enum srn_perf_op op);      /* "write" */
bool srn_perf_op_atomic(enum srn_perf_op op);            /* cas, faa */
const char *srn_perf_op_title(enum srn_perf_op op);     /* "RDMA Write" */
int srn_perf_op_parse(const char *s);                   /* -1 when unknown */
bool srn_perf_op_one_sided_lat(enum srn_perf_op op);    /* read, cas, faa */
const char *srn_perf_qp_type_name(enum ibv_qp_type t);  /* "ud" */
const char *srn_perf_qp_type_title(enum ibv_qp_type t); /* "UD" */
/* rc, uc or ud as IBV_QPT_*; -1 when unknown. */
int srn_perf_qp_type_parse(const char *s);
/* The only types the tool runs: it still faces types from a peer. */
bool srn_perf_qp_type_known(enum ibv_qp_type t);

/* Leave a message in c->err and return err (a negative errno). */
int srn_perf_fail(struct srn_perf_ctx *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* perf_res.c: open the device, create everything, fill in our QP
 * addresses: srn_perf_open_device, then srn_perf_create. */
int srn_perf_open(struct srn_perf_ctx *c, const struct srn_perf_params *p,
		  const char *dev_name, uint8_t ib_port, int gid_index);
/* perf_res.c: open the device and check its port; sets c->mtu, the path
 * MTU of the session (p->mtu, else the port's active MTU), which a caller
 * may need before it settles the sizes (UD). */
int srn_perf_open_device(struct srn_perf_ctx *c, const struct srn_perf_params *p,
			 const char *dev_name, uint8_t ib_port, int gid_index);
/* perf_res.c: after srn_perf_open_device, everything else for p (which
 * may differ from the parameters given there in sizes and mtu only).
 * UD: -EMSGSIZE when p->max_size does not fit in one packet. */
int srn_perf_create(struct srn_perf_ctx *c, const struct srn_perf_params *p);
/* The MTU of c in bytes. */
uint32_t srn_perf_mtu_bytes(const struct srn_perf_ctx *c);
/* perf_res.c: connect every QP to the peer's (RESET -> RTS). */
int srn_perf_connect(struct srn_perf_ctx *c, const struct srn_perf_peer_qp *peer,
		     uint32_t peer_rkey);
void srn_perf_close(struct srn_perf_ctx *c);

/* Before a run, on both sides: tx = pattern(seed), rx and slots cleared,
 * receive WRs topped up, per-run counters reset. */
int srn_perf_prepare(struct srn_perf_ctx *c, uint32_t size, uint32_t seed);
/* The active side's run: fills `res` (samples point into ctx). */
int srn_perf_client_run(struct srn_perf_ctx *c, const struct srn_perf_run *run,
			struct srn_perf_result *res);
/* The passive side's run: ping-pong for write/send lat; for send bw,
 * receive until run->peer_poll fires (returns -EINTR then); nothing for
 * one-sided ops (returns 0 at once). */
int srn_perf_serve(struct srn_perf_ctx *c, const struct srn_perf_run *run,
		   uint64_t *received);
/* Send bw, after the peer said it sent `expected` messages in total: keep
 * receiving until all arrived or `grace_ns` passed; with quiet_ns (UC,
 * UD: a lost message never comes), also once nothing arrived for that
 * long.  Neither bound is an error: the caller compares the counts. */
int srn_perf_drain(struct srn_perf_ctx *c, const struct srn_perf_run *run,
		   uint64_t expected, uint64_t grace_ns, uint64_t quiet_ns,
		   uint64_t *received);

/* After a run: do rx bytes [0, len) of every QP that carried messages
 * (msgs[q] > 0) hold pattern(seed)?  -EILSEQ with the first difference
 * in ctx->err. */
int srn_perf_check_rx(struct srn_perf_ctx *c, size_t len, uint32_t seed,
		      const uint64_t *msgs);
/* Messages this side sent on QP q in the current run. */
uint64_t srn_perf_sent(const struct srn_perf_ctx *c, uint32_t q);
/* Target of atomics: does QP q's counter hold `expected`? */
int srn_perf_check_counter(struct srn_perf_ctx *c, uint32_t q, uint64_t expected);

#endif /* SRN_TOOLS_PERF_RUN_H */
