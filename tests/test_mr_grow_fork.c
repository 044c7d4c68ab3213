/*
 * test_mr_grow_fork - what a program may do to registered memory whose
 * pages moved onto a memfd (core/mr_share.c), issue 27 items 1 and 3:
 *
 *  grow:  realloc() of a registered 1 MiB block (libc's own mremap, no
 *         hook sees it), mremap() of registered 128 KiB and 1 MiB regions
 *         through the hook and as a raw system call, each grown to 4x and
 *         written to the end: no SIGBUS (the memfd is sized past the
 *         span), old bytes intact; after dereg the grown mapping, wherever
 *         it went, is private memory again.
 *  fork:  an 80 KiB heap buffer registered between other heap objects;
 *         a forked child reads and writes those objects and the buffer
 *         (it sees the parent's bytes as of the fork), and neither side
 *         sees the other's later stores: the child has its own copy.
 *
 * One process (and its child), one device, no traffic.  A machine where
 * pages never move (userfaultfd refused) skips (77).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "check.h"
#include "rc_test_conn.h"

#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static void fill(uint8_t *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 13 + seed);
}

static bool filled(const uint8_t *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != (uint8_t)(i * 13 + seed))
			return false;
	return true;
}

static bool moved_any;

/* realloc a registered block of len to 4x, write it all. */
static void grow_realloc(struct ibv_pd *pd, size_t len)
{
	uint8_t *b = malloc(len);
	CHECK(b);
	fill(b, len, 1);
	struct ibv_mr *mr = ibv_reg_mr(pd, b, len, ACCESS);
	CHECK(mr);
	moved_any |= srn_tc_on_memfd(b);
	uint8_t *g = realloc(b, 4 * len);
	CHECK(g);
	if (!g)
		return;
	memset(g + len, 0x5a, 3 * len);         /* SIGBUS here on a tight memfd */
	CHECK(filled(g, len, 1), "realloc lost the block's bytes");
	CHECK(g[4 * len - 1] == 0x5a);
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(!srn_tc_on_memfd(g) && !srn_tc_on_memfd(g + 4 * len - 1),
	      "the grown block is still on the memfd after dereg");
	CHECK(filled(g, len, 1) && g[4 * len - 1] == 0x5a, "dereg changed the bytes");
	free(g);
}

/* mremap a registered mapping of len to 4x: through the hook (may move)
 * or as a raw system call growing in place (as libc's own does). */
static void grow_mremap(struct ibv_pd *pd, size_t len, bool raw)
{
	uint8_t *b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(b != MAP_FAILED);
	fill(b, len, 3);
	struct ibv_mr *mr = ibv_reg_mr(pd, b, len, ACCESS);
	CHECK(mr);
	bool moved = srn_tc_on_memfd(b);
	moved_any |= moved;
	uint8_t *g = raw ? (uint8_t *)syscall(SYS_mremap, b, len, 4 * len, 0)
			 : mremap(b, len, 4 * len, MREMAP_MAYMOVE);
	if (g == MAP_FAILED && raw) {
		/* No room to grow in place: move it, still unseen by the hook. */
		g = (uint8_t *)syscall(SYS_mremap, b, len, 4 * len, MREMAP_MAYMOVE);
	}
	CHECK(g != MAP_FAILED, "mremap failed");
	if (g == MAP_FAILED)
		return;
	CHECK(!moved || srn_tc_on_memfd(g + 4 * len - 1), "the grown tail is not the memfd's");
	memset(g + len, 0x6b, 3 * len);         /* SIGBUS here on a tight memfd */
	CHECK(filled(g, len, 3) && g[4 * len - 1] == 0x6b, "mremap lost bytes");
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(!srn_tc_on_memfd(g) && !srn_tc_on_memfd(g + 4 * len - 1), "still on the memfd after dereg");
	CHECK(filled(g, len, 3) && g[4 * len - 1] == 0x6b, "dereg changed the bytes");
	munmap(g, 4 * len);
}

/* The fork case; returns after the child is reaped. */
static void fork_heap(struct ibv_pd *pd)
{
	enum { N = 64, SMALL = 200, BIG = 80 << 10 };
	uint8_t *before[N], *after[N];
	for (int i = 0; i < N; i++) {
		before[i] = malloc(SMALL);
		fill(before[i], SMALL, (unsigned)i);
	}
	uint8_t *buf = malloc(BIG);
	fill(buf, BIG, 7);
	for (int i = 0; i < N; i++) {
		after[i] = malloc(SMALL);
		fill(after[i], SMALL, (unsigned)i + 100);
	}
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, BIG, ACCESS);
	CHECK(mr);
	bool moved = srn_tc_on_memfd(buf);
	moved_any |= moved;
	int p2c[2], c2p[2];
	CHECK(!pipe(p2c) && !pipe(c2p));
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(c2p[0]);
		close(p2c[1]);
		bool ok = filled(buf, BIG, 7) && !srn_tc_on_memfd(buf);
		for (int i = 0; i < N; i++) {
			ok &= filled(before[i], SMALL, (unsigned)i);
			ok &= filled(after[i], SMALL, (unsigned)i + 100);
			memset(before[i], 0xee, SMALL);     /* SIGSEGV here with DONTFORK */
			memset(after[i], 0xee, SMALL);
		}
		uint8_t *x = malloc(4096);          /* the heap still works */
		ok &= x != NULL;
		free(x);
		memset(buf, 0xcc, BIG);
		char c = ok ? 'y' : 'n';
		ok &= write(c2p[1], &c, 1) == 1;
		ok &= read(p2c[0], &c, 1) == 1;     /* the parent wrote its buffer */
		for (size_t i = 0; i < BIG; i++)
			ok &= buf[i] == 0xcc;
		_exit(ok ? 0 : 1);
	}
	/* Only the child holds these ends: its death ends the reads. */
	close(c2p[1]);
	close(p2c[0]);
	char c = 0;
	CHECK(read(c2p[0], &c, 1) == 1 && c == 'y', "the child saw wrong bytes (%c)", c);
	CHECK(filled(buf, BIG, 7), "the child's store reached the parent's buffer");
	for (int i = 0; i < N; i++)
		CHECK(filled(before[i], SMALL, (unsigned)i) &&
		      filled(after[i], SMALL, (unsigned)i + 100));
	memset(buf, 0xdd, BIG);
	if (c == 'y')           /* else it is gone: no SIGPIPE */
		CHECK(write(p2c[1], &c, 1) == 1);
	int st = 0;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child ended with status %#x", st);
	CHECK(!moved || srn_tc_on_memfd(buf), "the parent's span left the memfd");
	CHECK(ibv_dereg_mr(mr) == 0);
	for (int i = 0; i < N; i++) {
		free(before[i]);
		free(after[i]);
	}
	free(buf);
	close(p2c[1]);
	close(c2p[0]);
}

/* argv[1] "grow" or "fork" runs that half alone. */
int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : "";
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	CHECK(ctx);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	if (strcmp(only, "fork")) {
		grow_realloc(pd, 1u << 20);
		grow_realloc(pd, 256u << 10);
		grow_mremap(pd, 128u << 10, false);
		grow_mremap(pd, 1u << 20, false);
		grow_mremap(pd, 128u << 10, true);
		grow_mremap(pd, 1u << 20, true);
	}
	if (strcmp(only, "grow"))
		fork_heap(pd);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	if (!moved_any) {
		printf("SKIP: no region's pages moved (userfaultfd refused?)\n");
		return 77;
	}
	if (!srn_check_failures)
		printf("ok: registered memory grown by realloc and mremap, forked with heap "
		       "neighbours, no fault and no sharing\n");
	return srn_check_result();
}
