/*
 * verbs_unmap.c - the libc calls that take memory away, seen first by us.
 *
 * A NIC pins the pages of a region; when the program unmaps them they stay
 * with the NIC, and a new mapping at the same address is other memory.
 * We reach a region by its virtual address, so a region unmapped under a
 * live registration would reach whatever the program maps there next.  We
 * are loaded as libibverbs.so.1, ahead of libc in the lookup order of
 * every program that uses verbs, so we define munmap, mremap, mmap,
 * mprotect and shmdt: each one first revokes the regions it would take
 * pages or rights from (core/mr_map.h), then makes the system call.  The
 * map exports them under libc's own version node, which is what a
 * program's reference (munmap@GLIBC_2.2.5) asks for.
 *
 * Not seen: libc's internal calls (free() of a large block, which unmaps
 * with libc's hidden __munmap; malloc_trim's brk), raw syscall(), and
 * other processes' calls.  What a peer reaches after those is listed in
 * docs/DESIGN.md, "Registered memory: the rule"; a span on a memfd may
 * grow through them without a fault (core/mr_share.c, file_size).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/mr_map.h"
#include "verbs/visibility.h"

/* Pages a call affects: [addr, addr+len) rounded out to whole pages. */
static void unmapping(const void *addr, size_t len, int prot)
{
	if (!srn_mr_tracked)
		return;
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t s = (uintptr_t)addr & ~(pg - 1);
	uintptr_t e = (uintptr_t)addr + len;
	if (e < s)
		e = UINTPTR_MAX;
	srn_mr_unmapping(s, e - s, prot);
}

SRN_EXPORT int munmap(void *addr, size_t len)
{
	unmapping(addr, len, -1);
	return (int)syscall(SYS_munmap, addr, len);
}

static void *do_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	/* MAP_FIXED replaces whatever was there; MAP_FIXED_NOREPLACE fails
	 * instead, and without either the kernel picks free space. */
	if ((flags & MAP_FIXED) && !(flags & MAP_FIXED_NOREPLACE))
		unmapping(addr, len, -1);
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

SRN_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return do_mmap(addr, len, prot, flags, fd, off);
}

SRN_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return do_mmap(addr, len, prot, flags, fd, off);
}

SRN_EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	void *new_addr = NULL;
	if (flags & (MREMAP_FIXED | MREMAP_DONTUNMAP)) {
		va_list ap;
		va_start(ap, flags);
		new_addr = va_arg(ap, void *);
		va_end(ap);
	}
	/* Growing in place keeps every page where it is; moving (MAYMOVE may
	 * move), shrinking or DONTUNMAP take pages from the old range. */
	if (flags || new_len < old_len)
		unmapping(old, old_len, -1);
	if (flags & MREMAP_FIXED)
		unmapping(new_addr, new_len, -1);
	return (void *)syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
}

SRN_EXPORT int mprotect(void *addr, size_t len, int prot)
{
	unmapping(addr, len, prot);
	return (int)syscall(SYS_mprotect, addr, len, prot);
}

/* shmdt names only the start: the segment is the run of mappings from
 * addr that share its device and inode in /proc/self/maps. */
static size_t shm_extent(const void *addr)
{
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return SIZE_MAX;        /* unknown: revoke all above addr */
	char line[576];
	uintptr_t at = (uintptr_t)addr, end = at;
	char id[64] = "";
	while (fgets(line, sizeof(line), f)) {
		unsigned long s, e, ino;
		char dev[16];
		if (sscanf(line, "%lx-%lx %*s %*s %15s %lu", &s, &e, dev, &ino) != 4)
			continue;
		char this_id[64];
		snprintf(this_id, sizeof(this_id), "%s %lu", dev, ino);
		if (s == at || (end != at && s == end && !strcmp(id, this_id))) {
			if (s == at)
				snprintf(id, sizeof(id), "%s", this_id);
			end = e;
		} else if (end != at) {
			break;
		}
	}
	fclose(f);
	return end - at;
}

SRN_EXPORT int shmdt(const void *addr)
{
	if (srn_mr_tracked)
		unmapping(addr, shm_extent(addr), -1);
	return (int)syscall(SYS_shmdt, addr);
}
