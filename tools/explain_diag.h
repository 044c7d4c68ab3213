/*
 * explain_diag.h - the diagnoses of `softrnic explain`: patterns in the
 * counters and error lines of softrnic processes that name a known
 * problem, say what it is and what to do (explain_diag.c).
 *
 *   stale rkey              a requester keeps using a remote key that its
 *                           peer deregistered (REM_ACCESS_ERR lines with
 *                           one rkey, the peer's freed region slot)
 *   retransmission storm    go-back-N restarts, ACK timeouts, duplicates
 *                           climbing relative to the packets sent
 *   PFC pause storm         pause frames / pause time climbing (mlx5's
 *                           counter names: rx_pause, rx_pause_duration,
 *                           rx_prioN_pause..., tx_pause...)
 *
 * Pure: the caller (cmd_explain.c) copies everything out of the
 * segments first; these functions read only their arguments and print
 * on a FILE, so tests feed them synthetic snapshots.  Counters are found
 * by name, never by the library's enum, so a counter that a newer
 * library adds (the pause counters) is diagnosed as soon as it exists.
 */
#ifndef SRN_TOOLS_EXPLAIN_DIAG_H
#define SRN_TOOLS_EXPLAIN_DIAG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SRN_XD_NAME_LEN 32      /* = SRN_DIAG_NAME_LEN */
#define SRN_XD_ADDR_LEN 48

/* A set of counters read by name: values now, and at the start of the
 * window (base, NULL: zero, i.e. since the process started). */
struct srn_xd_set {
	uint32_t n;
	const char (*names)[SRN_XD_NAME_LEN];
	const uint64_t *now;
	const uint64_t *base;
};

/* The counter's growth over the window; 0 when there is no such counter. */
uint64_t srn_xd_delta(const struct srn_xd_set *s, const char *name);
bool srn_xd_has(const struct srn_xd_set *s, const char *name);

/* One QP's share of a retransmission storm (deltas over the window). */
struct srn_xd_qp {
	uint32_t qpn;
	char peer[80];              /* "QP 0x.. at ADDR" */
	uint64_t retransmits, timeouts, seq_naks, sent, rnr;   /* rnr: RNR NAKs received */
};

struct srn_xd_dev {
	const char *who;            /* "pid 123 (prog) softrnic0" */
	struct srn_xd_set cnt;      /* the device counters */
	double secs;                /* length of the window; 0 unknown */
	bool lifetime;              /* the window is the process's life so far */
	const struct srn_xd_qp *qps;
	size_t nqps;
};

/* Each prints its finding ("diagnosis: ..." and indented lines) and
 * returns 1, or prints nothing and returns 0. */
int srn_xd_retransmit_storm(FILE *f, const struct srn_xd_dev *d);
int srn_xd_pause_storm(FILE *f, const struct srn_xd_dev *d);

/* An error line about a remote key: a requester's REM_ACCESS_ERR
 * completion, or a responder's NAK remote access error. */
struct srn_xd_key_err {
	bool responder;
	int pid;
	const char *who;            /* "pid 123 (prog) softrnic0" */
	const char *self_addr;      /* the logging device's address */
	uint32_t qpn;               /* the QP that logged */
	uint32_t rkey;
	uint64_t va;
	uint32_t len;
	char peer_addr[SRN_XD_ADDR_LEN];   /* requester lines: the responder's */
	char why[80];               /* responder lines: the failed check */
	uint64_t when;              /* CLOCK_REALTIME ns */
};

/* A memory region as the segments show it, live or deregistered (a freed
 * slot keeps its last region). */
struct srn_xd_region {
	int pid;
	const char *who;
	const char *addr;           /* the owning device's address */
	uint32_t rkey, access;
	uint64_t va, len;
	bool live;
};

/* Parse one log line into e (the pid/who/addr/qpn/when fields are left
 * to the caller): true for a key error line. */
bool srn_xd_parse_key_err(const char *msg, struct srn_xd_key_err *e);
/* Group the requester lines by process and rkey; for each key that
 * failed, find the region it named (a freed slot at the responder's
 * address) and tell the story.  Returns the findings printed. */
int srn_xd_stale_rkeys(FILE *f, const struct srn_xd_key_err *e, size_t n,
		       const struct srn_xd_region *r, size_t nr);

/* All of them over the segments in set (explain_seg.c): the stale keys
 * in their logs (only QP qpn's lines when has_qp), and, unless has_qp,
 * the storms of each device, over secs since base (a sample of the same
 * files) or, without base, over each process's life.  Returns how many
 * diagnoses it printed. */
struct srn_seg_set;
int srn_explain_diagnose(const struct srn_seg_set *set, const struct srn_seg_set *base,
			 double secs, bool has_qp, uint32_t qpn);

#endif
