/*
 * test_direct_fence - the direct-placement table alone (link/direct.h):
 *  1. a table opens through /proc/self/fd like a peer's, entries read back,
 *     a wrong key or QPN reads as nothing; a copy kept by its record's
 *     change number goes stale at the next set, and an emptied peer
 *     entry's generation turns;
 *  2. a fence waits for a placement in flight (the placement's last write
 *     is visible when the fence returns), and does not wait when none is;
 *  3. a requester process killed inside a placement does not hold a fence
 *     (no timeout: its death releases the slot);
 *  4. seqlock: a reader racing a writer only ever accepts whole entries.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

/* Each step builds on the one before: stop at the first failed check. */
#define SRN_CHECK_FATAL
#include "check.h"
#include "link/direct.h"

#define COOKIE 0x1234abcdull
#define KEY(slot) (0x5a000000u | (slot) << 8 | 0x17u)

static struct srn_direct_own own;
static struct srn_direct_req req;
static _Atomic int entered, left, changed;

static void *placement(void *arg)
{
	struct srn_direct_peer *p = arg;
	srn_direct_enter(p);
	atomic_store(&entered, 1);
	/* Stay inside until the owner changed the entry, and a while more,
	 * so its fence finds us here even on a loaded machine (a fixed
	 * 100 ms from entering was sometimes over before the fence ran). */
	for (int i = 0; i < 10000 && !atomic_load(&changed); i++)
		usleep(1000);
	usleep(300000);
	atomic_store(&left, 1);
	srn_direct_leave(p);
	return NULL;
}

static _Atomic int stop;
static void *writer(void *arg)
{
	(void)arg;
	for (uint64_t k = 1; !atomic_load(&stop); k++) {
		struct srn_direct_mr_ent e = { .key = KEY(7), .access = 6, .pd = k, .iova = k,
					       .length = 3 * k, .base = 5 * k };
		srn_direct_own_set_mr(&own, 7, &e);
		/* A real owner writes an entry now and then, not in a loop:
		 * leave readers a gap (a reader gives up after 64 tries). */
		for (volatile int i = 0; i < 200; i++)
			;
	}
	return NULL;
}

int main(void)
{
	CHECK(srn_direct_own_open(&own) == 0);
	srn_direct_own_publish(&own, COOKIE);
	struct srn_direct_mr_ent e = { .key = KEY(3), .access = 6, .pd = 1, .iova = 0x1000,
				       .length = 4096, .base = 0x7000 };
	srn_direct_own_set_mr(&own, 3, &e);
	struct srn_direct_qp_ent q = { .qpn = 0x123045, .state = 3, .flags = SRN_DIRECT_QP_OK };
	srn_direct_own_set_qp(&own, 0x045, &q);

	/* 1. Open as a peer would; a wrong cookie is refused. */
	CHECK(!srn_direct_peer_get(&req, getpid(), own.fd, COOKIE + 1, 0));
	srn_direct_req_close(&req);
	struct srn_direct_peer *p = srn_direct_peer_get(&req, getpid(), own.fd, COOKIE, 0);
	CHECK(p);
	struct srn_direct_mr_ent m;
	struct srn_direct_qp_ent qq;
	CHECK(srn_direct_read_mr(p, 3, KEY(3), &m) && m.base == 0x7000 && m.length == 4096);
	CHECK(!srn_direct_read_mr(p, 3, KEY(3) ^ 1, &m));
	CHECK(!srn_direct_read_mr(p, 0xffff, KEY(0xffff), &m));
	CHECK(srn_direct_read_qp(p, 0x123045, &qq) && qq.state == 3);
	CHECK(!srn_direct_read_qp(p, 0x124045, &qq));

	/* A kept copy (transport/direct.c's hint) holds while its record's
	 * number is unchanged, and not after any set, even an equal one. */
	uint64_t mseq, qseq;
	CHECK(srn_direct_read_mr_seq(p, 3, KEY(3), &m, &mseq) && !(mseq & 1));
	CHECK(srn_direct_read_qp_seq(p, 0x123045, &qq, &qseq) && !(qseq & 1));
	CHECK(srn_direct_mr_unchanged(p, 3, mseq) && srn_direct_qp_unchanged(p, 0x123045, qseq));
	srn_direct_own_set_mr(&own, 3, &e);
	srn_direct_own_set_qp(&own, 0x045, &q);
	CHECK(!srn_direct_mr_unchanged(p, 3, mseq) && !srn_direct_qp_unchanged(p, 0x123045, qseq));
	CHECK(!srn_direct_mr_unchanged(p, 0xffff, 0));
	CHECK(srn_direct_read_mr_seq(p, 3, KEY(3), &m, &mseq) && srn_direct_mr_unchanged(p, 3, mseq));
	/* A dropped entry's generation turns, so a kept pointer to it fails. */
	uint32_t gen = p->gen;

	/* 2. A fence with nothing in flight does not wait; one with a
	 * placement in flight returns after it. */
	CHECK(!srn_direct_own_fence(&own));
	pthread_t t;
	CHECK(pthread_create(&t, NULL, placement, p) == 0);
	while (!atomic_load(&entered))
		usleep(1000);
	memset(&e, 0, sizeof(e));
	srn_direct_own_set_mr(&own, 3, &e);
	atomic_store(&changed, 1);
	CHECK(srn_direct_own_fence(&own));
	CHECK(atomic_load(&left) == 1);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(!srn_direct_read_mr(p, 3, KEY(3), &m));

	/* 3. A requester killed inside a placement. */
	int pipefd[2];
	CHECK(pipe(pipefd) == 0);
	pid_t child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		struct srn_direct_req r2;
		memset(&r2, 0, sizeof(r2));
		struct srn_direct_peer *cp = srn_direct_peer_get(&r2, getppid(), own.fd, COOKIE, 0);
		if (!cp)
			_exit(3);
		srn_direct_enter(cp);
		char c = 1;
		if (write(pipefd[1], &c, 1) != 1)
			_exit(4);
		pause();
		_exit(0);
	}
	char c;
	CHECK(read(pipefd[0], &c, 1) == 1);
	CHECK(kill(child, SIGKILL) == 0);
	uint64_t timeouts = own.fence_timeouts;
	CHECK(srn_direct_own_fence(&own));
	CHECK(own.fence_timeouts == timeouts);
	int st;
	CHECK(waitpid(child, &st, 0) == child && WIFSIGNALED(st));

	/* 4. Seqlock under a racing writer. */
	CHECK(pthread_create(&t, NULL, writer, NULL) == 0);
	unsigned got = 0;
	time_t until = time(NULL) + 5;
	for (int i = 0; got < 20000 && time(NULL) < until; i++) {
		if (!srn_direct_read_mr(p, 7, KEY(7), &m))
			continue;
		CHECK(m.length == 3 * m.iova && m.base == 5 * m.iova && m.pd == m.iova);
		got++;
	}
	atomic_store(&stop, 1);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(got > 0);

	srn_direct_req_close(&req);
	CHECK(p->gen != gen && !p->pid);
	srn_direct_own_close(&own);
	printf("ok: table open/read, kept copies checked by change number, fence waits for a "
	       "placement, a killed requester releases its slot, %u consistent racing reads\n", got);
	return 0;
}
