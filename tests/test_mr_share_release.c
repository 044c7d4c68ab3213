/*
 * test_mr_share_release - a region whose pages moved onto a memfd
 * (core/mr_share.c: 1 MiB, remote write) gets them back on private
 * anonymous memory when it is deregistered, contents kept:
 *
 *  - /proc/self/maps shows the span shared while registered, private
 *    after ibv_dereg_mr, and the bytes are the program's;
 *  - the mapping can then grow in place or move with mremap and the new
 *    tail is usable (on the memfd, growing past the file's end faulted
 *    with SIGBUS: libc's realloc of a large block does exactly this);
 *  - a forked child sees the bytes (the span was MADV_DONTFORK while
 *    registered, as ibv_fork_init makes registered memory).
 *
 * One process, one device, no traffic.  A machine where the pages never
 * move (userfaultfd refused) skips (77).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "check.h"
#include "rc_test_conn.h"

#define LEN (1u << 20)

/* The permissions of the mapping holding p ("rw-p", "rw-s"), or "" */
static void perms_at(const void *p, char out[5])
{
	out[0] = 0;
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		unsigned long s, e;
		char perms[5];
		if (sscanf(line, "%lx-%lx %4s", &s, &e, perms) == 3 && (uintptr_t)p >= s &&
		    (uintptr_t)p < e) {
			memcpy(out, perms, 5);
			break;
		}
	}
	fclose(f);
}

static bool kernel_at_least(int major, int minor)
{
	struct utsname u;
	int ma = 0, mi = 0;
	if (uname(&u) || sscanf(u.release, "%d.%d", &ma, &mi) != 2)
		return false;
	return ma > major || (ma == major && mi >= minor);
}

static bool pattern_ok(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != (uint8_t)(i * 13 + 1))
			return false;
	return true;
}

int main(void)
{
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	CHECK(ctx);
	if (!ctx)
		return srn_check_result();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	uint8_t *b = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(b != MAP_FAILED);
	for (size_t i = 0; i < LEN; i++)
		b[i] = (uint8_t)(i * 13 + 1);
	struct ibv_mr *mr = ibv_reg_mr(pd, b, LEN, IBV_ACCESS_LOCAL_WRITE |
				       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	CHECK(mr);
	char p[5];
	perms_at(b, p);
	if (strcmp(p, "rw-s")) {
		printf("SKIP: the region's pages did not move (%s; userfaultfd refused?)\n", p);
		return 77;
	}
	CHECK(pattern_ok(b, LEN));
	CHECK(ibv_dereg_mr(mr) == 0);
	perms_at(b, p);
	if (!strcmp(p, "rw-s") && !kernel_at_least(5, 19)) {
		/* Before 5.19 userfaultfd cannot write-protect shared memory. */
		printf("SKIP: the pages stayed on the memfd after dereg (Linux before 5.19)\n");
		return 77;
	}
	CHECK(!strcmp(p, "rw-p"), "after dereg the span is %s, not private", p);
	CHECK(pattern_ok(b, LEN), "the bytes changed when the pages came back");

	/* Grow it (in place or moved, as the kernel likes) and use the tail. */
	size_t size = LEN;
	uint8_t *g = mremap(b, LEN, 2 * LEN, MREMAP_MAYMOVE);
	CHECK(g != MAP_FAILED);
	if (g != MAP_FAILED) {
		size = 2 * LEN;
		memset(g + LEN, 0x77, LEN);       /* SIGBUS here on a memfd */
		CHECK(pattern_ok(g, LEN) && g[2 * LEN - 1] == 0x77);
		b = g;
	}

	pid_t child = fork();
	CHECK(child >= 0);
	if (child == 0)
		_exit(pattern_ok(b, LEN) ? 0 : 1);    /* SIGSEGV here if DONTFORK stayed */
	int st = 0;
	CHECK(waitpid(child, &st, 0) == child);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child saw status %#x", st);

	munmap(b, size);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	if (!srn_check_failures)
		printf("ok: pages back on private memory after dereg, bytes kept, grown with "
		       "mremap, seen by a forked child\n");
	return srn_check_result();
}
