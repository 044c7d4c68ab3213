/*
 * rsocket_check - rsockets behaviour two processes must agree on, run as a
 * server and a client through `softrnic run` (tests/test_rsocket_check.sh):
 *
 *   server ADDR PORT / client ADDR PORT, three connections in turn:
 *     1. rpoll over a pipe and an rsocket: a timeout with nothing ready
 *        returns 0 no earlier than asked; the pipe alone is reported when
 *        only it is ready; the rsocket when its peer sends; O_NONBLOCK
 *        rrecv says EAGAIN; rselect agrees; the peer's rclose reads as EOF.
 *     2. the writer closes mid-stream: the client sends 256 KiB and
 *        rcloses while most of it is unread; the server still reads all
 *        of it, in order, then end of stream (0).
 *     3. the reader closes mid-stream: the server reads 64 KiB and
 *        rcloses; the client, still sending, gets EPIPE or ECONNRESET.
 *     4. many buffer turns: 32 MiB through a 16 KiB receive buffer (two
 *        8 KiB halves, 4096 grants), checked byte by byte.  (The bug of a
 *        sender moving its slot on after posting the Write, so a fast
 *        peer's next grant could land first and be overwritten, did not
 *        show here; rstream -T a -T v in test_rsocket.sh caught it about
 *        one run in five.)
 *   killed ADDR PORT / victim ADDR PORT:
 *     the victim connects, reads 4 bytes, says "ready" and sleeps; the
 *     script SIGKILLs it; the server, blocked in rrecv, must get
 *     ECONNRESET (its liveness probe fails), not sleep for ever.
 * Every wait is bounded by alarm().  Exit 0 pass, 1 fail.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rsocket.h>

#define MID_LEN (256 << 10)

/* Most checks here are about a call's errno: each failure shows it. */
static const char *errno_tag(void)
{
	static char b[80];
	int e = errno;
	snprintf(b, sizeof(b), "errno %d %s", e, strerror(e));
	return b;
}
#define SRN_CHECK_TAG errno_tag()
#include "check.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int send_all(int s, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t r = rsend(s, p, n, 0);
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int recv_all(int s, uint8_t *p, size_t n)
{
	while (n) {
		ssize_t r = rrecv(s, p, n, 0);
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static uint8_t pattern(size_t i) { return (uint8_t)(i * 7 + (i >> 9)); }

static int listen_on(const struct sockaddr_in *a)
{
	int l = rsocket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	if (l < 0 || rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    rbind(l, (const struct sockaddr *)a, sizeof(*a)) || rlisten(l, 4)) {
		perror("listen");
		exit(1);
	}
	return l;
}

static int connect_to(const struct sockaddr_in *a)
{
	/* The server may not listen yet: a few tries, a second apart. */
	for (int i = 0; i < 20; i++) {
		int s = rsocket(AF_INET, SOCK_STREAM, 0);
		if (s < 0) {
			perror("rsocket");
			exit(1);
		}
		if (!rconnect(s, (const struct sockaddr *)a, sizeof(*a)))
			return s;
		rclose(s);
		sleep(1);
	}
	perror("rconnect");
	exit(1);
}

static void server_poll(int l)
{
	int s = raccept(l, NULL, NULL);
	CHECK(s >= 0);
	int pfd[2];
	CHECK(pipe(pfd) == 0);
	CHECK(rfcntl(s, F_SETFL, O_NONBLOCK) == 0);
	CHECK((rfcntl(s, F_GETFL) & O_NONBLOCK) != 0);
	char c;
	errno = 0;
	CHECK(rrecv(s, &c, 1, 0) == -1 && (errno == EAGAIN || errno == EWOULDBLOCK));

	struct pollfd f[2] = { { .fd = s, .events = POLLIN }, { .fd = pfd[0], .events = POLLIN } };
	double t0 = now();
	CHECK(rpoll(f, 2, 300) == 0);
	CHECK(now() - t0 >= 0.29);     /* a lower bound only: the machine may be slow */
	CHECK(write(pfd[1], "x", 1) == 1);
	CHECK(rpoll(f, 2, 10000) == 1);
	CHECK(f[1].revents & POLLIN);
	CHECK(f[0].revents == 0);
	CHECK(read(pfd[0], &c, 1) == 1);

	fd_set rd;
	struct timeval tv = { 0, 200000 };
	FD_ZERO(&rd);
	FD_SET(s, &rd);
	FD_SET(pfd[0], &rd);
	CHECK(rselect((s > pfd[0] ? s : pfd[0]) + 1, &rd, NULL, NULL, &tv) == 0);

	/* Ask the client for 1000 bytes; they come while we sleep in rpoll. */
	CHECK(rsend(s, "g", 1, 0) == 1);
	uint8_t buf[1000];
	size_t got = 0;
	while (got < sizeof(buf)) {
		f[0].revents = f[1].revents = 0;
		int n = rpoll(f, 2, 20000);
		CHECK(n == 1 && (f[0].revents & POLLIN) && !f[1].revents);
		if (n != 1)
			break;
		ssize_t r = rrecv(s, buf + got, sizeof(buf) - got, 0);
		CHECK(r > 0 || errno == EAGAIN);
		if (r > 0)
			got += (size_t)r;
	}
	for (size_t i = 0; i < got; i++)
		if (buf[i] != pattern(i)) {
			CHECK(!"data as sent");
			break;
		}
	CHECK(got == sizeof(buf));
	close(pfd[0]);
	close(pfd[1]);
	CHECK(rclose(s) == 0);
}

static void client_poll(const struct sockaddr_in *a)
{
	int s = connect_to(a);
	char c;
	CHECK(rrecv(s, &c, 1, 0) == 1 && c == 'g');
	uint8_t buf[1000];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = pattern(i);
	CHECK(send_all(s, buf, sizeof(buf)) == 0);
	/* The server closes after reading: end of stream, then POLLHUP. */
	CHECK(rrecv(s, &c, 1, 0) == 0);
	struct pollfd f = { .fd = s, .events = POLLIN };
	CHECK(rpoll(&f, 1, 10000) == 1 && (f.revents & (POLLHUP | POLLIN)));
	CHECK(rclose(s) == 0);
}

static void server_mid_writer_close(int l)
{
	int s = raccept(l, NULL, NULL);
	CHECK(s >= 0);
	sleep(1);     /* the client sends everything and closes meanwhile */
	uint8_t *buf = malloc(MID_LEN + 1);
	size_t got = 0;
	ssize_t r;
	while ((r = rrecv(s, buf + got, MID_LEN + 1 - got, 0)) > 0)
		got += (size_t)r;
	CHECK(r == 0);
	CHECK(got == MID_LEN);
	for (size_t i = 0; i < got; i++)
		if (buf[i] != pattern(i)) {
			CHECK(!"data in order");
			break;
		}
	free(buf);
	CHECK(rclose(s) == 0);
}

static void client_mid_writer_close(const struct sockaddr_in *a)
{
	int s = connect_to(a);
	uint8_t *buf = malloc(MID_LEN);
	for (size_t i = 0; i < MID_LEN; i++)
		buf[i] = pattern(i);
	CHECK(send_all(s, buf, MID_LEN) == 0);
	free(buf);
	CHECK(rclose(s) == 0);
}

static void server_mid_reader_close(int l)
{
	int s = raccept(l, NULL, NULL);
	CHECK(s >= 0);
	uint8_t buf[64 << 10];
	CHECK(recv_all(s, buf, sizeof(buf)) == 0);
	CHECK(rclose(s) == 0);
}

static void client_mid_reader_close(const struct sockaddr_in *a)
{
	int s = connect_to(a);
	uint8_t buf[16 << 10];
	memset(buf, 'r', sizeof(buf));
	ssize_t r;
	size_t sent = 0;
	/* Bounded: the server reads 64 KiB; past 1 GiB something is wrong. */
	while ((r = rsend(s, buf, sizeof(buf), 0)) > 0 && sent < (1u << 30))
		sent += (size_t)r;
	CHECK(r < 0 && (errno == EPIPE || errno == ECONNRESET));
	CHECK(sent >= 64 << 10);
	CHECK(rclose(s) == 0);
}

#define TURNS_LEN (32u << 20)

static void small_buffers(int s)
{
	int v = 8192;
	rsetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
	rsetsockopt(s, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
}

static void server_turns(int l)
{
	small_buffers(l);   /* the connection accepted next takes the listener's sizes */
	int s = raccept(l, NULL, NULL);
	CHECK(s >= 0);
	static uint8_t buf[65536];
	size_t got = 0;
	ssize_t r;
	while ((r = rrecv(s, buf, sizeof(buf), 0)) > 0) {
		for (ssize_t i = 0; i < r; i++)
			if (buf[i] != pattern(got + (size_t)i)) {
				fprintf(stderr, "byte %zu differs\n", got + (size_t)i);
				CHECK(!"data in order through many buffer turns");
				rclose(s);
				return;
			}
		got += (size_t)r;
	}
	CHECK(r == 0 && got == TURNS_LEN);
	CHECK(rclose(s) == 0);
}

static void client_turns(const struct sockaddr_in *a)
{
	int s = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK(s >= 0);
	small_buffers(s);
	CHECK(rconnect(s, (const struct sockaddr *)a, sizeof(*a)) == 0);
	static uint8_t buf[65536];
	for (size_t off = 0; off < TURNS_LEN; off += sizeof(buf)) {
		size_t n = TURNS_LEN - off < sizeof(buf) ? TURNS_LEN - off : sizeof(buf);
		for (size_t i = 0; i < n; i++)
			buf[i] = pattern(off + i);
		if (send_all(s, buf, n)) {
			CHECK(!"send");
			break;
		}
	}
	CHECK(rclose(s) == 0);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s server|client|killed|victim ADDR PORT\n", argv[0]);
		return 2;
	}
	alarm(120);
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3])) };
	if (inet_pton(AF_INET, argv[2], &a.sin_addr) != 1)
		return 2;
	const char *mode = argv[1];
	if (!strcmp(mode, "server")) {
		int l = listen_on(&a);
		server_poll(l);
		server_mid_writer_close(l);
		server_mid_reader_close(l);
		server_turns(l);
		CHECK(rclose(l) == 0);
	} else if (!strcmp(mode, "client")) {
		client_poll(&a);
		client_mid_writer_close(&a);
		client_mid_reader_close(&a);
		client_turns(&a);
	} else if (!strcmp(mode, "killed")) {
		int l = listen_on(&a);
		int s = raccept(l, NULL, NULL);
		CHECK(s >= 0 && rsend(s, "ping", 4, 0) == 4);
		char c;
		double t0 = now();
		errno = 0;
		ssize_t r = rrecv(s, &c, 1, 0);
		/* A same-host peer's death reaches the CM at once (its pidfd) as
		 * the DREQ a kernel peer's exit sends: an orderly end, EOF.  A
		 * peer the CM cannot watch is found dead by the 5 s probe:
		 * ECONNRESET.  Either way, no hang. */
		CHECK(r == 0 || (r == -1 && errno == ECONNRESET));
		printf("rrecv returned %zd (%s) after %.1f s\n", r, strerror(errno), now() - t0);
		rclose(s);
		rclose(l);
	} else if (!strcmp(mode, "victim")) {
		int s = connect_to(&a);
		char b[4];
		CHECK(recv_all(s, (uint8_t *)b, 4) == 0);
		printf("ready\n");
		pause();
	} else {
		return 2;
	}
	if (srn_check_failures)
		return srn_check_result();
	printf("%s: ok\n", mode);
	return 0;
}
