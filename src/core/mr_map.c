/*
 * mr_map.c - registered regions against the process's own mappings: the
 * mapping check of registration and the revocation the unmap hooks do.
 *
 * Lock order: the list lock is never held while a nic->lock is taken,
 * and nothing holding a nic->lock comes through the hooks (the library's
 * own mappings are made by system call, diag/raw_mem.h), so the two
 * locks never nest; regions leave the list lock with map_users raised,
 * which keeps untrack (and so dereg) from freeing them meanwhile.
 */
#include "core/direct_pub.h"
#include "core/mr_map.h"
#include "core/mr_share.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/mr.h"
#include "core/nic.h"
#include "diag/memcheck.h"

_Atomic unsigned srn_mr_tracked;

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct srn_mr *list_head;

/* A fork while another thread holds the list lock would leave it held in
 * the child, whose next munmap would then wait forever. */
static void atfork_prepare(void) { pthread_mutex_lock(&list_lock); }
static void atfork_release(void) { pthread_mutex_unlock(&list_lock); }
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void atfork_register(void)
{
	pthread_atfork(atfork_prepare, atfork_release, atfork_release);
}

bool srn_mr_access_writable(unsigned access)
{
	return access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND);
}

/* One line of /proc/self/maps: "start-end perms offset dev inode [name]". */
static bool parse_line(const char *l, uintptr_t *start, uintptr_t *end, char perms[5],
		       const char **name)
{
	unsigned long s, e;
	int n = 0;
	if (sscanf(l, "%lx-%lx %4s %*s %*s %*s %n", &s, &e, perms, &n) < 3 || e < s)
		return false;
	*start = s;
	*end = e;
	*name = n ? l + n : "";
	return true;
}

/* PROCMAP_QUERY (Linux 6.11, <linux/fs.h>; Debian 12's headers predate
 * it): one ioctl per mapping instead of reading the whole maps text,
 * which took 40 us per registration in a small process. */
struct srn_procmap_query {
	uint64_t size, query_flags, query_addr;
	uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
	uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
	uint64_t vma_name_addr, build_id_addr;
};
#define SRN_PROCMAP_QUERY _IOWR('f', 17, struct srn_procmap_query)
#define SRN_PROCMAP_READABLE 0x01
#define SRN_PROCMAP_WRITABLE 0x02

/* 0 / -EFAULT, or 1 when the kernel does not know the ioctl. */
static int check_query(uintptr_t cur, uintptr_t end, bool write)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1;
	int ret = -EFAULT;
	char name[256];
	while (cur < end) {
		struct srn_procmap_query q = {
			.size = sizeof(q), .query_addr = cur,
			.vma_name_size = sizeof(name), .vma_name_addr = (uintptr_t)name,
		};
		if (ioctl(fd, SRN_PROCMAP_QUERY, &q) < 0) {
			/* ENOENT: no mapping covers cur (a hole); ENAMETOOLONG:
			 * a file mapping with a long path, asked again below
			 * without the name. */
			if (errno == ENAMETOOLONG) {
				q.vma_name_size = 0;
				q.vma_name_addr = 0;
				name[0] = 0;
				if (ioctl(fd, SRN_PROCMAP_QUERY, &q) == 0)
					goto got;
			}
			if (errno == ENOTTY || errno == EINVAL)
				ret = 1;
			break;
		}
		/* The kernel wrote the name through the pointer in q, which
		 * valgrind (not knowing this ioctl) cannot follow. */
		if (!q.vma_name_size)
			name[0] = 0;
		else
			SRN_MEM_DEFINED(name, q.vma_name_size < sizeof(name) ? q.vma_name_size
									      : sizeof(name));
got:
		if (q.vma_start > cur || q.vma_end <= cur)
			break;
		if (!(q.vma_flags & (write ? SRN_PROCMAP_WRITABLE : SRN_PROCMAP_READABLE)))
			break;
		/* I/O and PFN mappings: get_user_pages refuses them. */
		if (!strncmp(name, "[vvar", 5))
			break;
		cur = q.vma_end;
	}
	if (cur >= end)
		ret = 0;
	close(fd);
	return ret;
}

/* The text of /proc/self/maps, for kernels before PROCMAP_QUERY. */
static int check_text(uintptr_t cur, uintptr_t end, bool write)
{
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return -errno;
	char line[512 + 64];
	int ret = -EFAULT;
	/* Lines come in address order; walk them until [cur, end) is covered
	 * by adjacent mappings that all allow the access, or a gap or a
	 * mapping without the right shows up.  A line longer than the buffer
	 * (a long path) continues in the next read and fails to parse. */
	while (fgets(line, sizeof(line), f)) {
		uintptr_t s, e;
		char perms[5];
		const char *name;
		if (!parse_line(line, &s, &e, perms, &name) || e <= cur)
			continue;
		if (s > cur)
			break;          /* a hole: the kernel's pin fails here */
		if (perms[write ? 1 : 0] != (write ? 'w' : 'r'))
			break;
		/* I/O and PFN mappings: get_user_pages refuses them. */
		if (!strncmp(name, "[vvar", 5) || !strncmp(name, "[vsyscall]", 10))
			break;
		cur = e;
		if (cur >= end) {
			ret = 0;
			break;
		}
	}
	fclose(f);
	return ret;
}

int srn_mr_map_check(const void *addr, size_t len, bool write)
{
	uintptr_t cur = (uintptr_t)addr, end = cur + len;
	int ret = check_query(cur, end, write);
	return ret == 1 ? check_text(cur, end, write) : ret;
}

void srn_mr_track(struct srn_mr *mr)
{
	pthread_once(&atfork_once, atfork_register);
	pthread_mutex_lock(&list_lock);
	mr->map_prev = NULL;
	mr->map_next = list_head;
	if (list_head)
		list_head->map_prev = mr;
	list_head = mr;
	mr->map_base = (uintptr_t)mr->base;
	mr->map_len = mr->length;
	mr->map_writable = srn_mr_access_writable(mr->access);
	mr->map_tracked = true;
	srn_mr_tracked++;
	pthread_mutex_unlock(&list_lock);
}

void srn_mr_untrack(struct srn_mr *mr)
{
	pthread_mutex_lock(&list_lock);
	if (mr->map_tracked) {
		if (mr->map_prev)
			mr->map_prev->map_next = mr->map_next;
		else
			list_head = mr->map_next;
		if (mr->map_next)
			mr->map_next->map_prev = mr->map_prev;
		mr->map_tracked = false;
		srn_mr_tracked--;
	}
	/* A hook revoking it right now holds no list lock while it waits for
	 * the region's nic->lock; it is quick, so wait it out. */
	while (mr->map_users) {
		pthread_mutex_unlock(&list_lock);
		sched_yield();
		pthread_mutex_lock(&list_lock);
	}
	pthread_mutex_unlock(&list_lock);
}

void srn_mr_map_set(struct srn_mr *mr, uintptr_t base, uint64_t len, bool writable)
{
	pthread_mutex_lock(&list_lock);
	mr->map_base = base;
	mr->map_len = len;
	mr->map_writable = writable;
	pthread_mutex_unlock(&list_lock);
}

bool srn_mr_map_collected(struct srn_mr *mr)
{
	pthread_mutex_lock(&list_lock);
	bool c = mr->map_collected;
	pthread_mutex_unlock(&list_lock);
	return c;
}

void srn_mr_map_lock(void)
{
	pthread_once(&atfork_once, atfork_register);
	pthread_mutex_lock(&list_lock);
}

void srn_mr_map_unlock(void)
{
	pthread_mutex_unlock(&list_lock);
}

bool srn_mr_map_overlap_locked(const struct srn_mr *self, uintptr_t start, uint64_t len)
{
	for (const struct srn_mr *mr = list_head; mr; mr = mr->map_next)
		if (mr != self && mr->map_base < start + len && mr->map_base + mr->map_len > start)
			return true;
	return false;
}

/* Would a region lose a right it needs if its pages became prot? */
static bool loses_right(const struct srn_mr *mr, int prot)
{
	if (prot < 0)
		return true;
	return mr->map_writable ? !(prot & PROT_WRITE) : !(prot & PROT_READ);
}

void srn_mr_unmapping(uintptr_t start, size_t len, int prot)
{
	if (!srn_mr_tracked || !len)
		return;
	uintptr_t end = start + len < start ? UINTPTR_MAX : start + len;
	enum { BATCH = 32 };
	if (prot < 0) {
		/* Pages moved onto a memfd (core/mr_share.h) that go now are
		 * never shared again, whatever is mapped there next. */
		pthread_mutex_lock(&list_lock);
		srn_mr_share_unmapping_locked(start, end);
		pthread_mutex_unlock(&list_lock);
	}
	for (;;) {
		struct srn_mr *batch[BATCH];
		unsigned n = 0;
		pthread_mutex_lock(&list_lock);
		for (struct srn_mr *mr = list_head; mr && n < BATCH; mr = mr->map_next) {
			uintptr_t b = mr->map_base;
			if (mr->map_collected || b >= end || b + mr->map_len <= start ||
			    !loses_right(mr, prot))
				continue;
			mr->map_collected = true;
			mr->map_users++;
			batch[n++] = mr;
		}
		pthread_mutex_unlock(&list_lock);
		if (!n)
			return;
		/* Under the region's nic->lock, so an access that already
		 * resolved the key finishes before the pages go. */
		for (unsigned i = 0; i < n; i++) {
			struct srn_nic *nic = batch[i]->pd->nic;
			srn_nic_lock(nic);
			batch[i]->revoked = true;
			/* Fenced: no same-host peer still places into it. */
			srn_direct_pub_mr(nic, batch[i]);
			/* Nothing was queued, and no packet should leave from
			 * inside the program's munmap. */
			/* raw nic unlock: a flag flip inside munmap */
			srn_nic_unlock_raw(nic);
		}
		pthread_mutex_lock(&list_lock);
		for (unsigned i = 0; i < n; i++)
			batch[i]->map_users--;
		pthread_mutex_unlock(&list_lock);
	}
}
