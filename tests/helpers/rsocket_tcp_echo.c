/*
 * rsocket_tcp_echo - a plain TCP program (socket, bind, listen, accept,
 * connect, poll, read, write, shutdown, close: nothing of RDMA) that
 * tests/test_rsocket_preload.sh runs under Debian's librspreload.so.
 *
 *   rsocket_tcp_echo server ADDR PORT   echo one connection until EOF
 *   rsocket_tcp_echo client ADDR PORT   send 1 MiB, read it back, compare
 *
 * Both report whether their connected socket is an rsocket: through the
 * preload, getsockopt(SOL_RDMA, RDMA_SQSIZE) reaches rgetsockopt and
 * succeeds; on a kernel TCP socket it fails.  Exit 0 pass, 1 fail.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <rdma/rsocket.h>

#define TOTAL (1 << 20)

static const char *transport(int fd)
{
	int v = 0;
	socklen_t len = sizeof(v);
	return getsockopt(fd, SOL_RDMA, RDMA_SQSIZE, &v, &len) == 0 ? "rsocket" : "kernel";
}

static int wait_fd(int fd, short ev)
{
	struct pollfd p = { .fd = fd, .events = ev };
	int n = poll(&p, 1, 30000);
	return n == 1 ? 0 : -1;
}

static int server(const struct sockaddr_in *a)
{
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(l, (const struct sockaddr *)a, sizeof(*a)) || listen(l, 1)) {
		perror("server setup");
		return 1;
	}
	int s = accept(l, NULL, NULL);
	if (s < 0) {
		perror("accept");
		return 1;
	}
	printf("server transport: %s\n", transport(s));
	static char buf[65536];
	size_t total = 0;
	for (;;) {
		if (wait_fd(s, POLLIN))
			return 1;
		ssize_t n = read(s, buf, sizeof(buf));
		if (n == 0)
			break;
		if (n < 0) {
			perror("read");
			return 1;
		}
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(s, buf + off, (size_t)(n - off));
			if (w <= 0) {
				perror("write");
				return 1;
			}
			off += w;
		}
		total += (size_t)n;
	}
	printf("server echoed %zu bytes\n", total);
	close(s);
	close(l);
	return 0;
}

static int client(const struct sockaddr_in *a)
{
	int s = -1;
	for (int i = 0; i < 20; i++) {
		s = socket(AF_INET, SOCK_STREAM, 0);
		if (s >= 0 && !connect(s, (const struct sockaddr *)a, sizeof(*a)))
			break;
		if (s >= 0)
			close(s);
		s = -1;
		sleep(1);
	}
	if (s < 0) {
		perror("connect");
		return 1;
	}
	printf("client transport: %s\n", transport(s));
	char *out = malloc(TOTAL), *in = malloc(TOTAL);
	for (size_t i = 0; i < TOTAL; i++)
		out[i] = (char)(i * 13 + (i >> 11));
	size_t sent = 0, got = 0;
	/* Alternate: a chunk out, whatever came back in, so neither side's
	 * buffers fill while the other waits. */
	while (got < TOTAL) {
		if (sent < TOTAL) {
			size_t n = TOTAL - sent < 32768 ? TOTAL - sent : 32768;
			ssize_t w = send(s, out + sent, n, 0);
			if (w <= 0) {
				perror("send");
				return 1;
			}
			sent += (size_t)w;
			if (sent == TOTAL)
				shutdown(s, SHUT_WR);
		}
		while (got < sent) {
			if (wait_fd(s, POLLIN))
				return 1;
			ssize_t r = recv(s, in + got, TOTAL - got, 0);
			if (r <= 0) {
				perror("recv");
				return 1;
			}
			got += (size_t)r;
			if (sent < TOTAL)
				break;
		}
	}
	int bad = memcmp(in, out, TOTAL) != 0;
	printf("client got %zu bytes back, %s\n", got, bad ? "DIFFERENT" : "identical");
	close(s);
	return bad;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	alarm(120);
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3])) };
	if (inet_pton(AF_INET, argv[2], &a.sin_addr) != 1)
		return 2;
	return !strcmp(argv[1], "server") ? server(&a) : client(&a);
}
