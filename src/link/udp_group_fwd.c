/*
 * udp_group_fwd.c - what a member of a shared address's group does with
 * the packets that are not its own (see udp_group.h): it forwards them to
 * their owner's forwarding socket, takes in what others forward to it,
 * rings other members' doorbells, and routes QP1's MADs to the CM they
 * are for (wire/gsi_route.h).
 */
#include "link/udp_group_priv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "diag/clock.h"
#include "link/gso.h"
#include "wire/gsi_route.h"

static bool forward(struct srn_udp_group *g, unsigned member, uint32_t flags, const uint8_t *data,
		    uint32_t len, const struct sockaddr *src, socklen_t srclen);
static unsigned owner_of(struct srn_udp_group *g, const uint8_t *d, uint32_t len, uint32_t *flags);

/* Before our socket closes: what the kernel queued on it for other
 * members would die with it (the steering was stale, or the hash picked
 * us), so pass it on.  Bounded: a flood still ends at the close. */
void srn_grp_drain_for_others(struct srn_udp *u)
{
	enum { BATCHES = 64 };
	uint8_t *buf = malloc(SRN_RX_BUFSZ);
	if (!buf)
		return;
	for (int k = 0; k < BATCHES * SRN_RX_BATCH; k++) {
		struct sockaddr_storage src;
		socklen_t sl = sizeof(src);
		ssize_t n = recvfrom(u->fd, buf, SRN_RX_BUFSZ, MSG_DONTWAIT, (struct sockaddr *)&src, &sl);
		if (n < 0)
			break;
		if (n < 8 || srn_grp_is_probe(buf, (uint32_t)n))
			continue;       /* a probe's answer would name a closed socket */
		uint32_t flags = 0;
		unsigned m = owner_of(u->grp, buf, (uint32_t)n, &flags);
		if (m != u->grp->member)
			forward(u->grp, m, flags, buf, (uint32_t)n, (const struct sockaddr *)&src, sl);
	}
	free(buf);
}


/* One process-wide socket sends doorbells from devices that are in no
 * group to a member's forwarding socket. */
static int tx_sock(void)
{
	static _Atomic int fd = -1;
	int f = atomic_load_explicit(&fd, memory_order_acquire);
	if (f >= 0)
		return f;
	int n = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
	if (n < 0)
		return -1;
	int expect = -1;
	if (!atomic_compare_exchange_strong(&fd, &expect, n)) {
		close(n);
		return expect;
	}
	return n;
}

/* The record in the open slot file fd, if its member lives (holds the
 * lock) and the record is one with a forwarding address: 0, else -ENOENT. */
static int slot_rec_read(int fd, struct slot_rec *r)
{
	if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
		flock(fd, LOCK_UN);     /* nobody holds it: the member is gone */
		return -ENOENT;
	}
	if (pread(fd, r, sizeof(*r), 0) != (ssize_t)sizeof(*r) || r->magic != SLOT_MAGIC ||
	    r->fwd.sin_family != AF_INET || r->fwd.sin_port == 0 ||
	    r->fwd.sin_addr.s_addr != htonl(INADDR_LOOPBACK))
		return -ENOENT;
	return 0;
}

/* Where the member of the open slot file fd takes forwarded packets. */
static int slot_read(int fd, struct sockaddr_in *out)
{
	struct slot_rec r;
	int ret = slot_rec_read(fd, &r);
	if (!ret)
		*out = r.fwd;
	return ret;
}

/* Member k's slot file, if it exists (a QPN from the wire names any
 * member: no file is created for it). */
static int open_slot(const struct srn_udp_group *g, unsigned k)
{
	char suffix[16];
	snprintf(suffix, sizeof(suffix), ".m%u", k);
	return srn_grp_open_existing(g, suffix);
}

static int slot_fwd(const struct srn_udp_group *g, unsigned k, struct sockaddr_in *out)
{
	int fd = open_slot(g, k);
	if (fd < 0)
		return -ENOENT;
	int ret = slot_read(fd, out);
	close(fd);
	return ret;
}

int srn_grp_fwd_send(int from, const struct sockaddr_in *to, uint32_t magic, uint32_t flags,
		    uint64_t secret, const struct sockaddr *src, socklen_t srclen, const uint8_t *data,
		    uint32_t len)
{
	struct fwd_hdr h = { .magic = magic, .srclen = srclen, .flags = flags, .secret = secret };
	if (srclen > sizeof(h.src))
		return -EINVAL;
	memcpy(&h.src, src, srclen);
	struct iovec iov[2] = { { &h, sizeof(h) }, { (void *)data, len } };
	struct msghdr mh = { .msg_name = (void *)to, .msg_namelen = sizeof(*to), .msg_iov = iov,
			     .msg_iovlen = len ? 2 : 1 };
	return sendmsg(from, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/* Member k's forwarding address, read from its slot file now: a cached
 * one goes stale when the holder leaves and the next process takes the
 * number with another port, and what is sent to the old port is lost
 * (a UD datagram for good).  Two system calls on the forwarding path,
 * which is the slow path anyway. */
const struct sockaddr_in *srn_grp_peer_fwd(struct srn_udp_group *g, unsigned k)
{
	if (g->peer_fd[k] < 0 && (g->peer_fd[k] = open_slot(g, k)) < 0)
		return NULL;
	return slot_read(g->peer_fd[k], &g->peer_to) ? NULL : &g->peer_to;
}

int srn_udp_group_doorbell(struct srn_udp *u, const struct sockaddr *dst, socklen_t dstlen,
			   unsigned member)
{
	(void)dstlen;
	if (member >= SRN_GRP_MEMBERS)
		return -ENOENT;
	struct srn_udp_group tmp, *g = u->grp;
	const struct sockaddr_in *to = NULL;
	struct sockaddr_in a;
	int from;
	char key[sizeof(tmp.key)];
	if (srn_grp_addr_key(dst, key, sizeof(key)))
		return -ENOENT;
	if (g && !strcmp(g->key, key) && g->fwd_fd >= 0) {
		to = srn_grp_peer_fwd(g, member);
		from = g->fwd_fd;
	} else {
		/* Not our group: its files tell the port and the secret. */
		memset(&tmp, 0, sizeof(tmp));
		if (srn_grp_dir_name(tmp.dir, sizeof(tmp.dir)))
			return -ENOENT;
		memcpy(tmp.key, key, sizeof(key));
		int ofd = srn_grp_open_ours(&tmp, ".order");
		struct order_file o;
		if (ofd < 0)
			return -ENOENT;
		bool known = pread(ofd, &o, sizeof(o), 0) == (ssize_t)sizeof(o) && o.magic == ORDER_MAGIC;
		close(ofd);
		if (!known || slot_fwd(&tmp, member, &a))
			return -ENOENT;
		tmp.secret = o.secret;
		g = &tmp;
		to = &a;
		from = tx_sock();
	}
	if (!to || from < 0)
		return -ENOENT;
	/* The doorbell's source is ours; the owner ignores it (empty). */
	int r = srn_grp_fwd_send(from, to, FWD_MAGIC, 0, g->secret, (const struct sockaddr *)&u->local,
			 u->local_len, NULL, 0);
	return r == -EAGAIN ? 0 : r;     /* a full socket wakes its reader anyway */
}

static uint32_t bth_dest_qpn(const uint8_t *d)
{
	return (uint32_t)d[5] << 16 | (uint32_t)d[6] << 8 | d[7];
}

/* QP1's MADs (wire/gsi_route.h) and the members they are for. */

static bool is_req(const uint8_t *d, uint32_t len)
{
	return len >= 8 && bth_dest_qpn(d) == SRN_GSI_QPN &&
	       srn_gsi_route(d, len).kind == SRN_GSI_ROUTE_SID;
}

/* Member k's slot record if it lives, by a fresh open (no descriptor
 * kept: a scan may look at every member). */
static int slot_peek(const struct srn_udp_group *g, unsigned k, struct slot_rec *r)
{
	int fd = open_slot(g, k);
	if (fd < 0)
		return fd;
	int ret = slot_rec_read(fd, r);
	close(fd);
	return ret;
}

/* The live member whose process is pid, or -1.  It runs for a REQ to
 * another process, once per connection; and for every REQ a remote peer
 * sends that names such a port.  So the scan covers the members the
 * order file lists, not every possible slot: a REQ-shaped packet cost up
 * to 255 failed opens before its ICRC was checked (test_trust_cm_flood). */
static int member_of_pid(const struct srn_udp_group *g, long pid)
{
	uint8_t list[SRN_GRP_MEMBERS];
	unsigned n = srn_grp_order_members(g, list);
	for (unsigned i = 0; i < n; i++) {
		struct slot_rec r;
		if (list[i] != g->member && slot_peek(g, list[i], &r) == 0 && r.pid == pid)
			return (int)list[i];
	}
	return -1;
}

/* A group where no process runs a CM answers no REQ anyway: after a scan
 * that found none, the next looks wait this long (a CM that starts
 * meanwhile gets REQs from then on; the requester's CM retries). */
#define GSI_NONE_RECHECK_NS 50000000ull

/* A live member whose CM serves QP1, or -1: the last one found first,
 * then the members the order file lists (see member_of_pid). */
static int gsi_member(struct srn_udp_group *g)
{
	struct slot_rec r;
	if (g->gsi_hint != g->member && slot_peek(g, g->gsi_hint, &r) == 0 && (r.flags & SLOT_GSI))
		return (int)g->gsi_hint;
	uint64_t now = srn_now_ns();
	if (g->gsi_none_ns && now - g->gsi_none_ns < GSI_NONE_RECHECK_NS)
		return -1;
	uint8_t list[SRN_GRP_MEMBERS];
	unsigned n = srn_grp_order_members(g, list);
	for (unsigned i = 0; i < n; i++)
		if (list[i] != g->member && slot_peek(g, list[i], &r) == 0 && (r.flags & SLOT_GSI)) {
			g->gsi_hint = list[i];
			g->gsi_none_ns = 0;
			return (int)list[i];
		}
	g->gsi_none_ns = now;
	return -1;
}

/* The member that listens for the request d.  Without a CM of our own we cannot
 * tell: a member that has one gets it, to route once more (FWD_ROUTE). */
static unsigned listener_member(struct srn_udp_group *g, const uint8_t *d, uint32_t len,
				uint32_t *flags)
{
	srn_gsi_listener_fn *fn = atomic_load_explicit(&g->gsi_fn, memory_order_acquire);
	if (!fn) {
		int m = gsi_member(g);
		if (m < 0)
			return g->member;
		*flags = FWD_ROUTE;
		return (unsigned)m;
	}
	long pid = fn(d + SRN_GSI_MAD_OFF, len - SRN_GSI_MAD_OFF);
	if (pid <= 0) {
		*flags = FWD_UNHEARD;   /* our CM holds it; we keep the packet */
		return g->member;
	}
	int m = pid != (long)getpid() ? member_of_pid(g, pid) : -1;
	return m < 0 ? g->member : (unsigned)m;     /* ours, or not in the group: our CM answers */
}

/* The source GID of a stashed REQ, and its requester's comm ID. */
static bool stash_is(const struct grp_stashed_req *e, const uint8_t sgid[16], uint32_t comm_id)
{
	uint8_t gid[16];
	srn_sockaddr_to_gid((const struct sockaddr *)&e->src, gid);
	return srn_gsi_be32(e->pkt + SRN_GSI_DATA_OFF) == comm_id && memcmp(gid, sgid, 16) == 0;
}

/* Keep a copy of a REQ our CM is about to hold (FWD_UNHEARD). */
static void stash_req(struct srn_udp_group *g, const uint8_t *d, uint32_t len,
		      const struct sockaddr *src, socklen_t srclen)
{
	if (len > GRP_STASH_MAX || len < SRN_GSI_ROUTE_MIN || srclen > sizeof(g->stash[0].src))
		return;
	struct grp_stashed_req *e = &g->stash[g->stash_next];
	uint8_t gid[16];
	srn_sockaddr_to_gid(src, gid);
	for (unsigned i = 0; i < GRP_STASH_N; i++)   /* a retransmission takes its old entry */
		if (g->stash[i].t_ns && stash_is(&g->stash[i], gid, srn_gsi_be32(d + SRN_GSI_DATA_OFF)))
			e = &g->stash[i];
	if (e == &g->stash[g->stash_next])
		g->stash_next = (g->stash_next + 1) % GRP_STASH_N;
	e->t_ns = srn_now_ns();
	e->len = len;
	e->srclen = srclen;
	memcpy(&e->src, src, srclen);
	memcpy(e->pkt, d, len);
}

int srn_udp_group_reroute(struct srn_udp *u, const uint8_t sgid[16], uint32_t comm_id, long pid)
{
	struct srn_udp_group *g = u->grp;
	if (!g)
		return -ENOENT;
	uint64_t now = srn_now_ns();
	for (unsigned i = 0; i < GRP_STASH_N; i++) {
		struct grp_stashed_req *e = &g->stash[i];
		if (!e->t_ns || now - e->t_ns > GRP_STASH_NS || !stash_is(e, sgid, comm_id))
			continue;
		int m = pid > 0 && pid != (long)getpid() ? member_of_pid(g, pid) : -1;
		if (m < 0)
			return -ESRCH;
		const struct sockaddr_in *to = g->fwd_fd >= 0 ? srn_grp_peer_fwd(g, (unsigned)m) : NULL;
		if (!to)
			return -ESRCH;
		int r = srn_grp_fwd_send(g->fwd_fd, to, FWD_MAGIC, 0, g->secret,
					 (const struct sockaddr *)&e->src, e->srclen, e->pkt, e->len);
		if (r)
			return r == -EAGAIN || r == -ENOBUFS ? -EAGAIN : r;
		g->st.forwarded++;
		e->t_ns = 0;
		return 0;
	}
	return -ENOENT;
}

/* Which member a packet is for; *flags gets FWD_ROUTE when that member
 * must route it once more. */
static unsigned owner_of(struct srn_udp_group *g, const uint8_t *d, uint32_t len, uint32_t *flags)
{
	/* An empty doorbell has no QPN: it is member 0's (see the program). */
	if (len < 8)
		return 0;
	uint32_t qpn = bth_dest_qpn(d);
	if (qpn != SRN_GSI_QPN)
		return srn_qpn_member(qpn);
	struct srn_gsi_route r = srn_gsi_route(d, len);
	if (r.kind == SRN_GSI_ROUTE_MEMBER)
		return r.member;
	if (r.kind == SRN_GSI_ROUTE_SID)
		return listener_member(g, d, len, flags);
	return g->member;       /* not a CM MAD: whoever has it answers */
}

/* A REQ that a member without a CM passed to us: forward it to its
 * listener, unless that is us (or nobody).  True when it went on. */
static bool route_again(struct srn_udp_group *g, const uint8_t *d, uint32_t len,
			const struct fwd_hdr *h)
{
	uint32_t flags = 0;
	unsigned m = owner_of(g, d, len, &flags);
	if (m == g->member && (flags & FWD_UNHEARD))
		stash_req(g, d, len, (const struct sockaddr *)&h->src, h->srclen);
	if (m == g->member || flags)
		return false;
	return forward(g, m, 0, d, len, (const struct sockaddr *)&h->src, h->srclen);
}

void srn_udp_group_set_gsi(struct srn_udp *u, srn_gsi_listener_fn *fn)
{
	struct srn_udp_group *g = u->grp;
	if (!g)
		return;
	atomic_store_explicit(&g->gsi_fn, fn, memory_order_release);
	/* Tell the others, for REQs they have no CM to route. */
	g->rec.flags = fn ? g->rec.flags | SLOT_GSI : g->rec.flags & ~SLOT_GSI;
	struct slot_rec r = g->rec;
	if (r.magic == SLOT_MAGIC && pwrite(g->slot_fd, &r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		/* Then REQs reach us by the program or from a CM member only. */
	}
}

/* Pass one packet on to its owner.  False: keep it here (the owner has
 * no forwarding socket: gone, or never there for a QP1 MAD). */
static bool forward(struct srn_udp_group *g, unsigned member, uint32_t flags, const uint8_t *data,
		    uint32_t len, const struct sockaddr *src, socklen_t srclen)
{
	const struct sockaddr_in *to = g->fwd_fd >= 0 ? srn_grp_peer_fwd(g, member) : NULL;
	if (!to) {
		g->st.fwd_failed++;
		return false;
	}
	if (srn_grp_fwd_send(g->fwd_fd, to, FWD_MAGIC, flags, g->secret, src, srclen, data, len) == 0)
		g->st.forwarded++;
	else
		g->st.fwd_failed++;     /* full: dropped, as a full socket drops */
	return true;
}

/* Receive what other members forwarded into the unused slots from `first`. */
/* Receive up to n forwarded packets into buf[0..n) (each cap bytes):
 * returns how many arrived valid; ok[i] says which of the first r did,
 * len[i] their packet length, g->rx_hdr[i] their header. */
static int fwd_recv(struct srn_udp_group *g, uint8_t *const *buf, size_t cap, int n, bool *ok,
		    uint32_t *len)
{
	if (n <= 0 || g->fwd_fd < 0)
		return 0;
	uint64_t now = srn_now_ns();
	if (!g->fwd_busy && now - g->fwd_polled_ns < g->fwd_gap_ns)
		return 0;
	g->fwd_polled_ns = now;
	/* The watch shares the forwarding socket's looks (and its place in
	 * the engine's poll sets: poll_fd). */
	srn_grp_watch_read(g, now);
	struct iovec iov[SRN_RX_BATCH][2];
	struct mmsghdr mm[SRN_RX_BATCH];
	if (n > SRN_RX_BATCH)
		n = SRN_RX_BATCH;
	for (int i = 0; i < n; i++) {
		iov[i][0] = (struct iovec){ &g->rx_hdr[i], sizeof(g->rx_hdr[i]) };
		iov[i][1] = (struct iovec){ buf[i], cap };
		memset(&mm[i], 0, sizeof(mm[i]));
		mm[i].msg_hdr.msg_iov = iov[i];
		mm[i].msg_hdr.msg_iovlen = 2;
	}
	int r = recvmmsg(g->fwd_fd, mm, (unsigned)n, MSG_DONTWAIT, NULL);
	g->fwd_busy = r > 0;
	g->fwd_gap_ns = r > 0 || g->foreign_seen ? FWD_POLL_GAP_NS
			: g->fwd_gap_ns * 2 > FWD_POLL_GAP_MAX_NS ? FWD_POLL_GAP_MAX_NS
			: g->fwd_gap_ns * 2;
	if (r <= 0)
		return 0;
	for (int i = 0; i < r; i++) {
		const struct fwd_hdr *h = &g->rx_hdr[i];
		/* Anyone on this host can send here: only what carries the
		 * group's secret is a member's, and even that is bounded. */
		ok[i] = mm[i].msg_len >= sizeof(*h) && !(mm[i].msg_hdr.msg_flags & MSG_TRUNC) &&
			h->magic == FWD_MAGIC && h->secret == g->secret && h->srclen <= sizeof(h->src) &&
			(h->src.ss_family == AF_INET || h->src.ss_family == AF_INET6);
		if (mm[i].msg_len >= sizeof(*h) && h->magic == RESTEER_MAGIC &&
		    h->secret == g->secret)
			g->resteer_asked = true;
		if (mm[i].msg_len >= sizeof(*h) && h->magic == PROBE_ANS_MAGIC &&
		    h->secret == g->secret && !(mm[i].msg_hdr.msg_flags & MSG_TRUNC))
			srn_grp_probe_answer(g, buf[i], mm[i].msg_len - (uint32_t)sizeof(*h));
		len[i] = ok[i] ? mm[i].msg_len - (uint32_t)sizeof(*h) : 0;
		if (ok[i] && len[i])
			g->st.fwd_rcvd++;
		/* A REQ a member without a CM passed to us: ours to route. */
		if (ok[i] && (h->flags & FWD_ROUTE) && route_again(g, buf[i], len[i], h))
			ok[i] = false;
	}
	return r;
}

/* Is this packet another member's, and did it go there? */
static bool foreign(struct srn_udp_group *g, const uint8_t *d, uint32_t len,
		    const struct sockaddr *src, socklen_t srclen)
{
	if (srn_grp_probe_rx(g, d, len))
		return true;    /* a probe: answered, never a packet */
	uint32_t flags = 0;
	unsigned m = owner_of(g, d, len, &flags);
	if (m == g->member) {
		if (flags & FWD_UNHEARD)
			stash_req(g, d, len, src, srclen);
		return false;
	}
	/* A REQ reaches any member by design; anything else here means the
	 * program is stale. */
	if (!flags && !is_req(d, len))
		g->foreign_seen = true;
	return forward(g, m, flags, d, len, src, srclen);
}

int srn_udp_group_gro(struct srn_udp *u, struct srn_gro_batch *b)
{
	struct srn_udp_group *g = u->grp;
	int out = 0;
	for (int i = 0; i < b->count; i++) {
		const struct sockaddr *src = (const struct sockaddr *)b->pkt[i].src;
		socklen_t sl = src->sa_family == AF_INET ? sizeof(struct sockaddr_in) :
							   sizeof(struct sockaddr_in6);
		if (foreign(g, b->pkt[i].data, b->pkt[i].len, src, sl))
			continue;
		if (out != i)
			b->pkt[out] = b->pkt[i];
		out++;
	}
	/* The message buffers this receive left unused take forwarded
	 * packets, one each, their source in the message's address slot. */
	uint8_t *buf[SRN_GRO_MSGS];
	int free_ = 0;
	for (int i = b->datagrams; i < SRN_GRO_MSGS && out + free_ < SRN_GRO_MAX_PKTS; i++)
		buf[free_++] = b->bufs + (size_t)i * SRN_GRO_BUFSZ;
	bool ok[SRN_GRO_MSGS];
	uint32_t len[SRN_GRO_MSGS];
	int r = fwd_recv(g, buf, SRN_GRO_BUFSZ, free_, ok, len);
	for (int i = 0; i < r; i++) {
		if (!ok[i])
			continue;
		int slot = b->datagrams + i;
		memcpy(&b->src[slot], &g->rx_hdr[i].src, sizeof(b->src[slot]));
		b->pkt[out].data = buf[i];
		b->pkt[out].len = len[i];
		b->pkt[out].seg_index = 0;
		b->pkt[out].src = &b->src[slot];
		out++;
	}
	b->count = out;
	if (g->foreign_seen || g->resteer_asked)
		srn_grp_resteer(u);
	srn_udp_group_tick(u, srn_now_ns());
	return out;
}

int srn_udp_group_rx(struct srn_udp *u, struct srn_rx_batch *b, int n)
{
	struct srn_udp_group *g = u->grp;
	if (n < 0) {
		srn_udp_group_tick(u, srn_now_ns());
		return n;
	}
	int out = 0;
	for (int i = 0; i < n; i++) {
		if (foreign(g, b->pkt[i].data, b->pkt[i].len, (const struct sockaddr *)&b->pkt[i].src,
			    b->pkt[i].srclen))
			continue;
		if (out != i)
			b->pkt[out] = b->pkt[i];
		out++;
	}
	/* Forwarded packets into the slots this receive left unused. */
	uint8_t *buf[SRN_RX_BATCH];
	for (int i = n; i < SRN_RX_BATCH; i++)
		buf[i - n] = b->bufs + (size_t)i * SRN_RX_BUFSZ;
	bool ok[SRN_RX_BATCH];
	uint32_t len[SRN_RX_BATCH];
	int r = fwd_recv(g, buf, SRN_RX_BUFSZ, SRN_RX_BATCH - n, ok, len);
	for (int i = 0; i < r; i++) {
		if (!ok[i])
			continue;
		b->pkt[out].data = buf[i];
		b->pkt[out].len = len[i];
		memcpy(&b->pkt[out].src, &g->rx_hdr[i].src, sizeof(b->pkt[out].src));
		b->pkt[out].srclen = g->rx_hdr[i].srclen;
		out++;
	}
	b->count = out;
	if (g->foreign_seen || g->resteer_asked)
		srn_grp_resteer(u);
	srn_udp_group_tick(u, srn_now_ns());
	return out;
}
