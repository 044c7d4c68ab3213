/*
 * test_mr_share_writers - registering a region with remote atomics moves
 * its whole pages onto a memfd (core/mr_share.c) while another thread of
 * the program keeps writing those pages: no write may be lost.
 *
 * Each round maps three fresh private pages, starts a thread that
 * increments a counter on the last page (outside the region, inside the
 * span that moves), registers [page 0 + 100, page 2 + 50) with
 * REMOTE_ATOMIC, stops the thread and compares the counter with the
 * thread's own count.  /proc/self/maps must show the pages moved (a
 * shared mapping), else the round checked nothing; a machine where
 * userfaultfd is refused does not move them (exit 77 if no round moved).
 * One process, one device, no traffic.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "check.h"
#include "rc_test_conn.h"

#define ROUNDS 40

static volatile uint64_t *counter;
static atomic_bool stop, started;
static uint64_t incs;

static void *writer(void *arg)
{
	(void)arg;
	uint64_t n = 0;
	atomic_store(&started, true);
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		(*counter)++;
		n++;
	}
	incs = n;
	return NULL;
}

/* Is the page at p in a shared mapping (rw-s) now? */
static bool page_shared(const void *p)
{
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return false;
	char line[512];
	bool shared = false;
	while (fgets(line, sizeof(line), f)) {
		unsigned long s, e;
		char perms[5];
		if (sscanf(line, "%lx-%lx %4s", &s, &e, perms) == 3 && (uintptr_t)p >= s &&
		    (uintptr_t)p < e) {
			shared = perms[3] == 's';
			break;
		}
	}
	fclose(f);
	return shared;
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
	long pg = sysconf(_SC_PAGESIZE);
	int moved = 0;
	uint64_t total = 0;
	for (int r = 0; r < ROUNDS && !srn_check_failures; r++) {
		uint8_t *base = mmap(NULL, (size_t)pg * 3, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		CHECK(base != MAP_FAILED);
		if (base == MAP_FAILED)
			break;
		memset(base, 0x5a, (size_t)pg * 3);
		counter = (volatile uint64_t *)(base + 2 * pg + 64);
		*counter = 0;
		atomic_store(&stop, false);
		atomic_store(&started, false);
		pthread_t t;
		CHECK(pthread_create(&t, NULL, writer, NULL) == 0);
		while (!atomic_load(&started))
			sched_yield();
		usleep(200);    /* the writer is running flat out */
		struct ibv_mr *mr = ibv_reg_mr(pd, base + 100, (size_t)(2 * pg - 50),
					       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
		usleep(200);
		atomic_store(&stop, true);
		pthread_join(t, NULL);
		CHECK(mr, "round %d: ibv_reg_mr failed", r);
		moved += page_shared(base + 2 * pg);
		CHECK(*counter == incs, "round %d: the writer counted %llu, the page holds %llu", r,
		      (unsigned long long)incs, (unsigned long long)*counter);
		/* The bytes around it came along too. */
		CHECK(base[0] == 0x5a && base[2 * pg - 1] == 0x5a && base[3 * pg - 1] == 0x5a);
		total += incs;
		if (mr)
			CHECK(ibv_dereg_mr(mr) == 0);
		munmap(base, (size_t)pg * 3);
	}
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	if (!srn_check_failures && !moved) {
		printf("SKIP: no round moved its pages (userfaultfd refused?)\n");
		return 77;
	}
	if (!srn_check_failures)
		printf("ok: %d rounds, %d moved their pages, %llu writes during registration, none lost\n",
		       ROUNDS, moved, (unsigned long long)total);
	return srn_check_result();
}
