/*
 * cmd_perf.c - `softrnic perf`: perftest's latency and bandwidth tests in
 * one subcommand (op write|send|read|cas|faa, RC or UC, lat or bw).
 *
 *   softrnic perf [options]          server: waits for one client on TCP
 *   softrnic perf [options] HOST     client: runs the test, prints results
 *   softrnic perf --loopback [opts]  both, as two processes on this host
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
 * Each size runs twice: a short warm-up, then the measured run.  Every
 * wait for a message is bounded (--timeout), runs by their own stall
 * bound; an error on either side reaches the other as ABORT, so neither
 * waits out a timeout for a peer that already gave up.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perf_conn.h"
#include "perf_report.h"
#include "perf_run.h"
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

#define PROTO_VERSION 1
#define STALL_NS (10ull * 1000000000ull) /* a run with no progress this long failed */
#define RUN_WAIT_S 3600                  /* longest wait for the end of one run */
#define DRAIN_GRACE_NS 2000000000ull     /* send bw: receives still arriving */
#define UC_CHECK_NS 500000000ull         /* UC write: last packets still arriving */
#define CHILD_WAIT_S 10
#define SWEEP_MIN_LOG2 1                 /* 2 B */
#define SWEEP_MAX_LOG2 20                /* 1 MiB */

enum output { OUT_TABLE, OUT_JSON, OUT_CSV };

struct perf_opts {
	struct srn_perf_params p;
	uint32_t sizes[SRN_PERF_MAX_ROWS];
	size_t nsizes;
	uint64_t iters;
	double duration_s;
	const char *port, *dev, *host, *plot;
	uint8_t ib_port;
	int gid_index;
	int timeout_s;
	bool loopback;
	enum output out;
};

struct session {
	const struct perf_opts *o;
	struct srn_perf_ctx c;
	int fd;
	bool server, quiet;
	uint32_t seed;
	struct srn_perf_progress pg;
	char peer_err[400];
	uint8_t msg[SRN_CONN_MAX_PAYLOAD];
};

void srn_usage_perf(FILE *out)
{
	fprintf(out,
"Usage: softrnic perf [options]             server: wait for a client\n"
"       softrnic perf [options] HOST        client: run the test against HOST\n"
"       softrnic perf --loopback [options]  both ends here, in two processes\n"
"\n"
"Measures latency or bandwidth of one verbs operation, like perftest's\n"
"ib_{write,send,read,atomic}_{lat,bw}.  The client chooses the test and the\n"
"server adopts it; the server serves one client and exits.\n"
"\n"
"Test:\n"
"  -o, --op OP          write | send | read | cas | faa        (default write)\n"
"  -c, --qp-type T      rc | uc (read and atomics need rc)     (default rc)\n"
"  -T, --test T         lat | bw                               (default lat)\n"
"  -s, --size N         message size in bytes, K/M suffixes    (lat 2, bw 65536)\n"
"  -a, --sweep          every power of two from 2 B to 1 MiB\n"
"      --sizes LIST     comma-separated sizes, e.g. 8,4096,65536\n"
"  -n, --iters N        messages per size (lat: round trips)   (lat 1000, bw 5000)\n"
"  -D, --duration SEC   run each size for SEC seconds instead\n"
"  -q, --qps N          QPs, used round-robin (max %d)          (default 1)\n"
"  -m, --mtu N          path MTU 256..4096                     (port's active MTU)\n"
"  -I, --inline N       post write/send of up to N bytes inline (default 0)\n"
"  -t, --tx-depth N     bw: WRs in flight per QP               (default 128)\n"
"  -Q, --cq-mod N       bw: signal one WR in N                 (default 64)\n"
"  -l, --post-list N    bw: chain N WRs per ibv_post_send      (default 1)\n"
"  -r, --rx-depth N     send: receives kept posted per QP      (default 512)\n"
"Connection:\n"
"  -p, --port PORT      TCP port of the exchange               (default %s)\n"
"  -L, --loopback       run the server too, in a child process on 127.0.0.1\n"
"  -d, --ib-dev NAME    RDMA device                            (default: first)\n"
"  -i, --ib-port N      device port                            (default 1)\n"
"  -x, --gid-index N    GID index                              (default 0)\n"
"      --timeout SEC    wait at most SEC for the peer          (default 60)\n"
"Output (client):\n"
"      --json           results as JSON on stdout (instead of the table)\n"
"      --csv            results as CSV on stdout (instead of the table)\n"
"      --plot FILE.svg  draw latency or bandwidth against size\n"
"\n"
"Latency is half the ping-pong round trip for write and send (perftest's\n"
"t_typical), and the full round trip of one operation for read, cas, faa.\n"
"Bandwidth is in MB/s (10^6 bytes/s), Gb/s and millions of messages/s.\n"
"Every run checks the data it moved. Exit status: 0 ok, 1 failure\n"
"(including an operation the device does not support), 2 usage error.\n",
		SRN_PERF_MAX_QPS, SRN_CONN_DEFAULT_PORT);
}

/* ---- option parsing ---- */

static int __attribute__((format(printf, 1, 2))) usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "softrnic perf: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n\n");
	srn_usage_perf(stderr);
	return SRN_EXIT_USAGE;
}

/* A decimal count with an optional K/M/G (binary) suffix, in [min, max]. */
static bool parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	if (!s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return false;
	if (*end == 'K' || *end == 'k')
		mul = 1ull << 10, end++;
	else if (*end == 'M' || *end == 'm')
		mul = 1ull << 20, end++;
	else if (*end == 'G' || *end == 'g')
		mul = 1ull << 30, end++;
	if (*end || (v && mul > UINT64_MAX / v))
		return false;
	*out = v * mul;
	return *out >= min && *out <= max;
}

static bool parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t v;

	if (!parse_u64(s, min, max, &v))
		return false;
	*out = (uint32_t)v;
	return true;
}

static bool parse_sizes(const char *s, struct perf_opts *o)
{
	char buf[512], *save, *tok;

	snprintf(buf, sizeof(buf), "%s", s);
	o->nsizes = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (o->nsizes == SRN_PERF_MAX_ROWS ||
		    !parse_u32(tok, 1, SRN_PERF_MAX_SIZE, &o->sizes[o->nsizes]))
			return false;
		o->nsizes++;
	}
	return o->nsizes > 0;
}

/* Test parameters that both the command line and a client's CONFIG must
 * satisfy; the reason for a rejection goes to why. */
static bool params_valid(const struct srn_perf_params *p, char *why, size_t len)
{
	bool one_sided = p->op == SRN_PERF_READ || p->op == SRN_PERF_CAS ||
			 p->op == SRN_PERF_FAA;

	if (p->op >= SRN_PERF_NOPS || (p->test != SRN_PERF_LAT && p->test != SRN_PERF_BW) ||
	    (p->qp_type != IBV_QPT_RC && p->qp_type != IBV_QPT_UC))
		snprintf(why, len, "unknown operation, test or QP type");
	else if (one_sided && p->qp_type != IBV_QPT_RC)
		snprintf(why, len, "--op %s needs --qp-type rc (UC has no %s)",
			 srn_perf_op_name(p->op), p->op == SRN_PERF_READ ? "RDMA Read" : "atomics");
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

enum { OPT_SIZES = 256, OPT_JSON, OPT_CSV, OPT_PLOT, OPT_TIMEOUT };

static const struct option long_opts[] = {
	{ "op", required_argument, NULL, 'o' },
	{ "qp-type", required_argument, NULL, 'c' },
	{ "test", required_argument, NULL, 'T' },
	{ "size", required_argument, NULL, 's' },
	{ "sweep", no_argument, NULL, 'a' },
	{ "sizes", required_argument, NULL, OPT_SIZES },
	{ "iters", required_argument, NULL, 'n' },
	{ "duration", required_argument, NULL, 'D' },
	{ "qps", required_argument, NULL, 'q' },
	{ "mtu", required_argument, NULL, 'm' },
	{ "inline", required_argument, NULL, 'I' },
	{ "tx-depth", required_argument, NULL, 't' },
	{ "cq-mod", required_argument, NULL, 'Q' },
	{ "post-list", required_argument, NULL, 'l' },
	{ "rx-depth", required_argument, NULL, 'r' },
	{ "port", required_argument, NULL, 'p' },
	{ "loopback", no_argument, NULL, 'L' },
	{ "ib-dev", required_argument, NULL, 'd' },
	{ "ib-port", required_argument, NULL, 'i' },
	{ "gid-index", required_argument, NULL, 'x' },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "csv", no_argument, NULL, OPT_CSV },
	{ "plot", required_argument, NULL, OPT_PLOT },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* Returns -1 when parsed, else the exit status (help, usage error). */
static int parse_args(int argc, char *argv[], struct perf_opts *o)
{
	struct srn_perf_params *p = &o->p;
	bool sweep = false, have_cq_mod = false, have_rx = false, have_iters = false;
	uint32_t v32;
	char why[160];
	int opt, op;

	memset(o, 0, sizeof(*o));
	*p = (struct srn_perf_params){ .op = SRN_PERF_WRITE, .qp_type = IBV_QPT_RC,
				       .test = SRN_PERF_LAT, .qps = 1, .tx_depth = 128,
				       .rx_depth = 512, .post_list = 1 };
	o->port = SRN_CONN_DEFAULT_PORT;
	o->ib_port = 1;
	o->timeout_s = 60;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "o:c:T:s:an:D:q:m:I:t:Q:l:r:p:Ld:i:x:h",
				  long_opts, NULL)) != -1) {
		switch (opt) {
		case 'o':
			op = srn_perf_op_parse(optarg);
			if (op < 0)
				return usage_error("unknown --op '%s'", optarg);
			p->op = (enum srn_perf_op)op;
			break;
		case 'c':
			if (!strcmp(optarg, "rc"))
				p->qp_type = IBV_QPT_RC;
			else if (!strcmp(optarg, "uc"))
				p->qp_type = IBV_QPT_UC;
			else
				return usage_error("unknown --qp-type '%s' (rc or uc)", optarg);
			break;
		case 'T':
			if (!strcmp(optarg, "lat"))
				p->test = SRN_PERF_LAT;
			else if (!strcmp(optarg, "bw"))
				p->test = SRN_PERF_BW;
			else
				return usage_error("unknown --test '%s' (lat or bw)", optarg);
			break;
		case 's':
			if (!parse_u32(optarg, 1, SRN_PERF_MAX_SIZE, &o->sizes[0]))
				return usage_error("bad --size '%s'", optarg);
			o->nsizes = 1;
			break;
		case 'a':
			sweep = true;
			break;
		case OPT_SIZES:
			if (!parse_sizes(optarg, o))
				return usage_error("bad --sizes '%s'", optarg);
			break;
		case 'n':
			if (!parse_u64(optarg, 1, SRN_PERF_MAX_BW_ITERS, &o->iters))
				return usage_error("bad --iters '%s'", optarg);
			have_iters = true;
			break;
		case 'D':
			o->duration_s = strtod(optarg, NULL);
			if (!(o->duration_s > 0 && o->duration_s <= 3600))
				return usage_error("bad --duration '%s' (seconds, up to 3600)", optarg);
			break;
		case 'q':
			if (!parse_u32(optarg, 1, SRN_PERF_MAX_QPS, &p->qps))
				return usage_error("bad --qps '%s'", optarg);
			break;
		case 'm':
			if (!parse_u32(optarg, 256, 4096, &p->mtu))
				return usage_error("bad --mtu '%s'", optarg);
			break;
		case 'I':
			if (!parse_u32(optarg, 0, 65536, &p->inline_size))
				return usage_error("bad --inline '%s'", optarg);
			break;
		case 't':
			if (!parse_u32(optarg, 1, SRN_PERF_MAX_DEPTH, &p->tx_depth))
				return usage_error("bad --tx-depth '%s'", optarg);
			break;
		case 'Q':
			if (!parse_u32(optarg, 1, SRN_PERF_MAX_DEPTH, &p->cq_mod))
				return usage_error("bad --cq-mod '%s'", optarg);
			have_cq_mod = true;
			break;
		case 'l':
			if (!parse_u32(optarg, 1, 512, &p->post_list))
				return usage_error("bad --post-list '%s'", optarg);
			break;
		case 'r':
			if (!parse_u32(optarg, 1, SRN_PERF_MAX_DEPTH, &p->rx_depth))
				return usage_error("bad --rx-depth '%s'", optarg);
			have_rx = true;
			break;
		case 'p':
			o->port = optarg;
			break;
		case 'L':
			o->loopback = true;
			break;
		case 'd':
			o->dev = optarg;
			break;
		case 'i':
			if (!parse_u32(optarg, 1, 255, &v32))
				return usage_error("bad --ib-port '%s'", optarg);
			o->ib_port = (uint8_t)v32;
			break;
		case 'x':
			if (!parse_u32(optarg, 0, 255, &v32))
				return usage_error("bad --gid-index '%s'", optarg);
			o->gid_index = (int)v32;
			break;
		case OPT_TIMEOUT:
			if (!parse_u32(optarg, 1, 86400, &v32))
				return usage_error("bad --timeout '%s'", optarg);
			o->timeout_s = (int)v32;
			break;
		case OPT_JSON:
		case OPT_CSV:
			if (o->out != OUT_TABLE)
				return usage_error("--json and --csv exclude each other");
			o->out = opt == OPT_JSON ? OUT_JSON : OUT_CSV;
			break;
		case OPT_PLOT:
			o->plot = optarg;
			break;
		case 'h':
			srn_usage_perf(stdout);
			return SRN_EXIT_OK;
		default:
			return usage_error("bad option");
		}
	}
	if (optind < argc)
		o->host = argv[optind++];
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (o->host && o->loopback)
		return usage_error("--loopback runs its own server: no HOST");

	if (sweep) {
		if (o->nsizes)
			return usage_error("--sweep, --size and --sizes exclude each other");
		for (int k = SWEEP_MIN_LOG2; k <= SWEEP_MAX_LOG2; k++)
			o->sizes[o->nsizes++] = 1u << k;
	}
	if (p->op == SRN_PERF_CAS || p->op == SRN_PERF_FAA) {
		/* Atomics are 8 bytes by definition (IBTA 9.4.5). */
		for (size_t i = 0; i < o->nsizes; i++)
			if (o->sizes[i] != SRN_PERF_ATOMIC_SIZE)
				return usage_error("atomics are %d bytes: no --size/--sizes/--sweep",
						   SRN_PERF_ATOMIC_SIZE);
		o->sizes[0] = SRN_PERF_ATOMIC_SIZE;
		o->nsizes = 1;
	}
	if (!o->nsizes) {
		o->sizes[0] = p->test == SRN_PERF_LAT ? 2 : 65536;
		o->nsizes = 1;
	}
	if (!have_iters)
		o->iters = o->duration_s > 0 ? SRN_PERF_MAX_BW_ITERS :
			   p->test == SRN_PERF_LAT ? 1000 : 5000;
	if (p->test == SRN_PERF_LAT && o->iters > SRN_PERF_MAX_LAT_ITERS) {
		if (have_iters)
			return usage_error("lat keeps every sample: --iters up to %llu",
					   SRN_PERF_MAX_LAT_ITERS);
		o->iters = SRN_PERF_MAX_LAT_ITERS;
	}
	if (!have_cq_mod) {
		uint32_t most = p->tx_depth >= p->post_list ? p->tx_depth - p->post_list + 1 : 1;

		p->cq_mod = most < 64 ? most : 64;
	}
	if (!have_rx && p->rx_depth < 4 * p->tx_depth)
		p->rx_depth = 4 * p->tx_depth < SRN_PERF_MAX_DEPTH ? 4 * p->tx_depth :
								     SRN_PERF_MAX_DEPTH;
	for (size_t i = 0; i < o->nsizes; i++)
		if (o->sizes[i] > p->max_size)
			p->max_size = o->sizes[i];
	if (!params_valid(p, why, sizeof(why)))
		return usage_error("%s", why);
	if (o->loopback || o->host) {
		if (o->plot && !strstr(o->plot, ".svg"))
			return usage_error("--plot writes SVG: give a FILE.svg");
	} else if (o->out != OUT_TABLE || o->plot) {
		return usage_error("--json, --csv and --plot are client options");
	}
	return -1;
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
		srn_conn_get_str(r, s->peer_err, sizeof(s->peer_err));
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

static void put_params(struct srn_conn_wr *w, const struct srn_perf_params *p)
{
	srn_conn_put_u32(w, PROTO_VERSION);
	srn_conn_put_u8(w, (uint8_t)p->op);
	srn_conn_put_u8(w, p->qp_type == IBV_QPT_UC);
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

/* Validated once here: the engine trusts params_valid()'s ranges. */
static int get_params(struct session *s, struct srn_conn_rd *r, struct srn_perf_params *p)
{
	char why[160];

	if (srn_conn_get_u32(r) != PROTO_VERSION) {
		snprintf(s->peer_err, sizeof(s->peer_err), "client speaks another protocol version");
		return -EPROTO;
	}
	p->op = (enum srn_perf_op)srn_conn_get_u8(r);
	p->qp_type = srn_conn_get_u8(r) ? IBV_QPT_UC : IBV_QPT_RC;
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
	if (!params_valid(p, why, sizeof(why))) {
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

static void show_progress(void *arg, uint64_t done, uint64_t total, uint64_t elapsed_ns)
{
	struct session *s = arg;

	srn_perf_progress_show(&s->pg, done, total, elapsed_ns);
}

/* ---- client ---- */

/* One run of one size; `measured` runs feed the report. */
static int client_run(struct session *s, uint32_t size, uint64_t iters, uint64_t duration_ns,
		      struct srn_perf_result *res, bool measured)
{
	const struct srn_perf_params *p = &s->c.p;
	struct srn_perf_run run = { .size = size, .seed = ++s->seed, .iters = iters,
				    .duration_ns = duration_ns, .stall_ns = STALL_NS,
				    .peer_poll = peer_poll,
				    .progress = measured && s->pg.f ? show_progress : NULL,
				    .arg = s };
	struct srn_conn_wr w;
	struct srn_conn_rd r;
	uint64_t received, sent = 0;
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
	ret = srn_perf_client_run(&s->c, &run, res);
	srn_perf_progress_clear(&s->pg);
	if (ret == -EINTR) /* the server spoke first: its ABORT says why */
		return recv_msg(s, MSG_DONE, &r, s->o->timeout_s) ?: -EPROTO;
	if (ret)
		goto local_error;

	srn_conn_wr_init(&w, s->msg, sizeof(s->msg));
	srn_conn_put_u32(&w, p->qps);
	for (uint32_t q = 0; q < p->qps; q++) {
		const struct srn_perf_qp *x = &s->c.qps[q];

		/* This run's sends, and the session's: an atomics target's
		 * counter must equal the latter. */
		sent += x->posted - x->run_base;
		srn_conn_put_u64(&w, x->posted - x->run_base);
		srn_conn_put_u64(&w, x->posted);
	}
	if (send_msg(s, MSG_DONE, &w))
		return -EIO;
	ret = recv_msg(s, MSG_RESULT, &r, s->o->timeout_s);
	if (ret)
		return ret;
	received = srn_conn_get_u64(&r);
	if (!srn_conn_rd_done(&r))
		return bad_msg(s, "RESULT");

	/* What landed here: the server's answers (ping-pong) or our reads. */
	if (p->test == SRN_PERF_LAT && !srn_perf_op_one_sided_lat(p->op))
		ret = srn_perf_check_rx(&s->c, size - 1, run.seed);
	else if (p->op == SRN_PERF_READ)
		ret = srn_perf_check_rx(&s->c, size, run.seed);
	if (ret)
		goto local_error;
	if (p->op == SRN_PERF_SEND && p->test == SRN_PERF_BW && received != sent && measured)
		say(s, "note: UC: the server received %" PRIu64 " of %" PRIu64 " messages "
		    "of %u bytes", received, sent, size);
	return 0;

local_error:
	snprintf(s->peer_err, sizeof(s->peer_err), "%s", s->c.err);
	send_abort(s, s->c.err);
	return ret;
}

static uint64_t warmup_iters(const struct perf_opts *o)
{
	uint64_t w = o->p.test == SRN_PERF_LAT ? 100 : 2ull * o->p.tx_depth * o->p.qps;
	uint64_t tenth = o->iters / 10 ? o->iters / 10 : 1;

	return o->duration_s > 0 || tenth > w ? w : tenth;
}

static int client_session(struct session *s)
{
	const struct perf_opts *o = s->o;
	struct srn_perf_report *rep;
	struct srn_conn_wr w;
	char local[64], remote[64], label[64];
	uint64_t dur_ns = (uint64_t)(o->duration_s * 1e9);
	int ret;

	rep = calloc(1, sizeof(*rep));
	if (!rep)
		return say(s, "out of memory");
	ret = srn_perf_open(&s->c, &o->p, o->dev, o->ib_port, o->gid_index);
	if (ret) {
		send_abort(s, "the client could not set up its side");
		ret = say(s, "%s", s->c.err);
		goto out;
	}
	srn_conn_wr_init(&w, s->msg, sizeof(s->msg));
	put_params(&w, &o->p);
	ret = send_msg(s, MSG_CONFIG, &w) ?: send_hello(s) ?: recv_hello_and_connect(s);
	if (ret) {
		if (ret != -ECANCELED && ret != -EIO)
			send_abort(s, s->peer_err);
		ret = say(s, "%s%s", ret == -ECANCELED ? "server: " : "", s->peer_err);
		goto out;
	}
	srn_perf_report_init(rep, &o->p, s->c.dev_name,
			     srn_conn_gid_str(&s->c.qps[0].local.gid, local, sizeof(local)),
			     srn_conn_gid_str(&s->c.qps[0].remote.addr.gid, remote, sizeof(remote)),
			     128u << s->c.mtu, o->duration_s);
	snprintf(label, sizeof(label), "%s %s %s", srn_perf_op_name(o->p.op),
		 o->p.test == SRN_PERF_LAT ? "lat" : "bw", o->p.qp_type == IBV_QPT_RC ? "rc" : "uc");
	srn_perf_progress_init(&s->pg, isatty(STDERR_FILENO) ? stderr : NULL, label,
			       o->duration_s);
	if (o->out == OUT_TABLE)
		srn_perf_table_header(stdout, rep);

	for (size_t i = 0; i < o->nsizes; i++) {
		struct srn_perf_result res;
		struct srn_perf_row *row;

		ret = client_run(s, o->sizes[i], warmup_iters(o), 0, &res, false) ?:
		      client_run(s, o->sizes[i], o->iters, dur_ns, &res, true);
		if (ret) {
			bool unsupported = ret == -EOPNOTSUPP;

			if (unsupported)
				ret = say(s, "%s is not supported by %s yet (%s)",
					  srn_perf_op_title(o->p.op), s->c.dev_name, s->c.err);
			else
				ret = say(s, "%s%s", ret == -ECANCELED ? "server: " : "",
					  s->peer_err);
			goto out;
		}
		row = srn_perf_report_add(rep, o->sizes[i], &res);
		if (o->out == OUT_TABLE && row)
			srn_perf_table_row(stdout, rep, row);
	}
	send_empty(s, MSG_END);
	if (o->out == OUT_TABLE)
		srn_perf_table_footer(stdout);
	else if (o->out == OUT_JSON)
		srn_perf_json(stdout, rep);
	else
		srn_perf_csv(stdout, rep);
	ret = SRN_EXIT_OK;
	if (o->plot) {
		char err[256];

		if (srn_perf_plot_svg(o->plot, rep, err, sizeof(err)))
			ret = say(s, "--plot: %s", err);
	}
out:
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
	uint64_t total = 0, until;
	int ret = 0;

	for (uint32_t q = 0; q < p->qps; q++)
		total += sent[q];
	if (p->op == SRN_PERF_SEND && p->test == SRN_PERF_BW) {
		ret = srn_perf_drain(&s->c, run, total, DRAIN_GRACE_NS, received);
		if (ret)
			return ret;
		if (*received != total && p->qp_type == IBV_QPT_RC) {
			snprintf(s->c.err, sizeof(s->c.err), "RC: received %" PRIu64 " of %" PRIu64
				 " messages", *received, total);
			return -EILSEQ;
		}
		return *received ? srn_perf_check_rx(&s->c, run->size, run->seed) : 0;
	}
	if (p->op == SRN_PERF_CAS || p->op == SRN_PERF_FAA) {
		for (uint32_t q = 0; q < p->qps && !ret; q++)
			ret = srn_perf_check_counter(&s->c, q, counter[q]);
		return ret;
	}
	if (p->op == SRN_PERF_READ)
		return 0;
	if (p->test == SRN_PERF_LAT)
		return srn_perf_check_rx(&s->c, run->size - 1, run->seed);
	/* write bw: RC completions mean placed; UC packets may be in flight. */
	until = srn_perf_now_ns() + (p->qp_type == IBV_QPT_UC ? UC_CHECK_NS : 0);
	while ((ret = srn_perf_check_rx(&s->c, run->size, run->seed)) &&
	       srn_perf_now_ns() < until)
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
			p.qp_type == IBV_QPT_RC ? "rc" : "uc", p.qps, p.qps == 1 ? "" : "s",
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

/* ---- roles ---- */

static int serve(const struct perf_opts *o, int lfd, bool quiet)
{
	struct session *s = calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return SRN_EXIT_FAIL;
	*s = (struct session){ .o = o, .server = true, .quiet = quiet };
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

static int client(const struct perf_opts *o, const char *host, const char *port)
{
	struct session *s = calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return SRN_EXIT_FAIL;
	*s = (struct session){ .o = o };
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

/* The child must be forked before either side touches verbs: the library's
 * threads and sockets do not survive a fork. */
static int loopback(const struct perf_opts *o)
{
	char port[16];
	int lfd, ret, status = 0;
	pid_t pid;

	ret = srn_conn_listen("127.0.0.1", strcmp(o->port, SRN_CONN_DEFAULT_PORT) ? o->port : "0",
			      &lfd);
	if (ret) {
		fprintf(stderr, "softrnic perf: cannot listen on 127.0.0.1: %s\n", strerror(-ret));
		return SRN_EXIT_FAIL;
	}
	snprintf(port, sizeof(port), "%d", srn_conn_bound_port(lfd));
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "softrnic perf: fork: %s\n", strerror(errno));
		close(lfd);
		return SRN_EXIT_FAIL;
	}
	if (pid == 0) {
		/* The server outlives no client: it goes when the parent goes. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		_exit(serve(o, lfd, true));
	}
	close(lfd);
	ret = client(o, "127.0.0.1", port);
	for (int i = 0; i < CHILD_WAIT_S * 100; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			goto reaped;
		usleep(10000);
	}
	fprintf(stderr, "softrnic perf: the server process did not exit; stopping it\n");
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return SRN_EXIT_FAIL;
reaped:
	if (ret == SRN_EXIT_OK && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
		fprintf(stderr, "softrnic perf: the server process failed (status 0x%x)\n", status);
		ret = SRN_EXIT_FAIL;
	}
	return ret;
}

int srn_cmd_perf(int argc, char *argv[])
{
	struct perf_opts o;
	int ret = parse_args(argc, argv, &o), lfd;

	if (ret >= 0)
		return ret;
	if (o.loopback)
		return loopback(&o);
	if (o.host)
		return client(&o, o.host, o.port);
	ret = srn_conn_listen(NULL, o.port, &lfd);
	if (ret) {
		fprintf(stderr, "softrnic perf: cannot listen on TCP port %s: %s\n", o.port,
			strerror(-ret));
		return SRN_EXIT_FAIL;
	}
	fprintf(stderr, "softrnic perf: server: waiting for a client on TCP port %d\n",
		srn_conn_bound_port(lfd));
	return serve(&o, lfd, false);
}
