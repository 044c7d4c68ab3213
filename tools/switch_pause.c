/*
 * switch_pause.c - the emulated switch writes its pause records
 * (switch_pause.h; the format and the readers' rules: src/link/pause.h).
 */
#include "switch_pause.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int srn_swp_open(struct srn_swp *p, const char *dir, const char *port)
{
	struct stat st;
	void *m;
	int fd;

	memset(p, 0, sizeof(*p));
	if ((size_t)snprintf(p->path, sizeof(p->path), "%s/%s.pause", dir, port) >= sizeof(p->path))
		return -ENAMETOOLONG;
	/* A record left by an earlier switch of ours goes; anything else
	 * under that name is not ours to replace. */
	if (lstat(p->path, &st) == 0) {
		if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
			return -EEXIST;
		unlink(p->path);
	}
	fd = open(p->path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, sizeof(struct srn_pause_rec))) {
		int err = -errno;
		close(fd);
		unlink(p->path);
		return err;
	}
	m = mmap(NULL, sizeof(struct srn_pause_rec), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		unlink(p->path);
		return -errno;
	}
	p->rec = m;
	p->rec->version = SRN_PAUSE_VERSION;
	/* The magic last: a reader that checks it sees a whole header. */
	__atomic_store_n(&p->rec->magic, SRN_PAUSE_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

/* Seqlock write: odd while the fields change.  The field stores are
 * release stores, so none moves before the odd store (no fence: GCC
 * refuses fences under ThreadSanitizer); the final release store pairs
 * with the readers' acquire load of seq (srn_pause_read). */
static void write_begin(struct srn_pause_rec *r)
{
	atomic_store_explicit(&r->seq, atomic_load_explicit(&r->seq, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

static void write_end(struct srn_pause_rec *r)
{
	atomic_store_explicit(&r->seq, atomic_load_explicit(&r->seq, memory_order_relaxed) + 1,
			      memory_order_release);
}

void srn_swp_pause(struct srn_swp *p, uint64_t now_ns, uint64_t lease_ns)
{
	struct srn_pause_rec *r = p->rec;

	if (!r)
		return;
	write_begin(r);
	if (!p->paused) {
		atomic_store_explicit(&r->gen, atomic_load_explicit(&r->gen, memory_order_relaxed) + 1,
				      memory_order_release);
		atomic_store_explicit(&r->start_ns, now_ns, memory_order_release);
	}
	atomic_store_explicit(&r->until_ns, now_ns + lease_ns, memory_order_release);
	atomic_store_explicit(&r->set_ns, now_ns, memory_order_release);
	write_end(r);
	p->paused = true;
}

void srn_swp_resume(struct srn_swp *p, uint64_t now_ns)
{
	struct srn_pause_rec *r = p->rec;
	uint64_t start, until;

	if (!r || !p->paused)
		return;
	start = atomic_load_explicit(&r->start_ns, memory_order_relaxed);
	until = atomic_load_explicit(&r->until_ns, memory_order_relaxed);
	/* A lease that ran out before the resume paused nobody after it. */
	if (until < now_ns)
		now_ns = until;
	write_begin(r);
	atomic_store_explicit(&r->done_ns, atomic_load_explicit(&r->done_ns, memory_order_relaxed) +
				   (now_ns > start ? now_ns - start : 0), memory_order_release);
	atomic_store_explicit(&r->until_ns, 0, memory_order_release);
	atomic_store_explicit(&r->set_ns, now_ns, memory_order_release);
	write_end(r);
	p->paused = false;
}

void srn_swp_close(struct srn_swp *p)
{
	if (!p->rec)
		return;
	munmap(p->rec, sizeof(*p->rec));
	p->rec = NULL;
	unlink(p->path);
}
