/*
 * cmd_explain.c - `softrnic explain`: why did it fail?
 *
 *   softrnic explain [--pid N] [--dev NAME] [--qp QPN] [--interval SECS]
 *       the recent error explanations of every softrnic process, newest
 *       last, from their diagnostic segments (one line per error
 *       completion and per QP that went to the error state), then the
 *       diagnoses (explain_diag.h: stale rkey, retransmission storm, PFC
 *       pause storm) over the processes' lives, or over SECS between two
 *       samples
 *   softrnic explain --qp-log QPN [--pid N] [--dev NAME]
 *       the event log of one QP: state changes, NAKs, retransmissions,
 *       RNR waits, errors
 *   softrnic explain STATUS
 *       what a work-completion status means, its usual causes and how to
 *       check each with softrnic (STATUS as IBV_WC_RNR_RETRY_EXC_ERR,
 *       RNR_RETRY_EXC_ERR or 13); `--list` lists them all
 *
 * Invariants: read-only; the status texts are a table indexed by the
 * status number, so every ibv_wc_status has exactly one entry (checked at
 * compile time against the last one, IBV_WC_TM_RNDV_INCOMPLETE).
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "diag_read.h"
#include "explain_dead.h"
#include "explain_diag.h"
#include "subcommands.h"

struct status_text {
	const char *name;      /* without the IBV_WC_ prefix */
	const char *summary;
	const char *text;      /* meaning, causes, how to check */
};

static const struct status_text statuses[] = {
	[IBV_WC_SUCCESS] = { "SUCCESS", "the work request completed",
		"The operation completed without error. For a send-side request\n"
		"this means the data reached the responder (RC: it was acknowledged);\n"
		"for a receive, that a message landed in the posted buffer.\n" },
	[IBV_WC_LOC_LEN_ERR] = { "LOC_LEN_ERR", "local length error",
		"A message did not fit: on the receive side, the incoming SEND is\n"
		"longer than the buffers of the receive WQE it landed in; on the send\n"
		"side, the request is longer than the QP allows (UD: longer than the\n"
		"path MTU; any: longer than max_msg_sz, 2^31).\n"
		"Usual causes: receive buffers sized smaller than the peer's largest\n"
		"SEND; UD receives without the 40 extra bytes for the GRH.\n"
		"Check: `softrnic explain` names the wr_id and both lengths;\n"
		"counters loc_len_err and resp_local_length_error (`softrnic stat`);\n"
		"the sender sees REM_INV_REQ_ERR for the same message.\n" },
	[IBV_WC_LOC_QP_OP_ERR] = { "LOC_QP_OP_ERR", "local QP operation error",
		"The work request is not valid for this QP: an opcode its type does\n"
		"not support (RDMA on UD, READ or atomics on UC), more scatter/gather\n"
		"entries or inline bytes than the QP was created with, or a request\n"
		"the QP could not process in its current state.\n"
		"Check: `softrnic res --qp QPN` for the QP's type, state and sizes;\n"
		"`softrnic explain --qp-log QPN` for what it refused.\n" },
	[IBV_WC_LOC_EEC_OP_ERR] = { "LOC_EEC_OP_ERR", "local EE context operation error",
		"Reliable Datagram (EE contexts) only. softrnic does not implement RD\n"
		"and never reports this status.\n" },
	[IBV_WC_LOC_PROT_ERR] = { "LOC_PROT_ERR", "local protection error",
		"A local buffer failed the key check: an SGE's lkey does not exist,\n"
		"belongs to a region of another protection domain, does not cover\n"
		"[addr, addr+length), or the region was deregistered after the work\n"
		"request was posted (softrnic resolves keys when the bytes move, so a\n"
		"deregistered region gives this error, never a stale pointer). A\n"
		"receive buffer also needs IBV_ACCESS_LOCAL_WRITE.\n"
		"Check: `softrnic explain` names the lkey and the failed check;\n"
		"`softrnic res --type mr` shows every region's keys, range, PD and\n"
		"access; compare with the SGE.\n" },
	[IBV_WC_WR_FLUSH_ERR] = { "WR_FLUSH_ERR", "work request flushed",
		"The QP is in the Error state, so every outstanding work request and\n"
		"every one posted afterwards completes with this status. It is a\n"
		"consequence, not a cause: find the first completion on this QP with\n"
		"another error status, or the asynchronous event, that moved it to\n"
		"Error (or the application's own ibv_modify_qp to IBV_QPS_ERR).\n"
		"Check: `softrnic explain --qp-log QPN` shows the state change to ERR\n"
		"and the error before it; `softrnic res --qp QPN` shows the state;\n"
		"counters req_cqe_flush_error / resp_cqe_flush_error.\n" },
	[IBV_WC_MW_BIND_ERR] = { "MW_BIND_ERR", "memory window bind error",
		"Binding a memory window failed (bad window, region or rights).\n"
		"softrnic does not support memory windows (ibv_alloc_mw answers\n"
		"EOPNOTSUPP), so it never reports this status.\n" },
	[IBV_WC_BAD_RESP_ERR] = { "BAD_RESP_ERR", "bad response",
		"The requester received a response it cannot match to the request:\n"
		"a wrong response opcode, an unexpected length, or a response that\n"
		"breaks the transport rules. It points at the peer's implementation\n"
		"or at two incompatible versions talking.\n"
		"Check: counter malformed_pkts; record the exchange with\n"
		"`softrnic run --pcap FILE` (or SOFTRNIC_PCAP) and look at it in\n"
		"Wireshark; `softrnic explain` names the PSN and what arrived.\n" },
	[IBV_WC_LOC_ACCESS_ERR] = { "LOC_ACCESS_ERR", "local access error",
		"Data arriving for a local buffer failed the access check: typically\n"
		"the region receiving RDMA READ response data or an atomic's\n"
		"original value lacks IBV_ACCESS_LOCAL_WRITE, or the buffer was\n"
		"deregistered while the request was outstanding.\n"
		"Check: `softrnic res --type mr` for the access flags of the region\n"
		"named by the SGE; `softrnic explain` for the lkey and range.\n" },
	[IBV_WC_REM_INV_REQ_ERR] = { "REM_INV_REQ_ERR", "remote invalid request",
		"The responder answered NAK-invalid-request: it could not accept the\n"
		"request as such. Usual causes: the SEND is longer than the receive\n"
		"buffer posted on the remote side; an operation the remote QP does\n"
		"not allow (RDMA READ or atomics with max_dest_rd_atomic 0, or the\n"
		"remote QP's qp_access_flags lack REMOTE_WRITE/READ/ATOMIC); an\n"
		"operation softrnic does not implement at the responder; a broken\n"
		"opcode sequence. The responder's QP goes to Error too.\n"
		"Check: `softrnic explain --pid PEER` on the responder says which\n"
		"check failed; `softrnic res --pid PEER --type qp` for its attributes;\n"
		"counter req_remote_invalid_request here.\n" },
	[IBV_WC_REM_ACCESS_ERR] = { "REM_ACCESS_ERR", "remote access error",
		"The responder answered NAK-remote-access-error for an RDMA WRITE,\n"
		"READ or atomic: the rkey does not exist there (never registered,\n"
		"deregistered, or stale: the region was re-registered and got a new\n"
		"key), the range [va, va+len) is not inside the region, the region\n"
		"lacks IBV_ACCESS_REMOTE_WRITE/READ/ATOMIC, or it belongs to another\n"
		"protection domain than the responder's QP. Its QP goes to Error.\n"
		"Check: the explanation here names rkey, va and length; on the\n"
		"responder `softrnic explain --pid PEER` names the failed check and\n"
		"`softrnic res --pid PEER --type mr` lists its regions and keys;\n"
		"counters req_remote_access_errors / resp_remote_access_errors.\n" },
	[IBV_WC_REM_OP_ERR] = { "REM_OP_ERR", "remote operation error",
		"The responder answered NAK-remote-operational-error: it accepted the\n"
		"request but could not carry it out, e.g. its receive completion\n"
		"queue overflowed or an internal error stopped it. Its QP goes to\n"
		"Error.\n"
		"Check: `softrnic explain --pid PEER` and the counter cq_overflow on\n"
		"the responder; `softrnic res --pid PEER --type cq` for CQ fill.\n" },
	[IBV_WC_RETRY_EXC_ERR] = { "RETRY_EXC_ERR", "transport retry counter exceeded",
		"The requester sent, waited the local ACK timeout (4.096 us *\n"
		"2^timeout), retransmitted, and did so retry_cnt times without the\n"
		"peer acknowledging (NAK-sequence-errors count as retries too).\n"
		"Usual causes: the peer is not there or not listening (process gone,\n"
		"QP destroyed, not yet in RTR, or in Error and dropping); the RTR\n"
		"attributes name the wrong peer (dest_qp_num, GID, port); heavy loss;\n"
		"a timeout too short for the path.\n"
		"Check: `softrnic explain` names the PSN, the peer, the retries and\n"
		"the last thing the peer said; `softrnic res` on both sides: the\n"
		"peer and peer_qpn of each QP must be the other's address and qpn,\n"
		"states RTS/RTR; counters local_ack_timeout_err and retransmits\n"
		"here, unknown_qp_pkts, addr_mismatch_pkts and qp_state_drops at the\n"
		"peer (`softrnic stat --pid PEER`).\n" },
	[IBV_WC_RNR_RETRY_EXC_ERR] = { "RNR_RETRY_EXC_ERR", "receiver-not-ready retry counter exceeded",
		"The responder had no receive WQE posted when a SEND (or RDMA WRITE\n"
		"with immediate) arrived and answered RNR NAK; the requester waited\n"
		"the RNR timer and retried, rnr_retry times, in vain (rnr_retry 7\n"
		"means retry forever).\n"
		"Usual causes: the receiver posts receives too late (after the peer\n"
		"starts sending) or too few for the traffic; rnr_retry 0; a short\n"
		"min_rnr_timer on the responder.\n"
		"Check: `softrnic res --pid PEER --type qp` shows recv_posted on the\n"
		"responder (0 = nothing posted); counters send_rnr_err at the\n"
		"responder, rcvd_rnr_err here; `softrnic explain --qp-log QPN` shows\n"
		"the RNR waits. Post receives before moving to RTR, or raise\n"
		"rnr_retry.\n" },
	[IBV_WC_LOC_RDD_VIOL_ERR] = { "LOC_RDD_VIOL_ERR", "local RDD violation",
		"Reliable Datagram only (RD domain mismatch). softrnic does not\n"
		"implement RD and never reports this status.\n" },
	[IBV_WC_REM_INV_RD_REQ_ERR] = { "REM_INV_RD_REQ_ERR", "remote invalid RD request",
		"Reliable Datagram only (NAK invalid RD request). softrnic does not\n"
		"implement RD and never reports this status.\n" },
	[IBV_WC_REM_ABORT_ERR] = { "REM_ABORT_ERR", "remote aborted",
		"The responder aborted the operation, e.g. its QP was destroyed or\n"
		"reset while a multi-packet message was arriving. softrnic's\n"
		"responder does not report it; a hardware peer may.\n"
		"Check: `softrnic explain --pid PEER` if the peer is softrnic.\n" },
	[IBV_WC_INV_EECN_ERR] = { "INV_EECN_ERR", "invalid EE context number",
		"Reliable Datagram only. softrnic never reports this status.\n" },
	[IBV_WC_INV_EEC_STATE_ERR] = { "INV_EEC_STATE_ERR", "invalid EE context state",
		"Reliable Datagram only. softrnic never reports this status.\n" },
	[IBV_WC_FATAL_ERR] = { "FATAL_ERR", "fatal error",
		"The device failed in a way that affects every QP: for softrnic, the\n"
		"UDP socket reported an error it cannot recover from.\n"
		"Check: counters tx_err (`softrnic stat`); `softrnic explain` for the\n"
		"device log; the address the device is bound to (`softrnic devinfo`).\n" },
	[IBV_WC_RESP_TIMEOUT_ERR] = { "RESP_TIMEOUT_ERR", "response timeout",
		"Reliable Datagram only. softrnic never reports this status.\n" },
	[IBV_WC_GENERAL_ERR] = { "GENERAL_ERR", "general error",
		"An error that fits no other status.\n"
		"Check: `softrnic explain --qp-log QPN` for what happened on the QP.\n" },
	[IBV_WC_TM_ERR] = { "TM_ERR", "tag matching error",
		"Tag matching (ibv_post_srq_ops) only. softrnic does not implement\n"
		"tag matching and never reports this status.\n" },
	[IBV_WC_TM_RNDV_INCOMPLETE] = { "TM_RNDV_INCOMPLETE", "tag matching rendezvous incomplete",
		"Tag matching only. softrnic never reports this status.\n" },
};
#define NSTATUS (sizeof(statuses) / sizeof(statuses[0]))
_Static_assert(NSTATUS == IBV_WC_TM_RNDV_INCOMPLETE + 1, "a text for every ibv_wc_status");

void srn_usage_explain(FILE *out)
{
	fprintf(out,
		"Usage: softrnic explain [--pid N] [--dev NAME] [--qp QPN] [--interval SECS]\n"
		"       softrnic explain --qp-log QPN [--pid N] [--dev NAME]\n"
		"       softrnic explain STATUS | --list\n"
		"\n"
		"Without arguments: the recent error explanations of every softrnic\n"
		"process on this host, newest last: one line per error completion\n"
		"(e.g. which PSN, peer and retries a RETRY_EXC_ERR had, which rkey,\n"
		"address and check a REM_ACCESS_ERR failed) and per QP that went to\n"
		"the error state. Kept after the process exits when it logged errors.\n"
		"SOFTRNIC_LOG=warn makes the library print the same lines on stderr.\n"
		"Then the diagnoses, from the counters and logs of every process:\n"
		"  stale rkey            a process keeps using a key its peer deregistered\n"
		"  retransmission storm  go-back-N restarts, timeouts, duplicates climbing\n"
		"  PFC pause storm       pause frames / pause time climbing\n"
		"each naming the process, QPs and keys, and what to do.\n"
		"\n"
		"Options:\n"
		"  --pid N          only process N\n"
		"  --dev NAME       only device NAME\n"
		"  --qp QPN         only lines about QP QPN\n"
		"  --interval SECS  judge the counters over SECS between two samples\n"
		"                   (default: over each process's life)\n"
		"  --qp-log QPN     the event log of QP QPN (state changes, NAKs,\n"
		"                   retransmissions, RNR waits, errors); also of a QP\n"
		"                   already destroyed, until its slot is reused\n"
		"  --list           list every work-completion status\n"
		"  -h, --help       show this help\n"
		"\n"
		"STATUS is a work-completion status as ibv_wc_status_str prints it or\n"
		"as named in <infiniband/verbs.h>: IBV_WC_RETRY_EXC_ERR, RETRY_EXC_ERR\n"
		"or 12; `softrnic explain STATUS` says what it means, its usual causes\n"
		"and how to check each with softrnic.\n");
}

/* "IBV_WC_RNR_RETRY_EXC_ERR", "rnr_retry_exc_err", "13": the status. */
static int find_status(const char *arg)
{
	uint32_t n;
	if (!srn_parse_u32(arg, &n))
		return n < NSTATUS ? (int)n : -1;
	if (!strncasecmp(arg, "IBV_WC_", 7))
		arg += 7;
	for (size_t i = 0; i < NSTATUS; i++)
		if (!strcasecmp(arg, statuses[i].name))
			return (int)i;
	/* The one-line summaries, e.g. "remote access error". */
	for (size_t i = 0; i < NSTATUS; i++)
		if (!strcasecmp(arg, statuses[i].summary))
			return (int)i;
	return -1;
}

static int explain_status(const char *arg)
{
	int st = find_status(arg);
	if (st < 0) {
		fprintf(stderr, "softrnic explain: '%s' is not a work-completion status; "
				"`softrnic explain --list` lists them\n", arg);
		return SRN_EXIT_USAGE;
	}
	const struct status_text *t = &statuses[st];
	printf("IBV_WC_%s (%d): %s\n\n%s", t->name, st, t->summary, t->text);
	return SRN_EXIT_OK;
}

static int list_statuses(void)
{
	for (size_t i = 0; i < NSTATUS; i++)
		printf("%2zu  IBV_WC_%-22s %s\n", i, statuses[i].name, statuses[i].summary);
	return SRN_EXIT_OK;
}

struct line {
	uint64_t when;                 /* CLOCK_REALTIME ns */
	const struct srn_seg *seg;
	struct srn_diag_log_entry e;
};

static int line_cmp(const void *a, const void *b)
{
	const struct line *x = a, *y = b;
	return (x->when > y->when) - (x->when < y->when);
}

static void print_line(const struct line *l, bool with_who)
{
	char t[32], who[96] = "", qp[24] = "";
	srn_time_str(l->when, t, sizeof(t));
	if (with_who)
		snprintf(who, sizeof(who), "  pid %d (%s) %s", l->seg->pid, l->seg->comm,
			 l->seg->dev);
	if (l->e.kind == SRN_DIAG_QP)
		snprintf(qp, sizeof(qp), " qp 0x%06x", l->e.qpn);
	else if (l->e.kind != SRN_DIAG_FREE)
		snprintf(qp, sizeof(qp), " %s", srn_kind_name(l->e.kind));
	printf("%s%s%s  %s: %s\n", t, who, qp,
	       srn_level_str(l->e.level), l->e.msg);
}

/* Sleep SECS (bounded by the caller's parse: at most an hour). */
static void sleep_secs(double secs)
{
	struct timespec ts = { (time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9) };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static int explain_recent(const struct srn_seg_filter *f, bool has_qp, uint32_t qpn,
			  double interval)
{
	struct srn_seg_set set, base;
	bool have_base = interval > 0;
	if (have_base) {
		int r = srn_segs_load(&base, f, true);
		if (r) {
			fprintf(stderr, "softrnic explain: %s: %s\n", srn_diag_dir(), strerror(-r));
			return SRN_EXIT_FAIL;
		}
		sleep_secs(interval);
	}
	int r = srn_segs_load(&set, f, false);
	if (r) {
		fprintf(stderr, "softrnic explain: %s: %s\n", srn_diag_dir(), strerror(-r));
		if (have_base)
			srn_segs_free(&base);
		return SRN_EXIT_FAIL;
	}
	size_t cap = set.n * SRN_DIAG_DEV_LOG_ENTRIES, n = 0;
	struct line *lines = cap ? calloc(cap, sizeof(*lines)) : NULL;
	struct srn_diag_log_entry e[SRN_DIAG_DEV_LOG_ENTRIES];
	for (size_t i = 0; i < set.n && lines; i++) {
		size_t k = srn_seg_dev_log(&set.v[i], e, SRN_DIAG_DEV_LOG_ENTRIES);
		for (size_t j = 0; j < k; j++) {
			if (has_qp && (e[j].kind != SRN_DIAG_QP || e[j].qpn != qpn))
				continue;
			lines[n++] = (struct line){ .when = srn_seg_realtime(&set.v[i], e[j].ts_ns),
						    .seg = &set.v[i], .e = e[j] };
		}
	}
	qsort(lines, n, sizeof(*lines), line_cmp);
	for (size_t i = 0; i < n; i++)
		print_line(&lines[i], true);
	if (!n)
		printf("no errors recorded%s (%zu softrnic device%s checked)\n",
		       has_qp ? " for that QP" : "", set.n, set.n == 1 ? "" : "s");
	if (n)
		printf("\n");
	if (!has_qp && srn_explain_dead(stdout, &set))
		printf("\n");
	int found = srn_explain_diagnose(&set, have_base ? &base : NULL, interval, has_qp, qpn);
	if (!found && n)
		printf("no known pattern (stale rkey, retransmission storm, PFC pause storm) "
		       "in the counters and logs\n");
	srn_segs_note_others(stdout, &set);
	free(lines);
	srn_segs_free(&set);
	if (have_base)
		srn_segs_free(&base);
	return SRN_EXIT_OK;
}

static int explain_qp_log(const struct srn_seg_filter *f, uint32_t qpn)
{
	struct srn_seg_set set;
	int r = srn_segs_load(&set, f, false);
	if (r) {
		fprintf(stderr, "softrnic explain: %s: %s\n", srn_diag_dir(), strerror(-r));
		return SRN_EXIT_FAIL;
	}
	unsigned found = 0;
	struct srn_diag_slot sl;
	struct srn_diag_log_entry e[SRN_DIAG_LOG_ENTRIES];
	for (size_t i = 0; i < set.n; i++) {
		const struct srn_seg *s = &set.v[i];
		for (uint32_t idx = 0; idx < s->nslots; idx++) {
			if (!srn_seg_slot_any(s, idx, &sl))
				continue;
			/* A freed slot keeps its last QP's body and log until reused. */
			if (sl.last_kind != SRN_DIAG_QP || sl.qp.qpn != qpn)
				continue;
			bool gone = sl.kind != SRN_DIAG_QP;
			printf("%sqp 0x%06x  pid %d (%s) %s  %s %s%s\n", found ? "\n" : "", qpn, s->pid,
			       s->comm, s->dev, srn_qp_type_str(sl.qp.type),
			       srn_qp_state_name(sl.qp.state), gone ? "  (destroyed)" : "");
			found++;
			size_t k = srn_seg_qp_log(s, idx, sl.gen, e, SRN_DIAG_LOG_ENTRIES);
			for (size_t j = 0; j < k; j++) {
				struct line l = { .when = srn_seg_realtime(s, e[j].ts_ns), .seg = s,
						  .e = e[j] };
				l.e.kind = SRN_DIAG_FREE;   /* the QP is in the heading */
				printf("  ");
				print_line(&l, false);
			}
			if (!k)
				printf("  (no events logged)\n");
		}
	}
	if (!found)
		printf("no QP 0x%06x in any softrnic process%s\n", qpn,
		       f->pid || f->dev ? " matching the filter" : "");
	srn_segs_note_others(stdout, &set);
	srn_segs_free(&set);
	return found ? SRN_EXIT_OK : SRN_EXIT_FAIL;
}

int srn_cmd_explain(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },    { "dev", required_argument, NULL, 'd' },
		{ "qp", required_argument, NULL, 'q' },     { "qp-log", required_argument, NULL, 'L' },
		{ "list", no_argument, NULL, 'l' },         { "help", no_argument, NULL, 'h' },
		{ "interval", required_argument, NULL, 'i' },
		{ NULL, 0, NULL, 0 },
	};
	struct srn_seg_filter f = { 0 };
	bool has_qp = false, qp_log = false;
	uint32_t qpn = 0;
	double interval = 0;
	char *end;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (srn_parse_pid(optarg, &f.pid))
				goto bad;
			break;
		case 'd':
			f.dev = optarg;
			break;
		case 'q':
		case 'L':
			if (srn_parse_u32(optarg, &qpn) || qpn > 0xffffff)
				goto bad;
			has_qp = true;
			qp_log = c == 'L';
			break;
		case 'i':
			interval = strtod(optarg, &end);
			if (end == optarg || *end || !(interval > 0 && interval <= 3600))
				goto bad;
			break;
		case 'l':
			return list_statuses();
		case 'h':
			srn_usage_explain(stdout);
			return SRN_EXIT_OK;
		default:
			srn_usage_explain(stderr);
			return SRN_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		if (optind + 1 < argc || has_qp || f.pid || f.dev || interval > 0) {
			fprintf(stderr, "softrnic explain: STATUS takes no other arguments\n");
			return SRN_EXIT_USAGE;
		}
		return explain_status(argv[optind]);
	}
	if (qp_log)
		return explain_qp_log(&f, qpn);
	return explain_recent(&f, has_qp, qpn, interval);
bad:
	fprintf(stderr, "softrnic explain: bad value '%s'\n", optarg);
	srn_usage_explain(stderr);
	return SRN_EXIT_USAGE;
}
