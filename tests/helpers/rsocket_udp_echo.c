/*
 * rsocket_udp_echo - a plain UDP program (socket, bind, connect, poll,
 * recvfrom, sendto, send, recv, close: nothing of RDMA) that
 * tests/test_rsocket_udp.sh runs under Debian's librspreload.so.
 *
 *   rsocket_udp_echo server ADDR PORT   echo datagrams until one says END
 *   rsocket_udp_echo client ADDR PORT   datagrams of several sizes, each
 *                                       echoed back and compared
 *
 * Datagrams may be lost (UD is unreliable, as UDP is), so the client
 * sends each again until its echo comes, at most 50 times.  Both report
 * whether their socket is an rsocket: through the preload,
 * getsockopt(SOL_RDMA, RDMA_SQSIZE) reaches rgetsockopt and succeeds; on
 * a kernel socket it fails.  An rsocket must refuse a datagram larger
 * than its receive buffers (EMSGSIZE).  Exit 0 pass, 1 fail.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <rdma/rsocket.h>

#define TRIES 50

static const char *transport(int fd)
{
	int v = 0;
	socklen_t len = sizeof(v);
	return getsockopt(fd, SOL_RDMA, RDMA_SQSIZE, &v, &len) == 0 ? "rsocket" : "kernel";
}

static int readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

static int server(const struct sockaddr_in *a)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0 || bind(s, (const struct sockaddr *)a, sizeof(*a))) {
		perror("server setup");
		return 1;
	}
	printf("server transport: %s\n", transport(s));
	static char buf[4096];
	unsigned echoed = 0;
	for (int idle = 0; idle < 60;) {
		if (!readable(s, 1000)) {
			idle++;      /* bounded: a client that vanished ends us within a minute */
			continue;
		}
		idle = 0;
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(s, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
		if (n < 0) {
			if (errno == EAGAIN)
				continue;
			perror("recvfrom");
			return 1;
		}
		if (sendto(s, buf, (size_t)n, 0, (struct sockaddr *)&from, fl) != n)
			perror("sendto");
		echoed++;
		if (n == 3 && !memcmp(buf, "END", 3)) {
			printf("server: echoed %u datagrams\n", echoed);
			close(s);
			return 0;
		}
	}
	fprintf(stderr, "server: no END within a minute\n");
	return 1;
}

/* Send msg until the same bytes come back. */
static int ping(int s, const uint8_t *msg, size_t len)
{
	static uint8_t back[4096];
	for (int t = 0; t < TRIES; t++) {
		if (send(s, msg, len, 0) != (ssize_t)len) {
			perror("send");
			return -1;
		}
		while (readable(s, 200)) {
			ssize_t n = recv(s, back, sizeof(back), MSG_DONTWAIT);
			if (n == (ssize_t)len && !memcmp(back, msg, len))
				return 0;
			/* an older echo of a resend: read on */
		}
	}
	fprintf(stderr, "client: no echo of %zu bytes after %d tries\n", len, TRIES);
	return -1;
}

static int client(const struct sockaddr_in *a)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0 || connect(s, (const struct sockaddr *)a, sizeof(*a))) {
		perror("client setup");
		return 1;
	}
	const char *tr = transport(s);
	printf("client transport: %s\n", tr);
	static const size_t sizes[] = { 1, 16, 64, 512, 1000, 1400, 2000 };
	static uint8_t msg[4096];
	unsigned n = 0;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		for (unsigned k = 0; k < 20; k++, n++) {
			for (size_t j = 0; j < sizes[i]; j++)
				msg[j] = (uint8_t)(j * 7 + k + i);
			msg[0] = (uint8_t)(n | 0x80);   /* never "END" */
			if (ping(s, msg, sizes[i]))
				return 1;
		}
	printf("client: %u datagrams echoed identical\n", n);
	if (!strcmp(tr, "rsocket")) {
		/* 2048 bytes of receive buffer hold our header too. */
		errno = 0;
		if (send(s, msg, 2100, 0) != -1 || errno != EMSGSIZE) {
			fprintf(stderr, "client: a 2100-byte datagram was not refused with EMSGSIZE\n");
			return 1;
		}
		printf("client: 2100 bytes refused: EMSGSIZE\n");
	}
	if (ping(s, (const uint8_t *)"END", 3))
		return 1;
	close(s);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s server|client ADDR PORT\n", argv[0]);
		return 2;
	}
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3])) };
	if (inet_pton(AF_INET, argv[2], &a.sin_addr) != 1)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	return !strcmp(argv[1], "server") ? server(&a) : client(&a);
}
