/*
 * udp_pingpong.c - the raw UDP floor for bench/compare.sh: what the kernel
 * itself gives two processes on loopback, with no RDMA protocol on top.
 *
 * One command runs both ends: the parent makes two UDP sockets on
 * 127.0.0.1, connects each to the other, and forks; the child echoes
 * (latency) or sinks (bandwidth), the parent measures.  Both ends
 * busy-poll with MSG_DONTWAIT, as a polling RDMA application would;
 * with --block (latency only) both sleep in a blocking recv() instead, as
 * an event-driven application would: the sleeping floor of
 * compare.sh --events.
 *
 *   lat: a message of SIZE bytes goes out and the same comes back; the
 *        result is half the round trip (min, median, p99, max, average),
 *        like perftest's and `softrnic perf`'s write latency.  A message
 *        is one datagram when SIZE <= 65507 (the largest UDP payload),
 *        otherwise a stream of 60000-byte datagrams (the last shorter).
 *   bw:  the parent streams messages as fast as the sink takes them,
 *        sendmmsg/recvmmsg batches of -b datagrams; the sink returns a
 *        cumulative count (an "ack") when it has taken a quarter window or
 *        the stream pauses, and the sender keeps at most a window of
 *        datagrams in flight so the receive buffer never overflows.  The
 *        result counts only bytes the sink received.
 *
 * Datagrams of 8 bytes or more carry {seq, index} in their first 8 bytes
 * so a stale or lost datagram cannot complete the wrong round; a round
 * that gets no answer in 200 ms is counted as lost and sent again (on
 * loopback that is nearly always a descheduled peer, not a lost packet).
 *
 * Between two network namespaces (root; compare.sh's UDP-link section):
 * --addr A --peer-addr B --peer-netns NAME binds the measuring socket to A
 * in the namespace the program runs in, and the echoing one to B inside
 * /run/netns/NAME: a socket stays in the namespace it was made in, so the
 * forked child answers from the other side of the veth pair.
 *
 * Invariants: every loop is bounded by the --timeout deadline (and the
 * child dies with the parent); the program only talks to 127.0.0.1, or to
 * the two addresses it was given.
 * Exit status: 0 ok, 1 failure, 2 usage error.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE     /* sendmmsg, recvmmsg: built standalone with cc -O2 */
#endif
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define UDP_MAX_PAYLOAD 65507u    /* 65535 - 8 (UDP) - 20 (IPv4) */
#define STREAM_DGRAM    60000u    /* datagram size when a message is larger */
#define MAX_BATCH       64u
#define MAX_ITERS       10000000u
#define ROUND_TIMEOUT_NS 200000000ull  /* a lost lat round is resent after 200 ms */
#define STALL_NS        200000000ull   /* bw: no ack for 200 ms = the rest was lost */
#define MAX_LOST_ROUNDS 100u
#define SINK_IDLE_POLLS 64u            /* empty polls before a partial ack */
/* bw: a streaming end that polls this often in vain yields the CPU, so on
 * a busy 2-core machine the two ends do not burn each other's time slice
 * (lat mode never yields: it is the busy-poll floor). */
#define YIELD_POLLS     16u
#define SOCK_BUF        (16 << 20)
/* --block: how long a blocking recv()/send() sleeps before the end looks
 * at its deadline (the echo end) or counts the round as lost (the client). */
#define BLOCK_ECHO_NS   100000000ull

enum mode { MODE_LAT, MODE_BW };

struct opts {
	enum mode mode;
	uint64_t size;
	uint64_t iters;         /* lat: round trips; bw: messages (0 = use duration) */
	uint64_t warmup;
	double duration_s;      /* bw */
	unsigned batch;         /* bw: datagrams per sendmmsg/recvmmsg */
	unsigned window;        /* bw: datagrams in flight (0 = derived from size) */
	double timeout_s;
	bool json;
	bool block;             /* lat: blocking recv/send, no polling */
	struct in_addr addr[2]; /* [0] the measuring end, [1] the echo/sink */
	const char *peer_netns; /* NULL: both ends in this namespace */
};

/* The shape of one message on the wire. */
struct shape {
	uint64_t size;
	uint32_t ndgrams;       /* datagrams per message */
	uint32_t dgram;         /* size of every datagram but the last */
	uint32_t last;          /* size of the last one */
};

struct ack {
	uint64_t dgrams;        /* cumulative datagrams received */
	uint64_t bytes;         /* cumulative bytes received */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct shape shape_of(uint64_t size)
{
	struct shape s = { .size = size };

	if (size <= UDP_MAX_PAYLOAD) {
		s.ndgrams = 1;
		s.dgram = s.last = (uint32_t)size;
	} else {
		s.dgram = STREAM_DGRAM;
		s.ndgrams = (uint32_t)((size + STREAM_DGRAM - 1) / STREAM_DGRAM);
		s.last = (uint32_t)(size - (uint64_t)(s.ndgrams - 1) * STREAM_DGRAM);
	}
	return s;
}

static uint32_t dgram_len(const struct shape *s, uint32_t idx)
{
	return idx + 1 == s->ndgrams ? s->last : s->dgram;
}

static void stamp(uint8_t *buf, uint32_t len, uint32_t seq, uint32_t idx)
{
	if (len >= 8) {
		memcpy(buf, &seq, 4);
		memcpy(buf + 4, &idx, 4);
	}
}

/* Large buffers so a window of datagrams never overflows the receiver;
 * the *FORCE variants pass net.core.rmem_max when we are allowed to. */
static void grow_buffers(int fd)
{
	int v = SOCK_BUF;

	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof(v)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
}

static int rcvbuf_of(int fd)
{
	int v = 0;
	socklen_t l = sizeof(v);

	getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &l);
	return v;
}

/* One UDP socket bound to ADDR (any port), made in the namespace this
 * thread is in at the time. */
static int make_socket(struct in_addr addr, struct sockaddr_in *bound)
{
	socklen_t l = sizeof(*bound);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0)
		return -errno;
	memset(bound, 0, sizeof(*bound));
	bound->sin_family = AF_INET;
	bound->sin_addr = addr;
	if (bind(fd, (struct sockaddr *)bound, sizeof(*bound)) < 0 ||
	    getsockname(fd, (struct sockaddr *)bound, &l) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	grow_buffers(fd);
	return fd;
}

/* The echo end inside /run/netns/NAME: enter it, make the socket, come
 * back (the socket keeps its namespace). */
static int make_socket_in(const char *netns, struct in_addr addr, struct sockaddr_in *bound)
{
	char path[256];
	int home, there, fd, err;

	if (snprintf(path, sizeof(path), "/run/netns/%s", netns) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (home < 0)
		return -errno;
	there = open(path, O_RDONLY | O_CLOEXEC);
	if (there < 0 || setns(there, CLONE_NEWNET) < 0) {
		err = -errno;
		if (there >= 0)
			close(there);
		close(home);
		return err;
	}
	fd = make_socket(addr, bound);
	/* Back home before anything else, so the measuring end's later
	 * system calls see the namespace it was started in. */
	err = setns(home, CLONE_NEWNET) < 0 ? -errno : 0;
	close(there);
	close(home);
	if (err < 0 && fd >= 0)
		close(fd);
	return err < 0 ? err : fd;
}

/* Two UDP sockets, each connected to the other: both on 127.0.0.1, or on
 * the two given addresses, the second in the peer namespace. */
static int make_pair(const struct opts *o, int fds[2])
{
	struct sockaddr_in a[2];

	fds[0] = make_socket(o->addr[0], &a[0]);
	if (fds[0] < 0)
		return fds[0];
	fds[1] = o->peer_netns ? make_socket_in(o->peer_netns, o->addr[1], &a[1]) :
				 make_socket(o->addr[1], &a[1]);
	if (fds[1] < 0)
		return fds[1];
	for (int i = 0; i < 2; i++)
		if (connect(fds[i], (struct sockaddr *)&a[1 - i], sizeof(a[1 - i])) < 0)
			return -errno;
	return 0;
}

/* --block: blocking calls on FD give up after NS (EAGAIN), so every wait
 * still ends at a deadline. */
static int set_block_timeout(int fd, uint64_t ns)
{
	struct timeval tv = { .tv_sec = (time_t)(ns / 1000000000ull),
			      .tv_usec = (suseconds_t)(ns % 1000000000ull / 1000) };

	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		return -errno;
	return 0;
}

/* Send one whole message; a full socket buffer is waited out (bounded).
 * FLAGS: MSG_DONTWAIT (polling) or 0 (--block). */
static int send_msg(int fd, uint8_t *buf, const struct shape *s, uint32_t seq, uint64_t deadline,
		    int flags)
{
	for (uint32_t i = 0; i < s->ndgrams; i++) {
		uint32_t len = dgram_len(s, i);

		stamp(buf, len, seq, i);
		while (send(fd, buf, len, flags) < 0) {
			if (errno != EAGAIN && errno != ENOBUFS && errno != EINTR)
				return -errno;
			if (now_ns() > deadline)
				return -ETIMEDOUT;
		}
	}
	return 0;
}

/* ---- latency ------------------------------------------------------------ */

/* Child: echo each whole message back.  Runs until killed or the deadline.
 * FLAGS: MSG_DONTWAIT (spin) or 0 (sleep in recv, --block). */
static int lat_echo(int fd, const struct shape *s, uint64_t deadline, int flags)
{
	uint8_t *buf = malloc(UDP_MAX_PAYLOAD + 1);
	uint32_t cur = 0, got = 0;
	unsigned spins = 0;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = recv(fd, buf, UDP_MAX_PAYLOAD + 1, flags);
		uint32_t seq = 0;

		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				break;
			/* Blocking: each EAGAIN is a 100 ms sleep, look every time. */
			if ((flags == 0 || ++spins % 1024 == 0) && now_ns() > deadline)
				break;
			continue;
		}
		if (n >= 8)
			memcpy(&seq, buf, 4);
		if (seq != cur || got == 0) {
			cur = seq;
			got = 0;
		}
		if (++got < s->ndgrams)
			continue;
		got = 0;
		if (send_msg(fd, buf, s, cur, deadline, flags) < 0)
			break;
	}
	free(buf);
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The latency line (or JSON object) from n round trips, sorted. */
static void lat_report(const struct opts *o, const struct shape *s, const uint64_t *rtt,
		       uint64_t n, uint64_t sum, uint64_t lost, uint64_t t_begin)
{
	/* Half round trip, in microseconds. */
	double h = 2000.0, med = rtt[(n - 1) / 2] / h;
	uint64_t p99 = (n * 99 + 99) / 100;
	double secs = (now_ns() - t_begin) / 1e9;

	if (o->json)
		printf("{\"tool\": \"udp_pingpong\", \"test\": \"lat\", \"bytes\": %" PRIu64
		       ", \"iters\": %" PRIu64 ", \"datagrams_per_msg\": %u"
		       ", \"latency_kind\": \"half_round_trip\", \"wait\": \"%s\""
		       ", \"t_min_us\": %.3f, \"t_median_us\": %.3f, \"t_p99_us\": %.3f"
		       ", \"t_max_us\": %.3f, \"t_avg_us\": %.3f, \"bw_MBps\": %.3f"
		       ", \"lost_rounds\": %" PRIu64 ", \"elapsed_s\": %.6f}\n",
		       s->size, n, s->ndgrams, o->block ? "block" : "poll", rtt[0] / h, med,
		       rtt[p99 - 1] / h,
		       rtt[n - 1] / h, (double)sum / n / h, s->size / med, lost, secs);
	else
		printf("udp lat %" PRIu64 " B x %" PRIu64 ": half RTT min %.3f median %.3f "
		       "p99 %.3f max %.3f avg %.3f us (%u datagram%s/msg, %" PRIu64
		       " lost rounds, %s)\n",
		       s->size, n, rtt[0] / h, med, rtt[p99 - 1] / h, rtt[n - 1] / h,
		       (double)sum / n / h, s->ndgrams, s->ndgrams == 1 ? "" : "s", lost,
		       o->block ? "blocking recv" : "busy-polling");
}

static int lat_client(int fd, const struct opts *o, const struct shape *s, uint64_t deadline)
{
	uint64_t n = o->iters, total = o->warmup + o->iters, lost = 0, sum = 0;
	uint64_t *rtt = calloc(n, sizeof(*rtt));
	uint8_t *buf = malloc(UDP_MAX_PAYLOAD + 1);
	uint64_t t_begin = now_ns();
	uint32_t seq = 0;
	int flags = o->block ? 0 : MSG_DONTWAIT;
	int rc = 0;

	if (!rtt || !buf) {
		rc = -ENOMEM;
		goto out;
	}
	memset(buf, 0x5a, UDP_MAX_PAYLOAD + 1);
	for (uint64_t i = 0; i < total;) {
		uint64_t t0 = now_ns(), t;
		uint32_t got = 0;

		seq++;
		rc = send_msg(fd, buf, s, seq, deadline, flags);
		if (rc < 0)
			goto out;
		for (;;) {
			/* --block: recv sleeps up to the round timeout (SO_RCVTIMEO). */
			ssize_t r = recv(fd, buf, UDP_MAX_PAYLOAD + 1, flags);
			uint32_t rseq = seq;

			t = now_ns();
			if (r < 0) {
				if (errno != EAGAIN && errno != EINTR) {
					rc = -errno;
					goto out;
				}
				if (t - t0 > ROUND_TIMEOUT_NS || t > deadline)
					break;
				continue;
			}
			if (r >= 8)
				memcpy(&rseq, buf, 4);
			if (rseq == seq && ++got == s->ndgrams)
				break;
		}
		if (got < s->ndgrams) {
			if (t > deadline) {
				rc = -ETIMEDOUT;
				goto out;
			}
			if (++lost > MAX_LOST_ROUNDS) {
				rc = -EIO;
				goto out;
			}
			continue;
		}
		if (i >= o->warmup)
			rtt[i - o->warmup] = t - t0;
		i++;
	}
	qsort(rtt, n, sizeof(*rtt), cmp_u64);
	for (uint64_t i = 0; i < n; i++)
		sum += rtt[i];
	lat_report(o, s, rtt, n, sum, lost, t_begin);
out:
	free(rtt);
	free(buf);
	return rc;
}

/* ---- bandwidth ---------------------------------------------------------- */

/* Child: take datagrams in recvmmsg batches and report the running count. */
static int bw_sink(int fd, const struct opts *o, unsigned ack_every, uint64_t deadline)
{
	static uint8_t bufs[MAX_BATCH][STREAM_DGRAM + 8];
	struct mmsghdr msgs[MAX_BATCH];
	struct iovec iov[MAX_BATCH];
	struct ack a = { 0, 0 };
	uint64_t unacked = 0;
	unsigned spins = 0, idle = 0;

	for (unsigned i = 0; i < o->batch; i++) {
		iov[i] = (struct iovec){ bufs[i], sizeof(bufs[i]) };
		memset(&msgs[i], 0, sizeof(msgs[i]));
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	for (;;) {
		int n = recvmmsg(fd, msgs, o->batch, MSG_DONTWAIT, NULL);

		if (n > 0) {
			for (int i = 0; i < n; i++)
				a.bytes += msgs[i].msg_len;
			a.dgrams += (uint64_t)n;
			unacked += (uint64_t)n;
			idle = 0;
			if (unacked < ack_every)
				continue;
		} else if (errno != EAGAIN && errno != EINTR) {
			break;
		} else {
			if (++spins % 1024 == 0 && now_ns() > deadline)
				break;
			if (spins % YIELD_POLLS == 0)
				sched_yield();
			/* An ack per drained socket would cost the sender a
			 * receive per batch: wait until the stream pauses. */
			if (unacked == 0 || ++idle < SINK_IDLE_POLLS)
				continue;
		}
		/* A quarter window taken, or the stream paused: tell the sender. */
		if (send(fd, &a, sizeof(a), MSG_DONTWAIT) == (ssize_t)sizeof(a))
			unacked = 0;
	}
	return 0;
}

/* Drain pending acks; returns the newest. */
static void read_acks(int fd, struct ack *best)
{
	struct ack a;

	while (recv(fd, &a, sizeof(a), MSG_DONTWAIT) == (ssize_t)sizeof(a))
		if (a.dgrams > best->dgrams)
			*best = a;
}

/* The bandwidth line (or JSON object) of a run from t0 to t_end. */
static void bw_report(const struct opts *o, const struct shape *s, unsigned window,
		      const struct ack *acked, uint64_t msgs_out, uint64_t written_off,
		      uint64_t t0, uint64_t t_end)
{
	double secs = (t_end - t0) / 1e9;
	double mbps = acked->bytes / secs / 1e6;
	double mpps = acked->bytes / (double)s->size / secs / 1e6;
	uint64_t lost = written_off;

	if (o->json)
		printf("{\"tool\": \"udp_pingpong\", \"test\": \"bw\", \"bytes\": %" PRIu64
		       ", \"msgs\": %" PRIu64 ", \"datagrams\": %" PRIu64
		       ", \"datagrams_per_msg\": %u, \"batch\": %u, \"window\": %u"
		       ", \"elapsed_s\": %.6f, \"bw_MBps\": %.3f, \"bw_Gbps\": %.4f"
		       ", \"msg_rate_Mpps\": %.5f, \"lost_datagrams\": %" PRIu64 "}\n",
		       s->size, msgs_out, acked->dgrams, s->ndgrams, o->batch, window, secs,
		       mbps, mbps * 8 / 1000, mpps, lost);
	else
		printf("udp bw %" PRIu64 " B: %.3f MB/s, %.4f Gb/s, %.5f Mmsg/s over %.3f s "
		       "(%" PRIu64 " datagrams, batch %u, window %u, %" PRIu64 " lost)\n",
		       s->size, mbps, mbps * 8 / 1000, mpps, secs, acked->dgrams, o->batch,
		       window, lost);
}

static int bw_client(int fd, const struct opts *o, const struct shape *s, unsigned window,
		     uint64_t deadline)
{
	static uint8_t buf[STREAM_DGRAM + 8];
	struct mmsghdr msgs[MAX_BATCH];
	struct iovec iov[MAX_BATCH];
	struct ack acked = { 0, 0 };
	uint64_t sent = 0, written_off = 0, msgs_out = 0, last_progress, t_end;
	uint64_t t0 = now_ns(), stop_at = o->iters ? UINT64_MAX : t0 + (uint64_t)(o->duration_s * 1e9);
	uint32_t idx = 0;           /* datagram index within the current message */
	unsigned blocked = 0;       /* polls with the window full */
	bool done = false;

	memset(buf, 0x5a, sizeof(buf));
	memset(msgs, 0, sizeof(msgs));
	last_progress = t0;
	while (!done || sent > acked.dgrams + written_off) {
		uint64_t in_flight, t = now_ns(), prev = acked.dgrams;
		unsigned k = 0;

		if (t > deadline)
			return -ETIMEDOUT;
		read_acks(fd, &acked);
		if (acked.dgrams != prev)
			last_progress = t;
		in_flight = sent > acked.dgrams + written_off ? sent - acked.dgrams - written_off : 0;
		if (in_flight && t - last_progress > STALL_NS) {
			/* No ack for 200 ms on loopback: those datagrams are gone. */
			written_off += in_flight;
			in_flight = 0;
			last_progress = t;
		}
		if (!done && (t >= stop_at || (o->iters && msgs_out >= o->iters)))
			done = true;
		/* Fill a batch with whole datagrams within the window. */
		while (!done && k < o->batch && in_flight + k < window) {
			uint32_t len = dgram_len(s, idx);

			/* Every datagram of the batch shares the buffer: the
			 * payload is not checked, only the header of lat mode is. */
			iov[k] = (struct iovec){ buf, len };
			msgs[k].msg_hdr.msg_iov = &iov[k];
			msgs[k].msg_hdr.msg_iovlen = 1;
			k++;
			if (++idx == s->ndgrams) {
				idx = 0;
				if (o->iters && ++msgs_out >= o->iters)
					break;
				if (!o->iters)
					msgs_out++;
			}
		}
		if (!k && ++blocked % YIELD_POLLS == 0)
			sched_yield();
		if (k) {
			int n = sendmmsg(fd, msgs, k, MSG_DONTWAIT);

			if (n < 0 && errno != EAGAIN && errno != ENOBUFS && errno != EINTR)
				return -errno;
			if (n < (int)k) {
				/* Roll the message accounting back over what was not sent. */
				for (int u = (int)k - 1; u >= (n < 0 ? 0 : n); u--) {
					if (idx == 0) {
						idx = s->ndgrams;
						if (msgs_out)
							msgs_out--;
					}
					idx--;
				}
			}
			if (n > 0)
				sent += (uint64_t)n;
		}
	}
	t_end = now_ns();
	bw_report(o, s, window, &acked, msgs_out, written_off, t0, t_end);
	return 0;
}

/* ---- main --------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: udp_pingpong [options]\n"
		"Raw UDP on 127.0.0.1, both ends (two processes) in this command, busy-polling\n"
		"(lat --block: both sleeping).\n"
		"  -t, --test lat|bw     ping-pong latency or streaming bandwidth  (lat)\n"
		"  -s, --size N          message size in bytes, K/M suffixes        (8)\n"
		"  -n, --iters N         lat: round trips; bw: messages             (lat 10000)\n"
		"  -w, --warmup N        lat: round trips not measured              (iters/10, <= 1000)\n"
		"  -D, --duration SEC    bw: stream for SEC seconds                 (1)\n"
		"  -b, --batch N         bw: datagrams per sendmmsg/recvmmsg 1..%u  (32)\n"
		"  -W, --window N        bw: datagrams in flight                    (from size)\n"
		"      --timeout SEC     give up after SEC seconds                  (30)\n"
		"      --json            one JSON object on stdout\n"
		"      --block           lat: both ends sleep in blocking recv(), no polling\n"
		"      --addr A --peer-addr B --peer-netns NAME\n"
		"                        the echo end bound to B inside /run/netns/NAME,\n"
		"                        this end to A here (root: two namespaces)\n"
		"Messages above %u bytes travel as %u-byte datagrams.\n",
		MAX_BATCH, UDP_MAX_PAYLOAD, STREAM_DGRAM);
}

static int parse_size(const char *arg, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno || end == arg)
		return -EINVAL;
	if (*end == 'K' || *end == 'k')
		v <<= 10, end++;
	else if (*end == 'M' || *end == 'm')
		v <<= 20, end++;
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

/* The command line into o: 0, or -EINVAL for a usage error.
 * Why long: one case per option, each a few lines. */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "test", required_argument, NULL, 't' },
		{ "size", required_argument, NULL, 's' },
		{ "iters", required_argument, NULL, 'n' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "duration", required_argument, NULL, 'D' },
		{ "batch", required_argument, NULL, 'b' },
		{ "window", required_argument, NULL, 'W' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "json", no_argument, NULL, 'j' },
		{ "block", no_argument, NULL, 'k' },
		{ "addr", required_argument, NULL, 'A' },
		{ "peer-addr", required_argument, NULL, 'B' },
		{ "peer-netns", required_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool have_iters = false, have_warmup = false, have_duration = false;
	uint64_t v;
	int c;

	*o = (struct opts){ .mode = MODE_LAT, .size = 8, .iters = 10000, .duration_s = 1.0,
			    .batch = 32, .timeout_s = 30 };
	o->addr[0].s_addr = o->addr[1].s_addr = htonl(INADDR_LOOPBACK);
	while ((c = getopt_long(argc, argv, "t:s:n:w:D:b:W:h", lo, NULL)) != -1) {
		switch (c) {
		case 't':
			if (!strcmp(optarg, "lat"))
				o->mode = MODE_LAT;
			else if (!strcmp(optarg, "bw"))
				o->mode = MODE_BW;
			else
				return -EINVAL;
			break;
		case 's':
			if (parse_size(optarg, &o->size) || o->size == 0 || o->size > (1ull << 30))
				return -EINVAL;
			break;
		case 'n':
			if (parse_size(optarg, &o->iters) || o->iters == 0 || o->iters > MAX_ITERS)
				return -EINVAL;
			have_iters = true;
			break;
		case 'w':
			if (parse_size(optarg, &o->warmup) || o->warmup > MAX_ITERS)
				return -EINVAL;
			have_warmup = true;
			break;
		case 'D':
			o->duration_s = strtod(optarg, NULL);
			if (!(o->duration_s > 0 && o->duration_s <= 600))
				return -EINVAL;
			have_duration = true;
			break;
		case 'b':
			if (parse_size(optarg, &v) || v == 0 || v > MAX_BATCH)
				return -EINVAL;
			o->batch = (unsigned)v;
			break;
		case 'W':
			if (parse_size(optarg, &v) || v == 0 || v > 65536)
				return -EINVAL;
			o->window = (unsigned)v;
			break;
		case 'T':
			o->timeout_s = strtod(optarg, NULL);
			if (!(o->timeout_s > 0 && o->timeout_s <= 3600))
				return -EINVAL;
			break;
		case 'j':
			o->json = true;
			break;
		case 'k':
			o->block = true;
			break;
		case 'A':
		case 'B':
			if (inet_pton(AF_INET, optarg, &o->addr[c == 'B']) != 1)
				return -EINVAL;
			break;
		case 'N':
			if (!*optarg || strchr(optarg, '/'))
				return -EINVAL;
			o->peer_netns = optarg;
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
	if (o->mode == MODE_BW) {
		/* The stream's window and acks are built on polling. */
		if ((have_iters && have_duration) || o->block)
			return -EINVAL;
		if (!have_iters)
			o->iters = 0;
	}
	if (!have_warmup)
		o->warmup = o->iters / 10 < 1000 ? o->iters / 10 : 1000;
	return 0;
}

/* bw window in datagrams: enough to keep the pipe full, small enough that
 * the receive buffer (charged with each skb's truesize, about the payload
 * plus 1 KiB) holds all of it twice over. */
static unsigned window_for(const struct opts *o, const struct shape *s, int rcvbuf)
{
	uint64_t per = (uint64_t)s->dgram + 1024, w;

	if (o->window)
		return o->window;
	w = (uint64_t)rcvbuf / 2 / per;
	if (w > 4096)
		w = 4096;
	if (w < 2u * o->batch)
		w = 2u * o->batch;
	return (unsigned)w;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct shape s;
	int fds[2], rc, status;
	uint64_t deadline;
	unsigned window;
	pid_t pid;

	if (parse_opts(argc, argv, &o) < 0) {
		usage(stderr);
		return 2;
	}
	s = shape_of(o.size);
	rc = make_pair(&o, fds);
	if (rc < 0) {
		fprintf(stderr, "udp_pingpong: sockets: %s\n", strerror(-rc));
		return 1;
	}
	if (o.block) {
		rc = set_block_timeout(fds[0], ROUND_TIMEOUT_NS);
		if (rc == 0)
			rc = set_block_timeout(fds[1], BLOCK_ECHO_NS);
		if (rc < 0) {
			fprintf(stderr, "udp_pingpong: socket timeouts: %s\n", strerror(-rc));
			return 1;
		}
	}
	window = window_for(&o, &s, rcvbuf_of(fds[1]));
	deadline = now_ns() + (uint64_t)(o.timeout_s * 1e9);
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		perror("udp_pingpong: fork");
		return 1;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(fds[0]);
		if (o.mode == MODE_LAT)
			lat_echo(fds[1], &s, deadline, o.block ? 0 : MSG_DONTWAIT);
		else
			bw_sink(fds[1], &o, window / 4 ? window / 4 : 1, deadline);
		_exit(0);
	}
	close(fds[1]);
	rc = o.mode == MODE_LAT ? lat_client(fds[0], &o, &s, deadline)
				: bw_client(fds[0], &o, &s, window, deadline);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	if (rc < 0) {
		fprintf(stderr, "udp_pingpong: %s %" PRIu64 " B: %s\n",
			o.mode == MODE_LAT ? "lat" : "bw", o.size, strerror(-rc));
		return 1;
	}
	return 0;
}
