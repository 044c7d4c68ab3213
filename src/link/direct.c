/*
 * direct.c - the direct-placement table (direct.h): its layout in a sealed
 * memfd, the seqlocked entries, the requester slots that fence dereg, and
 * the cross-memory copy itself.
 *
 * Layout (one page of header and slots, then the QP entries, then the
 * region entries; sizes fixed, so a peer checks the file's size and the
 * counts in the header against its own):
 *
 *   hdr    magic (stored last), layout, owner pid, cookie, closed, counts
 *   slots  SRN_DIRECT_SLOTS x { claim = requester pid, seq }, a cache line each
 *   qps    SRN_DIRECT_QPS  x { seq, entry }
 *   mrs    SRN_DIRECT_MRS  x { seq, entry }
 *
 * Every field a peer may read while the owner writes it is accessed with
 * atomics (word by word), ordered by the entry's sequence number: the
 * writer makes it odd, writes, makes it even; a reader accepts a copy
 * only when the number was the same even value before and after.  This
 * is the seqlock of the Linux kernel's include/linux/seqlock.h, written
 * without fences (ThreadSanitizer does not model them): the word stores
 * are release stores (each keeps the odd number before it), the word
 * loads acquire loads (each keeps the second look at the number after
 * it); on x86 both are plain moves.
 *
 * Fence against placement (the store-buffer pattern): the owner's last
 * store of an entry's number and its loads of the slots, and the
 * requester's increment of its slot and its first load of an entry's
 * number, are all sequentially consistent, so of the two loads at least
 * one sees the other side's store.
 */
#include "link/direct.h"
#include "diag/raw_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "diag/clock.h"
#include "diag/memcheck.h"
#include "link/shm_file.h"

#define DIRECT_MAGIC 0x3154434552494453ull   /* "SDIRECT1", little-endian */
#define DIRECT_LAYOUT 4u                     /* 2: QP max_dest_rd_atomic, region share; 3: alive page;
					     * 4: 64-bit record numbers */
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U        /* Linux 6.3; older glibc lacks the name */
#endif
#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010     /* Linux 5.1 */
#endif
#define ALIVE_BYTES 4096u                    /* the liveness page */
#define READ_TRIES 64                        /* a seqlock read gives up after this many */
#define PEER_RETRY_NS 1000000000ull          /* a target without a usable table: look again in 1 s */
/* A mapping used within this many of the target's mapped operations is
 * not evicted for another region (srn_direct_shared_ptr). */
#define SRN_DIRECT_MAP_KEEP_OPS 4096u

struct tab_hdr {
	_Atomic uint64_t magic;
	uint32_t layout;
	int32_t owner_pid;
	uint64_t cookie;                     /* the inbox's (locator) cookie */
	_Atomic uint32_t closed;
	uint32_t nqps, nmrs, nslots;
	/* The liveness page (see "Liveness" in direct.h): its descriptor
	 * in the owner (+1), inode, and the futex word's offset in it
	 * (where the owner's libc keeps a mutex's lock word). */
	int32_t alive_fd;
	uint32_t alive_off;
	uint64_t alive_ino;
};

struct tab_slot {
	alignas(64) _Atomic uint64_t claim;  /* the requester's pid, 0 = free */
	_Atomic uint64_t seq;                /* odd while a placement runs */
};

/* A record's number is 64 bits: a requester keeps a copy while the
 * number it was read at holds (srn_direct_*_unchanged), for as long as
 * its QP is idle, and 32 bits would come round again after 2^31 writes
 * of one slot (a billion reg/dereg pairs: minutes, not years). */
struct qp_rec {
	_Atomic uint64_t seq;
	uint64_t w[sizeof(struct srn_direct_qp_ent) / 8];
};

struct mr_rec {
	_Atomic uint64_t seq;
	uint64_t w[sizeof(struct srn_direct_mr_ent) / 8];
};

_Static_assert(sizeof(struct srn_direct_qp_ent) % 8 == 0, "QP entry in whole words");
_Static_assert(sizeof(struct srn_direct_mr_ent) % 8 == 0, "region entry in whole words");

struct srn_direct_tab {
	struct tab_hdr h;
	struct tab_slot slot[SRN_DIRECT_SLOTS];
};

#define HEAD_BYTES ((sizeof(struct srn_direct_tab) + 4095) & ~(size_t)4095)
#define QPS_OFF HEAD_BYTES
#define MRS_OFF (QPS_OFF + (size_t)SRN_DIRECT_QPS * sizeof(struct qp_rec))
#define TAB_BYTES ((MRS_OFF + (size_t)SRN_DIRECT_MRS * sizeof(struct mr_rec) + 4095) & \
		   ~(size_t)4095)

static struct qp_rec *qp_rec(struct srn_direct_tab *t, uint32_t slot)
{
	return (struct qp_rec *)((uint8_t *)t + QPS_OFF) + slot;
}

static struct mr_rec *mr_rec(struct srn_direct_tab *t, uint32_t slot)
{
	return (struct mr_rec *)((uint8_t *)t + MRS_OFF) + slot;
}

static struct srn_direct_tab *map_tab(int fd)
{
	void *p = srn_raw_mmap(NULL, TAB_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return NULL;
	/* A forked child does not use the parent's device (as link/shm.c). */
	madvise(p, TAB_BYTES, MADV_DONTFORK);
	return p;
}

/* Seqlock writer: one writer per entry (the owner, under nic->lock). */
static void seq_write(_Atomic uint64_t *seq, uint64_t *dst, const void *src, size_t words)
{
	uint64_t s = atomic_load_explicit(seq, memory_order_relaxed);
	atomic_store_explicit(seq, s + 1, memory_order_relaxed);
	/* Release stores: the odd number is visible before any word
	 * changes (pairs with the reader's acquire loads of the words). */
	const uint64_t *w = src;
	for (size_t i = 0; i < words; i++)
		__atomic_store_n(&dst[i], w[i], __ATOMIC_RELEASE);
	/* Pairs with the reader's first load; seq_cst for the fence against
	 * placement (srn_direct_own_fence's slot loads come after it). */
	atomic_store_explicit(seq, s + 2, memory_order_seq_cst);
}

/* Seqlock reader: a consistent copy, or false after READ_TRIES; *at:
 * the (even) number it was read at. */
static bool seq_read(_Atomic uint64_t *seq, const uint64_t *src, void *dst, size_t words,
		     uint64_t *at)
{
	uint64_t *w = dst;
	for (int t = 0; t < READ_TRIES; t++) {
		/* seq_cst: after the requester's slot increment (the fence
		 * against placement); acquire for the words. */
		uint64_t s1 = atomic_load_explicit(seq, memory_order_seq_cst);
		if (s1 & 1)
			continue;
		/* Acquire loads: the second look below stays after them. */
		for (size_t i = 0; i < words; i++)
			w[i] = __atomic_load_n(&src[i], __ATOMIC_ACQUIRE);
		if (atomic_load_explicit(seq, memory_order_relaxed) == s1) {
			*at = s1;
			return true;
		}
	}
	return false;
}

/* The liveness page: a memfd of one page, 0600, holding a robust
 * process-shared mutex, mapped here read-write and then sealed
 * F_SEAL_FUTURE_WRITE, so peers (who open it through /proc/PID/fd as the
 * table) can map it only read-only: the mutex's robust-list pointers,
 * which glibc follows when it unlocks, are ours alone.  0 or -errno. */
static int alive_open(struct srn_direct_own *o, uint64_t *ino)
{
	int fd = memfd_create("softrnic-alive", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL);
	if (fd < 0 && errno == EINVAL)
		fd = memfd_create("softrnic-alive", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	void *at = MAP_FAILED;
	struct stat st;
	/* Reserved, so the page never faults for lack of memory. */
	if (!fchmod(fd, 0600) && !ftruncate(fd, ALIVE_BYTES) && !fallocate(fd, 0, 0, ALIVE_BYTES))
		at = srn_raw_mmap(NULL, ALIVE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int ret = at == MAP_FAILED ? -errno : 0;
	if (!ret) {
		pthread_mutexattr_t a;
		pthread_mutexattr_init(&a);
		pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
		pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
		ret = -pthread_mutex_init(at, &a);
		pthread_mutexattr_destroy(&a);
	}
	/* F_SEAL_FUTURE_WRITE: Linux 5.1.  Without it no page, no table:
	 * direct placement is off. */
	if (!ret && (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE |
					       F_SEAL_SEAL) || fstat(fd, &st)))
		ret = -errno;
	if (ret) {
		if (at != MAP_FAILED)
			srn_raw_munmap(at, ALIVE_BYTES);
		close(fd);
		return ret;
	}
	madvise(at, ALIVE_BYTES, MADV_DONTFORK);
	o->alive = at;
	o->alive_fd = fd;
	*ino = (uint64_t)st.st_ino;
	return 0;
}

static void alive_close(struct srn_direct_own *o)
{
	if (o->alive && o->pid == getpid())
		srn_raw_munmap(o->alive, ALIVE_BYTES);
	if (o->alive_fd >= 0)
		close(o->alive_fd);
	o->alive = NULL;
	o->alive_fd = -1;
}

int srn_direct_own_open(struct srn_direct_own *o)
{
	memset(o, 0, sizeof(*o));
	o->fd = o->alive_fd = -1;
	o->pid = getpid();
	uint64_t ino = 0;
	int ret = alive_open(o, &ino);
	if (ret)
		return ret;
	int fd = srn_shm_memfd_create(TAB_BYTES, HEAD_BYTES);
	if (fd < 0) {
		alive_close(o);
		return fd;
	}
	struct srn_direct_tab *t = map_tab(fd);
	if (!t) {
		ret = -errno;
		close(fd);
		alive_close(o);
		return ret;
	}
	t->h.alive_fd = o->alive_fd + 1;
	t->h.alive_ino = ino;
	/* glibc's futex word: the robust list's futex_offset points there. */
	t->h.alive_off = (uint32_t)offsetof(pthread_mutex_t, __data.__lock);
	t->h.layout = DIRECT_LAYOUT;
	t->h.owner_pid = o->pid;
	t->h.nqps = SRN_DIRECT_QPS;
	t->h.nmrs = SRN_DIRECT_MRS;
	t->h.nslots = SRN_DIRECT_SLOTS;
	o->tab = t;
	o->fd = fd;
	return 0;
}

void srn_direct_own_publish(struct srn_direct_own *o, uint64_t cookie)
{
	if (!o->tab)
		return;
	o->tab->h.cookie = cookie;
	/* Pairs with the peer's acquire load of the magic in open_tab. */
	atomic_store_explicit(&o->tab->h.magic, DIRECT_MAGIC, memory_order_release);
}

void srn_direct_own_retire(struct srn_direct_own *o)
{
	if (!o->tab || o->pid != getpid())
		return;
	atomic_store(&o->tab->h.closed, 1);
	srn_direct_own_fence(o);
}

void srn_direct_own_exit(struct srn_direct_own *o)
{
	if (o->tab && o->pid == getpid())
		atomic_store(&o->tab->h.closed, 1);
}

void srn_direct_own_close(struct srn_direct_own *o)
{
	if (!o->tab)
		return;
	srn_direct_own_retire(o);
	if (o->pid == getpid())
		srn_raw_munmap(o->tab, TAB_BYTES);
	close(o->fd);
	o->tab = NULL;
	o->fd = -1;
	alive_close(o);
}

void srn_direct_own_hold(struct srn_direct_own *o)
{
	/* Never contended (peers only read it; one progress thread per
	 * device), so this does not block.  A failure leaves it unheld:
	 * peers then take the rings, which is safe. */
	if (o->alive)
		pthread_mutex_lock(o->alive);
}

void srn_direct_own_unhold(struct srn_direct_own *o)
{
	if (o->alive)
		pthread_mutex_unlock(o->alive);
}

void srn_direct_own_set_qp(struct srn_direct_own *o, uint32_t slot,
			   const struct srn_direct_qp_ent *e)
{
	if (!o->tab || slot >= SRN_DIRECT_QPS)
		return;
	struct qp_rec *r = qp_rec(o->tab, slot);
	seq_write(&r->seq, r->w, e, sizeof(*e) / 8);
}

void srn_direct_own_set_mr(struct srn_direct_own *o, uint32_t slot,
			   const struct srn_direct_mr_ent *e)
{
	if (!o->tab || slot >= SRN_DIRECT_MRS)
		return;
	struct mr_rec *r = mr_rec(o->tab, slot);
	seq_write(&r->seq, r->w, e, sizeof(*e) / 8);
}

bool srn_direct_own_fence(struct srn_direct_own *o)
{
	if (!o->tab)
		return false;
	/* The slot loads are seq_cst, after the entry's seq_cst number
	 * store (seq_write) or the seq_cst `closed` store: see the top of
	 * this file. */
	bool waited = false;
	for (uint32_t i = 0; i < SRN_DIRECT_SLOTS; i++) {
		struct tab_slot *sl = &o->tab->slot[i];
		uint64_t pid = atomic_load(&sl->claim);
		uint64_t s = atomic_load(&sl->seq);
		if (!pid || !(s & 1))
			continue;
		waited = true;
		o->fence_waits++;
		uint64_t start = srn_now_ns(), checked = start;
		for (unsigned spin = 0; atomic_load(&sl->seq) == s; spin++) {
			uint64_t now = spin < 256 ? start : srn_now_ns();
			if (now - start > SRN_DIRECT_FENCE_MAX_NS) {
				o->fence_timeouts++;
				break;
			}
			/* A requester that died mid-placement moves no more bytes. */
			if (now - checked > 1000000ull) {
				checked = now;
				if (!srn_shm_pid_alive((int32_t)pid))
					break;
			}
			if (spin < 64)
				continue;
			if (spin < 256) {
				sched_yield();
			} else {
				struct timespec ts = { 0, 20000 };
				nanosleep(&ts, NULL);
			}
		}
	}
	return waited;
}

/* Map a target's table and check everything its header says. */
static struct srn_direct_tab *open_tab(int32_t pid, int32_t fd, uint64_t cookie)
{
	int mfd = srn_shm_peer_fd_open(pid, fd, TAB_BYTES);
	if (mfd < 0)
		return NULL;
	struct srn_direct_tab *t = map_tab(mfd);
	close(mfd);
	if (!t)
		return NULL;
	/* Pairs with the release store in srn_direct_own_publish. */
	if (atomic_load_explicit(&t->h.magic, memory_order_acquire) != DIRECT_MAGIC ||
	    t->h.layout != DIRECT_LAYOUT || t->h.owner_pid != pid || t->h.cookie != cookie ||
	    t->h.nqps != SRN_DIRECT_QPS || t->h.nmrs != SRN_DIRECT_MRS ||
	    t->h.nslots != SRN_DIRECT_SLOTS || atomic_load(&t->h.closed)) {
		srn_raw_munmap(t, TAB_BYTES);
		return NULL;
	}
	return t;
}

/* Map the target's liveness page read-only (the owner sealed it against
 * writable mappings), checked as the table plus the inode the table
 * names.  NULL: none, and no direct placement to this target. */
static const void *open_alive(int32_t pid, const struct srn_direct_tab *t, uint32_t *off_out)
{
	/* Read once: the table is the peer's to rewrite. */
	uint32_t off = __atomic_load_n(&t->h.alive_off, __ATOMIC_RELAXED);
	*off_out = off;
	int32_t afd = __atomic_load_n(&t->h.alive_fd, __ATOMIC_RELAXED);
	if (afd <= 0 || off > ALIVE_BYTES - sizeof(uint32_t) || (off & 3))
		return NULL;
	int fd = srn_shm_peer_fd_open(pid, afd - 1, ALIVE_BYTES);
	if (fd < 0)
		return NULL;
	struct stat st;
	void *at = MAP_FAILED;
	if (!fstat(fd, &st) && (uint64_t)st.st_ino == t->h.alive_ino)
		at = srn_raw_mmap(NULL, ALIVE_BYTES, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (at == MAP_FAILED)
		return NULL;
	madvise(at, ALIVE_BYTES, MADV_DONTFORK);
	return at;
}

enum srn_direct_life srn_direct_peer_life(const struct srn_direct_peer *p)
{
	/* Acquire: pairs with nothing of ours, it is the kernel's word; it
	 * keeps the caller's later loads after it.  After a copy, ask
	 * srn_direct_peer_alive_after instead. */
	uint32_t w = __atomic_load_n((const uint32_t *)((const uint8_t *)p->alive + p->alive_off),
				     __ATOMIC_ACQUIRE);
	if (w & FUTEX_OWNER_DIED)
		return SRN_DIRECT_DEAD;
	return (w & FUTEX_TID_MASK) ? SRN_DIRECT_ALIVE : SRN_DIRECT_UNSURE;
}

bool srn_direct_peer_alive_after(struct srn_direct_peer *p)
{
	/* Our stores, then the word: a store-to-load order, which only a
	 * full barrier gives.  A sequentially consistent read-modify-write
	 * of a line of our own is one (x86: a locked instruction drains the
	 * store buffer), and ThreadSanitizer models it, which it does not a
	 * fence (see the top of this file).  The word can only be read:
	 * the page is mapped read-only. */
	atomic_fetch_add_explicit(&p->life_checks, 1, memory_order_seq_cst);
	uint32_t w = __atomic_load_n((const uint32_t *)((const uint8_t *)p->alive + p->alive_off),
				     __ATOMIC_SEQ_CST);
	return !(w & FUTEX_OWNER_DIED) && (w & FUTEX_TID_MASK);
}

/* Claim a requester slot: a free one, else one whose owner died.  A slot
 * taken over mid-placement is made even (its placement is over). */
static bool claim_slot(struct srn_direct_tab *t, uint32_t *slot)
{
	uint64_t me = (uint64_t)getpid();
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t i = 0; i < SRN_DIRECT_SLOTS; i++) {
			uint64_t cur = atomic_load(&t->slot[i].claim);
			if (pass == 0 ? cur != 0 : cur == me || srn_shm_pid_alive((int32_t)cur))
				continue;
			if (!atomic_compare_exchange_strong(&t->slot[i].claim, &cur, me))
				continue;
			uint64_t s = atomic_load(&t->slot[i].seq);
			if (s & 1)
				atomic_fetch_add(&t->slot[i].seq, 1);
			*slot = i;
			return true;
		}
	return false;
}

static void unmap_one(struct srn_direct_map *m)
{
	if (m->at)
		srn_raw_munmap(m->at, m->len);
	memset(m, 0, sizeof(*m));
}

/* Empty an entry; its generation turns, so no kept pointer takes the
 * next target that fills it for this one. */
static void reset_peer(struct srn_direct_peer *p)
{
	uint32_t gen = p->gen + 1;
	memset(p, 0, sizeof(*p));
	p->gen = gen;
}

static void drop_peer(struct srn_direct_peer *p)
{
	for (unsigned i = 0; i < SRN_DIRECT_MAPS; i++)
		unmap_one(&p->map[i]);
	if (p->alive)
		srn_raw_munmap((void *)p->alive, ALIVE_BYTES);
	if (p->tab) {
		uint64_t me = (uint64_t)getpid();
		atomic_compare_exchange_strong(&p->tab->slot[p->slot].claim, &me, 0);
		srn_raw_munmap(p->tab, TAB_BYTES);
	}
	reset_peer(p);
}

struct srn_direct_peer *srn_direct_peer_get(struct srn_direct_req *r, int32_t pid, int32_t fd,
					    uint64_t cookie, uint64_t now_ns)
{
	if (pid <= 0 || fd < 0)
		return NULL;
	struct srn_direct_peer *p = NULL, *free_ = NULL;
	for (unsigned i = 0; i < SRN_DIRECT_PEERS; i++) {
		struct srn_direct_peer *c = &r->peer[i];
		if (c->pid == pid) {
			p = c;
			break;
		}
		if (!c->pid && !free_)
			free_ = c;
	}
	if (p && (p->fd != fd || p->cookie != cookie)) {
		drop_peer(p);           /* the pid now holds another device's table */
		free_ = p;
		p = NULL;
	}
	if (p) {
		/* A dead one is returned: the caller reads its word, says so
		 * and drops it (transport/direct.c). */
		if (p->tab && !atomic_load_explicit(&p->tab->h.closed, memory_order_relaxed))
			return p;
		if (p->tab) {
			drop_peer(p);   /* closed: the device went away */
			return NULL;
		}
		if (!now_ns)
			now_ns = srn_now_ns();
		if (now_ns < p->retry_ns)
			return NULL;
		free_ = p;
	}
	if (!free_) {
		/* Full: forget the first (a device that is probably gone). */
		free_ = &r->peer[0];
		drop_peer(free_);
	}
	if (!r->pid)
		r->pid = getpid();
	free_->pid = pid;
	free_->fd = fd;
	free_->cookie = cookie;
	free_->tab = open_tab(pid, fd, cookie);
	free_->alive = free_->tab ? open_alive(pid, free_->tab, &free_->alive_off) : NULL;
	if (free_->tab && (!free_->alive || !claim_slot(free_->tab, &free_->slot))) {
		if (free_->alive)
			srn_raw_munmap((void *)free_->alive, ALIVE_BYTES);
		free_->alive = NULL;
		srn_raw_munmap(free_->tab, TAB_BYTES);
		free_->tab = NULL;
	}
	if (!free_->tab) {
		free_->retry_ns = (now_ns ? now_ns : srn_now_ns()) + PEER_RETRY_NS;
		return NULL;
	}
	return free_;
}

bool srn_direct_peer_closed(const struct srn_direct_peer *p)
{
	return !p->tab || atomic_load_explicit(&p->tab->h.closed, memory_order_relaxed);
}

void srn_direct_peer_drop(struct srn_direct_peer *p)
{
	if (p->pid)
		drop_peer(p);
}

void srn_direct_req_close(struct srn_direct_req *r)
{
	if (r->pid && r->pid != getpid()) {
		/* A forked child: nothing is mapped here. */
		for (unsigned i = 0; i < SRN_DIRECT_PEERS; i++)
			reset_peer(&r->peer[i]);
		r->pid = 0;
		return;
	}
	for (unsigned i = 0; i < SRN_DIRECT_PEERS; i++)
		if (r->peer[i].pid)
			drop_peer(&r->peer[i]);
	r->pid = 0;
}

void srn_direct_enter(struct srn_direct_peer *p)
{
	/* seq_cst: the odd number comes before the entry loads (seq_read's
	 * first load is seq_cst too); see the top of this file. */
	atomic_fetch_add_explicit(&p->tab->slot[p->slot].seq, 1, memory_order_seq_cst);
}

void srn_direct_leave(struct srn_direct_peer *p)
{
	/* Every byte moved before the number turns even (pairs with the
	 * fence's load). */
	atomic_fetch_add_explicit(&p->tab->slot[p->slot].seq, 1, memory_order_release);
}

bool srn_direct_read_qp_seq(const struct srn_direct_peer *p, uint32_t qpn,
			    struct srn_direct_qp_ent *out, uint64_t *seq)
{
	if (atomic_load(&p->tab->h.closed))
		return false;
	struct qp_rec *r = qp_rec(p->tab, qpn & (SRN_DIRECT_QPS - 1));
	return seq_read(&r->seq, r->w, out, sizeof(*out) / 8, seq) && out->qpn == qpn;
}

bool srn_direct_read_mr_seq(const struct srn_direct_peer *p, uint32_t slot, uint32_t key,
			    struct srn_direct_mr_ent *out, uint64_t *seq)
{
	if (slot >= SRN_DIRECT_MRS || atomic_load(&p->tab->h.closed))
		return false;
	struct mr_rec *r = mr_rec(p->tab, slot);
	return seq_read(&r->seq, r->w, out, sizeof(*out) / 8, seq) && out->key == key;
}

bool srn_direct_read_qp(const struct srn_direct_peer *p, uint32_t qpn,
			struct srn_direct_qp_ent *out)
{
	uint64_t seq;
	return srn_direct_read_qp_seq(p, qpn, out, &seq);
}

bool srn_direct_read_mr(const struct srn_direct_peer *p, uint32_t slot, uint32_t key,
			struct srn_direct_mr_ent *out)
{
	uint64_t seq;
	return srn_direct_read_mr_seq(p, slot, key, out, &seq);
}

/* seq_cst, as seq_read's first load: after the placement's enter. */
bool srn_direct_qp_unchanged(const struct srn_direct_peer *p, uint32_t qpn, uint64_t seq)
{
	if (atomic_load(&p->tab->h.closed))
		return false;
	struct qp_rec *r = qp_rec(p->tab, qpn & (SRN_DIRECT_QPS - 1));
	return atomic_load_explicit(&r->seq, memory_order_seq_cst) == seq;
}

bool srn_direct_mr_unchanged(const struct srn_direct_peer *p, uint32_t slot, uint64_t seq)
{
	if (slot >= SRN_DIRECT_MRS || atomic_load(&p->tab->h.closed))
		return false;
	struct mr_rec *r = mr_rec(p->tab, slot);
	return atomic_load_explicit(&r->seq, memory_order_seq_cst) == seq;
}

int srn_direct_copy(const struct srn_direct_peer *p, bool write, const struct iovec *local,
		    int nlocal, uint64_t remote, uint64_t len)
{
	struct iovec rv = { .iov_base = (void *)(uintptr_t)remote, .iov_len = len };
	/* A Write's data is the program's memory, read as a NIC's DMA
	 * reads it: memcheck does not judge it (diag/memcheck.h).  A Read
	 * writes ours, which memcheck sees the call do. */
	ssize_t n;
	int err;
	if (write) {
		SRN_DMA_READ_BEGIN();
		n = process_vm_writev(p->pid, local, (unsigned long)nlocal, &rv, 1, 0);
		err = errno;
		SRN_DMA_READ_END();
	} else {
		n = process_vm_readv(p->pid, local, (unsigned long)nlocal, &rv, 1, 0);
		err = errno;
	}
	if (n < 0)
		return -err;
	return (uint64_t)n == len ? 0 : -EIO;
}

/* Open and map the target's memfd for region m: the descriptor must be a
 * sealed memfd of our user, 0600, at least share_len long and sealed
 * against shrinking (so the mapping of its first share_len bytes can
 * never fault past its end; the file is longer, sparse, so the target's
 * program can grow its own mapping: core/mr_share.c) and the inode
 * published with it (a descriptor number the target closed and reused
 * names another file). */
static uint8_t *map_share(const struct srn_direct_peer *p, const struct srn_direct_mr_ent *m)
{
	if (m->share_fd <= 0 || !m->share_len || m->share_len > SIZE_MAX / 2)
		return NULL;
	int fd = srn_shm_peer_fd_open_min(p->pid, m->share_fd - 1, (size_t)m->share_len);
	if (fd < 0)
		return NULL;
	struct stat st;
	void *at = MAP_FAILED;
	if (!fstat(fd, &st) && (uint64_t)st.st_ino == m->share_ino)
		at = srn_raw_mmap(NULL, (size_t)m->share_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (at == MAP_FAILED)
		return NULL;
	/* A forked child does not use this device's mappings. */
	madvise(at, (size_t)m->share_len, MADV_DONTFORK);
	return at;
}

void *srn_direct_shared_ptr(struct srn_direct_peer *p, uint32_t slot,
			    const struct srn_direct_mr_ent *m, uint64_t remote, uint64_t len)
{
	/* The bytes must lie inside the span the memfd backs. */
	if (m->share_fd <= 0 || !len || remote < m->share_base ||
	    remote - m->share_base > m->share_len || m->share_len - (remote - m->share_base) < len)
		return NULL;
	/* The last one used first: a stream of small Writes mostly goes to
	 * one region, and the search below costs more than the copy.  One
	 * slot has at most one mapping (the search drops older ones). */
	struct srn_direct_map *last = &p->map[p->map_last % SRN_DIRECT_MAPS];
	if (last->at && last->slot == slot && last->key == m->key && last->ino == m->share_ino &&
	    last->base == m->share_base && last->len == m->share_len) {
		last->used = ++p->map_tick;
		return last->at + (remote - m->share_base);
	}
	struct srn_direct_map *hit = NULL, *victim = &p->map[0];
	for (unsigned i = 0; i < SRN_DIRECT_MAPS; i++) {
		struct srn_direct_map *c = &p->map[i];
		if (c->at && c->slot == slot && (c->key != m->key || c->ino != m->share_ino ||
						 c->base != m->share_base || c->len != m->share_len))
			unmap_one(c);  /* an older region of this slot: dereg'd or rekeyed */
		if (c->at && c->slot == slot)
			hit = c;
		/* Evict an unused entry first, else the least recently used. */
		if (!c->at) {
			if (victim->at)
				victim = c;
		} else if (victim->at && c->used < victim->used) {
			victim = c;
		}
	}
	if (!hit) {
		/* All in use lately: copy by system call rather than map and
		 * unmap per operation (a requester cycling through more small
		 * regions of one target than it keeps would pay an open and
		 * an mmap, tens of us, for each 1 us copy). */
		if (victim->at && p->map_tick - victim->used < SRN_DIRECT_MAP_KEEP_OPS)
			return NULL;
		uint8_t *at = map_share(p, m);
		if (!at)
			return NULL;
		unmap_one(victim);
		hit = victim;
		*hit = (struct srn_direct_map){
			.at = at, .slot = slot, .key = m->key, .ino = m->share_ino,
			.base = m->share_base, .len = m->share_len,
		};
	}
	hit->used = ++p->map_tick;
	p->map_last = (uint32_t)(hit - p->map);
	return hit->at + (remote - m->share_base);
}
