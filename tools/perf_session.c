/*
 * perf_session.c - one `softrnic perf` session: the control protocol that
 * drives the measurement engine (perf_run.c) on both sides of the TCP
 * channel (perf_conn.c), and feeds the report (perf_report.c).
 *
 * The client decides the test and tells the server (CONFIG), so a server
 * needs no options but its port and device.  Control protocol over the
 * TCP channel of perf_conn.c, one message answered by one message:
 *
 *   client                         server
 *   CONFIG (test parameters)  ->   opens the device, or ABORT(reason)
 *   HELLO (QPs, buffer)       <->  HELLO; both connect their QPs
 *   RUN (size, seed, count)   ->   prepares buffers, posts receives
 *                             <-   READY
 *   ... the run (perf_run.c); either side may ABORT(reason) instead ...
 *   DONE (per QP: sent, counter) -> checks what it received
 *                             <-   RESULT (messages received)
 *   RUN ... | END
 *
 * UD: before CONFIG, the client settles its sizes against its port's MTU
 * and sends that MTU, so the server holds messages to the same limit.
 * UC and UD may lose messages: send bw counts what arrived and reports it
 * (RESULT), and fails on loss only for RC.
 *
 * Each size runs twice: a short warm-up, then the measured run.  Every
 * wait for a message is bounded (--timeout), runs by their own stall
 * bound; an error on either side reaches the other as ABORT, so neither
 * waits out a timeout for a peer that already gave up.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf_conn.h"
#include "perf_session.h"
#include "subcommands.h"

enum msg_type {
	MSG_CONFIG = 1,
	MSG_HELLO,
	MSG_RUN,
	MSG_READY,
	MSG_DONE,
	MSG_RESULT,
	MSG_END,
	MSG_ABORT,
};

/* 2: CONFIG's QP type byte is a wire_qp_type (1 had a u8 "is UC"). */
#define PROTO_VERSION 2
#define STALL_NS (10ull * 1000000000ull) /* a run with no progress this long failed */
#define RUN_WAIT_S 3600                  /* longest wait for the end of one run */
#define DRAIN_GRACE_NS 2000000000ull     /* send bw: receives still arriving */
#define UC_CHECK_NS 500000000ull         /* UC write: last packets still arriving */
/* UC, UD send bw: after the client's last send completed, this long with
 * no arrival means the rest was lost.  Its packets have left the sender
 * by then: what is still coming arrives within microseconds, unless the
 * receiver is descheduled. */
#define LOSSY_QUIET_NS 200000000ull

/* The QP type in CONFIG. */
enum wire_qp_type { WIRE_RC, WIRE_UC, WIRE_UD, WIRE_NQP_TYPES };

struct session {
	const struct srn_perf_opts *o;
	struct srn_perf_ctx c;
	int fd;
	bool server, quiet;
	uint32_t seed;
	struct srn_perf_progress pg;
	/* client --series: throughput of the measured runs over time */
	FILE *series;
	uint64_t series_done, series_ns;	/* at the last line */
	uint32_t series_size;
	/* client: o->p and o->sizes as run (UD: held to the path MTU) */
	struct srn_perf_params p;
	uint32_t sizes[SRN_PERF_MAX_ROWS];
	size_t nsizes;
	char peer_err[400];
	uint8_t msg[SRN_CONN_MAX_PAYLOAD];
};

/* Test parameters that both the command line and a client's CONFIG must
 * satisfy; the reason for a rejection goes to why. */
bool srn_perf_params_valid(const struct srn_perf_params *p, char *why, size_t len)
{
	bool one_sided = p->op == SRN_PERF_READ || p->op == SRN_PERF_CAS ||
			 p->op == SRN_PERF_FAA;

	if (p->op >= SRN_PERF_NOPS || (p->test != SRN_PERF_LAT && p->test != SRN_PERF_BW) ||
	    !srn_perf_qp_type_known(p->qp_type))
		snprintf(why, len, "unknown operation, test or QP type");
	else if (one_sided && p->qp_type != IBV_QPT_RC)
		snprintf(why, len, "--op %s needs --qp-type rc (%s has no %s)",
			 srn_perf_op_name(p->op), srn_perf_qp_type_title(p->qp_type),
			 p->op == SRN_PERF_READ ? "RDMA Read" : "atomics");
	else if (p->qp_type == IBV_QPT_UD && p->op != SRN_PERF_SEND)
		snprintf(why, len, "--op %s is not possible over UD: --qp-type ud carries "
			 "only --op send", srn_perf_op_name(p->op));
	else if (p->qp_type == IBV_QPT_UD && p->mtu && p->max_size > p->mtu)
		snprintf(why, len, "--qp-type ud: a %u-byte message does not fit in one packet "
			 "(path MTU %u)", p->max_size, p->mtu);
	else if (!p->qps || p->qps > SRN_PERF_MAX_QPS)
		snprintf(why, len, "--qps must be 1..%d", SRN_PERF_MAX_QPS);
	else if (p->mtu && (p->mtu < 256 || p->mtu > 4096 || (p->mtu & (p->mtu - 1))))
		snprintf(why, len, "--mtu must be 256, 512, 1024, 2048 or 4096");
	else if (!p->tx_depth || p->tx_depth > SRN_PERF_MAX_DEPTH || !p->rx_depth ||
		 p->rx_depth > SRN_PERF_MAX_DEPTH)
		snprintf(why, len, "--tx-depth and --rx-depth must be 1..%d", SRN_PERF_MAX_DEPTH);
	else if (!p->post_list || p->post_list > p->tx_depth || p->post_list > 512)
		snprintf(why, len, "--post-list must be 1..min(tx-depth, 512)");
	else if (!p->cq_mod || p->cq_mod > p->tx_depth - p->post_list + 1)
		/* A full window must hold a signaled WR (perf_run.c). */
		snprintf(why, len, "--cq-mod must be 1..tx-depth - post-list + 1 (%u)",
			 p->tx_depth - p->post_list + 1);
	else if (!p->max_size || p->max_size > SRN_PERF_MAX_SIZE)
		snprintf(why, len, "sizes must be 1..%u", SRN_PERF_MAX_SIZE);
	else if (p->inline_size > 65536)
		snprintf(why, len, "--inline is too large");
	else
		return true;
	return false;
}

bool srn_perf_ud_sizes(uint32_t *sizes, size_t *nsizes, bool given, uint32_t mtu,
		       char *why, size_t len)
{
	size_t n = 0;

	for (size_t i = 0; i < *nsizes; i++) {
		if (sizes[i] <= mtu) {
			sizes[n++] = sizes[i];
		} else if (given) {
			snprintf(why, len, "--qp-type ud: a %u-byte message does not fit in one "
				 "packet (path MTU %u)", sizes[i], mtu);
			return false;
		}
	}
	/* Only the bw default (64 KiB) can leave nothing: send the most. */
	if (!n)
		sizes[n++] = mtu;
	*nsizes = n;
	return true;
}

/* ---- messages ---- */

static int __attribute__((format(printf, 2, 3))) say(struct session *s, const char *fmt, ...)
{
	va_list ap;

	if (s->quiet)
		return SRN_EXIT_FAIL;
	srn_perf_progress_clear(&s->pg);
	fprintf(stderr, "softrnic perf: %s", s->server ? "server: " : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	return SRN_EXIT_FAIL;
}

static int send_msg(struct session *s, uint16_t type, const struct srn_conn_wr *w)
{
	int ret = srn_conn_send(s->fd, type, w);

	if (ret)
		say(s, "sending to the peer: %s", strerror(-ret));
	return ret;
}

/* Tell the peer why we stop, so it does not wait for a timeout. */
static void send_abort(struct session *s, const char *why)
{
	uint8_t buf[512];
	struct srn_conn_wr w;

	srn_conn_wr_init(&w, buf, sizeof(buf));
	srn_conn_put_str(&w, why, 400);
	srn_conn_send(s->fd, MSG_ABORT, &w);
}

static int send_empty(struct session *s, uint16_t type)
{
	struct srn_conn_wr w;

	srn_conn_wr_init(&w, s->msg, 0);
	return send_msg(s, type, &w);
}

/* Receive a message of type `want`; an ABORT yields -ECANCELED with the
 * peer's reason in s->peer_err. */
static int recv_msg(struct session *s, uint16_t want, struct srn_conn_rd *r, int timeout_s)
{
	uint16_t type;
	int ret = srn_conn_recv(s->fd, &type, r, s->msg, sizeof(s->msg), timeout_s * 1000);

	if (ret) {
		snprintf(s->peer_err, sizeof(s->peer_err), "%s",
			 ret == -ECONNRESET ? "the peer closed the connection" :
			 ret == -ETIMEDOUT  ? "timed out waiting for the peer" :
			 ret == -EPROTO     ? "the peer does not speak this protocol" :
					      strerror(-ret));
		return ret;
	}
	if (type == MSG_ABORT) {
		char why[256];

		srn_conn_get_str(r, why, sizeof(why));
		snprintf(s->peer_err, sizeof(s->peer_err), "the %s stopped: %s",
			 s->server ? "client" : "server", why);
		return -ECANCELED;
	}
	if (type != want) {
		snprintf(s->peer_err, sizeof(s->peer_err), "unexpected message %u (expected %u)",
			 type, want);
		return -EPROTO;
	}
	return 0;
}

static int bad_msg(struct session *s, const char *what)
{
	snprintf(s->peer_err, sizeof(s->peer_err), "malformed %s message", what);
	return -EPROTO;
}

static uint8_t wire_qp_type(enum ibv_qp_type t)
{
	return t == IBV_QPT_UD ? WIRE_UD : t == IBV_QPT_UC ? WIRE_UC : WIRE_RC;
}

static void put_params(struct srn_conn_wr *w, const struct srn_perf_params *p)
{
	srn_conn_put_u32(w, PROTO_VERSION);
	srn_conn_put_u8(w, (uint8_t)p->op);
	srn_conn_put_u8(w, wire_qp_type(p->qp_type));
	srn_conn_put_u8(w, (uint8_t)p->test);
	srn_conn_put_u32(w, p->qps);
	srn_conn_put_u32(w, p->mtu);
	srn_conn_put_u32(w, p->inline_size);
	srn_conn_put_u32(w, p->tx_depth);
	srn_conn_put_u32(w, p->rx_depth);
	srn_conn_put_u32(w, p->cq_mod);
	srn_conn_put_u32(w, p->post_list);
	srn_conn_put_u32(w, p->max_size);
}

/* Validated once here: the engine trusts srn_perf_params_valid()'s ranges. */
static int get_params(struct session *s, struct srn_conn_rd *r, struct srn_perf_params *p)
{
	static const enum ibv_qp_type types[WIRE_NQP_TYPES] = {
		[WIRE_RC] = IBV_QPT_RC, [WIRE_UC] = IBV_QPT_UC, [WIRE_UD] = IBV_QPT_UD,
	};
	char why[160];
	uint8_t type;

	if (srn_conn_get_u32(r) != PROTO_VERSION) {
		snprintf(s->peer_err, sizeof(s->peer_err), "client speaks another protocol version");
		return -EPROTO;
	}
	p->op = (enum srn_perf_op)srn_conn_get_u8(r);
	type = srn_conn_get_u8(r);
	/* An unknown type stays unknown: srn_perf_params_valid rejects it. */
	p->qp_type = type < WIRE_NQP_TYPES ? types[type] : IBV_QPT_DRIVER;
	p->test = (enum srn_perf_test)srn_conn_get_u8(r);
	p->qps = srn_conn_get_u32(r);
	p->mtu = srn_conn_get_u32(r);
	p->inline_size = srn_conn_get_u32(r);
	p->tx_depth = srn_conn_get_u32(r);
	p->rx_depth = srn_conn_get_u32(r);
	p->cq_mod = srn_conn_get_u32(r);
	p->post_list = srn_conn_get_u32(r);
	p->max_size = srn_conn_get_u32(r);
	if (!srn_conn_rd_done(r))
		return bad_msg(s, "CONFIG");
	if (!srn_perf_params_valid(p, why, sizeof(why))) {
		snprintf(s->peer_err, sizeof(s->peer_err), "rejected: %s", why);
		return -EINVAL;
	}
	return 0;
}

static int send_hello(struct session *s)
{
	struct srn_conn_wr w;

	srn_conn_wr_init(&w, s->msg, sizeof(s->msg));
	srn_conn_put_u32(&w, s->c.mr->rkey);
	srn_conn_put_u32(&w, s->c.p.qps);
	for (uint32_t q = 0; q < s->c.p.qps; q++) {
		const struct srn_perf_qp *x = &s->c.qps[q];

		srn_conn_put_qp(&w, &x->local);
		srn_conn_put_u64(&w, (uintptr_t)x->tx);
		srn_conn_put_u64(&w, (uintptr_t)x->rx);
		srn_conn_put_u64(&w, (uintptr_t)x->slots);
	}
	return send_msg(s, MSG_HELLO, &w);
}

static int recv_hello_and_connect(struct session *s)
{
	struct srn_perf_peer_qp peer[SRN_PERF_MAX_QPS];
	struct srn_conn_rd r;
	uint32_t rkey, n;
	int ret = recv_msg(s, MSG_HELLO, &r, s->o->timeout_s);

	if (ret)
		return ret;
	rkey = srn_conn_get_u32(&r);
	n = srn_conn_get_u32(&r);
	if (n != s->c.p.qps)
		return bad_msg(s, "HELLO");
	for (uint32_t q = 0; q < n; q++) {
		srn_conn_get_qp(&r, &peer[q].addr);
		peer[q].tx = srn_conn_get_u64(&r);
		peer[q].rx = srn_conn_get_u64(&r);
		peer[q].slots = srn_conn_get_u64(&r);
	}
	if (!srn_conn_rd_done(&r))
		return bad_msg(s, "HELLO");
	ret = srn_perf_connect(&s->c, peer, rkey);
	if (ret)
		snprintf(s->peer_err, sizeof(s->peer_err), "%s", s->c.err);
	return ret;
}

static int peer_poll(void *arg)
{
	struct session *s = arg;

	return srn_conn_readable(s->fd) != 0;
}

/* --series: one line per progress call (about every 100 ms): the clock
 * (CLOCK_MONOTONIC seconds, one clock for every process and namespace of
 * the host, so several senders' series and the switch's stats line up),
 * the message size and the Mb/s completed since the previous line. */
static void series_line(struct session *s, uint64_t done, uint64_t elapsed_ns)
{
	uint64_t dt = elapsed_ns - s->series_ns;

	if (!dt)
		return;
	fprintf(s->series, "%.3f\t%u\t%.2f\n", (double)srn_now_ns() / 1e9, s->series_size,
		(double)(done - s->series_done) * s->series_size * 8e3 / (double)dt);
	s->series_done = done;
	s->series_ns = elapsed_ns;
}

static void show_progress(void *arg, uint64_t done, uint64_t total, uint64_t elapsed_ns)
{
	struct session *s = arg;

	if (s->series)
		series_line(s, done, elapsed_ns);
	if (s->pg.f)
		srn_perf_progress_show(&s->pg, done, total, elapsed_ns);
}

/* ---- client ---- */

/* DONE: what each QP sent in this run and in the session.  *sent: this
 * run's sends on all QPs.  Nonzero when it could not be sent. */
static int send_done(struct session *s, uint64_t *sent)
{
	const struct srn_perf_params *p = &s->c.p;
	struct srn_conn_wr w;

	srn_conn_wr_init(&w, s->msg, sizeof(s->msg));
	srn_conn_put_u32(&w, p->qps);
	for (uint32_t q = 0; q < p->qps; q++) {
		const struct srn_perf_qp *x = &s->c.qps[q];

		/* This run's sends, and the session's: an atomics target's
		 * counter must equal the latter. */
		*sent += srn_perf_sent(&s->c, q);
		srn_conn_put_u64(&w, srn_perf_sent(&s->c, q));
		srn_conn_put_u64(&w, x->posted);
	}
	return send_msg(s, MSG_DONE, &w);
}

/* One run of one size; `measured` runs feed the report. */
static int client_run(struct session *s, uint32_t size, uint64_t iters, uint64_t duration_ns,
		      struct srn_perf_result *res, bool measured)
{
	const struct srn_perf_params *p = &s->c.p;
	struct srn_perf_run run = { .size = size, .seed = ++s->seed, .iters = iters,
				    .duration_ns = duration_ns, .stall_ns = STALL_NS,
				    .peer_poll = peer_poll,
				    .progress = measured && (s->pg.f || s->series) ? show_progress : NULL,
				    .arg = s };
	uint64_t received, sent = 0, per_qp[SRN_PERF_MAX_QPS];
	struct srn_conn_wr w;
	struct srn_conn_rd r;
	int ret;

	ret = srn_perf_prepare(&s->c, size, run.seed);
	if (ret)
		goto local_error;
	srn_conn_wr_init(&w, s->msg, sizeof(s->msg));
	srn_conn_put_u32(&w, size);
	srn_conn_put_u32(&w, run.seed);
	srn_conn_put_u64(&w, iters);
	srn_conn_put_u64(&w, duration_ns);
	if (send_msg(s, MSG_RUN, &w))
		return -EIO;
	ret = recv_msg(s, MSG_READY, &r, s->o->timeout_s);
	if (ret)
		return ret;
	s->pg.size = size;
	s->series_done = s->series_ns = 0;
	s->series_size = size;
	ret = srn_perf_client_run(&s->c, &run, res);
	srn_perf_progress_clear(&s->pg);
	if (ret == -EINTR) {
		/* The server spoke during the run: only an ABORT may, and it
		 * says why (recv_msg turns it into -ECANCELED). */
		ret = recv_msg(s, MSG_ABORT, &r, s->o->timeout_s);
		return ret ? ret : bad_msg(s, "ABORT");
	}
	if (ret)
		goto local_error;

	if (send_done(s, &sent))
		return -EIO;
	ret = recv_msg(s, MSG_RESULT, &r, s->o->timeout_s);
	if (ret)
		return ret;
	received = srn_conn_get_u64(&r);
	if (!srn_conn_rd_done(&r))
		return bad_msg(s, "RESULT");

	/* What landed here: the server's answers (ping-pong) or our reads,
	 * on each QP we sent on. */
	for (uint32_t q = 0; q < p->qps; q++)
		per_qp[q] = srn_perf_sent(&s->c, q);
	if (p->test == SRN_PERF_LAT && !srn_perf_op_one_sided_lat(p->op))
		ret = srn_perf_check_rx(&s->c, size - 1, run.seed, per_qp);
	else if (p->op == SRN_PERF_READ)
		ret = srn_perf_check_rx(&s->c, size, run.seed, per_qp);
	if (ret)
		goto local_error;
	res->received = received;
	/* RC never gets here with a loss: the server failed the run. */
	if (p->op == SRN_PERF_SEND && p->test == SRN_PERF_BW && received != sent && measured)
		say(s, "note: %s: the server received %" PRIu64 " of %" PRIu64 " messages "
		    "of %u bytes", srn_perf_qp_type_title(p->qp_type), received, sent, size);
	return 0;

local_error:
	snprintf(s->peer_err, sizeof(s->peer_err), "%s", s->c.err);
	send_abort(s, s->c.err);
	return ret;
}

static uint64_t warmup_iters(const struct srn_perf_opts *o)
{
	uint64_t w = o->p.test == SRN_PERF_LAT ? 100 : 2ull * o->p.tx_depth * o->p.qps;
	uint64_t tenth = o->iters / 10 ? o->iters / 10 : 1;

	return o->duration_s > 0 || tenth > w ? w : tenth;
}

/* UD: settle the sizes against our port's MTU, and send that MTU in
 * CONFIG so that the server holds messages to the same.  False: a usage
 * error, told on stderr as cmd_perf.c tells its own. */
static bool ud_sizes(struct session *s)
{
	uint32_t mtu = srn_perf_mtu_bytes(&s->c);
	char why[160];

	if (!srn_perf_ud_sizes(s->sizes, &s->nsizes, s->o->sizes_given, mtu, why, sizeof(why))) {
		send_abort(s, why);
		say(s, "%s", why);
		fprintf(stderr, "\n");
		srn_usage_perf(stderr);
		return false;
	}
	s->p.mtu = mtu;
	s->p.max_size = 0;
	for (size_t i = 0; i < s->nsizes; i++)
		if (s->sizes[i] > s->p.max_size)
			s->p.max_size = s->sizes[i];
	return true;
}

/* The device, the QPs and the connection with the server, as the
 * options ask.  Returns 0, or the exit status after saying why. */
static int client_connect(struct session *s)
{
	const struct srn_perf_opts *o = s->o;
	struct srn_conn_wr w;
	int ret;

	s->p = o->p;
	s->nsizes = o->nsizes;
	memcpy(s->sizes, o->sizes, sizeof(s->sizes));
	ret = srn_perf_open_device(&s->c, &s->p, o->dev, o->ib_port, o->gid_index);
	if (!ret && s->p.qp_type == IBV_QPT_UD && !ud_sizes(s))
		return SRN_EXIT_USAGE;
	if (!ret)
		ret = srn_perf_create(&s->c, &s->p);
	if (ret) {
		send_abort(s, s->c.err);
		return say(s, "%s", s->c.err);
	}
	srn_conn_wr_init(&w, s->msg, sizeof(s->msg));
	put_params(&w, &s->p);
	ret = send_msg(s, MSG_CONFIG, &w) ?: send_hello(s) ?: recv_hello_and_connect(s);
	if (ret) {
		if (ret != -ECANCELED && ret != -EIO)
			send_abort(s, s->peer_err);
		return say(s, "%s", s->peer_err);
	}
	return 0;
}

/* The report's end in the format asked for, and the plot.  Returns the
 * exit status. */
static int client_output(struct session *s, const struct srn_perf_report *rep)
{
	const struct srn_perf_opts *o = s->o;

	if (o->out == SRN_PERF_OUT_TABLE)
		srn_perf_table_footer(stdout);
	else if (o->out == SRN_PERF_OUT_JSON)
		srn_perf_json(stdout, rep);
	else
		srn_perf_csv(stdout, rep);
	if (o->plot) {
		char err[256];

		if (srn_perf_plot_svg(o->plot, rep, err, sizeof(err)))
			return say(s, "--plot: %s", err);
	}
	return SRN_EXIT_OK;
}

static int client_session(struct session *s)
{
	const struct srn_perf_opts *o = s->o;
	struct srn_perf_report *rep;
	char local[64], remote[64], label[64];
	uint64_t dur_ns = (uint64_t)(o->duration_s * 1e9);
	int ret;

	rep = calloc(1, sizeof(*rep));
	if (!rep)
		return say(s, "out of memory");
	ret = client_connect(s);
	if (ret)
		goto out;
	srn_perf_report_init(rep, &s->p, s->c.dev_name,
			     srn_conn_gid_str(&s->c.qps[0].local.gid, local, sizeof(local)),
			     srn_conn_gid_str(&s->c.qps[0].remote.addr.gid, remote, sizeof(remote)),
			     128u << s->c.mtu, o->duration_s);
	snprintf(label, sizeof(label), "%s %s %s", srn_perf_op_name(o->p.op),
		 o->p.test == SRN_PERF_LAT ? "lat" : "bw", srn_perf_qp_type_name(o->p.qp_type));
	srn_perf_progress_init(&s->pg, isatty(STDERR_FILENO) ? stderr : NULL, label,
			       o->duration_s);
	if (o->series && !(s->series = fopen(o->series, "w"))) {
		send_abort(s, "the client cannot write its --series file");
		ret = say(s, "--series %s: %s", o->series, strerror(errno));
		goto out;
	}
	if (s->series)
		fprintf(s->series, "# clock_s\tsize\tmbps\n");

	for (size_t i = 0; i < s->nsizes; i++) {
		struct srn_perf_result res;
		struct srn_perf_row *row;

		ret = client_run(s, s->sizes[i], warmup_iters(o), 0, &res, false) ?:
		      client_run(s, s->sizes[i], o->iters, dur_ns, &res, true);
		if (ret) {
			bool unsupported = ret == -EOPNOTSUPP;

			if (unsupported)
				ret = say(s, "%s is not supported by %s yet (%s)",
					  srn_perf_op_title(o->p.op), s->c.dev_name, s->c.err);
			else
				ret = say(s, "%s", s->peer_err);
			goto out;
		}
		row = srn_perf_report_add(rep, s->sizes[i], &res);
		/* The header waits for the first row: a test that cannot run
		 * leaves an error, not an empty table. */
		if (o->out == SRN_PERF_OUT_TABLE && row && i == 0)
			srn_perf_table_header(stdout, rep);
		if (o->out == SRN_PERF_OUT_TABLE && row)
			srn_perf_table_row(stdout, rep, row);
	}
	send_empty(s, MSG_END);
	ret = client_output(s, rep);
out:
	if (s->series)
		fclose(s->series);
	srn_perf_close(&s->c);
	free(rep);
	return ret;
}

/* ---- server ---- */

/* After the client's DONE: does what arrived here match what was sent? */
static int server_check(struct session *s, const struct srn_perf_run *run,
			const uint64_t *sent, const uint64_t *counter, uint64_t *received)
{
	const struct srn_perf_params *p = &s->c.p;
	uint64_t total = 0, until, got[SRN_PERF_MAX_QPS];
	int ret = 0;

	for (uint32_t q = 0; q < p->qps; q++)
		total += sent[q];
	if (p->op == SRN_PERF_SEND && p->test == SRN_PERF_BW) {
		bool rc = p->qp_type == IBV_QPT_RC;

		ret = srn_perf_drain(&s->c, run, total, DRAIN_GRACE_NS, rc ? 0 : LOSSY_QUIET_NS,
				     received);
		if (ret)
			return ret;
		if (*received != total && rc) {
			snprintf(s->c.err, sizeof(s->c.err), "RC: received %" PRIu64 " of %" PRIu64
				 " messages", *received, total);
			return -EILSEQ;
		}
		/* UC and UD may drop messages (a UD receiver out of posted
		 * receives drops, RNR is RC's): what arrived is reported, and
		 * checked on the QPs that received some. */
		for (uint32_t q = 0; q < p->qps; q++)
			got[q] = s->c.qps[q].received;
		return srn_perf_check_rx(&s->c, run->size, run->seed, got);
	}
	if (p->op == SRN_PERF_CAS || p->op == SRN_PERF_FAA) {
		for (uint32_t q = 0; q < p->qps && !ret; q++)
			ret = srn_perf_check_counter(&s->c, q, counter[q]);
		return ret;
	}
	if (p->op == SRN_PERF_READ)
		return 0;
	if (p->test == SRN_PERF_LAT)
		return srn_perf_check_rx(&s->c, run->size - 1, run->seed, sent);
	/* write bw: RC completions mean placed; UC packets may be in flight. */
	until = srn_now_ns() + (p->qp_type == IBV_QPT_UC ? UC_CHECK_NS : 0);
	while ((ret = srn_perf_check_rx(&s->c, run->size, run->seed, sent)) &&
	       srn_now_ns() < until)
		usleep(1000);
	*received = total;
	return ret;
}

static int server_run(struct session *s, struct srn_conn_rd *r)
{
	const struct srn_perf_params *p = &s->c.p;
	struct srn_perf_run run = { .stall_ns = STALL_NS, .peer_poll = peer_poll, .arg = s };
	uint64_t sent[SRN_PERF_MAX_QPS], counter[SRN_PERF_MAX_QPS], received = 0;
	struct srn_conn_wr w;
	uint32_t n;
	int ret;

	run.size = srn_conn_get_u32(r);
	run.seed = srn_conn_get_u32(r);
	run.iters = srn_conn_get_u64(r);
	run.duration_ns = srn_conn_get_u64(r);
	if (!srn_conn_rd_done(r) || !run.size || run.size > p->max_size)
		return bad_msg(s, "RUN");
	ret = srn_perf_prepare(&s->c, run.size, run.seed);
	if (ret)
		goto local_error;
	ret = send_empty(s, MSG_READY);
	if (ret)
		return ret;
	ret = srn_perf_serve(&s->c, &run, &received);
	if (ret && ret != -EINTR)
		goto local_error;
	ret = recv_msg(s, MSG_DONE, r, RUN_WAIT_S + (int)(run.duration_ns / 1000000000ull));
	if (ret)
		return ret;
	n = srn_conn_get_u32(r);
	if (n != p->qps)
		return bad_msg(s, "DONE");
	for (uint32_t q = 0; q < n; q++) {
		sent[q] = srn_conn_get_u64(r);
		counter[q] = srn_conn_get_u64(r);
	}
	if (!srn_conn_rd_done(r))
		return bad_msg(s, "DONE");
	ret = server_check(s, &run, sent, counter, &received);
	if (ret)
		goto local_error;
	srn_conn_wr_init(&w, s->msg, sizeof(s->msg));
	srn_conn_put_u64(&w, received);
	return send_msg(s, MSG_RESULT, &w);

local_error:
	snprintf(s->peer_err, sizeof(s->peer_err), "%s", s->c.err);
	send_abort(s, s->c.err);
	return ret;
}

static int server_session(struct session *s)
{
	struct srn_perf_params p;
	struct srn_conn_rd r;
	char peer[64];
	int ret;

	ret = recv_msg(s, MSG_CONFIG, &r, s->o->timeout_s);
	if (!ret)
		ret = get_params(s, &r, &p);
	if (ret) {
		if (ret != -ECANCELED)
			send_abort(s, s->peer_err);
		return say(s, "%s", s->peer_err);
	}
	ret = srn_perf_open(&s->c, &p, s->o->dev, s->o->ib_port, s->o->gid_index);
	if (ret) {
		send_abort(s, s->c.err);
		ret = say(s, "%s", s->c.err);
		goto out;
	}
	if (!s->quiet)
		fprintf(stderr, "softrnic perf: server: %s %s %s, %u QP%s, from %s\n",
			srn_perf_op_name(p.op), p.test == SRN_PERF_LAT ? "lat" : "bw",
			srn_perf_qp_type_name(p.qp_type), p.qps, p.qps == 1 ? "" : "s",
			srn_conn_peer_name(s->fd, peer, sizeof(peer)));
	ret = send_hello(s) ?: recv_hello_and_connect(s);
	for (uint64_t runs = 0; !ret && runs < 2 * SRN_PERF_MAX_ROWS + 2; runs++) {
		uint16_t type;

		ret = srn_conn_recv(s->fd, &type, &r, s->msg, sizeof(s->msg),
				    s->o->timeout_s * 1000);
		if (ret) {
			snprintf(s->peer_err, sizeof(s->peer_err), "waiting for the client: %s",
				 strerror(-ret));
			break;
		}
		if (type == MSG_END) {
			ret = SRN_EXIT_OK;
			goto out;
		}
		if (type == MSG_ABORT) {
			char why[256];

			srn_conn_get_str(&r, why, sizeof(why));
			snprintf(s->peer_err, sizeof(s->peer_err), "the client stopped: %s", why);
			ret = -ECANCELED;
			break;
		}
		if (type != MSG_RUN) {
			ret = bad_msg(s, "control");
			break;
		}
		ret = server_run(s, &r);
	}
	if (!ret)
		snprintf(s->peer_err, sizeof(s->peer_err), "too many runs");
	ret = say(s, "%s", s->peer_err);
out:
	srn_perf_close(&s->c);
	return ret;
}

/* ---- entry points ---- */

int srn_perf_session_server(const struct srn_perf_opts *o, int lfd, bool quiet)
{
	struct session *s = calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return SRN_EXIT_FAIL;
	s->o = o;
	s->server = true;
	s->quiet = quiet;
	s->fd = srn_conn_accept(lfd, o->timeout_s * 1000);
	close(lfd);
	if (s->fd < 0) {
		ret = say(s, "no client within %d s: %s", o->timeout_s, strerror(-s->fd));
	} else {
		ret = server_session(s);
		close(s->fd);
	}
	free(s);
	return ret;
}

struct incast_slot {
	pthread_t thread;
	struct session *s;
	int ret;
	bool started;
};

static void *incast_serve(void *arg)
{
	struct incast_slot *slot = arg;

	slot->ret = server_session(slot->s);
	close(slot->s->fd);
	return NULL;
}

int srn_perf_session_server_incast(const struct srn_perf_opts *o, int lfd, int n)
{
	struct incast_slot slot[SRN_PERF_MAX_INCAST] = { 0 };
	int ret = SRN_EXIT_OK, served = 0;

	for (int i = 0; i < n && i < SRN_PERF_MAX_INCAST; i++) {
		struct session *s = calloc(1, sizeof(*s));

		if (!s) {
			ret = SRN_EXIT_FAIL;
			break;
		}
		s->o = o;
		s->server = true;
		s->fd = srn_conn_accept(lfd, o->timeout_s * 1000);
		if (s->fd < 0) {
			ret = say(s, "client %d of %d did not come within %d s: %s", i + 1, n,
				  o->timeout_s, strerror(-s->fd));
			free(s);
			break;
		}
		slot[i].s = s;
		if (pthread_create(&slot[i].thread, NULL, incast_serve, &slot[i])) {
			ret = say(s, "cannot start a thread for client %d", i + 1);
			close(s->fd);
			free(s);
			slot[i].s = NULL;
			break;
		}
		slot[i].started = true;
	}
	close(lfd);
	/* Every session ends: each wait in server_session is bounded. */
	for (int i = 0; i < n && i < SRN_PERF_MAX_INCAST; i++) {
		if (!slot[i].started)
			continue;
		pthread_join(slot[i].thread, NULL);
		served++;
		if (slot[i].ret != SRN_EXIT_OK)
			ret = slot[i].ret;
		free(slot[i].s);
	}
	fprintf(stderr, "softrnic perf: incast server: served %d of %d clients\n", served, n);
	return ret;
}

int srn_perf_session_client(const struct srn_perf_opts *o, const char *host, const char *port)
{
	struct session *s = calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return SRN_EXIT_FAIL;
	s->o = o;
	s->fd = srn_conn_connect(host, port, o->timeout_s * 1000);
	if (s->fd < 0) {
		ret = say(s, "cannot reach %s port %s: %s", host, port, strerror(-s->fd));
	} else {
		ret = client_session(s);
		close(s->fd);
	}
	free(s);
	return ret;
}
