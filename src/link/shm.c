/*
 * shm.c - the same-host link (see shm.h).
 *
 * Inbox layout: a header page (identity, the `sleeping` and `active` words
 * and one control block per slot, producer and consumer indices on their
 * own cache lines), then one ring per slot (its size in the header).  Ring
 * indices count bytes and only grow; a record is a 16-byte header and the
 * packet, rounded up to 64 bytes so neighbouring records do not share a
 * cache line, and never wraps: a WRAP record fills the end of the ring.
 *
 * Everything a peer wrote is read once into locals and bounded before use
 * (rec_check for a record; indices are the reader's and the writer's own
 * copies): a broken or hostile same-user peer can lose its own packets,
 * never make us read or write outside the mapping.
 *
 * Memory: the segment is a sealed memfd (shm_file.h): it cannot shrink
 * under anyone's mapping.  It is sparse; the receiver reserves its header
 * and each sender the ring of the slot it claims (fallocate), before
 * anyone touches them: no fault later can find no page to give.
 */
#include "link/shm.h"
#include "diag/raw_mem.h"
#include "link/shm_bell.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "diag/clock.h"
#include "link/shm_file.h"

#define SHM_MAGIC SRN_SHM_LOC_MAGIC            /* header and locator agree */
#define SHM_LAYOUT SRN_SHM_LAYOUT
#define REC_HDR 16u
#define REC_ALIGN 64u
#define REC_PKT 1u
#define REC_WRAP 2u
#define ALL_SLOTS ((1ull << SRN_SHM_SLOTS) - 1)

struct slot_ctl {
	_Atomic uint64_t claim;            /* owning sender's pid, 0 = free */
	_Atomic uint32_t srclen;           /* stored after src (release) */
	uint32_t reserved;
	struct sockaddr_storage src;       /* the sender device's address */
	alignas(64) _Atomic uint64_t prod; /* published end, by the sender */
	alignas(64) _Atomic uint64_t cons; /* consumed end, by the receiver */
};

struct inbox_hdr {
	_Atomic uint64_t magic;            /* stored last */
	uint32_t layout, nslots;
	uint64_t ring_bytes;
	uint64_t netns;
	int32_t owner_pid;
	_Atomic uint32_t closed;
	uint64_t cookie;                   /* the locator's: this is the inbox it names */
	alignas(64) _Atomic uint32_t sleeping;  /* the receiver is about to block */
	/* Its bell, an eventfd (descriptor number + 1; 0: none): senders
	 * write it instead of sending a datagram (link/shm_bell.h).  In the
	 * sleeping word's line, read with it; a header without it (an
	 * older library's) reads 0. */
	_Atomic int32_t bell_fd;
	alignas(64) _Atomic uint64_t active;    /* slots ever claimed */
	alignas(64) struct slot_ctl slot[SRN_SHM_SLOTS];
};

#define HDR_BYTES ((sizeof(struct inbox_hdr) + 4095) & ~(size_t)4095)
static size_t seg_bytes(uint64_t ring)
{
	return HDR_BYTES + (size_t)SRN_SHM_SLOTS * ring;
}

struct srn_shm_seg {
	struct inbox_hdr h;
};

/* tos: the packet's IPv4 TOS / IPv6 traffic class as the UDP link would
 * carry it (DSCP and the ECN bits, link/udp_ecn.h), so a mark survives
 * the ring. */
struct rec {
	uint32_t len, kind;
	uint8_t tos;
	uint8_t reserved[7];
};
_Static_assert(sizeof(struct rec) == REC_HDR && REC_HDR <= REC_ALIGN, "record header");
_Static_assert(offsetof(struct rec, tos) == 8, "the TOS where the reserved word was");

static uint8_t *ring_of(struct srn_shm_seg *g, uint64_t ring, uint32_t slot)
{
	return (uint8_t *)g + HDR_BYTES + (size_t)slot * ring;
}

/* The ring size this device's inbox offers (SOFTRNIC_SHM_RING_KB). */
static uint64_t ring_size_setting(void)
{
	const char *v = getenv("SOFTRNIC_SHM_RING_KB");
	uint64_t b = v && *v ? strtoull(v, NULL, 10) << 10 : SRN_SHM_RING_BYTES;
	if (b < SRN_SHM_RING_MIN)
		b = SRN_SHM_RING_MIN;
	if (b > SRN_SHM_RING_MAX)
		b = SRN_SHM_RING_MAX;
	return b & ~(uint64_t)4095;
}

static uint64_t rec_bytes(uint32_t len)
{
	return ((uint64_t)REC_HDR + len + REC_ALIGN - 1) & ~(uint64_t)(REC_ALIGN - 1);
}

static uint64_t netns_id(void)
{
	struct stat st;
	return stat("/proc/self/ns/net", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static bool same_addr(const struct sockaddr_storage *a, socklen_t alen, const struct sockaddr *b,
		      socklen_t blen)
{
	if (alen != blen || a->ss_family != b->sa_family)
		return false;
	if (b->sa_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
	return x->sin6_port == y->sin6_port && !memcmp(&x->sin6_addr, &y->sin6_addr, 16);
}

static struct srn_shm_seg *map_seg(int fd, size_t len)
{
	void *p = srn_raw_mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return NULL;
	/* A forked child does not use the parent's device; it must not keep
	 * the segment's memory alive after the parent is gone. */
	madvise(p, len, MADV_DONTFORK);
	return p;
}

/* The receiver's side of an inbox: a sealed memfd, its header, then a
 * locator under the first of its names nobody else holds. */
static int create_inbox(struct srn_shm *s)
{
	uint64_t ring = ring_size_setting();
	int fd = srn_shm_memfd_create(seg_bytes(ring), HDR_BYTES);
	if (fd < 0)
		return fd;
	struct srn_shm_seg *g = map_seg(fd, seg_bytes(ring));
	if (!g) {
		int ret = -errno;
		close(fd);
		return ret;
	}
	uint64_t cookie = 0;
	if (getrandom(&cookie, sizeof(cookie), GRND_NONBLOCK) != (ssize_t)sizeof(cookie))
		cookie = srn_clock_ns(CLOCK_MONOTONIC_COARSE) ^ ((uint64_t)getpid() << 32);
	g->h.layout = SHM_LAYOUT;
	g->h.nslots = SRN_SHM_SLOTS;
	g->h.ring_bytes = ring;
	g->h.netns = s->netns;
	g->h.owner_pid = (int32_t)getpid();
	g->h.cookie = cookie;
	/* Pairs with the sender's acquire load of magic (attach_inbox):
	 * the header above is written before a sender trusts it. */
	atomic_store_explicit(&g->h.magic, SHM_MAGIC, memory_order_release);
	struct srn_shm_locator loc = {
		.magic = SRN_SHM_LOC_MAGIC, .layout = SHM_LAYOUT, .fd = fd, .ring_bytes = ring,
		.netns = s->netns, .pid = (int32_t)getpid(), .cookie = cookie,
		.direct_fd = s->direct_fd >= 0 ? s->direct_fd + 1 : 0,
	};
	int ret = srn_shm_locator_publish(&loc, (const struct sockaddr *)&s->local, s->member,
					  s->in_name,
					  sizeof(s->in_name), s->note, sizeof(s->note));
	if (ret) {
		srn_raw_munmap(g, seg_bytes(ring));
		close(fd);
		return ret;
	}
	s->in = g;
	s->in_fd = fd;
	s->in_ring = ring;
	s->in_cookie = cookie;
	return 0;
}

int srn_shm_open(struct srn_shm *s, const struct sockaddr *local, socklen_t len, unsigned member,
		 bool enabled, int direct_fd)
{
	memset(s, 0, sizeof(*s));
	s->member = member;
	s->in_fd = -1;
	s->direct_fd = direct_fd;
	s->enabled = enabled;
	s->pid = getpid();
	if (!enabled)
		return 0;
	s->netns = netns_id();
	if (len > sizeof(s->local))
		return -EINVAL;
	memcpy(&s->local, local, len);
	s->local_len = len;
	srn_shm_sweep();
	int ret = create_inbox(s);
	if (ret && ret != -EAFNOSUPPORT && !s->note[0])
		snprintf(s->note, sizeof(s->note),
			 "no same-host inbox (%s): this device receives over UDP only",
			 strerror(-ret));
	return ret;
}

static void detach(struct srn_shm_peer *p)
{
	if (!p->seg)
		return;
	uint64_t me = (uint64_t)getpid();
	/* Free the slot; whoever claims it next continues from its indices. */
	atomic_compare_exchange_strong(&p->seg->h.slot[p->slot].claim, &me, 0);
	srn_raw_munmap(p->seg, seg_bytes(p->ring));
	p->seg = NULL;
	p->gen++;
	if (p->owner_fd >= 0)
		close(p->owner_fd);
	p->owner_fd = -1;
	if (p->bell >= 0)
		close(p->bell);
	p->bell = -1;
	p->bell_tried = 0;   /* the next process behind this address has its own */
}

void srn_shm_exit(struct srn_shm *s)
{
	if (s->pid != getpid())
		return;         /* a forked child: the mappings stayed with the parent */
	if (s->in && !atomic_exchange(&s->in->h.closed, 1))
		srn_shm_locator_remove(s->in_name, s->in_cookie);
}

void srn_shm_close(struct srn_shm *s)
{
	if (s->pid != getpid()) {
		/* A forked child: nothing here is mapped (MADV_DONTFORK), but
		 * the descriptors are its own copies. */
		for (int i = 0; i < s->npeers; i++) {
			if (s->peer[i].seg && s->peer[i].owner_fd >= 0)
				close(s->peer[i].owner_fd);
			if (s->peer[i].seg && s->peer[i].bell >= 0)
				close(s->peer[i].bell);
		}
		if (s->in)
			close(s->in_fd);
		memset(s, 0, sizeof(*s));
		return;
	}
	for (int i = 0; i < s->npeers; i++)
		detach(&s->peer[i]);
	if (s->in) {
		srn_shm_exit(s);
		srn_raw_munmap(s->in, seg_bytes(s->in_ring));
		close(s->in_fd);
		s->in = NULL;
		s->in_fd = -1;
	}
	s->npeers = 0;
	s->ndirty = 0;
}

static bool claim_slot(struct srn_shm_seg *g, uint32_t *slot)
{
	uint64_t me = (uint64_t)getpid();
	for (uint32_t i = 0; i < SRN_SHM_SLOTS; i++) {
		uint64_t free_ = 0;
		if (atomic_compare_exchange_strong(&g->h.slot[i].claim, &free_, me)) {
			*slot = i;
			return true;
		}
	}
	/* All taken: take over one whose owner died without releasing it. */
	for (uint32_t i = 0; i < SRN_SHM_SLOTS; i++) {
		uint64_t owner = atomic_load(&g->h.slot[i].claim);
		if (owner != me && !srn_shm_pid_alive((int32_t)owner) &&
		    atomic_compare_exchange_strong(&g->h.slot[i].claim, &owner, me)) {
			*slot = i;
			return true;
		}
	}
	return false;
}

/* Has p's receiver exited?  Its pidfd turns readable then (a zombie
 * included); without one, ask /proc. */
static bool owner_gone(const struct srn_shm_peer *p)
{
	if (p->owner_fd >= 0) {
		struct pollfd pf = { .fd = p->owner_fd, .events = POLLIN };
		return poll(&pf, 1, 0) > 0;
	}
	return !srn_shm_pid_alive(p->owner_pid);
}

/* Map the inbox a checked locator names, check its header, claim a slot. */
static int attach_inbox(struct srn_shm *s, struct srn_shm_peer *p,
			const struct srn_shm_locator *loc)
{
	uint64_t ring = loc->ring_bytes;
	if (ring < SRN_SHM_RING_MIN || ring > SRN_SHM_RING_MAX || (ring & 4095))
		return -ENOENT;
	/* The pidfd before the memfd: a pid reused meanwhile names another
	 * process, whose descriptor then fails the cookie check. */
	p->owner_fd = (int)syscall(SYS_pidfd_open, loc->pid, 0);
	if (p->owner_fd < 0 && errno == ESRCH)
		return -ENOENT;
	p->owner_pid = loc->pid;
	p->direct_fd = loc->direct_fd > 0 ? loc->direct_fd - 1 : -1;
	p->cookie = loc->cookie;
	int fd = srn_shm_memfd_open(loc, seg_bytes(ring));
	struct srn_shm_seg *g = fd < 0 ? NULL : map_seg(fd, seg_bytes(ring));
	struct inbox_hdr *h = g ? &g->h : NULL;
	uint32_t slot;
	/* Sealed at the checked size: the header is there to be read.  The
	 * acquire pairs with the owner's release store of magic (inbox
	 * creation): the fields checked after it are the owner's. */
	if (!h || atomic_load_explicit(&h->magic, memory_order_acquire) != SHM_MAGIC ||
	    h->layout != SHM_LAYOUT || h->nslots != SRN_SHM_SLOTS || h->ring_bytes != ring ||
	    h->netns != s->netns || h->cookie != loc->cookie || h->owner_pid != loc->pid ||
	    atomic_load(&h->closed) || owner_gone(p) || !claim_slot(g, &slot))
		goto fail;
	/* Reserve the ring's pages now (see the top of this file). */
	if (fallocate(fd, 0, (off_t)(HDR_BYTES + (size_t)slot * ring), (off_t)ring)) {
		uint64_t me = (uint64_t)getpid();
		atomic_compare_exchange_strong(&h->slot[slot].claim, &me, 0);
		goto fail;
	}
	close(fd);
	struct slot_ctl *c = &h->slot[slot];
	memcpy(&c->src, &s->local, s->local_len);
	/* Pairs with the receiver's acquire load of srclen (srn_shm_poll):
	 * the address bytes are written before their length is seen. */
	atomic_store_explicit(&c->srclen, (uint32_t)s->local_len, memory_order_release);
	p->seg = g;
	p->gen++;
	p->slot = slot;
	p->ring = ring;
	p->fresh = true;
	/* Our own index from here on, record-aligned whatever the word
	 * said: an unaligned one would put a header across the ring's end
	 * (the reader drops what lies between, see rec_check). */
	/* Acquire: pairs with the previous owner's release store of prod
	 * (srn_shm_put, srn_shm_publish), so its records are behind us. */
	p->prod = (atomic_load_explicit(&c->prod, memory_order_acquire) + REC_ALIGN - 1) &
		  ~(uint64_t)(REC_ALIGN - 1);
	p->published = p->prod;
	/* Pairs with the receiver's release store of cons (srn_shm_poll). */
	p->cons_seen = atomic_load_explicit(&c->cons, memory_order_acquire);
	p->dirty = false;
	p->owner_check_ns = srn_clock_ns(CLOCK_MONOTONIC_COARSE);
	/* Pairs with the receiver's acquire load of active (srn_shm_poll):
	 * the slot's source address and indices are set before it is polled. */
	atomic_fetch_or_explicit(&h->active, 1ull << slot, memory_order_release);
	return 0;
fail:
	if (g)
		srn_raw_munmap(g, seg_bytes(ring));
	if (fd >= 0)
		close(fd);
	if (p->owner_fd >= 0)
		close(p->owner_fd);
	p->owner_fd = -1;
	return -ENOENT;
}

/* Find dst's inbox under its names, in order: the first that is ours,
 * live and valid.  A name another user holds is passed over. */
static int attach(struct srn_shm *s, struct srn_shm_peer *p)
{
	int ret = -ENOENT;
	for (unsigned k = 0; k < SRN_SHM_NAMES; k++) {
		struct srn_shm_locator loc;
		ret = srn_shm_locator_read(s->netns, (const struct sockaddr *)&p->addr, p->member, k,
					   &loc);
		if (ret == -EAFNOSUPPORT)
			return ret;
		if (!ret && !(ret = attach_inbox(s, p, &loc)))
			return 0;
	}
	return ret;
}

/* Give up p's ring (its receiver closed or died): unpublished records go
 * with it; look for an inbox again from retry_ns on. */
static void forget(struct srn_shm *s, struct srn_shm_peer *p, uint64_t retry_ns)
{
	if (p->dirty) {
		p->dirty = false;
		s->ndirty--;
	}
	detach(p);
	p->retry_ns = retry_ns;
}

void srn_shm_peer_gone(struct srn_shm *s, struct srn_shm_peer *p)
{
	if (p->seg)
		forget(s, p, srn_clock_ns(CLOCK_MONOTONIC_COARSE) + SRN_SHM_RETRY_NS);
}

bool srn_shm_unread(struct srn_shm *s, const struct sockaddr *dst, socklen_t dstlen,
		    unsigned member)
{
	/* Only a ring already in use: asking must not attach one (the link
	 * may be off, or the peer may take UDP).  route then checks that
	 * its owner is alive, and forgets a dead one's ring. */
	if (!s->enabled)
		return false;
	bool attached = false;
	for (int i = 0; i < s->npeers && !attached; i++)
		attached = s->peer[i].seg && s->peer[i].member == member &&
			   same_addr(&s->peer[i].addr, s->peer[i].addrlen, dst, dstlen);
	if (!attached)
		return false;
	struct srn_shm_peer *p = srn_shm_route(s, dst, dstlen, member);
	if (!p || !p->seg)
		return false;
	const struct slot_ctl *c = &p->seg->h.slot[p->slot];
	/* Pairs with the receiver's release store of cons (srn_shm_poll). */
	return atomic_load_explicit(&c->cons, memory_order_acquire) < p->published;
}

bool srn_shm_has_ring(const struct srn_shm *s, const struct sockaddr *dst, socklen_t dstlen)
{
	for (int i = 0; i < s->npeers; i++)
		if (s->peer[i].seg && same_addr(&s->peer[i].addr, s->peer[i].addrlen, dst, dstlen))
			return true;
	return false;
}

struct srn_shm_peer *srn_shm_route(struct srn_shm *s, const struct sockaddr *dst,
				   socklen_t dstlen, unsigned member)
{
	struct srn_shm_peer *p = NULL;
	for (int i = 0; i < s->npeers; i++)
		if (s->peer[i].member == member &&
		    same_addr(&s->peer[i].addr, s->peer[i].addrlen, dst, dstlen)) {
			p = &s->peer[i];
			break;
		}
	if (!p) {
		if (dstlen > sizeof(p->addr))
			return NULL;
		if (s->npeers < SRN_SHM_PEERS) {
			p = &s->peer[s->npeers++];
		} else {
			/* Full: forget a destination that has no ring (a remote
			 * host, a device without an inbox); if all have one, the
			 * rest take UDP. */
			for (int i = 0; i < s->npeers && !p; i++)
				if (!s->peer[i].seg)
					p = &s->peer[i];
			if (!p)
				return NULL;
		}
		uint32_t gen = p->gen + 1;
		memset(p, 0, sizeof(*p));
		p->gen = gen;
		p->owner_fd = -1;
		p->bell = -1;
		memcpy(&p->addr, dst, dstlen);
		p->addrlen = dstlen;
		p->member = member;
	}
	uint64_t now = srn_clock_ns(CLOCK_MONOTONIC_COARSE);
	if (p->seg) {
		bool closed = atomic_load_explicit(&p->seg->h.closed, memory_order_relaxed);
		if (!closed && now - p->owner_check_ns < SRN_SHM_OWNER_POLL_NS)
			return p;
		if (!closed) {
			p->owner_check_ns = now;
			if (!owner_gone(p))
				return p;
		}
		/* Its device closed, or died (nobody can mark a dead
		 * process's inbox closed): look for a successor's inbox on
		 * the same address now, else UDP. */
		forget(s, p, 0);
	}
	if (now < p->retry_ns)
		return NULL;
	if (attach(s, p)) {
		p->retry_ns = now + SRN_SHM_RETRY_NS;
		return NULL;
	}
	return p;
}

/* No room: normally the receiver is just behind (wait, like a link
 * paused by PFC); but a receiver killed without closing never drains. */
static int full_ring(struct srn_shm *s, struct srn_shm_peer *p)
{
	uint64_t now = srn_clock_ns(CLOCK_MONOTONIC_COARSE);
	if (now - p->full_check_ns < SRN_SHM_OWNER_CHECK_NS)
		return -EAGAIN;
	p->full_check_ns = now;
	if (!owner_gone(p))
		return -EAGAIN;
	forget(s, p, now + SRN_SHM_RETRY_NS);
	return -EPIPE;
}

int srn_shm_put(struct srn_shm *s, struct srn_shm_peer *p, const struct iovec *iov, int iovcnt,
		uint32_t len, uint8_t tos)
{
	if (len > SRN_SHM_MAX_PKT)
		return -EMSGSIZE;
	struct slot_ctl *c = &p->seg->h.slot[p->slot];
	uint8_t *ring = ring_of(p->seg, p->ring, p->slot);
	uint64_t need = rec_bytes(len);
	uint64_t off = p->prod % p->ring;
	uint64_t wrap = p->ring - off < need ? p->ring - off : 0;
	if (p->prod + wrap + need - p->cons_seen > p->ring) {
		/* Pairs with the receiver's release store of cons
		 * (srn_shm_poll): the space below it is read, ours again. */
		p->cons_seen = atomic_load_explicit(&c->cons, memory_order_acquire);
		if (p->prod + wrap + need - p->cons_seen > p->ring)
			return full_ring(s, p);
	}
	if (wrap) {
		struct rec *w = (struct rec *)(ring + off);
		w->len = 0;
		w->kind = REC_WRAP;
		p->prod += wrap;
		off = 0;
	}
	struct rec *r = (struct rec *)(ring + off);
	uint8_t *d = ring + off + REC_HDR;
	uint32_t copied = 0;
	for (int i = 0; i < iovcnt; i++) {
		size_t l = iov[i].iov_len;
		if (l > len - copied)
			return -EINVAL;
		memcpy(d + copied, iov[i].iov_base, l);
		copied += (uint32_t)l;
	}
	if (copied != len)
		return -EINVAL;
	r->len = len;
	r->kind = REC_PKT;
	r->tos = tos;
	p->prod += need;
	if (!p->dirty) {
		p->dirty = true;
		s->ndirty++;
	}
	if (p->prod - p->published >= SRN_SHM_PUBLISH_BYTES) {
		/* Mid-burst: the doorbell, if one is needed, comes with the
		 * burst's end (srn_shm_publish).  Pairs with the receiver's
		 * acquire load of prod (srn_shm_poll): the records are written. */
		atomic_store_explicit(&c->prod, p->prod, memory_order_release);
		p->published = p->prod;
	}
	return 0;
}

void srn_shm_publish(struct srn_shm *s,
		     void (*ring)(void *ctx, const struct sockaddr *dst, socklen_t len,
				  unsigned member, int bell),
		     void *ctx)
{
	if (!s->ndirty)
		return;
	for (int i = 0; i < s->npeers; i++) {
		struct srn_shm_peer *p = &s->peer[i];
		if (p->dirty) {
			/* Pairs with the receiver's acquire load of prod
			 * (srn_shm_poll): the records below it are written. */
			atomic_store_explicit(&p->seg->h.slot[p->slot].prod, p->prod,
					      memory_order_release);
			p->published = p->prod;
		}
	}
	/* Publish, then look at `sleeping`: the receiver raises it, then
	 * looks at the indices (srn_shm_sleep_begin).  With a full fence on
	 * both sides one of the two sees the other. */
	atomic_thread_fence(memory_order_seq_cst);
	for (int i = 0; i < s->npeers; i++) {
		struct srn_shm_peer *p = &s->peer[i];
		if (!p->dirty)
			continue;
		p->dirty = false;
		if (!atomic_load_explicit(&p->seg->h.sleeping, memory_order_relaxed))
			continue;
		/* Taken once per process behind the address (detach() forgets
		 * it), and again if the word changes: its bell appears once its
		 * progress thread runs, after the inbox.  Rung by datagram, a
		 * shared address's member costs the sender the group's files
		 * per doorbell (the block store's server: 80 % of its CPU). */
		if (p->bell < 0) {
			int32_t b = atomic_load_explicit(&p->seg->h.bell_fd, memory_order_relaxed);
			if (b > 0 && b != p->bell_tried) {
				p->bell_tried = b;
				p->bell = srn_shm_bell_take(p->owner_fd, b - 1);
			}
		}
		ring(ctx, (const struct sockaddr *)&p->addr, p->addrlen, p->member, p->bell);
	}
	s->ndirty = 0;
}

/* The one check of a record, before anything in it is used: `cons` and
 * `prod` are private copies, the header is read once.  Returns the bytes
 * the record spans (its step; *kind and *len filled), or 0 when this is
 * not a ring we can read from here on. */
static uint64_t rec_check(const uint8_t *ring, uint64_t rb, uint64_t cons, uint64_t prod,
			  uint32_t *kind, uint32_t *len)
{
	uint64_t avail = prod - cons, off = cons % rb;
	/* More published than the ring holds (or an index that went back):
	 * the producer's word is a lie. */
	if (avail > rb)
		return 0;
	/* Our index moves by whole records, so it is aligned, unless a bad
	 * record made us skip to an unaligned prod: a header read there
	 * could straddle the ring's end (4 bytes past the mapping when it
	 * starts 4 bytes short of it). */
	if (off % REC_ALIGN)
		return 0;
	/* Not even a header published.  Aligned, the header fits the ring
	 * (rb is a multiple of REC_ALIGN >= REC_HDR). */
	if (avail < REC_HDR)
		return 0;
	/* Once each: the producer may rewrite them while we look. */
	*len = __atomic_load_n((const uint32_t *)(ring + off), __ATOMIC_RELAXED);
	*kind = __atomic_load_n((const uint32_t *)(ring + off + 4), __ATOMIC_RELAXED);
	uint64_t step;
	if (*kind == REC_WRAP) {
		step = rb - off;             /* to the ring's start: >= REC_ALIGN */
	} else if (*kind == REC_PKT) {
		/* Longer than any packet we send: a length we would copy
		 * past the record on. */
		if (*len > SRN_SHM_MAX_PKT)
			return 0;
		step = rec_bytes(*len);
		/* Records never wrap: one that runs past the ring's end is
		 * not a record. */
		if (step > rb - off)
			return 0;
	} else {
		return 0;                    /* a kind we never write */
	}
	/* Every step stays inside what was published. */
	return step <= avail ? step : 0;
}

int srn_shm_ring_read(const uint8_t *ring, uint64_t rb, uint64_t *cons, uint64_t prod, int max,
		      srn_shm_deliver_fn deliver, void *ctx, const struct sockaddr *src)
{
	if (!rb || rb % REC_ALIGN)
		return 0;
	uint64_t c = *cons;
	int n = 0;
	while (c != prod && n < max) {
		uint32_t kind, len;
		uint64_t step = rec_check(ring, rb, c, prod, &kind, &len);
		if (!step) {
			c = prod;       /* not a ring we can read: drop what is in it */
			break;
		}
		if (kind == REC_PKT) {
			/* Any value is harmless: only its ECN bits are read. */
			uint8_t tos = __atomic_load_n(ring + c % rb + offsetof(struct rec, tos), __ATOMIC_RELAXED);
			deliver(ctx, ring + c % rb + REC_HDR, len, src, tos);
			n++;
		}
		c += step;
	}
	*cons = c;
	return n;
}

int srn_shm_poll(struct srn_shm *s, int max, srn_shm_deliver_fn deliver, void *ctx)
{
	if (!s->in)
		return 0;
	struct inbox_hdr *h = &s->in->h;
	/* Pairs with a sender's release fetch_or of active (attach_inbox):
	 * a slot seen active has its source address and indices set. */
	uint64_t act = atomic_load_explicit(&h->active, memory_order_acquire) & ALL_SLOTS;
	/* Start one slot further each time: a busy sender cannot keep the
	 * budget from the others. */
	uint32_t first = s->next_slot++ % SRN_SHM_SLOTS;
	act = (act >> first | act << (SRN_SHM_SLOTS - first)) & ALL_SLOTS;
	int n = 0;
	while (act && n < max) {
		uint32_t i = ((uint32_t)__builtin_ctzll(act) + first) % SRN_SHM_SLOTS;
		act &= act - 1;
		struct slot_ctl *c = &h->slot[i];
		/* Pairs with the sender's release store of prod (srn_shm_put,
		 * srn_shm_publish): the records below it are written. */
		uint64_t prod = atomic_load_explicit(&c->prod, memory_order_acquire);
		if (s->cons[i] == prod)
			continue;
		struct sockaddr_storage src;
		/* Pairs with the sender's release store of srclen (attach_inbox). */
		uint32_t srclen = atomic_load_explicit(&c->srclen, memory_order_acquire);
		if (srclen > sizeof(src))
			srclen = 0;
		memset(&src, 0, sizeof(src));
		memcpy(&src, &c->src, srclen);
		n += srn_shm_ring_read(ring_of(s->in, s->in_ring, i), s->in_ring, &s->cons[i], prod,
				       max - n, deliver, ctx, (const struct sockaddr *)&src);
		/* Pairs with the sender's acquire load of cons: the space
		 * below it may be written again. */
		atomic_store_explicit(&c->cons, s->cons[i], memory_order_release);
	}
	return n;
}

bool srn_shm_sleep_begin(struct srn_shm *s)
{
	if (!s->in)
		return true;
	struct inbox_hdr *h = &s->in->h;
	/* A count, not a flag: the progress thread and an application
	 * thread waiting for its completion (engine/wait.c) may both be
	 * about to block, and one waking must not lower the other's. */
	atomic_fetch_add(&h->sleeping, 1);
	atomic_thread_fence(memory_order_seq_cst);
	uint64_t act = atomic_load(&h->active) & ALL_SLOTS;
	while (act) {
		uint32_t i = (uint32_t)__builtin_ctzll(act);
		act &= act - 1;
		if (atomic_load(&h->slot[i].prod) != atomic_load(&h->slot[i].cons)) {
			atomic_fetch_sub(&h->sleeping, 1);
			return false;
		}
	}
	return true;
}

void srn_shm_set_bell(struct srn_shm *s, int fd)
{
	if (s->in)
		atomic_store_explicit(&s->in->h.bell_fd, fd >= 0 ? fd + 1 : 0, memory_order_relaxed);
}

void srn_shm_sleep_end(struct srn_shm *s)
{
	if (s->in)
		atomic_fetch_sub_explicit(&s->in->h.sleeping, 1, memory_order_relaxed);
}
