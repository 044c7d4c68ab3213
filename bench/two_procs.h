/*
 * two_procs.h - what bench/'s two-process verbs programs share (idle_qps.c,
 * post_cost.c): the failure check, the record each side sends the other,
 * the bounded exchange on the control socket and the bring-up to RTS.
 * Define BENCH_TOOL (the program's name, for messages) before including.
 */
#ifndef SRN_BENCH_TWO_PROCS_H
#define SRN_BENCH_TWO_PROCS_H

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "common/qp_up.h"     /* tools/common: the shared bring-up */

#define BENCH_XCHG_MS 10000

/* "parent" or "child": which side failed. */
static const char *role = "parent";

#define CHECK(c)                                                                \
	do {                                                                    \
		if (!(c)) {                                                     \
			fprintf(stderr, BENCH_TOOL "[%s]: %s:%d: %s failed\n",  \
				role, __FILE__, __LINE__, #c);                  \
			exit(1);                                                \
		}                                                               \
	} while (0)

/* What one side tells the other. */
struct info {
	union ibv_gid gid;
	uint32_t qpn;
	uint32_t rkey;
	uint64_t addr;
};

/* Send ours, receive theirs, each within BENCH_XCHG_MS. */
static inline void xchg(int fd, const void *out, void *in, size_t len)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t got = 0;

	CHECK(write(fd, out, len) == (ssize_t)len);
	while (got < len) {
		ssize_t n;

		CHECK(poll(&p, 1, BENCH_XCHG_MS) == 1);
		n = read(fd, (char *)in + got, len - got);
		CHECK(n > 0);
		got += (size_t)n;
	}
}

/* RESET to RTS towards the peer, PSN 0 both ways, remote writes allowed. */
static inline void to_rts(struct ibv_qp *qp, const struct info *peer)
{
	struct srn_qp_up_attr a = srn_qp_up_defaults();
	a.hop_limit = 1;
	a.access = IBV_ACCESS_REMOTE_WRITE;
	a.min_rnr_timer = 12;
	const struct srn_qp_up_peer p = { .qpn = peer->qpn, .psn = 0, .gid = peer->gid };
	const char *step;
	CHECK(srn_qp_up(qp, &a, 0, &p, &step) == 0);
}

/* A socketpair, then fork: *fd is this side's end.  The child (0 is
 * returned there) is named in messages and dies with its parent. */
static inline pid_t fork_pair(int *fd)
{
	int sv[2];
	pid_t pid;

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		role = "child";
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(sv[0]);
		*fd = sv[1];
		return 0;
	}
	close(sv[1]);
	*fd = sv[0];
	return pid;
}

#endif
