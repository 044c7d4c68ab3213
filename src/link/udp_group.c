/*
 * udp_group.c - processes sharing one device address (see udp_group.h).
 *
 * Files, all in /dev/shm/softrnic-grp-<euid>-<netns inode>/ (0700, ours,
 * checked on its descriptor before use), named after the address and
 * port, <key> = "<address>-<port>":
 *   <key>.order   the kernel's socket order of the group, as members
 *                 believe it, and the group's secret; flock'ed while a
 *                 member joins or leaves
 *   <key>.m<k>    member slot k: held (flock) by its member while it
 *                 lives; its pid and forwarding port
 * Another user cannot read these, and cannot join the group anyway (the
 * kernel refuses SO_REUSEPORT across effective uids): the trust boundary
 * stays the user.
 *
 * Invariant: a member's slot k is held for as long as its socket is in
 * the group, so a slot file whose lock can be taken names a dead member.
 */
#include "link/udp_group.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <unistd.h>

#include "diag/clock.h"
#include "link/gso.h"
#include "link/udp.h"

#ifndef SO_ATTACH_REUSEPORT_CBPF
#define SO_ATTACH_REUSEPORT_CBPF 51
#endif

#define GRP_DIR_FMT "/dev/shm/softrnic-grp-%u-%llx"
#define ORDER_MAGIC 0x31505247u         /* "GRP1" */
#define FWD_MAGIC 0x31445746u           /* "FWD1" */
#define RESTEER_MAGIC 0x31545352u       /* "RST1": a leaver asks a member to steer again */
#define FWD_SOCKBUF (4u << 20)          /* a burst of forwarded packets */
#define SLOT_MAGIC 0x544f4c53u          /* "SLOT" */

struct order_file {
	uint32_t magic;
	uint32_t n;                     /* sockets in the group */
	uint64_t secret;                /* random, at the group's first join: forwarded packets carry it */
	uint8_t member[SRN_GRP_MEMBERS];  /* member[i]: the member at kernel index i */
};

/* A member slot file: who holds it and where it takes forwarded packets. */
struct slot_rec {
	uint32_t magic;
	int32_t pid;
	struct sockaddr_in fwd;         /* 127.0.0.1:port */
};

/* What precedes a forwarded packet.  The forwarding socket is a UDP port
 * on loopback that any local user can reach; the group's secret, in a
 * file only our user can read, tells our members' packets apart. */
struct fwd_hdr {
	uint32_t magic;
	uint32_t srclen;
	uint64_t secret;
	struct sockaddr_storage src;    /* the packet's source on the wire */
};

/* A member that finds another's packet on its socket while steering is
 * on re-reads the group's order and attaches the program again (the
 * order changed under it: a member left or died), at most this often. */
#define RESTEER_GAP_NS 1000000ull

struct srn_udp_group {
	unsigned member;
	int slot_fd;                    /* flock'ed: our member slot */
	int fwd_fd;                     /* our forwarding socket, -1: none */
	uint64_t secret;
	char dir[96];
	char key[INET6_ADDRSTRLEN + 8];
	/* Member k's slot file, open: read on every forward, because a
	 * member number changes hands and the old holder's port is dead. */
	int peer_fd[SRN_GRP_MEMBERS];   /* -1: not open yet */
	struct sockaddr_in peer_to;     /* the last answer of peer_fwd */
	bool steer;                     /* the program steers (not SOFTRNIC_GROUP_STEER=0) */
	bool foreign_seen;              /* the socket gave us another member's packet */
	bool resteer_asked;             /* a leaver's note came */
	uint64_t resteer_ns;
	struct srn_udp_group_stats st;
	uint64_t fwd_polled_ns;         /* last look at the forwarding socket */
	bool fwd_busy;                  /* and it had something */
	struct fwd_hdr rx_hdr[SRN_RX_BATCH];
};

/* With steering right nothing is forwarded, and a look at an empty
 * forwarding socket on every poll would double the receive path's system
 * calls (half the bandwidth of a lone shared process): look every 20 us
 * unless the last look found packets.  The progress thread's epoll
 * watches the socket, so a sleeping process still wakes at once. */
#define FWD_POLL_GAP_NS 20000ull

static uint64_t netns_ino(void)
{
	struct stat st;
	return stat("/proc/self/ns/net", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* The key of an address: "10.0.0.1-4791", "fd00::1-4791". */
static int addr_key(const struct sockaddr *a, char *out, size_t n)
{
	char ip[INET6_ADDRSTRLEN];
	unsigned port;
	if (a->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)a;
		inet_ntop(AF_INET, &s->sin_addr, ip, sizeof(ip));
		port = ntohs(s->sin_port);
	} else if (a->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)a;
		inet_ntop(AF_INET6, &s->sin6_addr, ip, sizeof(ip));
		port = ntohs(s->sin6_port);
	} else {
		return -EAFNOSUPPORT;
	}
	return (size_t)snprintf(out, n, "%s-%u", ip, port) < n ? 0 : -ENAMETOOLONG;
}

static void dir_name(char *out, size_t n)
{
	snprintf(out, n, GRP_DIR_FMT, (unsigned)geteuid(), (unsigned long long)netns_ino());
}

/* Our private directory: created 0700 if missing; any other kind, owner
 * or mode is refused (someone else's name in world-writable /dev/shm). */
static int dir_ensure(const char *dir)
{
	if (mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	int ret = fstat(fd, &st) ? -errno : 0;
	if (!ret && (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)))
		ret = -EPERM;
	close(fd);
	return ret;
}

/* Open (create) a 0600 file of ours in the directory. */
static int open_ours(const struct srn_udp_group *g, const char *suffix)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s%s", g->dir, g->key, suffix);
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

static bool slot_alive(const struct srn_udp_group *g, unsigned k)
{
	char suffix[16];
	snprintf(suffix, sizeof(suffix), ".m%u", k);
	int fd = open_ours(g, suffix);
	if (fd < 0)
		return false;
	/* A lock we can take is nobody's: its holder died. */
	bool alive = flock(fd, LOCK_SH | LOCK_NB) != 0;
	close(fd);
	return alive;
}

static void order_read(int fd, struct order_file *o)
{
	if (pread(fd, o, sizeof(*o), 0) != (ssize_t)sizeof(*o) || o->magic != ORDER_MAGIC ||
	    o->n > SRN_GRP_MEMBERS || !o->secret) {
		/* A new group (or a file that is not one): a fresh secret. */
		memset(o, 0, sizeof(*o));
		if (getrandom(&o->secret, sizeof(o->secret), 0) != (ssize_t)sizeof(o->secret))
			o->secret = srn_now_ns() ^ ((uint64_t)getpid() << 40);
		o->secret |= 1;
	}
	o->magic = ORDER_MAGIC;
}

/* The kernel closes a socket by moving the group's last one into its
 * place (reuseport_detach_sock); do the same to our picture of it. */
static void order_remove_at(struct order_file *o, unsigned i)
{
	o->member[i] = o->member[o->n - 1];
	o->n--;
}

/* Forget members that died (their slot is free): their sockets left the
 * group when they did.  Exact if one died since the last look. */
static void order_prune(const struct srn_udp_group *g, struct order_file *o, int self)
{
	for (unsigned i = o->n; i-- > 0;)
		if ((int)o->member[i] != self && !slot_alive(g, o->member[i]))
			order_remove_at(o, i);
}

/* The steering part of a program: load the destination QPN's member,
 * return the index i (but not `skip`) whose order[i] it is; falls
 * through when none matches.  Returns the instructions written. */
static int emit_steer(const uint8_t *order, unsigned n, unsigned skip, struct sock_filter *p)
{
	int k = 0;
	/* The BTH's word at byte 4 is reserved:8 | DestQP:24 (IBTA 9.2),
	 * loaded big-endian: the member is bits 23..20.  A packet too short
	 * to have one (an empty doorbell) is member 0's: a load past the end
	 * would end the program with 0, socket index 0, whoever that is. */
	p[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0);
	p[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 8, 0, 4);
	p[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 4);
	p[k++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, SRN_QPN_MEMBER_SHIFT);
	p[k++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, SRN_GRP_MEMBERS - 1);
	p[k++] = (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, 1);
	p[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_IMM, 0);
	for (unsigned i = 0; i < n; i++) {
		if (i == skip)
			continue;
		p[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, order[i], 0, 1);
		p[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, i);
	}
	return k;
}

int srn_udp_group_prog(const uint8_t *order, unsigned n, struct sock_filter *p)
{
	if (n > SRN_GRP_MEMBERS)
		n = SRN_GRP_MEMBERS;
	int k = emit_steer(order, n, n, p);
	/* No such member: an index past the group makes the kernel pick by
	 * hash, and that member forwards. */
	p[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0xffffffffu);
	return k;
}

/* While a member leaves, until its socket is closed: every packet to an
 * index other than its own (`self`), so nothing that arrives after its
 * last look at the socket dies with it.  Steering on: the others'
 * packets to their current indices; its own, a packet of no member, and
 * with steering off every packet, spread over the others by PSN.  After
 * the close the kernel moves the last socket into `self`: its packets
 * then find index n-1 past the end and go by hash, and whoever gets them
 * forwards them and steers the group again (resteer). */
int srn_udp_group_prog_leave(const uint8_t *order, unsigned n, unsigned self, bool steer,
			     struct sock_filter *p)
{
	int k = 0;
	if (n > SRN_GRP_MEMBERS)
		n = SRN_GRP_MEMBERS;
	if (n < 2 || self >= n)
		return 0;
	unsigned first = self == 0 ? 1 : 0;
	if (steer)
		k = emit_steer(order, n, self, p);     /* without our entry */
	/* The spread: PSN (BTH bytes 8..11) mod n-1, skipping self.  A packet
	 * too short for a PSN goes to the first other index. */
	p[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0);
	p[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 12, 1, 0);
	p[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, first);
	p[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 8);
	p[k++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, n - 1);
	p[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, self, 0, 1);
	p[k++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, 1);
	p[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_A, 0);
	return k;
}

/* Put prog[0..n) on the group through our socket. */
static int attach(struct srn_udp *u, struct sock_filter *prog, int n)
{
	/* Zeroed whole: the padding after .len goes to the kernel too (it
	 * reads only the fields; valgrind checks every byte of optval). */
	struct sock_fprog fp;
	memset(&fp, 0, sizeof(fp));
	fp.len = (unsigned short)n;
	fp.filter = prog;
	if (setsockopt(u->fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &fp, sizeof(fp)))
		return -errno;
	u->grp->st.resteers++;
	return 0;
}

static int attach_prog(struct srn_udp *u, const struct order_file *o)
{
	/* SOFTRNIC_GROUP_STEER=0 leaves the kernel's hash to pick (tests:
	 * every packet then has a 1 - 1/N chance to need forwarding). */
	if (!u->grp->steer)
		return 0;
	struct sock_filter prog[SRN_GRP_PROG_MAX];
	return attach(u, prog, srn_udp_group_prog(o->member, o->n, prog));
}

/* Our forwarding socket: UDP on 127.0.0.1, a port of the kernel's
 * choosing, written into our slot file for the others.  (A Unix datagram
 * socket would keep it in our private directory, but its queue holds
 * net.unix.max_dgram_qlen packets, 10 by default, and a burst of
 * forwarded packets would be dropped.)  No loopback: no forwarding. */
static int fwd_open(struct srn_udp_group *g)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
	if (fd < 0)
		return -errno;
	int sz = FWD_SOCKBUF;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(fd, (struct sockaddr *)&a, &al)) {
		int e = -errno;
		close(fd);
		return e;
	}
	struct slot_rec r = { .magic = SLOT_MAGIC, .pid = (int32_t)getpid(), .fwd = a };
	if (pwrite(g->slot_fd, &r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		close(fd);
		return -EIO;
	}
	g->fwd_fd = fd;
	return 0;
}

static void group_free(struct srn_udp_group *g)
{
	for (unsigned k = 0; k < SRN_GRP_MEMBERS; k++)
		if (g->peer_fd[k] >= 0)
			close(g->peer_fd[k]);
	if (g->fwd_fd >= 0)
		close(g->fwd_fd);
	if (g->slot_fd >= 0)
		close(g->slot_fd);       /* releases the slot */
	free(g);
}

/* Take the lowest free member slot. */
static int take_slot(struct srn_udp_group *g)
{
	for (unsigned k = 0; k < SRN_GRP_MEMBERS; k++) {
		char suffix[16];
		snprintf(suffix, sizeof(suffix), ".m%u", k);
		int fd = open_ours(g, suffix);
		if (fd < 0)
			return fd;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			g->member = k;
			g->slot_fd = fd;
			return 0;
		}
		close(fd);
	}
	return -EUSERS;
}

int srn_udp_group_bind(struct srn_udp *u, const struct srn_dev_cfg *cfg,
		       const struct sockaddr *ss, socklen_t sl, char *err, size_t errlen)
{
	struct srn_udp_group *g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->slot_fd = g->fwd_fd = -1;
	for (unsigned k = 0; k < SRN_GRP_MEMBERS; k++)
		g->peer_fd[k] = -1;
	const char *steer = getenv("SOFTRNIC_GROUP_STEER");
	g->steer = !steer || strcmp(steer, "0");
	dir_name(g->dir, sizeof(g->dir));
	int ret = addr_key(ss, g->key, sizeof(g->key));
	if (!ret)
		ret = dir_ensure(g->dir);
	if (ret) {
		snprintf(err, errlen, "%s: cannot use %s for the address's process group: %s",
			 cfg->name, g->dir, strerror(-ret));
		free(g);
		return ret;
	}
	int ofd = open_ours(g, ".order");
	if (ofd < 0) {
		snprintf(err, errlen, "%s: cannot open %s/%s.order: %s", cfg->name, g->dir, g->key,
			 strerror(-ofd));
		free(g);
		return ofd;
	}
	/* Held for microseconds by each joiner and leaver. */
	flock(ofd, LOCK_EX);
	struct order_file o;
	order_read(ofd, &o);
	order_prune(g, &o, -1);
	ret = take_slot(g);
	if (ret) {
		snprintf(err, errlen, "%s: all %u processes an address can hold share %s already",
			 cfg->name, SRN_GRP_MEMBERS, g->key);
		goto out;
	}
	int one = 1;
	if (setsockopt(u->fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one))) {
		ret = -errno;
		snprintf(err, errlen, "%s: cannot set SO_REUSEPORT: %s", cfg->name, strerror(-ret));
		goto out;
	}
	if (bind(u->fd, ss, sl)) {
		ret = -errno;           /* err left empty: the caller explains a bind */
		goto out;
	}
	/* The kernel appended our socket to the group. */
	for (unsigned i = 0; i < o.n; i++)
		if (o.member[i] == g->member)
			order_remove_at(&o, i);   /* a stale entry of a dead holder */
	o.member[o.n++] = (uint8_t)g->member;
	g->secret = o.secret;
	u->grp = g;
	ret = attach_prog(u, &o);
	/* Without loopback the group still works where steering is right. */
	if (!ret && fwd_open(g))
		g->fwd_fd = -1;
	if (ret) {
		snprintf(err, errlen, "%s: cannot steer the group of %s: %s", cfg->name, g->key,
			 strerror(-ret));
		u->grp = NULL;
		goto out;
	}
	if (pwrite(ofd, &o, sizeof(o), 0) != (ssize_t)sizeof(o)) {
		/* Others re-learn the order from their prune; steering is only
		 * the fast path. */
	}
out:
	if (ret)
		group_free(g);
	flock(ofd, LOCK_UN);
	close(ofd);
	return ret;
}

static bool forward(struct srn_udp_group *g, unsigned member, const uint8_t *data, uint32_t len,
		    const struct sockaddr *src, socklen_t srclen);
static uint32_t bth_dest_qpn(const uint8_t *d);
static const struct sockaddr_in *peer_fwd(struct srn_udp_group *g, unsigned k);
static int fwd_send(int from, const struct sockaddr_in *to, uint32_t magic, uint64_t secret,
		    const struct sockaddr *src, socklen_t srclen, const uint8_t *data, uint32_t len);

/* Before our socket closes: what the kernel queued on it for other
 * members would die with it (the steering was stale, or the hash picked
 * us), so pass it on.  Bounded: a flood still ends at the close. */
static void drain_for_others(struct srn_udp *u)
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
		if (n < 8)
			continue;
		unsigned m = srn_qpn_member(bth_dest_qpn(buf));
		if (m != u->grp->member)
			forward(u->grp, m, buf, (uint32_t)n, (const struct sockaddr *)&src, sl);
	}
	free(buf);
}

void srn_udp_group_leave(struct srn_udp *u)
{
	struct srn_udp_group *g = u->grp;
	if (!g)
		return;
	u->grp = NULL;
	int ofd = open_ours(g, ".order");
	if (ofd >= 0) {
		flock(ofd, LOCK_EX);
		struct order_file o;
		order_read(ofd, &o);
		order_prune(g, &o, (int)g->member);
		/* Nothing more to our socket (srn_udp_group_prog_leave), then
		 * what it holds for others passed on, then go; the order as
		 * the close leaves it is written for the others, all under
		 * the lock, so no joiner comes between. */
		u->grp = g;
		for (unsigned i = 0; i < o.n; i++)
			if (o.member[i] == g->member) {
				struct sock_filter prog[SRN_GRP_PROG_MAX];
				int n = srn_udp_group_prog_leave(o.member, o.n, i, g->steer, prog);
				if (n)
					attach(u, prog, n);
				order_remove_at(&o, i);
				break;
			}
		drain_for_others(u);
		u->grp = NULL;
		close(u->fd);
		u->fd = -1;
		if (pwrite(ofd, &o, sizeof(o), 0) != (ssize_t)sizeof(o)) {
			/* As at join: the next prune corrects it. */
		}
		flock(ofd, LOCK_UN);
		close(ofd);
		/* Our leave program stays attached; ask a member that stays
		 * to attach the group's next one now (see resteer). */
		const struct sockaddr_in *to = o.n && g->steer && g->fwd_fd >= 0 ?
						       peer_fwd(g, o.member[0]) : NULL;
		if (to && fwd_send(g->fwd_fd, to, RESTEER_MAGIC, g->secret,
				   (const struct sockaddr *)&u->local, u->local_len, NULL, 0)) {
			/* Lost: its first foreign packet makes it steer again. */
		}
	}
	group_free(g);
}

void srn_udp_group_set_steer(struct srn_udp *u, bool on)
{
	if (u->grp)
		u->grp->steer = on;
}

unsigned srn_udp_member(const struct srn_udp *u)
{
	return u->grp ? u->grp->member : 0;
}

int srn_udp_group_fd(const struct srn_udp *u)
{
	return u->grp ? u->grp->fwd_fd : -1;
}

void srn_udp_group_fwd_seen(struct srn_udp *u, bool readable)
{
	if (!u->grp)
		return;
	u->grp->fwd_busy = readable;
	if (!readable)
		u->grp->fwd_polled_ns = srn_now_ns();
}

const struct srn_udp_group_stats *srn_udp_group_stats(const struct srn_udp *u)
{
	return u->grp ? &u->grp->st : NULL;
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

/* Where member k of the group in dir/key takes forwarded packets: 0, or
 * -ENOENT when the slot is free or has no forwarding socket. */
/* The forwarding address in the open slot file fd, if its member lives
 * (holds the lock) and the record is one: 0, else -ENOENT. */
static int slot_read(int fd, struct sockaddr_in *out)
{
	if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
		flock(fd, LOCK_UN);     /* nobody holds it: the member is gone */
		return -ENOENT;
	}
	struct slot_rec r;
	if (pread(fd, &r, sizeof(r), 0) != (ssize_t)sizeof(r) || r.magic != SLOT_MAGIC ||
	    r.fwd.sin_family != AF_INET || r.fwd.sin_port == 0 ||
	    r.fwd.sin_addr.s_addr != htonl(INADDR_LOOPBACK))
		return -ENOENT;
	*out = r.fwd;
	return 0;
}

static int open_slot(const struct srn_udp_group *g, unsigned k)
{
	char suffix[16];
	snprintf(suffix, sizeof(suffix), ".m%u", k);
	return open_ours(g, suffix);
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

static int fwd_send(int from, const struct sockaddr_in *to, uint32_t magic, uint64_t secret,
		    const struct sockaddr *src, socklen_t srclen, const uint8_t *data, uint32_t len)
{
	struct fwd_hdr h = { .magic = magic, .srclen = srclen, .secret = secret };
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
static const struct sockaddr_in *peer_fwd(struct srn_udp_group *g, unsigned k)
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
	if (addr_key(dst, key, sizeof(key)))
		return -ENOENT;
	if (g && !strcmp(g->key, key) && g->fwd_fd >= 0) {
		to = peer_fwd(g, member);
		from = g->fwd_fd;
	} else {
		/* Not our group: its files tell the port and the secret. */
		memset(&tmp, 0, sizeof(tmp));
		dir_name(tmp.dir, sizeof(tmp.dir));
		memcpy(tmp.key, key, sizeof(key));
		int ofd = open_ours(&tmp, ".order");
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
	int r = fwd_send(from, to, FWD_MAGIC, g->secret, (const struct sockaddr *)&u->local,
			 u->local_len, NULL, 0);
	return r == -EAGAIN ? 0 : r;     /* a full socket wakes its reader anyway */
}

static uint32_t bth_dest_qpn(const uint8_t *d)
{
	return (uint32_t)d[5] << 16 | (uint32_t)d[6] << 8 | d[7];
}

/* Pass one packet on to its owner.  False: keep it here (the owner has
 * no forwarding socket: gone, or member 0 absent for a QP1 MAD). */
static bool forward(struct srn_udp_group *g, unsigned member, const uint8_t *data, uint32_t len,
		    const struct sockaddr *src, socklen_t srclen)
{
	const struct sockaddr_in *to = g->fwd_fd >= 0 ? peer_fwd(g, member) : NULL;
	if (!to) {
		g->st.fwd_failed++;
		return false;
	}
	if (fwd_send(g->fwd_fd, to, FWD_MAGIC, g->secret, src, srclen, data, len) == 0)
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
	if (!g->fwd_busy && now - g->fwd_polled_ns < FWD_POLL_GAP_NS)
		return 0;
	g->fwd_polled_ns = now;
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
		len[i] = ok[i] ? mm[i].msg_len - (uint32_t)sizeof(*h) : 0;
		if (ok[i] && len[i])
			g->st.fwd_rcvd++;
	}
	return r;
}

/* Is this packet another member's, and did it go there? */
static bool foreign(struct srn_udp_group *g, const uint8_t *d, uint32_t len,
		    const struct sockaddr *src, socklen_t srclen)
{
	/* An empty doorbell has no QPN: it is member 0's (see the
	 * program); a RoCE packet is its destination QP's member's. */
	unsigned m = len >= 8 ? srn_qpn_member(bth_dest_qpn(d)) : 0;
	if (m == g->member)
		return false;
	g->foreign_seen = true;
	return forward(g, m, d, len, src, srclen);
}

/* Steering let another member's packet reach us: the program is older
 * than the group (a member left, or died without leaving).  Attach it
 * again from the order the members keep, unless a joiner or leaver holds
 * the order now (it attaches one itself). */
static void resteer(struct srn_udp *u)
{
	struct srn_udp_group *g = u->grp;
	uint64_t now = srn_now_ns();
	bool asked = g->resteer_asked;
	g->foreign_seen = g->resteer_asked = false;
	if (!g->steer || (!asked && now - g->resteer_ns < RESTEER_GAP_NS))
		return;
	g->resteer_ns = now;
	int ofd = open_ours(g, ".order");
	if (ofd < 0)
		return;
	if (flock(ofd, LOCK_EX | LOCK_NB) == 0) {
		struct order_file o;
		order_read(ofd, &o);
		order_prune(g, &o, (int)g->member);
		bool in = false;
		for (unsigned i = 0; i < o.n; i++)
			in |= o.member[i] == g->member;
		if (in && o.secret == g->secret && !attach_prog(u, &o) &&
		    pwrite(ofd, &o, sizeof(o), 0) != (ssize_t)sizeof(o)) {
			/* The next prune corrects it. */
		}
		flock(ofd, LOCK_UN);
	}
	close(ofd);
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
		resteer(u);
	return out;
}

int srn_udp_group_rx(struct srn_udp *u, struct srn_rx_batch *b, int n)
{
	struct srn_udp_group *g = u->grp;
	if (n < 0)
		return n;
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
		resteer(u);
	return out;
}
