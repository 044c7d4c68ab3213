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
 * Everything a peer wrote is read once into locals and bounded before use:
 * a broken or hostile peer can lose its own packets, not crash us.
 *
 * Memory: the segment is sparse; the receiver reserves its header and
 * each sender the ring of the slot it claims (fallocate), before anyone
 * touches them.  A full /dev/shm (64 MiB in a default container) then
 * means "take UDP", never a SIGBUS on a page tmpfs cannot supply.
 */
#include "link/shm.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define SHM_MAGIC 0x314b4e494c4e5253ull        /* "SRNLINK1", little-endian */
#define SHM_LAYOUT 1
#define SHM_PREFIX "softrnic-link-"              /* then netns-address-port */
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
	alignas(64) _Atomic uint32_t sleeping;  /* the receiver is about to block */
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

struct rec {
	uint32_t len, kind;
	uint64_t reserved;
};

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

static uint64_t coarse_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A process that can still drain its inbox: it exists and is not a
 * zombie (killed but not yet reaped: kill(pid, 0) still succeeds, and a
 * container's pid 1 may take its time reaping). */
static bool pid_alive(int32_t pid)
{
	if (pid <= 0 || (kill(pid, 0) != 0 && errno != EPERM))
		return false;
	char path[32], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = 0;
	const char *rp = strrchr(buf, ')');   /* the name may hold anything */
	return !(rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'));
}

/* The inbox name of a device: network namespace, address, port.  False
 * for addresses that never have one (multicast, other families). */
static bool inbox_name(char *out, size_t n, uint64_t netns, const struct sockaddr *a)
{
	char ip[INET6_ADDRSTRLEN];
	unsigned port;
	if (a->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)a;
		if (IN_MULTICAST(ntohl(s->sin_addr.s_addr)))
			return false;
		inet_ntop(AF_INET, &s->sin_addr, ip, sizeof(ip));
		port = ntohs(s->sin_port);
	} else if (a->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)a;
		if (s->sin6_addr.s6_addr[0] == 0xff)
			return false;
		inet_ntop(AF_INET6, &s->sin6_addr, ip, sizeof(ip));
		port = ntohs(s->sin6_port);
	} else {
		return false;
	}
	return (size_t)snprintf(out, n, "/" SHM_PREFIX "%llx-%s-%u", (unsigned long long)netns, ip,
				port) < n;
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
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return NULL;
	/* A forked child does not use the parent's device; it must not keep
	 * the segment's memory alive after the parent is gone. */
	madvise(p, len, MADV_DONTFORK);
	return p;
}

/* The identity part of an inbox header, read with pread: a read through a
 * mapping could fault on a page tmpfs cannot supply (SIGBUS). */
static bool read_identity(int fd, struct inbox_hdr *out)
{
	size_t n = offsetof(struct inbox_hdr, sleeping);
	return pread(fd, out, n, 0) == (ssize_t)n && out->magic == SHM_MAGIC;
}

/* Retire the inbox `name` of a device that is gone: mark it closed, so
 * senders still mapping it go back to UDP (and look for a successor) at
 * once, and unlink it, but only the very file looked at, never one that
 * replaced it meanwhile.  only_if_dead: leave it if its owner lives. */
static void retire_inbox(const char *name, bool only_if_dead)
{
	int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0)
		return;
	struct stat st, now;
	struct inbox_hdr id;
	char path[NAME_MAX + 16];
	snprintf(path, sizeof(path), "/dev/shm%s", name);
	bool ours = fstat(fd, &st) == 0 && st.st_uid == geteuid();
	bool valid = ours && (size_t)st.st_size >= HDR_BYTES && read_identity(fd, &id);
	if (!ours || (only_if_dead && (!valid || pid_alive(id.owner_pid)))) {
		close(fd);
		return;
	}
	if (valid) {
		/* Its header page is allocated (written before the magic). */
		struct inbox_hdr *h = mmap(NULL, HDR_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (h != MAP_FAILED) {
			atomic_store(&h->closed, 1);
			munmap(h, HDR_BYTES);
		}
	}
	if (stat(path, &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev)
		shm_unlink(name);
	close(fd);
}

/* Inboxes of processes that died without closing (a crash, a kill) hold
 * memory in /dev/shm: retire those of this user whose owner is gone. */
static void sweep_dead_inboxes(void)
{
	DIR *d = opendir("/dev/shm");
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, SHM_PREFIX, strlen(SHM_PREFIX)))
			continue;
		char name[NAME_MAX + 2];
		snprintf(name, sizeof(name), "/%s", e->d_name);
		retire_inbox(name, true);
	}
	closedir(d);
}

int srn_shm_open(struct srn_shm *s, const struct sockaddr *local, socklen_t len, bool enabled)
{
	memset(s, 0, sizeof(*s));
	s->enabled = enabled;
	s->pid = getpid();
	if (!enabled)
		return 0;
	s->netns = netns_id();
	if (len > sizeof(s->local))
		return -EINVAL;
	memcpy(&s->local, local, len);
	s->local_len = len;
	if (!inbox_name(s->in_name, sizeof(s->in_name), s->netns, local))
		return -EAFNOSUPPORT;
	sweep_dead_inboxes();
	/* This process bound the address and port (no SO_REUSEADDR), so an
	 * inbox already there belongs to a device that is gone. */
	retire_inbox(s->in_name, false);
	int fd = shm_open(s->in_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	s->in_ring = ring_size_setting();
	int ret = ftruncate(fd, (off_t)seg_bytes(s->in_ring)) || fallocate(fd, 0, 0, (off_t)HDR_BYTES)
			  ? -errno : 0;
	struct srn_shm_seg *g = ret ? NULL : map_seg(fd, seg_bytes(s->in_ring));
	if (!ret && !g)
		ret = -errno;
	close(fd);
	if (ret) {
		shm_unlink(s->in_name);
		return ret;
	}
	g->h.layout = SHM_LAYOUT;
	g->h.nslots = SRN_SHM_SLOTS;
	g->h.ring_bytes = s->in_ring;
	g->h.netns = s->netns;
	g->h.owner_pid = (int32_t)getpid();
	atomic_store_explicit(&g->h.magic, SHM_MAGIC, memory_order_release);
	s->in = g;
	return 0;
}

static void detach(struct srn_shm_peer *p)
{
	if (!p->seg)
		return;
	uint64_t me = (uint64_t)getpid();
	/* Free the slot; whoever claims it next continues from its indices. */
	atomic_compare_exchange_strong(&p->seg->h.slot[p->slot].claim, &me, 0);
	munmap(p->seg, seg_bytes(p->ring));
	p->seg = NULL;
}

void srn_shm_exit(struct srn_shm *s)
{
	if (s->pid != getpid())
		return;         /* a forked child: the mappings stayed with the parent */
	if (s->in && !atomic_exchange(&s->in->h.closed, 1))
		shm_unlink(s->in_name);
}

void srn_shm_close(struct srn_shm *s)
{
	if (s->pid != getpid()) {
		memset(s, 0, sizeof(*s));      /* a forked child: nothing here is mapped */
		return;
	}
	for (int i = 0; i < s->npeers; i++)
		detach(&s->peer[i]);
	if (s->in) {
		srn_shm_exit(s);
		munmap(s->in, seg_bytes(s->in_ring));
		s->in = NULL;
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
		if (owner != me && !pid_alive((int32_t)owner) &&
		    atomic_compare_exchange_strong(&g->h.slot[i].claim, &owner, me)) {
			*slot = i;
			return true;
		}
	}
	return false;
}

/* Open dst's inbox and claim a slot in it. */
static int attach(struct srn_shm *s, struct srn_shm_peer *p)
{
	char name[sizeof(s->in_name)];
	if (!inbox_name(name, sizeof(name), s->netns, (const struct sockaddr *)&p->addr))
		return -EAFNOSUPPORT;
	int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* The header first: it says how large the rings are. */
	struct stat st;
	struct srn_shm_seg *g = NULL;
	uint64_t ring = 0;
	struct inbox_hdr id;
	if (fstat(fd, &st) == 0 && (size_t)st.st_size > HDR_BYTES && read_identity(fd, &id))
		ring = id.ring_bytes;
	if (ring >= SRN_SHM_RING_MIN && ring <= SRN_SHM_RING_MAX && !(ring & 4095) &&
	    (size_t)st.st_size == seg_bytes(ring))
		g = map_seg(fd, seg_bytes(ring));
	if (!g) {
		close(fd);
		return -ENOENT;
	}
	struct inbox_hdr *h = &g->h;
	uint32_t slot;
	if (h->layout != SHM_LAYOUT || h->nslots != SRN_SHM_SLOTS || h->ring_bytes != ring ||
	    h->netns != s->netns || atomic_load(&h->closed) || !pid_alive(h->owner_pid) ||
	    !claim_slot(g, &slot)) {
		close(fd);
		munmap(g, seg_bytes(ring));
		return -ENOENT;
	}
	/* Reserve the ring's pages now (see the top of this file). */
	if (fallocate(fd, 0, (off_t)(HDR_BYTES + (size_t)slot * ring), (off_t)ring)) {
		uint64_t me = (uint64_t)getpid();
		atomic_compare_exchange_strong(&h->slot[slot].claim, &me, 0);
		close(fd);
		munmap(g, seg_bytes(ring));
		return -ENOSPC;
	}
	close(fd);
	struct slot_ctl *c = &h->slot[slot];
	memcpy(&c->src, &s->local, s->local_len);
	atomic_store_explicit(&c->srclen, (uint32_t)s->local_len, memory_order_release);
	p->seg = g;
	p->slot = slot;
	p->ring = ring;
	p->fresh = true;
	p->prod = atomic_load_explicit(&c->prod, memory_order_acquire);
	p->published = p->prod;
	p->cons_seen = atomic_load_explicit(&c->cons, memory_order_acquire);
	p->dirty = false;
	atomic_fetch_or_explicit(&h->active, 1ull << slot, memory_order_release);
	return 0;
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

bool srn_shm_has_ring(const struct srn_shm *s, const struct sockaddr *dst, socklen_t dstlen)
{
	for (int i = 0; i < s->npeers; i++)
		if (s->peer[i].seg && same_addr(&s->peer[i].addr, s->peer[i].addrlen, dst, dstlen))
			return true;
	return false;
}

struct srn_shm_peer *srn_shm_route(struct srn_shm *s, const struct sockaddr *dst,
				   socklen_t dstlen)
{
	struct srn_shm_peer *p = NULL;
	for (int i = 0; i < s->npeers; i++)
		if (same_addr(&s->peer[i].addr, s->peer[i].addrlen, dst, dstlen)) {
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
		memset(p, 0, sizeof(*p));
		memcpy(&p->addr, dst, dstlen);
		p->addrlen = dstlen;
	}
	if (p->seg) {
		if (!atomic_load_explicit(&p->seg->h.closed, memory_order_relaxed))
			return p;
		/* Its device closed, or died and a successor on the same
		 * address retired its inbox: look for that successor's inbox
		 * now, else UDP. */
		forget(s, p, 0);
	}
	uint64_t now = coarse_now_ns();
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
	uint64_t now = coarse_now_ns();
	if (now - p->full_check_ns < SRN_SHM_OWNER_CHECK_NS)
		return -EAGAIN;
	p->full_check_ns = now;
	if (pid_alive(p->seg->h.owner_pid))
		return -EAGAIN;
	forget(s, p, now + SRN_SHM_RETRY_NS);
	return -EPIPE;
}

int srn_shm_put(struct srn_shm *s, struct srn_shm_peer *p, const struct iovec *iov, int iovcnt,
		uint32_t len)
{
	if (len > SRN_SHM_MAX_PKT)
		return -EMSGSIZE;
	struct slot_ctl *c = &p->seg->h.slot[p->slot];
	uint8_t *ring = ring_of(p->seg, p->ring, p->slot);
	uint64_t need = rec_bytes(len);
	uint64_t off = p->prod % p->ring;
	uint64_t wrap = p->ring - off < need ? p->ring - off : 0;
	if (p->prod + wrap + need - p->cons_seen > p->ring) {
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
	p->prod += need;
	if (!p->dirty) {
		p->dirty = true;
		s->ndirty++;
	}
	if (p->prod - p->published >= SRN_SHM_PUBLISH_BYTES) {
		/* Mid-burst: the doorbell, if one is needed, comes with the
		 * burst's end (srn_shm_publish). */
		atomic_store_explicit(&c->prod, p->prod, memory_order_release);
		p->published = p->prod;
	}
	return 0;
}

void srn_shm_publish(struct srn_shm *s,
		     void (*ring)(void *ctx, const struct sockaddr *dst, socklen_t len), void *ctx)
{
	if (!s->ndirty)
		return;
	for (int i = 0; i < s->npeers; i++) {
		struct srn_shm_peer *p = &s->peer[i];
		if (p->dirty) {
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
		if (atomic_load_explicit(&p->seg->h.sleeping, memory_order_relaxed))
			ring(ctx, (const struct sockaddr *)&p->addr, p->addrlen);
	}
	s->ndirty = 0;
}

int srn_shm_poll(struct srn_shm *s, int max, srn_shm_deliver_fn deliver, void *ctx)
{
	if (!s->in)
		return 0;
	struct inbox_hdr *h = &s->in->h;
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
		uint64_t prod = atomic_load_explicit(&c->prod, memory_order_acquire);
		uint64_t cons = s->cons[i];
		if (cons == prod)
			continue;
		struct sockaddr_storage src;
		uint32_t srclen = atomic_load_explicit(&c->srclen, memory_order_acquire);
		if (srclen > sizeof(src))
			srclen = 0;
		memset(&src, 0, sizeof(src));
		memcpy(&src, &c->src, srclen);
		uint64_t rb = s->in_ring;
		uint8_t *ring = ring_of(s->in, rb, i);
		while (cons != prod && n < max) {
			uint64_t off = cons % rb, avail = prod - cons;
			const volatile struct rec *r = (const volatile struct rec *)(ring + off);
			uint32_t kind = r->kind, len = r->len;
			/* Every step must stay inside what was published. */
			uint64_t step = kind == REC_WRAP ? rb - off : rec_bytes(len);
			if (avail > rb || (kind != REC_WRAP && kind != REC_PKT) ||
			    len > SRN_SHM_MAX_PKT || step > rb - off || step > avail) {
				cons = prod;    /* not a ring we can read: drop what is in it */
				break;
			}
			if (kind == REC_WRAP) {
				cons += step;
				continue;
			}
			deliver(ctx, ring + off + REC_HDR, len, (const struct sockaddr *)&src);
			cons += step;
			n++;
		}
		s->cons[i] = cons;
		atomic_store_explicit(&c->cons, cons, memory_order_release);
	}
	return n;
}

bool srn_shm_sleep_begin(struct srn_shm *s)
{
	if (!s->in)
		return true;
	struct inbox_hdr *h = &s->in->h;
	atomic_store(&h->sleeping, 1);
	atomic_thread_fence(memory_order_seq_cst);
	uint64_t act = atomic_load(&h->active) & ALL_SLOTS;
	while (act) {
		uint32_t i = (uint32_t)__builtin_ctzll(act);
		act &= act - 1;
		if (atomic_load(&h->slot[i].prod) != atomic_load(&h->slot[i].cons)) {
			atomic_store(&h->sleeping, 0);
			return false;
		}
	}
	return true;
}

void srn_shm_sleep_end(struct srn_shm *s)
{
	if (s->in)
		atomic_store_explicit(&s->in->h.sleeping, 0, memory_order_relaxed);
}
