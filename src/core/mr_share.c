/*
 * mr_share.c - moving a region's pages onto a memfd the library keeps
 * mapped, for the pin and for same-host direct placement (mr_share.h).
 *
 * The spans live on one process-wide list under the mr_map list lock
 * (core/mr_map.h), the lock the unmap hooks take, so a hook that unmaps a
 * span waits for a move in progress and then marks it dead.  The move
 * itself uses raw system calls: the library's own mmap/mremap/munmap are
 * the hooks, which would take the list lock we hold.
 */
#include "core/mr_share.h"
#include "diag/raw_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/mr.h"
#include "core/mr_map.h"
#include "core/mr_share_maps.h"
#include "core/nic.h"
#include "link/shm_file.h"

#define ATOMIC_MAX_DEFAULT (4u << 20)
#define PIN_MIN (64u << 10)            /* SRN_MR_PIN_MIN in mr_share.h */
#define SMALL_SPAN PIN_MIN
/* Spans under SMALL_SPAN moved for Writes and Reads at once: each holds
 * a descriptor and a mapping per peer, so a program registering many
 * small buffers keeps the rest on the system-call copy, never runs out
 * of descriptors (1024 by default). */
#define SMALL_SPANS_MAX 128
#define MAP_MAX_DEFAULT (16u << 20)
#define GROW_ROOM (1ull << 40)

static struct srn_mr_share *spans;     /* under the list lock */
static unsigned small_spans;           /* of them under SMALL_SPAN, for Writes and Reads */

/* A size from the environment: `off` (named =0) gives 0, unset gives def. */
static size_t env_size(const char *off, const char *name, size_t def)
{
	const char *on = getenv(off);
	if (on && !strcmp(on, "0"))
		return 0;
	const char *max = getenv(name);
	if (max && *max) {
		char *end;
		unsigned long long v = strtoull(max, &end, 0);
		if (!*end)
			return v > SIZE_MAX / 2 ? SIZE_MAX / 2 : (size_t)v;
	}
	return def;
}

/* May same-host peers map a span of len bytes of a region with these
 * rights?  Atomics need it (up to SOFTRNIC_DIRECT_ATOMIC_MAX).  Writes
 * and Reads gain speed: a large copy through the mapping runs at about
 * twice the speed of process_vm_writev (1 MiB), and a small one is a
 * store instead of a system call (an 8-byte Write 0.75 us -> tens of
 * ns).  So spans up to SOFTRNIC_DIRECT_MAP_MAX move, the small ones
 * while fewer than SMALL_SPANS_MAX are (the caller checks under the list
 * lock).  Every moved span costs a forked child a copy of it. */
static bool peers_may_map(const struct srn_nic *nic, unsigned access, size_t len)
{
	if (!nic->link.direct_on)
		return false;
	/* A region with remote atomics follows the atomic switches alone. */
	if (access & IBV_ACCESS_REMOTE_ATOMIC)
		return len <= env_size("SOFTRNIC_DIRECT_ATOMIC", "SOFTRNIC_DIRECT_ATOMIC_MAX",
				       ATOMIC_MAX_DEFAULT);
	return (access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)) &&
	       len <= env_size("SOFTRNIC_DIRECT_MAP", "SOFTRNIC_DIRECT_MAP_MAX", MAP_MAX_DEFAULT);
}

/* Does a span of len bytes move for the pin (mr_share.h)?  From 64 KiB,
 * what libc's allocator may unmap under a registration, up to
 * SOFTRNIC_MR_PIN_MAX (default 1 GiB: the move holds twice the span for
 * a moment; SOFTRNIC_MR_PIN=0: none). */
#define PIN_MAX_DEFAULT (1ull << 30)
static bool pinned(size_t len)
{
	return len >= PIN_MIN && len <= env_size("SOFTRNIC_MR_PIN", "SOFTRNIC_MR_PIN_MAX",
						 PIN_MAX_DEFAULT);
}

/* Does a span of len bytes for these rights count against
 * SMALL_SPANS_MAX? */
static bool counts_small(unsigned access, size_t len)
{
	return !(access & IBV_ACCESS_REMOTE_ATOMIC) && len < SMALL_SPAN;
}

/* Is the mapping of one /proc/self/maps line what maps_all wants: with
 * want_ino 0, private anonymous read-write memory (no file, no hugetlbfs,
 * not shared, not executable, not the stack); else a shared mapping of
 * our memfd with that inode (a span still where its move put it)? */
static bool mapping_ok(const char *perms, unsigned long ino, const char *name, uint64_t want_ino)
{
	if (want_ino)
		return ino == want_ino && perms[3] == 's' && !strncmp(name, "/memfd:", 7);
	return !strcmp(perms, "rw-p") && ino == 0 && strncmp(name, "[stack", 6) &&
	       strncmp(name, "[v", 2);
}

/* Is all of [s, e) mapped as mapping_ok wants?  Read from the text of
 * /proc/self/maps, before any lock is taken (stdio allocates). */
static bool maps_all(uintptr_t s, uintptr_t e, uint64_t want_ino)
{
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return false;
	char line[576];
	uintptr_t cur = s;
	while (cur < e && fgets(line, sizeof(line), f)) {
		unsigned long vs, ve, ino;
		char perms[5];
		int n = 0;
		if (sscanf(line, "%lx-%lx %4s %*s %*s %lu %n", &vs, &ve, perms, &ino, &n) < 4)
			continue;
		if (ve <= cur)
			continue;
		if (vs > cur)
			break;          /* a hole */
		if (!mapping_ok(perms, ino, n ? line + n : "", want_ino))
			break;
		cur = ve;
	}
	fclose(f);
	return cur >= e;
}

/* Write-protect [base, base+len) through userfaultfd for the length of
 * the move: a thread of the program that writes there meanwhile waits in
 * the kernel instead of writing to pages about to be replaced (its write
 * would be lost: measured, thousands of increments of a counter lost in
 * 200 moves without it, none with it).  Closing the descriptor wakes it,
 * and its write then lands in the new pages.  Without privilege (and
 * vm.unprivileged_userfaultfd=0) only user-mode writes wait; a system
 * call writing there in that instant fails with EFAULT instead.  Returns
 * the descriptor or -errno: then the pages do not move. */
static int protect_begin(uintptr_t base, size_t len, bool shmem)
{
	uint64_t features = UFFD_FEATURE_PAGEFAULT_FLAG_WP;
	if (shmem) {
#ifdef UFFD_FEATURE_WP_HUGETLBFS_SHMEM
		features |= UFFD_FEATURE_WP_HUGETLBFS_SHMEM;    /* Linux 5.19 */
#else
		return -EOPNOTSUPP;
#endif
	}
	int uf = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (uf < 0 && errno == EPERM)
		uf = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (uf < 0)
		return -errno;
	struct uffdio_api api = { .api = UFFD_API, .features = features };
	struct uffdio_register reg = { .range = { base, len }, .mode = UFFDIO_REGISTER_MODE_WP };
	struct uffdio_writeprotect wp = { .range = { base, len }, .mode = UFFDIO_WRITEPROTECT_MODE_WP };
	if (ioctl(uf, UFFDIO_API, &api) || ioctl(uf, UFFDIO_REGISTER, &reg) ||
	    ioctl(uf, UFFDIO_WRITEPROTECT, &wp)) {
		int ret = -errno;
		close(uf);
		return ret;
	}
	return uf;
}

/* The move failed: the old pages stay, writable again. */
static void protect_undo(int uf, uintptr_t base, size_t len)
{
	struct uffdio_writeprotect wp = { .range = { base, len }, .mode = 0 };
	ioctl(uf, UFFDIO_WRITEPROTECT, &wp);
	close(uf);
}

/* The memfd's size for a span of len bytes.  The program may grow the
 * span's mapping in place or move it larger (realloc does, through
 * libc's own mremap, which no hook sees), and a shared mapping grown
 * past its file's end raises SIGBUS at the first store there.  So the
 * file is 1 TiB long, sparse: only the span's own len bytes are
 * allocated, a grown tail takes pages as it is touched, as anonymous
 * memory would, and the file's size costs nothing (a memfd's size is
 * not charged to the commit limit).  Capped by RLIMIT_FSIZE: a truncate
 * past it raises SIGXFSZ; 0 when even the span would pass it (no move). */
static size_t file_size(size_t len)
{
	uint64_t want = GROW_ROOM;
	struct rlimit rl;
	if (!getrlimit(RLIMIT_FSIZE, &rl) && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want)
		want = (uint64_t)rl.rlim_cur & ~(uint64_t)(sysconf(_SC_PAGESIZE) - 1);
	if (want > SIZE_MAX / 2)
		want = SIZE_MAX / 2;
	return want >= len ? (size_t)want : 0;
}

/* Write [base, base+len) to offset 0 of fd.  The kernel's copy reads
 * whole pages, as a NIC's DMA would: bytes around the region that are
 * not the program's to read as objects (other allocations; under
 * AddressSanitizer its redzones, where memcpy would be stopped).  It
 * allocates the file's pages as it goes, without a page fault each (a
 * copy into a mapping of the memfd took 0.9 ms per MiB).  A raw system
 * call: AddressSanitizer's pwrite checks the buffer as objects.  0 or
 * -errno. */
static int copy_in(int fd, uintptr_t base, size_t len)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = syscall(SYS_pwrite64, fd, (const void *)(base + done), len - done,
				    (off_t)done);
		if (n <= 0)
			return n < 0 ? -errno : -EFAULT;
		done += (size_t)n;
	}
	return 0;
}

/* Copy [base, base+len) onto a new sealed memfd, map it over the same
 * addresses and once more for the library (*alias).  0 or -errno
 * (nothing changed).  Must hold the list lock. */
static int move_pages(uintptr_t base, size_t len, int *fdp, uint64_t *ino, uint8_t **alias)
{
	/* 0600, sealed against shrinking (a peer's mapping of the span can
	 * never fault past its end) and growing, longer than the span
	 * (file_size); the span's pages are allocated by the copy (no
	 * SIGBUS on a full memory later). */
	size_t size = file_size(len);
	if (!size)
		return -EFBIG;
	int fd = srn_shm_memfd_create_named(SRN_MR_SHARE_NAME, size, 0);
	if (fd < 0)
		return fd;
	struct stat st;
	if (fstat(fd, &st)) {
		int ret = -errno;
		close(fd);
		return ret;
	}
	void *tmp = srn_raw_mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	void *own = srn_raw_mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (tmp == MAP_FAILED || own == MAP_FAILED) {
		int ret = -errno;
		if (tmp != MAP_FAILED)
			srn_raw_munmap(tmp, len);
		if (own != MAP_FAILED)
			srn_raw_munmap(own, len);
		close(fd);
		return ret;
	}
	int uf = protect_begin(base, len, false);
	int ret = uf < 0 ? uf : copy_in(fd, base, len);
	if (ret) {
		if (uf >= 0)
			protect_undo(uf, base, len);
		srn_raw_munmap(tmp, len);
		srn_raw_munmap(own, len);
		close(fd);
		return ret;
	}
	/* One system call replaces the old pages: no moment without a
	 * mapping (a thread touching the span never faults). */
	void *at = (void *)syscall(SYS_mremap, tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
				   (void *)base);
	if (at == MAP_FAILED) {
		ret = -errno;
		protect_undo(uf, base, len);
		srn_raw_munmap(tmp, len);
		srn_raw_munmap(own, len);
		close(fd);
		return ret;
	}
	close(uf);      /* wakes any writer that waited: it writes the new pages */
	/* A forked child gets its private copy of the program's view
	 * (mr_share_maps.c); our own view stays with the parent's regions. */
	madvise(own, len, MADV_DONTFORK);
	*fdp = fd;
	*ino = (uint64_t)st.st_ino;
	*alias = own;
	return 0;
}

/* Read len bytes at offset off of fd into dst (a private mapping of
 * ours).  0 or -errno. */
static int copy_out(int fd, uint8_t *dst, size_t len, uint64_t off)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = syscall(SYS_pread64, fd, dst + done, len - done, (off_t)(off + done));
		if (n <= 0)
			return n < 0 ? -errno : -EFAULT;
		done += (size_t)n;
	}
	return 0;
}

/* The span's last region went (ibv_dereg_mr): put the pages of one of
 * its mappings (m, of fd) back on private anonymous memory, contents
 * copied, with one mremap, writes held off through userfaultfd as for
 * the move, its protection kept.  After dereg the memory is then what
 * the program allocated: a fork copies it with no work in the child,
 * MADV_DONTNEED empties it, and the memfd goes.  The copy reads the
 * file, not the mapping, into pages populated at once (through the
 * mapping, a fault per page on each side: 1.1 ms per MiB).  0 or
 * -errno: then it stays on the memfd (before Linux 5.19, which cannot
 * write-protect shared memory), still growable and copied into a forked
 * child.  Must hold the list lock. */
static int unshare_pages(int fd, const struct srn_span_map *m)
{
	uintptr_t base = m->start;
	size_t len = m->end - m->start;
	void *tmp = srn_raw_mmap(NULL, len, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (tmp == MAP_FAILED)
		return -errno;
	int uf = protect_begin(base, len, true);
	if (uf < 0) {
		srn_raw_munmap(tmp, len);
		return uf;
	}
	int ret = copy_out(fd, tmp, len, m->off);
	void *at = MAP_FAILED;
	if (!ret)
		at = (void *)syscall(SYS_mremap, tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
				     (void *)base);
	if (at == MAP_FAILED) {
		ret = ret ? ret : -errno;
		protect_undo(uf, base, len);
		srn_raw_munmap(tmp, len);
		return ret;
	}
	close(uf);
	if (m->prot != (PROT_READ | PROT_WRITE))
		syscall(SYS_mprotect, base, len, m->prot);
	return 0;
}

/* Put every mapping of the span's memfd back on private memory, wherever
 * the program has moved or grown it since (unshare_pages).  Must hold
 * the list lock. */
static void unshare_all(uint64_t ino, int fd)
{
	struct srn_span_map m[16];
	for (int pass = 0; pass < 16; pass++) {
		int n = srn_span_maps_find(ino, m, 16);
		for (int i = 0; i < n; i++)
			unshare_pages(fd, &m[i]);
		if (n < 16)
			break;
	}
}

/* Does [s, e) touch the calling thread's own stack?  Its pages must not
 * move: between write-protecting the span and the mremap this thread
 * makes calls, whose stores to its stack would wait for the move they
 * are part of (a 64-byte buffer on a thread's stack hung ibv_reg_mr).
 * The main thread's stack is already refused by name ([stack], in
 * mapping_ok); other threads' stacks are plain anonymous memory, and a
 * thread other than this one storing there just waits for the move.
 * Unsure (no attributes): treated as on it. */
static bool on_own_stack(uintptr_t s, uintptr_t e)
{
	pthread_attr_t a;
	void *lo;
	size_t sz;
	if (pthread_getattr_np(pthread_self(), &a))
		return true;
	int ret = pthread_attr_getstack(&a, &lo, &sz);
	pthread_attr_destroy(&a);
	return ret || (s < (uintptr_t)lo + sz && e > (uintptr_t)lo);
}

/* The live span holding all of [s, e), or NULL; *overlap: some span
 * overlaps it.  Must hold the list lock. */
static struct srn_mr_share *find_span(uintptr_t s, uintptr_t e, bool *overlap)
{
	*overlap = false;
	for (struct srn_mr_share *sp = spans; sp; sp = sp->next) {
		if (sp->base >= e || sp->base + sp->len <= s)
			continue;
		if (!sp->dead && sp->base <= s && sp->base + sp->len >= e)
			return sp;
		*overlap = true;
	}
	return NULL;
}

void srn_mr_share_attach(struct srn_mr *mr)
{
	struct srn_nic *nic = mr->pd->nic;
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t s = (uintptr_t)mr->base & ~(pg - 1);
	uintptr_t e = ((uintptr_t)mr->base + mr->length + pg - 1) & ~(pg - 1);
	if (e <= s)
		return;
	/* A region inside a span already moved shares it, whatever its size,
	 * if the span is still mapped there.  libc unmaps memory without our
	 * hooks (free of a large block), so a span may be gone with a region
	 * still on it, and new memory mapped at its addresses: sharing the
	 * old memfd would send peers' Writes to the old pages. */
	bool overlap;
	bool small = counts_small(mr->access, e - s);
	srn_mr_map_lock();
	struct srn_mr_share *sp = find_span(s, e, &overlap);
	uint64_t ino = sp ? sp->ino : 0;
	/* No room for another small span: skip the /proc/self/maps read
	 * below (checked again under the lock before a move). */
	bool room = !small || small_spans < SMALL_SPANS_MAX;
	srn_mr_map_unlock();
	bool mapped = sp && maps_all(s, e, ino);
	srn_mr_map_lock();
	struct srn_mr_share *now = find_span(s, e, &overlap);
	if (now && (now != sp || now->ino != ino || !mapped)) {
		if (now == sp && now->ino == ino)
			now->dead = true;     /* its pages went: never share it again */
		now = NULL;
		overlap = true;
	}
	if (now && !mr->map_collected) {
		now->refs++;
		mr->share = now;
		mr->at = now->alias + ((uintptr_t)mr->base - now->base);
	}
	srn_mr_map_unlock();
	bool peers = peers_may_map(nic, mr->access, e - s);
	if (now || overlap || !room || !(peers || pinned(e - s)) || on_own_stack(s, e) ||
	    !maps_all(s, e, 0))
		return;
	struct srn_mr_share *n = calloc(1, sizeof(*n));
	if (!n)
		return;
	srn_span_maps_fork_once();
	/* This device's threads (progress, responder) write nothing while
	 * the pages move: they write only under its lock. */
	srn_nic_lock(nic);
	srn_mr_map_lock();
	int ret = -EBUSY;
	if (!mr->map_collected && !find_span(s, e, &overlap) && !overlap &&
	    !srn_mr_map_overlap_locked(mr, s, e - s) && (!small || small_spans < SMALL_SPANS_MAX))
		ret = move_pages(s, e - s, &n->fd, &n->ino, &n->alias);
	if (!ret) {
		n->small = small;
		small_spans += small;
		n->base = s;
		n->len = e - s;
		n->peers_map = peers;
		n->pid = getpid();
		n->refs = 1;
		n->next = spans;
		spans = n;
		mr->share = n;
		mr->at = n->alias + ((uintptr_t)mr->base - s);
	}
	srn_mr_map_unlock();
	/* raw nic unlock: nothing was queued, a page move under it only */
	srn_nic_unlock_raw(nic);
	if (ret)
		free(n);
}

/* Drop mr's hold on its span; with `restore`, the last region to go
 * puts the pages back on private memory (unshare_all), wherever the
 * program has moved or grown them since; without (a rereg: peers may
 * still place until the table changes) they stay on the memfd, which
 * the mapping keeps alive, and a forked child still copies them
 * (core/mr_share_maps.c). */
static void drop(struct srn_mr *mr, bool restore)
{
	struct srn_mr_share *sp = mr->share;
	if (!sp)
		return;
	srn_mr_map_lock();
	mr->share = NULL;
	mr->at = mr->base;
	bool last = --sp->refs == 0;
	if (last) {
		small_spans -= sp->small;
		for (struct srn_mr_share **pp = &spans; *pp; pp = &(*pp)->next)
			if (*pp == sp) {
				*pp = sp->next;
				break;
			}
		/* Our own view goes first: unshare_all finds every mapping of
		 * the memfd left, which are then the program's.  A forked
		 * child never had it (DONTFORK): its memory may be there. */
		if (sp->pid == getpid())
			srn_raw_munmap(sp->alias, sp->len);
		if (restore)
			unshare_all(sp->ino, sp->fd);
	}
	srn_mr_map_unlock();
	if (last) {
		close(sp->fd);
		free(sp);
	}
}

void srn_mr_share_detach(struct srn_mr *mr)
{
	drop(mr, false);
}

void srn_mr_share_release(struct srn_mr *mr)
{
	drop(mr, true);
}

void srn_mr_share_unmapping_locked(uintptr_t start, uintptr_t end)
{
	for (struct srn_mr_share *sp = spans; sp; sp = sp->next)
		if (sp->base < end && sp->base + sp->len > start)
			sp->dead = true;
}
