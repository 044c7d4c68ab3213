/*
 * test_trust_shm_plant.c - the process that holds a same-host inbox name
 * before its rightful owner does (tests/test_trust_shm_inbox.sh).
 *
 *   test_trust_shm_plant ADDR PORT MODE SECONDS
 *
 * Opens an inbox for ADDR:PORT through the library itself, so the file
 * under the name is a perfect one of whatever layout this build writes;
 * sets that file's mode to MODE (octal); prints "planted PATH"; then
 * waits for SIGTERM (or SECONDS) and prints how many packets and bytes
 * reached its rings, the payload a sender should never have given it.
 * Run under `setpriv --reuid=65534` it is another user's file; as root
 * with MODE 0644 it is our own user's file that others could read.
 */
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "link/shm.h"

struct tally {
	unsigned long pkts, bytes;
};

static void count(void *ctx, const uint8_t *data, uint32_t len, const struct sockaddr *src,
		  uint8_t tos)
{
	struct tally *t = ctx;
	(void)data, (void)src, (void)tos;
	t->pkts++;
	t->bytes += len;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: %s ADDR PORT MODE SECONDS\n", argv[0]);
		return 2;
	}
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])) };
	if (inet_pton(AF_INET, argv[1], &a.sin_addr) != 1)
		return 2;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);

	static struct srn_shm s;
	int ret = srn_shm_open(&s, (const struct sockaddr *)&a, sizeof(a), 0, true, -1);
	if (ret || !s.in) {
		printf("plant failed: %s\n", strerror(-ret));
		return 1;
	}
	/* Layout 1 kept a shm_open name ("/softrnic-link-..."), later ones
	 * a full path. */
	char path[sizeof(s.in_name) + 16];
	snprintf(path, sizeof(path), "%s%s", strncmp(s.in_name, "/dev/shm/", 9) ? "/dev/shm" : "",
		 s.in_name);
	if (chmod(path, (mode_t)strtoul(argv[3], NULL, 8))) {
		perror("chmod");
		return 1;
	}
	printf("planted %s\n", path);
	fflush(stdout);

	struct timespec limit = { .tv_sec = atoi(argv[4]) };
	sigtimedwait(&set, NULL, &limit);
	struct tally t = { 0, 0 };
	for (int i = 0; i < 100000 && srn_shm_poll(&s, 1 << 16, count, &t) > 0; i++)
		;
	printf("planted inbox received %lu packets, %lu bytes\n", t.pkts, t.bytes);
	srn_shm_close(&s);
	return 0;
}
