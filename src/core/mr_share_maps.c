/*
 * mr_share_maps.c - finding a span's mappings, and a forked child's
 * private copy of them (mr_share_maps.h).
 *
 * Fork: a kernel NIC's registered memory is copied into a child like any
 * other (copy-on-write; pinned pages copied at fork, Linux 5.13+).  A span
 * is a MAP_SHARED mapping of a memfd, which fork would share between
 * parent and child, so the child's atfork handler replaces each such
 * mapping with a private anonymous copy of its contents, one mremap per
 * mapping as the move does.  The span is not MADV_DONTFORK: that hid the
 * heap objects sharing its edge pages from the child (SIGSEGV there).
 * The copy is made when the child's handler runs, not at the fork
 * itself: what the parent's threads or peers' Writes stored in the span
 * in between (the microseconds to milliseconds of fork and copy) may be
 * in the child's copy, torn or whole; nothing after the copy is.
 */
#include "core/mr_share_maps.h"
#include "diag/raw_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* Is line l a shared mapping of the memfd we look for?  Fills *m. */
static bool span_line(const char *l, uint64_t ino, struct srn_span_map *m)
{
	static const char want[] = "/memfd:" SRN_MR_SHARE_NAME;
	/* Most lines are something else: a search is cheaper than a parse
	 * (a few hundred lines per dereg). */
	if (!strstr(l, want))
		return false;
	unsigned long s, e, off, i;
	char perms[5];
	int n = 0;
	if (sscanf(l, "%lx-%lx %4s %lx %*s %lu %n", &s, &e, perms, &off, &i, &n) < 5 || e <= s ||
	    perms[3] != 's')
		return false;
	const char *name = n ? l + n : "";
	if (strncmp(name, want, sizeof(want) - 1) || (ino && i != ino))
		return false;
	m->start = s;
	m->end = e;
	m->off = off;
	m->prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
		  (perms[2] == 'x' ? PROT_EXEC : 0);
	return true;
}

int srn_span_maps_find(uint64_t ino, struct srn_span_map *out, int max)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char buf[4096];
	size_t have = 0;
	bool skip = false;      /* the rest of a line longer than buf */
	int n = 0;
	ssize_t got;
	while (n < max && (got = read(fd, buf + have, sizeof(buf) - 1 - have)) > 0) {
		have += (size_t)got;
		buf[have] = 0;
		char *line = buf, *nl;
		while ((nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
			*nl = 0;
			if (!skip && n < max && span_line(line, ino, &out[n]))
				n++;
			skip = false;
			line = nl + 1;
		}
		size_t rest = have - (size_t)(line - buf);
		if (rest == sizeof(buf) - 1) {
			/* A long name: the head holds all we read. */
			if (!skip && n < max && span_line(line, ino, &out[n]))
				n++;
			skip = true;
			rest = 0;
		}
		memmove(buf, line, rest);
		have = rest;
	}
	close(fd);
	return n;
}

/* In the child: put a private copy of the mapping's bytes over it.  Raw
 * system calls: the library's own are hooks that take the list lock. */
static void child_copy(const struct srn_span_map *m)
{
	size_t len = m->end - m->start;
	void *tmp = srn_raw_mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				 -1, 0);
	if (tmp == MAP_FAILED)
		return;
	if (!(m->prot & PROT_READ))
		syscall(SYS_mprotect, m->start, len, PROT_READ);
	/* The kernel's copy reads whole pages, as the move does (memcpy
	 * would stop at AddressSanitizer's redzones in them). */
	struct iovec to = { tmp, len }, from = { (void *)m->start, len };
	void *at = MAP_FAILED;
	if (process_vm_readv(getpid(), &to, 1, &from, 1, 0) == (ssize_t)len)
		at = (void *)syscall(SYS_mremap, tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
				     (void *)m->start);
	if (at == MAP_FAILED) {
		srn_raw_munmap(tmp, len);
		return;
	}
	if (m->prot != (PROT_READ | PROT_WRITE))
		syscall(SYS_mprotect, m->start, len, m->prot);
}

/* The child is one thread now, and the list lock was held across the
 * fork (core/mr_map.c), so nothing moves meanwhile.  Every mapping of a
 * span memfd is found by name: spans no region holds any more (a rereg
 * that stopped sharing leaves the pages on the memfd) are copied too.
 * A copy that failed would be found again: a bounded number of passes. */
static void fork_child(void)
{
	struct srn_span_map m[32];
	for (int pass = 0; pass < 64; pass++) {
		int n = srn_span_maps_find(0, m, 32);
		for (int i = 0; i < n; i++)
			child_copy(&m[i]);
		if (n < 32)
			break;
	}
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_register(void)
{
	pthread_atfork(NULL, NULL, fork_child);
}

void srn_span_maps_fork_once(void)
{
	pthread_once(&fork_once, fork_register);
}
