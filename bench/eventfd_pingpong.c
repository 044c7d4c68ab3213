/*
 * eventfd_pingpong.c - the sleeping floor for bench/compare.sh --events:
 * what one wake-up each way costs two processes on this kernel, with no
 * network stack and no RDMA protocol at all.
 *
 * One command runs both ends: the parent makes two eventfds (blocking,
 * counter mode) and forks.  A token goes back and forth: the parent writes
 * the child's eventfd and blocks in read() on its own; the child blocks in
 * read() on its eventfd and, woken, writes the parent's.  Neither end ever
 * polls: each round trip is two sleeps and two wake-ups, the least an
 * event-driven ping-pong between two processes can cost (a completion
 * channel, a blocking socket or a futex all end in the same scheduler
 * wake-up).
 *
 *   The result is half the round trip (min, median, p99, max, average),
 *   the same shape as udp_pingpong's latency and qperf's one-way latency
 *   (qperf prints the average: time over messages received).
 *
 * Invariants: every wait is bounded by the --timeout deadline (an alarm
 * ends a process whose read() never returns, with exit status 1; the child
 * also dies with the parent); nothing but the two eventfds is touched.
 * Exit status: 0 ok, 1 failure, 2 usage error.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE     /* built standalone with cc -O2 */
#endif
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_ITERS       10000000u
#define STOP            ((uint64_t)1 << 40)   /* token value: the child leaves */

struct opts {
	uint64_t iters;         /* measured round trips */
	uint64_t warmup;        /* round trips not measured */
	unsigned timeout_s;     /* whole run, both ends */
	bool json;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Block until the eventfd has a count; returns it, or 0 on failure.  A
 * signal other than the alarm (which ends the process) is waited out. */
static uint64_t take(int fd)
{
	uint64_t v;

	for (;;) {
		ssize_t n = read(fd, &v, sizeof(v));

		if (n == (ssize_t)sizeof(v))
			return v;
		if (n < 0 && errno == EINTR)
			continue;
		return 0;
	}
}

static int give(int fd, uint64_t v)
{
	for (;;) {
		ssize_t n = write(fd, &v, sizeof(v));

		if (n == (ssize_t)sizeof(v))
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		return n < 0 ? -errno : -EIO;
	}
}

/* Child: wait for the token, hand it back.  Leaves on STOP or failure. */
static void echo(int in, int out)
{
	for (;;) {
		uint64_t v = take(in);

		if (v == 0 || v >= STOP)
			return;
		if (give(out, 1) < 0)
			return;
	}
}

/* The bound on the whole run: an end whose read() never returns (its peer
 * died, or never got the CPU) says so and leaves. */
static void on_alarm(int sig)
{
	static const char msg[] = "eventfd_pingpong: timed out\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Parent: N round trips, then the statistics. */
static int measure(int out, int in, const struct opts *o)
{
	uint64_t n = o->iters, total = o->warmup + o->iters, sum = 0;
	uint64_t *rtt = calloc(n, sizeof(*rtt));
	uint64_t t_begin = now_ns();
	int rc = 0;

	if (!rtt)
		return -ENOMEM;
	for (uint64_t i = 0; i < total; i++) {
		uint64_t t0 = now_ns(), v;

		rc = give(out, 1);
		if (rc < 0)
			goto out;
		v = take(in);
		if (v != 1) {
			/* The child only ever writes 1, after each read. */
			rc = v == 0 ? -EIO : -EPROTO;
			goto out;
		}
		if (i >= o->warmup)
			rtt[i - o->warmup] = now_ns() - t0;
	}
	qsort(rtt, n, sizeof(*rtt), cmp_u64);
	for (uint64_t i = 0; i < n; i++)
		sum += rtt[i];
	{
		/* Half round trip, in microseconds. */
		double h = 2000.0, med = rtt[(n - 1) / 2] / h;
		uint64_t p99 = (n * 99 + 99) / 100;
		double secs = (now_ns() - t_begin) / 1e9;

		if (p99 > n)
			p99 = n;
		if (o->json)
			printf("{\"tool\": \"eventfd_pingpong\", \"test\": \"lat\", \"iters\": %" PRIu64
			       ", \"latency_kind\": \"half_round_trip\", \"wait\": \"block\""
			       ", \"t_min_us\": %.3f, \"t_median_us\": %.3f, \"t_p99_us\": %.3f"
			       ", \"t_max_us\": %.3f, \"t_avg_us\": %.3f, \"elapsed_s\": %.6f}\n",
			       n, rtt[0] / h, med, rtt[p99 - 1] / h, rtt[n - 1] / h,
			       (double)sum / n / h, secs);
		else
			printf("eventfd lat x %" PRIu64 ": half RTT min %.3f median %.3f p99 %.3f "
			       "max %.3f avg %.3f us (blocking read, two processes)\n",
			       n, rtt[0] / h, med, rtt[p99 - 1] / h, rtt[n - 1] / h,
			       (double)sum / n / h);
	}
out:
	free(rtt);
	return rc;
}

/* ---- main --------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: eventfd_pingpong [options]\n"
		"A token between two processes through two blocking eventfds: the\n"
		"sleeping floor (each end sleeps in read(), the other's write() wakes it).\n"
		"  -n, --iters N         round trips measured                       (10000)\n"
		"  -w, --warmup N        round trips not measured                   (iters/10, <= 1000)\n"
		"      --timeout SEC     give up after SEC seconds                  (30)\n"
		"      --json            one JSON object on stdout\n"
		"Prints half the round trip in microseconds: min, median, p99, max, average.\n");
}

static int parse_count(const char *arg, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno || end == arg)
		return -EINVAL;
	if (*end == 'K' || *end == 'k')
		v *= 1000, end++;
	else if (*end == 'M' || *end == 'm')
		v *= 1000000, end++;
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "iters", required_argument, NULL, 'n' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool have_warmup = false;
	uint64_t v;
	int c;

	*o = (struct opts){ .iters = 10000, .timeout_s = 30 };
	while ((c = getopt_long(argc, argv, "n:w:h", lo, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (parse_count(optarg, &o->iters) || o->iters == 0 || o->iters > MAX_ITERS)
				return -EINVAL;
			break;
		case 'w':
			if (parse_count(optarg, &o->warmup) || o->warmup > MAX_ITERS)
				return -EINVAL;
			have_warmup = true;
			break;
		case 'T':
			if (parse_count(optarg, &v) || v == 0 || v > 3600)
				return -EINVAL;
			o->timeout_s = (unsigned)v;
			break;
		case 'j':
			o->json = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return -EINVAL;
		}
	}
	if (optind != argc)
		return -EINVAL;
	if (!have_warmup)
		o->warmup = o->iters / 10 < 1000 ? o->iters / 10 : 1000;
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	int to_child, to_parent, rc, status;
	pid_t pid;

	if (parse_opts(argc, argv, &o) < 0) {
		usage(stderr);
		return 2;
	}
	/* Blocking, counter mode: read() sleeps while the count is 0 and
	 * returns the count, resetting it. */
	to_child = eventfd(0, EFD_CLOEXEC);
	to_parent = eventfd(0, EFD_CLOEXEC);
	if (to_child < 0 || to_parent < 0) {
		perror("eventfd_pingpong: eventfd");
		return 1;
	}
	signal(SIGALRM, on_alarm);
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		perror("eventfd_pingpong: fork");
		return 1;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			_exit(1);
		alarm(o.timeout_s + 5);
		echo(to_child, to_parent);
		_exit(0);
	}
	alarm(o.timeout_s);
	rc = measure(to_child, to_parent, &o);
	give(to_child, STOP);
	alarm(5);       /* the child leaves at once on STOP */
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (rc == 0)
			rc = -ECHILD;
	}
	alarm(0);
	if (rc < 0) {
		fprintf(stderr, "eventfd_pingpong: %s\n", strerror(-rc));
		return 1;
	}
	return 0;
}
