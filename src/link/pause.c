/*
 * pause.c - the sender's side of the emulated PFC pause (see pause.h):
 * map the switch's pause record once, and answer the egress "may I send
 * now?" with one load when no pause file is configured and a few loads of
 * a shared page when one is.
 */
#include "link/pause.h"
#include "diag/raw_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diag/clock.h"

/* A writer holds the sequence odd for a few stores; a reader that finds
 * it odd this many times in a row keeps its previous view. */
#define READ_TRIES 64

bool srn_pause_read(const struct srn_pause_rec *rec, struct srn_pause_snap *s)
{
	struct srn_pause_rec *r = (struct srn_pause_rec *)rec;

	for (int i = 0; i < READ_TRIES; i++) {
		/* Pairs with the writer's release store of an even seq after
		 * its field stores (tools/switch_pause.c). */
		uint32_t a = atomic_load_explicit(&r->seq, memory_order_acquire);
		if (a & 1)
			continue;
		s->gen = atomic_load_explicit(&r->gen, memory_order_acquire);
		s->until_ns = atomic_load_explicit(&r->until_ns, memory_order_acquire);
		s->start_ns = atomic_load_explicit(&r->start_ns, memory_order_acquire);
		s->done_ns = atomic_load_explicit(&r->done_ns, memory_order_acquire);
		s->set_ns = atomic_load_explicit(&r->set_ns, memory_order_acquire);
		/* The field loads are acquire loads, so the second look at seq
		 * cannot move before them (no fence: GCC refuses fences under
		 * ThreadSanitizer). */
		if (atomic_load_explicit(&r->seq, memory_order_relaxed) == a)
			return true;
	}
	return false;
}

/* The end of the pause as we honour it: the writer's lease, cut to
 * SRN_PAUSE_MAX_LEASE_NS after its last refresh. */
static uint64_t lease_end(const struct srn_pause_snap *s)
{
	uint64_t cap = s->set_ns + SRN_PAUSE_MAX_LEASE_NS;

	if (!s->until_ns)
		return 0;
	return s->until_ns < cap ? s->until_ns : cap;
}

bool srn_pause_active(const struct srn_pause_snap *s, uint64_t now_ns)
{
	return now_ns < lease_end(s);
}

uint64_t srn_pause_total_ns(const struct srn_pause_snap *s, uint64_t now_ns)
{
	uint64_t end = lease_end(s), run = 0;

	if (end) {
		if (now_ns < end)
			end = now_ns;
		run = end > s->start_ns ? end - s->start_ns : 0;
	}
	return s->done_ns + run;
}

const struct srn_pause_rec *srn_pause_map(const char *path, char *err, size_t errlen)
{
	struct stat st;
	void *m;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	/* Who may pause us: the file's owner is us or root (the switch the
	 * user started), and nobody else could have written it. */
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    (st.st_uid != geteuid() && st.st_uid != 0) || (st.st_mode & 022) ||
	    st.st_size < (off_t)sizeof(struct srn_pause_rec)) {
		snprintf(err, errlen, "%s: not a pause file of ours (a regular file, owned by "
			 "us or root, writable by its owner only)", path);
		close(fd);
		return NULL;
	}
	m = srn_raw_mmap(NULL, sizeof(struct srn_pause_rec), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		snprintf(err, errlen, "%s: mmap: %s", path, strerror(errno));
		return NULL;
	}
	const struct srn_pause_rec *r = m;
	if (r->magic != SRN_PAUSE_MAGIC || r->version != SRN_PAUSE_VERSION) {
		snprintf(err, errlen, "%s: not a softrnic pause record (magic/version)", path);
		srn_raw_munmap(m, sizeof(struct srn_pause_rec));
		return NULL;
	}
	return r;
}

/* The process-wide record: every device of the process sits behind the
 * one host link the switch port stands for. */
static const struct srn_pause_rec *g_rec;
static _Atomic bool g_on;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void open_once(void)
{
	const char *path = getenv(SRN_PAUSE_ENV);
	char err[256];

	if (!path || !*path)
		return;
	g_rec = srn_pause_map(path, err, sizeof(err));
	if (!g_rec) {
		fprintf(stderr, "softrnic: %s refused, pauses are not honoured: %s\n",
			SRN_PAUSE_ENV, err);
		return;
	}
	atomic_store_explicit(&g_on, true, memory_order_release);
}

bool srn_pause_hold(struct srn_pause_view *v, struct srn_counters *cnt)
{
	struct srn_pause_snap s;

	if (!v->started) {
		pthread_once(&g_once, open_once);
		v->started = true;
		if (!atomic_load_explicit(&g_on, memory_order_acquire))
			return false;
		if (!srn_pause_read(g_rec, &s))
			return false;
		/* Pauses that ended before this device first sent are not
		 * its own; one in progress is, whole. */
		v->gen_seen = s.gen - (s.gen && srn_pause_active(&s, srn_now_ns()));
		v->us_seen = s.done_ns / 1000;
	}
	/* Acquire pairs with open_once's release: g_rec is set. */
	if (!atomic_load_explicit(&g_on, memory_order_acquire))
		return false;
	if (!srn_pause_read(g_rec, &s))
		return false;
	uint64_t now = s.until_ns || s.done_ns / 1000 != v->us_seen ? srn_now_ns() : 0;
	if (s.gen > v->gen_seen) {
		srn_count(cnt, SRN_CNT_RX_PAUSE, s.gen - v->gen_seen);
		v->gen_seen = s.gen;
	}
	uint64_t us = now ? srn_pause_total_ns(&s, now) / 1000 : v->us_seen;
	if (us > v->us_seen) {
		srn_count(cnt, SRN_CNT_RX_PAUSE_DURATION, us - v->us_seen);
		v->us_seen = us;
	}
	return now && srn_pause_active(&s, now);
}
