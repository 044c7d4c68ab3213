/*
 * cmd_perf.c - `softrnic perf`: perftest's latency and bandwidth tests in
 * one subcommand (op write|send|read|cas|faa, RC or UC, send over UD too,
 * lat or bw).
 *
 *   softrnic perf [options]          server: waits for one client on TCP
 *   softrnic perf [options] HOST     client: runs the test, prints results
 *   softrnic perf --loopback [opts]  both, as two processes on this host
 *   softrnic perf --incast N [opts]  server of N clients at once (incast)
 *
 * The client decides the test and tells the server, so a server needs no
 * options but its port and device; the control protocol and both halves
 * of a session live in perf_session.c.  This file parses the command line
 * and sets up the roles; --loopback forks the server before either side
 * opens the device.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perf_conn.h"
#include "perf_session.h"
#include "subcommands.h"

#define CHILD_WAIT_S 10                  /* the server's exit after the client's */
#define SWEEP_MIN_LOG2 1                 /* 2 B */
#define SWEEP_MAX_LOG2 20                /* 1 MiB */

void srn_usage_perf(FILE *out)
{
	fprintf(out,
"Usage: softrnic perf [options]             server: wait for a client\n"
"       softrnic perf [options] HOST        client: run the test against HOST\n"
"       softrnic perf --loopback [options]  both ends here, in two processes\n"
"       softrnic perf --incast N [options]  server: N clients at once (incast)\n"
"\n"
"Measures latency or bandwidth of one verbs operation, like perftest's\n"
"ib_{write,send,read,atomic}_{lat,bw}.  The client chooses the test and the\n"
"server adopts it; the server serves one client and exits.\n"
"\n"
"Test:\n"
"  -o, --op OP          write | send | read | cas | faa        (default write)\n"
"  -c, --qp-type T      rc | uc | ud (read and atomics need rc; ud: send only, size <= MTU)\n"
"                                                              (default rc)\n"
"  -T, --test T         lat | bw                               (default lat)\n"
"  -s, --size N         message size in bytes, K/M suffixes    (lat 2, bw 65536;\n"
"                                                              ud bw: the MTU)\n"
"  -a, --sweep          every power of two from 2 B to 1 MiB (ud: to the MTU)\n"
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
"      --incast N       server: accept N clients and serve them at once, one\n"
"                       thread each on this process's device: N senders (other\n"
"                       processes, namespaces behind `softrnic switch`) -> 1\n"
"                       receiver; see bench/incast.sh                 (max %d)\n"
"Output (client):\n"
"      --json           results as JSON on stdout (instead of the table)\n"
"      --csv            results as CSV on stdout (instead of the table)\n"
"      --plot FILE.svg  draw latency or bandwidth against size\n"
"      --series FILE    throughput over time of the measured runs, every 100 ms:\n"
"                       CLOCK_MONOTONIC seconds, size, Mb/s (tab-separated)\n"
"\n"
"Latency is half the ping-pong round trip for write and send (perftest's\n"
"t_typical), and the full round trip of one operation for read, cas, faa.\n"
"Bandwidth is in MB/s (10^6 bytes/s), Gb/s and millions of messages/s.\n"
"Every run checks the data it moved. Exit status: 0 ok, 1 failure\n"
"(including an operation the device does not support), 2 usage error.\n",
		SRN_PERF_MAX_QPS, SRN_CONN_DEFAULT_PORT, SRN_PERF_MAX_INCAST);
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

static bool parse_sizes(const char *s, struct srn_perf_opts *o)
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

enum { OPT_SIZES = 256, OPT_JSON, OPT_CSV, OPT_PLOT, OPT_TIMEOUT, OPT_INCAST, OPT_SERIES };

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
	{ "incast", required_argument, NULL, OPT_INCAST },
	{ "series", required_argument, NULL, OPT_SERIES },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* Options given, for the defaults that depend on them. */
struct perf_seen {
	bool sweep, iters, cq_mod, rx_depth;
};

/* One option into o.  Returns -1 to go on, else the exit status (help,
 * usage error).
 * Why long: one case per option of `softrnic perf`, each a few lines. */
static int parse_option(int opt, struct srn_perf_opts *o, struct perf_seen *seen)
{
	struct srn_perf_params *p = &o->p;
	uint32_t v32;
	int op, v;

	switch (opt) {
	case 'o':
		op = srn_perf_op_parse(optarg);
		if (op < 0)
			return usage_error("unknown --op '%s'", optarg);
		p->op = (enum srn_perf_op)op;
		break;
	case 'c':
		v = srn_perf_qp_type_parse(optarg);
		if (v < 0)
			return usage_error("unknown --qp-type '%s' (rc, uc or ud)", optarg);
		p->qp_type = (enum ibv_qp_type)v;
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
		o->sizes_given = true;
		break;
	case 'a':
		seen->sweep = true;
		break;
	case OPT_SIZES:
		if (!parse_sizes(optarg, o))
			return usage_error("bad --sizes '%s'", optarg);
		o->sizes_given = true;
		break;
	case 'n':
		if (!parse_u64(optarg, 1, SRN_PERF_MAX_BW_ITERS, &o->iters))
			return usage_error("bad --iters '%s'", optarg);
		seen->iters = true;
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
		seen->cq_mod = true;
		break;
	case 'l':
		if (!parse_u32(optarg, 1, 512, &p->post_list))
			return usage_error("bad --post-list '%s'", optarg);
		break;
	case 'r':
		if (!parse_u32(optarg, 1, SRN_PERF_MAX_DEPTH, &p->rx_depth))
			return usage_error("bad --rx-depth '%s'", optarg);
		seen->rx_depth = true;
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
		if (o->out != SRN_PERF_OUT_TABLE)
			return usage_error("--json and --csv exclude each other");
		o->out = opt == OPT_JSON ? SRN_PERF_OUT_JSON : SRN_PERF_OUT_CSV;
		break;
	case OPT_PLOT:
		o->plot = optarg;
		break;
	case OPT_INCAST:
		if (!parse_u32(optarg, 1, SRN_PERF_MAX_INCAST, &v32))
			return usage_error("bad --incast '%s' (1..%d clients)", optarg,
					   SRN_PERF_MAX_INCAST);
		o->incast = (int)v32;
		break;
	case OPT_SERIES:
		o->series = optarg;
		break;
	case 'h':
		srn_usage_perf(stdout);
		return SRN_EXIT_OK;
	default:
		return usage_error("bad option");
	}
	return -1;
}

/* The operands, the defaults that depend on what was given, and the
 * checks across options.  Returns -1 when parsed, else the exit status. */
static int settle_args(int argc, char *argv[], struct srn_perf_opts *o,
		       const struct perf_seen *seen)
{
	struct srn_perf_params *p = &o->p;
	char why[160];

	if (optind < argc)
		o->host = argv[optind++];
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (o->host && o->loopback)
		return usage_error("--loopback runs its own server: no HOST");
	if (o->incast && (o->host || o->loopback))
		return usage_error("--incast is a server option: no HOST, no --loopback");

	if (seen->sweep) {
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
	/* With --mtu the limit is known now; else the client settles the
	 * sizes once it has seen the port (perf_session.c). */
	if (p->qp_type == IBV_QPT_UD && p->mtu &&
	    !srn_perf_ud_sizes(o->sizes, &o->nsizes, o->sizes_given, p->mtu, why, sizeof(why)))
		return usage_error("%s", why);
	if (!seen->iters)
		o->iters = o->duration_s > 0 ? SRN_PERF_MAX_BW_ITERS :
			   p->test == SRN_PERF_LAT ? 1000 : 5000;
	if (p->test == SRN_PERF_LAT && o->iters > SRN_PERF_MAX_LAT_ITERS) {
		if (seen->iters)
			return usage_error("lat keeps every sample: --iters up to %llu",
					   SRN_PERF_MAX_LAT_ITERS);
		o->iters = SRN_PERF_MAX_LAT_ITERS;
	}
	if (!seen->cq_mod) {
		uint32_t most = p->tx_depth >= p->post_list ? p->tx_depth - p->post_list + 1 : 1;

		p->cq_mod = most < 64 ? most : 64;
	}
	if (!seen->rx_depth && p->rx_depth < 4 * p->tx_depth)
		p->rx_depth = 4 * p->tx_depth < SRN_PERF_MAX_DEPTH ? 4 * p->tx_depth :
								     SRN_PERF_MAX_DEPTH;
	for (size_t i = 0; i < o->nsizes; i++)
		if (o->sizes[i] > p->max_size)
			p->max_size = o->sizes[i];
	if (!srn_perf_params_valid(p, why, sizeof(why)))
		return usage_error("%s", why);
	if (o->loopback || o->host) {
		if (o->plot && !strstr(o->plot, ".svg"))
			return usage_error("--plot writes SVG: give a FILE.svg");
	} else if (o->out != SRN_PERF_OUT_TABLE || o->plot || o->series) {
		return usage_error("--json, --csv, --plot and --series are client options");
	}
	return -1;
}

/* Returns -1 when parsed, else the exit status (help, usage error). */
static int parse_args(int argc, char *argv[], struct srn_perf_opts *o)
{
	struct srn_perf_params *p = &o->p;
	struct perf_seen seen = { 0 };
	int opt;

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
		int r = parse_option(opt, o, &seen);
		if (r >= 0)
			return r;
	}
	return settle_args(argc, argv, o, &seen);
}

/* The child must be forked before either side touches verbs: the library's
 * threads and sockets do not survive a fork. */
static int loopback(const struct srn_perf_opts *o)
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
		_exit(srn_perf_session_server(o, lfd, true));
	}
	close(lfd);
	ret = srn_perf_session_client(o, "127.0.0.1", port);
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
	struct srn_perf_opts o;
	int ret = parse_args(argc, argv, &o), lfd;

	if (ret >= 0)
		return ret;
	if (o.loopback)
		return loopback(&o);
	if (o.host)
		return srn_perf_session_client(&o, o.host, o.port);
	ret = srn_conn_listen(NULL, o.port, &lfd);
	if (ret) {
		fprintf(stderr, "softrnic perf: cannot listen on TCP port %s: %s\n", o.port,
			strerror(-ret));
		return SRN_EXIT_FAIL;
	}
	fprintf(stderr, "softrnic perf: server: waiting for %d client%s on TCP port %d\n",
		o.incast ? o.incast : 1, o.incast > 1 ? "s" : "", srn_conn_bound_port(lfd));
	if (o.incast)
		return srn_perf_session_server_incast(&o, lfd, o.incast);
	return srn_perf_session_server(&o, lfd, false);
}
