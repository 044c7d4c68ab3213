/*
 * shm.c - creating, filling and closing the diagnostic segment, and its
 * object slot table (layout and memory ordering: seg_layout.h).
 *
 * Invariants:
 * - The segment is written only by this process, under the nic->lock of
 *   its device (srn_diag_create/close excepted: nothing else can reach
 *   the segment then).
 * - The file is created O_EXCL and 0600 in a checked directory, so two
 *   processes never share one and no other user reads it; a stale segment
 *   of ours at the name is replaced, anything else left alone (seg_file.h).
 * - Pages of a sparse tmpfs file are allocated when first touched, and a
 *   full tmpfs answers a touch with SIGBUS.  So the pages every segment
 *   uses are fallocate()d at creation, and a slot's pages when the slot is
 *   taken; if that fails the object goes to a private sink slot instead.
 *   The application never dies for its diagnostics.
 * - Only the creating process marks the segment closed/exited or removes
 *   the file: a child forked after the device was opened shares the
 *   mapping, and its exit must not make the parent look finished.
 * - The private handle array mirrors the slots: objs[i].kind != FREE iff
 *   slot i is live.  The free list is a stack, lowest index on top, so a
 *   process touches only as many slot pages as it has objects.
 */
#include "diag/shm.h"
#include "diag/raw_mem.h"
#include "diag/clock.h"
#include "diag/seg_file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *const srn_diag_qp_counter_names[SRN_QPC__MAX] = {
	[SRN_QPC_SENT_PKTS] = "sent_pkts",
	[SRN_QPC_RCVD_PKTS] = "rcvd_pkts",
	[SRN_QPC_SENT_BYTES] = "sent_bytes",
	[SRN_QPC_RCVD_BYTES] = "rcvd_bytes",
	[SRN_QPC_RETRANSMITS] = "retransmits",
	[SRN_QPC_LOCAL_ACK_TIMEOUT] = "local_ack_timeout_err",
	[SRN_QPC_RCVD_RNR_ERR] = "rcvd_rnr_err",
	[SRN_QPC_SEND_RNR_ERR] = "send_rnr_err",
	[SRN_QPC_RCVD_SEQ_ERR] = "packet_seq_err",
	[SRN_QPC_SEQ_NAK_SENT] = "seq_nak_sent",
	[SRN_QPC_DUPLICATE_REQUEST] = "duplicate_request",
	[SRN_QPC_OUT_OF_SEQUENCE] = "out_of_sequence",
	[SRN_QPC_REMOTE_NAKS] = "remote_naks_rcvd",
	[SRN_QPC_ERR_COMPLETIONS] = "error_completions",
	[SRN_QPC_ECN_MARKED] = "np_ecn_marked_roce_packets",
	[SRN_QPC_CNP_SENT] = "np_cnp_sent",
	[SRN_QPC_CNP_HANDLED] = "rp_cnp_handled",
};
_Static_assert(sizeof(srn_diag_qp_counter_names) / sizeof(srn_diag_qp_counter_names[0]) ==
		       SRN_QPC__MAX,
	       "every QP counter needs a name");

struct srn_diag {
	struct srn_diag_seg *seg;
	int fd;                        /* -1: private mapping */
	int dirfd;                     /* its directory (removal is relative to it) */
	int pid;                       /* creator: a forked child must not close or unlink it */
	char name[128];                /* file name in dirfd */
	char path[256];                /* directory and name, for messages */
	uint64_t secret;               /* scrambles handles */
	uint32_t nfree;
	uint32_t hwm;                  /* slots [hwm, SLOTS) were never used */
	uint32_t free_stack[SRN_DIAG_SLOTS];
	struct srn_diag_obj objs[SRN_DIAG_SLOTS];
	/* Where objects go when the table is full: one per kind, so a sink
	 * QP's log lines at least name a QP.  Private, never read. */
	struct srn_diag_obj sink[SRN_DIAG__KINDS];
	struct srn_diag_slot sink_slot[SRN_DIAG__KINDS];
	struct srn_diag_qp_log sink_log;
	struct srn_diag *next_open;    /* on open_list, for the exit hook */
	struct srn_diag_clock clock;   /* core/snap.c, engine/diag_tick.c */
};

/* Segments still open, marked "exited" by the destructor below when the
 * program ends without closing its devices. */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static struct srn_diag *open_list;

static bool env_true(const char *name, bool dflt)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return dflt;
	return strcmp(v, "0") != 0 && strcasecmp(v, "no") != 0 && strcasecmp(v, "off") != 0;
}

static void gid_to_addr(const uint8_t gid[16], char *out, size_t len)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	if (!memcmp(gid, v4mapped, sizeof(v4mapped))) {
		snprintf(out, len, "%u.%u.%u.%u", gid[12], gid[13], gid[14], gid[15]);
		return;
	}
	size_t off = 0;
	for (int i = 0; i < 16 && off < len; i += 2)
		off += (size_t)snprintf(out + off, len - off, "%s%x", i ? ":" : "",
					(unsigned)(gid[i] << 8 | gid[i + 1]));
}

/* Allocate the backing pages of [off, off+len) (see the file comment).
 * Filesystems without fallocate are accepted: they do not SIGBUS the way a
 * full tmpfs does. */
static int back_pages(struct srn_diag *d, size_t off, size_t len)
{
	if (d->fd < 0)
		return 0;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	size_t start = off & ~(pg - 1);
	size_t end = (off + len + pg - 1) & ~(pg - 1);
	if (end > sizeof(struct srn_diag_seg))
		end = sizeof(struct srn_diag_seg);
	int r = posix_fallocate(d->fd, (off_t)start, (off_t)(end - start));
	return r == 0 || r == EOPNOTSUPP || r == EINVAL ? 0 : -r;
}

/* The shared file: in the checked directory, created exclusively and
 * 0600 (seg_file.c), sized to the whole segment but sparse: only the pages
 * back_pages() allocates use memory.  Then our own dead segments beyond
 * the newest SRN_DIAG_KEEP_DEAD are swept.  *note gets a line for the
 * device log when the usual name was taken. */
static int open_file(struct srn_diag *d, const char *devname, int pid, uint64_t start_ticks,
		     char *note, size_t notelen, char *err, size_t errlen)
{
	int dirfd = srn_diag_dir_open(err, errlen);
	if (dirfd < 0)
		return dirfd;
	const char *dir = getenv(SRN_DIAG_DIR_ENV);
	if (!dir || !*dir)
		dir = SRN_DIAG_DEFAULT_DIR;
	char name[sizeof(d->name)];
	int fd = srn_diag_file_create(dirfd, devname, pid, start_ticks, sizeof(struct srn_diag_seg),
				      name, sizeof(name), note, notelen, err, errlen);
	if (fd < 0) {
		close(dirfd);
		return fd;
	}
	d->fd = fd;
	d->dirfd = dirfd;
	snprintf(d->name, sizeof(d->name), "%s", name);
	snprintf(d->path, sizeof(d->path), "%s/%s", dir, name);
	int ret = back_pages(d, 0, offsetof(struct srn_diag_seg, slots));
	if (!ret) {
		void *p = srn_raw_mmap(NULL, sizeof(struct srn_diag_seg), PROT_READ | PROT_WRITE, MAP_SHARED,
			       d->fd, 0);
		if (p == MAP_FAILED)
			ret = -errno;
		else
			d->seg = p;
	}
	if (ret) {
		snprintf(err, errlen, "%s: %s", d->path, strerror(-ret));
		srn_diag_unlink_if_same(dirfd, name, fd);
		close(d->fd);
		close(d->dirfd);
		d->fd = d->dirfd = -1;
		return ret;
	}
	srn_diag_sweep(dirfd, SRN_DIAG_KEEP_DEAD);
	return 0;
}

static void fill_header(struct srn_diag *d, const char *devname, const uint8_t gid[16], int pid,
			uint64_t start_ticks)
{
	struct srn_diag_hdr *h = &d->seg->hdr;
	srn_diag_hdr_layout(h);
	h->ncounters = SRN_CNT__MAX;
	h->nqp_counters = SRN_QPC__MAX;
	h->pid = pid;
	h->proc_start_ticks = start_ticks;
	h->start_realtime_ns = srn_clock_ns(CLOCK_REALTIME);
	h->start_mono_ns = srn_now_ns();
	/* The process's name (its main thread's), not the calling thread's. */
	char comm[17] = "";
	int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, comm, sizeof(comm) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n > 0) {
		comm[n] = '\0';
		comm[strcspn(comm, "\n")] = '\0';
	} else {
		prctl(PR_GET_NAME, comm, 0, 0, 0);
	}
	memcpy(h->comm, comm, sizeof(h->comm) - 1);
	snprintf(h->devname, sizeof(h->devname), "%s", devname);
	memcpy(h->gid, gid, 16);
	gid_to_addr(gid, h->addr, sizeof(h->addr));
	for (int i = 0; i < SRN_CNT__MAX; i++)
		snprintf(d->seg->counter_names[i], SRN_DIAG_NAME_LEN, "%s",
			 srn_counter_names[i] ? srn_counter_names[i] : "?");
	for (int i = 0; i < SRN_QPC__MAX; i++)
		snprintf(d->seg->qp_counter_names[i], SRN_DIAG_NAME_LEN, "%s",
			 srn_diag_qp_counter_names[i]);
	/* Last, with release: pairs with the reader's acquire load of magic,
	 * so a reader that sees it sees the header above. */
	atomic_store_explicit(&h->magic, SRN_DIAG_MAGIC, memory_order_release);
}

struct srn_diag *srn_diag_create(const char *devname, const uint8_t gid[16], char *err,
				 size_t errlen)
{
	struct srn_diag *d = calloc(1, sizeof(*d));
	if (!d) {
		snprintf(err, errlen, "diagnostics: out of memory");
		return NULL;
	}
	d->fd = d->dirfd = -1;
	int pid = (int)getpid();
	d->pid = pid;
	uint64_t start_ticks = srn_diag_proc_start_ticks(pid);
	if (getrandom(&d->secret, sizeof(d->secret), GRND_NONBLOCK) != sizeof(d->secret))
		d->secret = srn_now_ns() ^ ((uint64_t)pid << 32);
	d->secret |= 1;
	if (err && errlen)
		err[0] = '\0';

	bool want_file = env_true("SOFTRNIC_DIAG", true);
	char note[400] = "";
	if (!want_file || open_file(d, devname, pid, start_ticks, note, sizeof(note), err, errlen)) {
		/* Private and anonymous: same layout, nobody else sees it. */
		void *p = srn_raw_mmap(NULL, sizeof(struct srn_diag_seg), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			snprintf(err, errlen, "diagnostics: %s", strerror(errno));
			free(d);
			return NULL;
		}
		d->seg = p;
		d->path[0] = '\0';
	}
	fill_header(d, devname, gid, pid, start_ticks);

	for (uint32_t i = 0; i < SRN_DIAG_SLOTS; i++)
		d->free_stack[i] = SRN_DIAG_SLOTS - 1 - i;
	d->nfree = SRN_DIAG_SLOTS;
	for (int k = 0; k < SRN_DIAG__KINDS; k++) {
		d->sink[k] = (struct srn_diag_obj){ .s = &d->sink_slot[k], .log = &d->sink_log,
						    .d = d, .idx = SRN_DIAG_SLOTS, .kind = k };
		d->sink_slot[k].kind = (uint32_t)k;
	}

	pthread_mutex_lock(&open_lock);
	d->next_open = open_list;
	open_list = d;
	pthread_mutex_unlock(&open_lock);

	if (want_file && d->fd < 0)
		srn_diag_dev_log(d, SRN_LOG_WARN, "diagnostics private to this process: %s",
				 err ? err : "cannot create the segment file");
	if (note[0])
		srn_diag_dev_log(d, SRN_LOG_WARN, "%s", note);
	return d;
}

static bool keep_file(const struct srn_diag *d)
{
	return env_true("SOFTRNIC_DIAG_KEEP", false) ||
	       atomic_load_explicit(&d->seg->hdr.errors_logged, memory_order_relaxed) != 0;
}

void srn_diag_close(struct srn_diag *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&open_lock);
	for (struct srn_diag **p = &open_list; *p; p = &(*p)->next_open)
		if (*p == d) {
			*p = d->next_open;
			break;
		}
	pthread_mutex_unlock(&open_lock);

	/* A forked child closing its inherited copy leaves the parent's
	 * segment alone (the mapping is shared with the parent). */
	bool mine = d->pid == (int)getpid();
	if (mine)
		atomic_store_explicit(&d->seg->hdr.closed, 1, memory_order_release);
	if (d->fd >= 0) {
		if (mine && !keep_file(d))
			srn_diag_unlink_if_same(d->dirfd, d->name, d->fd);
		close(d->fd);
		close(d->dirfd);
	}
	srn_raw_munmap(d->seg, sizeof(struct srn_diag_seg));
	free(d);
}

/* The program is exiting with devices still open (most verbs programs
 * never close them): mark the segments "exited" so readers do not take
 * the exit for a crash, and remove files with nothing to explain.  The
 * mappings stay: other threads may still count into them. */
__attribute__((destructor)) static void diag_at_exit(void)
{
	pthread_mutex_lock(&open_lock);
	for (struct srn_diag *d = open_list; d; d = d->next_open) {
		if (d->pid != (int)getpid())
			continue;   /* a forked child exiting: the parent lives on */
		uint32_t zero = 0;
		atomic_compare_exchange_strong(&d->seg->hdr.closed, &zero, 2);
		if (d->fd >= 0 && !keep_file(d))
			srn_diag_unlink_if_same(d->dirfd, d->name, d->fd);
	}
	pthread_mutex_unlock(&open_lock);
}

struct srn_counters *srn_diag_counters(struct srn_diag *d)
{
	return (struct srn_counters *)d->seg->counters.v;
}

bool srn_diag_is_shared(const struct srn_diag *d)
{
	return d->fd >= 0;
}

const char *srn_diag_path(const struct srn_diag *d)
{
	return d->path;
}

uint64_t srn_diag_handle(const struct srn_diag *d, const void *owner)
{
	if (!owner)
		return 0;
	/* Odd multiplier: a bijection, so equal handles mean equal owners. */
	return ((uint64_t)(uintptr_t)owner ^ d->secret) * 0x9e3779b97f4a7c15ull;
}

/* Zero the kind-specific part of a slot with release stores (a reader
 * may be copying it; see seg_layout.h). */
static void clear_body(struct srn_diag_slot *s)
{
	uint64_t *w = (uint64_t *)&s->pd;
	size_t n = (sizeof(*s) - offsetof(struct srn_diag_slot, pd)) / 8;
	for (size_t i = 0; i < n; i++)
		__atomic_store_n(&w[i], 0, __ATOMIC_RELEASE);
}

_Static_assert(offsetof(struct srn_diag_slot, pd) % 8 == 0, "slot body in 8-byte words");

struct srn_diag_obj *srn_diag_obj_add(struct srn_diag *d, enum srn_diag_kind kind,
				      const void *owner)
{
	struct srn_diag_hdr *h = &d->seg->hdr;
	if (kind <= SRN_DIAG_FREE || kind >= SRN_DIAG__KINDS)
		kind = SRN_DIAG_PD;   /* caller bug; keep the table consistent */
	uint32_t idx = d->nfree ? d->free_stack[d->nfree - 1] : SRN_DIAG_SLOTS;
	if (idx < SRN_DIAG_SLOTS) {
		size_t off = offsetof(struct srn_diag_seg, slots) + idx * sizeof(struct srn_diag_slot);
		if (back_pages(d, off, sizeof(struct srn_diag_slot)))
			idx = SRN_DIAG_SLOTS;
		else if (kind == SRN_DIAG_QP &&
			 back_pages(d, offsetof(struct srn_diag_seg, logs) +
					       idx * sizeof(struct srn_diag_qp_log),
				    sizeof(struct srn_diag_qp_log)))
			idx = SRN_DIAG_SLOTS;
	}
	if (idx >= SRN_DIAG_SLOTS) {
		atomic_fetch_add_explicit(&h->table_full, 1, memory_order_relaxed);
		return &d->sink[kind];
	}
	d->nfree--;
	if (idx >= d->hwm) {
		d->hwm = idx + 1;
		/* Readers look at slots below it only; the slot's own seqlock
		 * orders its contents (this store may be seen before them). */
		atomic_store_explicit(&h->slots_hwm, d->hwm, memory_order_release);
	}

	struct srn_diag_obj *o = &d->objs[idx];
	*o = (struct srn_diag_obj){ .s = &d->seg->slots[idx], .log = &d->seg->logs[idx], .d = d,
				    .owner = owner, .idx = idx, .kind = kind };
	srn_diag_obj_begin(o);
	SRN_DIAG_SET(o->s->kind, (uint32_t)kind);
	SRN_DIAG_SET(o->s->last_kind, (uint32_t)kind);
	/* New generation: log entries of the previous occupant no longer
	 * belong to this slot. */
	SRN_DIAG_SET(o->s->gen, SRN_DIAG_GET(o->s->gen) + 1);
	SRN_DIAG_SET(o->s->handle, srn_diag_handle(d, owner));
	SRN_DIAG_SET(o->s->created_ns, srn_now_ns());
	clear_body(o->s);
	if (kind == SRN_DIAG_QP)
		SRN_DIAG_SET(o->s->qp.last_peer_syndrome, SRN_DIAG_PEER_NONE);
	srn_diag_obj_end(o);
	atomic_fetch_add_explicit(&h->slots_used, 1, memory_order_relaxed);
	return o;
}

void srn_diag_obj_del(struct srn_diag_obj *o)
{
	if (!o || o->idx >= SRN_DIAG_SLOTS)
		return;   /* sinks are shared and never freed */
	struct srn_diag *d = o->d;
	/* The body stays: `softrnic explain --qp-log` finds a destroyed QP's
	 * log by the QPN left in its freed slot. */
	srn_diag_obj_begin(o);
	SRN_DIAG_SET(o->s->kind, (uint32_t)SRN_DIAG_FREE);
	srn_diag_obj_end(o);
	atomic_fetch_sub_explicit(&d->seg->hdr.slots_used, 1, memory_order_relaxed);
	if (o->kind == SRN_DIAG_MR) {
		/* A freed region goes to the bottom of the stack, reused last:
		 * `softrnic explain` names the region a stale rkey belonged to
		 * by it, long after the connections churned through new QPs
		 * (a memmove of at most 16 KiB, per deregistration only). */
		memmove(&d->free_stack[1], &d->free_stack[0], d->nfree * sizeof(d->free_stack[0]));
		d->free_stack[0] = o->idx;
		d->nfree++;
	} else {
		d->free_stack[d->nfree++] = o->idx;
	}
	o->kind = SRN_DIAG_FREE;
	o->owner = NULL;
}

struct srn_diag_obj *srn_diag_obj_next(struct srn_diag *d, struct srn_diag_obj *prev)
{
	for (uint32_t i = prev ? prev->idx + 1 : 0; i < d->hwm; i++)
		if (d->objs[i].kind != SRN_DIAG_FREE)
			return &d->objs[i];
	return NULL;
}

void srn_diag_qp_peer_said(struct srn_diag_obj *o, uint8_t syndrome, uint32_t psn,
			   uint64_t mono_ns)
{
	srn_diag_obj_begin(o);
	SRN_DIAG_SET(o->s->qp.last_peer_syndrome, (uint32_t)syndrome);
	SRN_DIAG_SET(o->s->qp.last_peer_psn, psn);
	SRN_DIAG_SET(o->s->qp.last_peer_ns, mono_ns ? mono_ns : srn_now_ns());
	srn_diag_obj_end(o);
}

struct srn_diag_clock *srn_diag_clock(struct srn_diag *d)
{
	return &d->clock;
}

struct srn_diag_seg *srn_diag_seg(struct srn_diag *d)
{
	return d->seg;
}

uint32_t srn_diag_tid(void)
{
	static __thread uint32_t tid;
	if (!tid)
		tid = (uint32_t)gettid();
	return tid;
}
