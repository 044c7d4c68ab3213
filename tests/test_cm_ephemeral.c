/*
 * test_cm_ephemeral.c - one process's side of test_cm_ephemeral.sh: rdma_cm
 * ids on ephemeral ports, held while another process takes its own.
 *
 *   hold NBIND NRESOLVE DST GO STOP
 *     waits (at most 30 s) until the file GO exists, so two holders start
 *     at once; then binds NBIND ids to 0.0.0.0 port 0 (rdma_bind_addr) and
 *     resolves NRESOLVE ids to DST (rdma_resolve_addr: an implicit bind),
 *     printing "port N" for each, then "ready"; holds them until the file
 *     STOP exists (at most 60 s) and exits without destroying them (its
 *     files are then a dead holder's, for the next process to clear).
 *   bind PORT
 *     rdma_bind_addr to 0.0.0.0:PORT; prints "bound" or "refused ERRNO".
 *
 * The ids share one event channel: a synchronous id has a channel (a
 * descriptor) each, and a thousand of them would hit the fd limit.
 * Exit 0 when every call behaved, 1 otherwise, 2 usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

/* Wait (bounded) until path exists. */
static int wait_file(const char *path, int seconds)
{
	for (int i = 0; i < seconds * 100; i++) {
		if (access(path, F_OK) == 0)
			return 0;
		usleep(10000);
	}
	return -1;
}

static int hold(int nbind, int nres, const char *dst, const char *go, const char *stop)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in any = { .sin_family = AF_INET }, to = { .sin_family = AF_INET };
	if (!ch || inet_pton(AF_INET, dst, &to.sin_addr) != 1)
		return fprintf(stderr, "setup failed\n"), 1;
	if (wait_file(go, 30))
		return fprintf(stderr, "no go\n"), 1;
	for (int i = 0; i < nbind + nres; i++) {
		struct rdma_cm_id *id;
		if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
			return perror("rdma_create_id"), 1;
		int ret = i < nbind ? rdma_bind_addr(id, (struct sockaddr *)&any)
				    : rdma_resolve_addr(id, NULL, (struct sockaddr *)&to, 2000);
		if (ret)
			return perror(i < nbind ? "rdma_bind_addr" : "rdma_resolve_addr"), 1;
		printf("port %u\n", ntohs(rdma_get_src_port(id)));
	}
	/* The resolves' ADDR_RESOLVED events: each must have come. */
	for (int i = 0; i < nres; i++) {
		struct rdma_cm_event *e;
		if (rdma_get_cm_event(ch, &e))
			return perror("rdma_get_cm_event"), 1;
		int bad = e->event != RDMA_CM_EVENT_ADDR_RESOLVED;
		rdma_ack_cm_event(e);
		if (bad)
			return fprintf(stderr, "event %d\n", i), 1;
	}
	printf("ready\n");
	fflush(stdout);
	wait_file(stop, 60);
	return 0;
}

static int bind_one(int port)
{
	struct rdma_cm_id *id;
	struct sockaddr_in any = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP))
		return perror("rdma_create_id"), 1;
	if (rdma_bind_addr(id, (struct sockaddr *)&any))
		printf("refused %d\n", errno);
	else
		printf("bound\n");
	rdma_destroy_id(id);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 7 && strcmp(argv[1], "hold") == 0)
		return hold(atoi(argv[2]), atoi(argv[3]), argv[4], argv[5], argv[6]);
	if (argc == 3 && strcmp(argv[1], "bind") == 0)
		return bind_one(atoi(argv[2]));
	fprintf(stderr, "usage: %s hold NBIND NRESOLVE DST GO STOP | bind PORT\n", argv[0]);
	return 2;
}
