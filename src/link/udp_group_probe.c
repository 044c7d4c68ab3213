/*
 * udp_group_probe.c - where the kernel really holds each member's socket
 * in a shared address's SO_REUSEPORT group (udp_group.h), so that
 * steering converges after members die or join, without waiting for a
 * packet to go astray first.
 *
 * Why: the steering program maps a member to the index of its socket in
 * the kernel's group, and the members keep that order in the .order file
 * (udp_group.c).  Joins and leaves happen under the file's lock, so the
 * file follows them exactly.  Deaths do not: a killed member's socket
 * leaves the group when its exit closes it, and the kernel moves the
 * group's last socket into its index.  Nobody hears that, and the prune
 * that guesses it later can be wrong for good: two members that died
 * between two looks leave two possible orders (the prune picks one), and
 * a killed member's slot lock may be gone before its socket (a joiner's
 * prune then removes it early, and the kernel's later move swaps two
 * members in the file).  Until a member that received another's packet
 * steered again, that member's flows went by hash to every socket, and a
 * socket whose owner was stopped, starved or exiting kept them unread.
 *
 * The watch: an inotify on the group directory hears every close of a
 * file opened for writing there.  A slot's holder keeps its slot file so
 * open until it leaves or dies; readers open slot files read-only.  A
 * close of a member's slot file whose lock is then free, while the order
 * file still lists that member, is a death.  The watch shares the
 * forwarding socket's place in the engine's poll sets (poll_fd, an epoll
 * of both), so a sleeping member wakes for it; it is read whenever the
 * forwarding socket is.
 *
 * The round: one member (the lowest-numbered living one first; the others
 * a little later, and only if the order file still lists a dead member)
 * sends a probe datagram to the shared address for each index 0..K-1.
 * Every program we attach steers a probe to the index it names
 * (udp_group_prog.c), so the socket at index j gets probe j, and probes
 * past the group's end go by hash: a member's lowest answer names its
 * index.  Each receiver answers the prober through its forwarding socket
 * (PROBE_ANS_MAGIC, with the group's secret).  The round ends when every
 * probe was answered, PROBE_GRACE_NS after its start when at most one
 * living member is silent, or after PROBE_WAIT_NS.
 *
 * The commit, under the order file's lock: only if the file is still what
 * the round began with and no member that was to answer died meanwhile
 * (else a join, leave, death or other round came between: retry if still
 * needed, or leave it to the round the death brings).  The members that answered go to their indices;
 * one silent living member (stopped, starved) takes the one index nobody
 * answered for, which is then exact too.  More silence than that (two
 * silent members, or a dead socket still in the group) is written as a
 * best guess and probed again, 2 ms later and doubling, up to
 * PROBE_TRIES_MAX rounds.
 *
 * Trust: probes and answers carry the group's secret, which only our user
 * can read (the 0600 order file in the 0700 directory); anyone may send a
 * probe-shaped datagram to the address, which picks a socket, as a QPN
 * does, and is then dropped.  No file is added: the round lives in memory.
 */
#include "link/udp_group_priv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "diag/clock.h"
#include "link/fork_drop.h"

#define PROBE_WAIT_NS 50000000ull       /* a round waits this long for silent members */
#define PROBE_GRACE_NS 5000000ull       /* ... and this long when one is silent */
#define PROBE_STAGGER_NS 2000000ull     /* between members that heard the same death */
#define PROBE_STAGGER_MAX 31u
#define PROBE_RETRY_NS 2000000ull       /* the first retry of an inexact round; doubles */
#define PROBE_TRIES_MAX 8u
#define PROBE_SLACK 8u                  /* probes past the file's count: sockets it misses */

bool srn_grp_is_probe(const uint8_t *d, uint32_t len)
{
	uint32_t w;
	if (len != PROBE_LEN)
		return false;
	memcpy(&w, d, sizeof(w));
	return ntohl(w) == PROBE_WORD;
}

int srn_grp_watch_open(struct srn_udp_group *g)
{
	if (g->fwd_fd < 0 || !g->steer)
		return -ENOENT;         /* answers come to the forwarding socket */
	int w = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w < 0)
		return -errno;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event e = { .events = EPOLLIN };
	if (ep < 0 || inotify_add_watch(w, g->dir, IN_CLOSE_WRITE | IN_ONLYDIR) < 0 ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, w, &e) || epoll_ctl(ep, EPOLL_CTL_ADD, g->fwd_fd, &e)) {
		int err = -errno;
		if (ep >= 0)
			close(ep);
		close(w);
		return err;
	}
	g->watch_fd = w;
	g->poll_fd = ep;
	srn_fork_drop_add(w);
	srn_fork_drop_add(ep);
	return 0;
}

void srn_grp_watch_close(struct srn_udp_group *g)
{
	srn_fork_drop_del(g->poll_fd);
	srn_fork_drop_del(g->watch_fd);
	if (g->poll_fd >= 0)
		close(g->poll_fd);
	if (g->watch_fd >= 0)
		close(g->watch_fd);
	srn_fork_drop_del(g->probe_fd);
	if (g->probe_fd >= 0)
		close(g->probe_fd);
	g->poll_fd = g->watch_fd = g->probe_fd = -1;
}

/* The engine's next wake for us: a round due, or the open round's end
 * (its grace when one member is silent). */
static void publish(struct srn_udp_group *g)
{
	const struct grp_round *r = &g->round;
	uint64_t a = g->probe_at_ns, b = 0;
	if (r->nonce)
		b = r->waiting <= 1 && r->start_ns + PROBE_GRACE_NS < r->end_ns ?
			    r->start_ns + PROBE_GRACE_NS : r->end_ns;
	atomic_store_explicit(&g->next_ns, !a || (b && b < a) ? b : a, memory_order_relaxed);
}

void srn_grp_probe_soon(struct srn_udp_group *g, uint64_t delay_ns, bool if_dead)
{
	if (g->watch_fd < 0)
		return;
	uint64_t at = srn_now_ns() + delay_ns;
	if (!g->probe_at_ns || at < g->probe_at_ns) {
		g->probe_at_ns = at;
		g->probe_if_dead = if_dead;
	} else if (!if_dead) {
		g->probe_if_dead = false;
	}
	publish(g);
}

/* The member a name of the directory is the slot file of, or -1: exactly
 * "<key>.m<k>", k < SRN_GRP_MEMBERS without leading zeros. */
static int slot_name_member(const struct srn_udp_group *g, const char *name, size_t max)
{
	size_t kl = strlen(g->key);
	if (strnlen(name, max) >= max || strncmp(name, g->key, kl) || strncmp(name + kl, ".m", 2))
		return -1;
	const char *p = name + kl + 2;
	unsigned k = 0, digits = 0;
	for (; *p >= '0' && *p <= '9' && digits < 4; p++, digits++)
		k = k * 10 + (unsigned)(*p - '0');
	if (*p || !digits || (digits > 1 && p[-(int)digits] == '0') || k >= SRN_GRP_MEMBERS)
		return -1;
	return (int)k;
}

/* Does the order file list a member that is dead?  *rank: the living
 * listed members numbered below us (who probe first). */
static bool lists_dead(const struct srn_udp_group *g, unsigned *rank)
{
	uint8_t list[SRN_GRP_MEMBERS];
	unsigned n = srn_grp_order_members(g, list);
	bool dead = false;
	*rank = 0;
	for (unsigned i = 0; i < n; i++) {
		if (list[i] == g->member)
			continue;
		if (!srn_grp_slot_alive(g, list[i]))
			dead = true;
		else if (list[i] < g->member)
			(*rank)++;
	}
	return dead;
}

void srn_grp_watch_read(struct srn_udp_group *g, uint64_t now)
{
	/* A look at the forwarding socket every 20 us while forwarded
	 * packets flow must not double its system calls: deaths are rare. */
	if (g->watch_fd < 0 || (!g->fwd_busy && now - g->watch_ns < WATCH_GAP_NS))
		return;
	g->watch_ns = now;
	union {
		struct inotify_event e;
		char b[4096];
	} buf;
	bool heard = false;
	for (int r = 0; r < 16; r++) {
		ssize_t n = read(g->watch_fd, buf.b, sizeof(buf.b));
		if (n <= 0)
			break;
		/* The kernel's records, each whole within one read. */
		for (size_t off = 0; off + sizeof(struct inotify_event) <= (size_t)n;) {
			const struct inotify_event *e = (const void *)(buf.b + off);
			off += sizeof(*e) + e->len;
			if (off > (size_t)n)
				break;
			int k = e->len ? slot_name_member(g, e->name, e->len) : -1;
			if ((e->mask & IN_Q_OVERFLOW) || (k >= 0 && (unsigned)k != g->member))
				heard = true;
		}
	}
	unsigned rank;
	if (heard && lists_dead(g, &rank))
		srn_grp_probe_soon(g, (rank < PROBE_STAGGER_MAX ? rank : PROBE_STAGGER_MAX) *
					      PROBE_STAGGER_NS, rank > 0);
}

static uint64_t new_nonce(void)
{
	uint64_t x;
	if (getrandom(&x, sizeof(x), GRND_NONBLOCK) != (ssize_t)sizeof(x))
		x = srn_now_ns() ^ ((uint64_t)getpid() << 32);
	return x | 1;
}

/* Under the order file's lock (not waited for: -EAGAIN), read it into
 * the round and steer by it, so that the program the probes meet has the
 * probe step (a leaver's last program has none, and stays until a member
 * steers again).  0, or -errno. */
static int round_snapshot(struct srn_udp *u, struct grp_round *r)
{
	struct srn_udp_group *g = u->grp;
	int fd = srn_grp_open_ours(g, ".order");
	if (fd < 0)
		return fd;
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		close(fd);
		return -EAGAIN;
	}
	struct order_file o;
	struct sock_filter prog[SRN_GRP_PROG_MAX];
	bool ok = pread(fd, &o, sizeof(o), 0) == (ssize_t)sizeof(o) && o.magic == ORDER_MAGIC &&
		  o.n <= SRN_GRP_MEMBERS && o.secret == g->secret &&
		  srn_grp_attach(u, prog, srn_udp_group_prog(o.member, o.n, prog)) == 0;
	flock(fd, LOCK_UN);
	close(fd);
	if (!ok)
		return -EINVAL;
	r->nfile = o.n;
	memcpy(r->file, o.member, o.n);
	memset(r->expect, 0, sizeof(r->expect));
	r->waiting = r->answers = 0;
	r->dead_listed = false;
	for (unsigned i = 0; i < o.n; i++) {
		unsigned m = o.member[i];
		if (r->expect[m])
			continue;
		if (m == g->member || srn_grp_slot_alive(g, m)) {
			r->expect[m] = true;
			r->waiting++;
		} else {
			r->dead_listed = true;
		}
	}
	for (unsigned m = 0; m < SRN_GRP_MEMBERS; m++)
		r->idx[m] = PROBE_NONE;
	return 0;
}

static void round_start(struct srn_udp *u, uint64_t now)
{
	struct srn_udp_group *g = u->grp;
	struct grp_round *r = &g->round;
	if (!g->steer || g->fwd_fd < 0 || !u->local_len)
		return;
	if (g->probe_fd < 0) {
		/* Straight to the kernel, as udp_ports.c's sockets: a round
		 * runs inside a program's verbs calls, which librspreload
		 * may have preloaded, and its socket() would make this an
		 * rsocket over our own device (rsocket_preload hung). */
		g->probe_fd = (int)syscall(SYS_socket, u->local.ss_family,
					   SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (g->probe_fd >= 0)
			srn_fork_drop_add(g->probe_fd);   /* a forked child holds nothing of ours */
	}
	if (g->probe_fd < 0)
		return;
	int ret = round_snapshot(u, r);
	if (ret == -EAGAIN)
		srn_grp_probe_soon(g, PROBE_RETRY_NS, false);   /* a joiner or leaver: soon */
	if (ret)
		return;
	r->nonce = new_nonce();
	unsigned k = r->nfile + PROBE_SLACK * (1 + g->probe_tries);
	if (k > SRN_GRP_MEMBERS)
		k = SRN_GRP_MEMBERS;
	struct grp_probe_pkt p = { .word = htonl(PROBE_WORD), .prober = (uint8_t)g->member,
				   .secret = g->secret, .nonce = r->nonce };
	for (r->sent = 0; r->sent < k; r->sent++) {
		p.index = (uint8_t)r->sent;
		if (sendto(g->probe_fd, &p, sizeof(p), MSG_DONTWAIT,
			   (const struct sockaddr *)&u->local, u->local_len) != (ssize_t)sizeof(p))
			break;
	}
	r->start_ns = now;
	r->end_ns = now + PROBE_WAIT_NS;
	g->fwd_gap_ns = FWD_POLL_GAP_NS;        /* the answers come there */
}

static void record(struct srn_udp_group *g, uint64_t nonce, unsigned index, unsigned member)
{
	struct grp_round *r = &g->round;
	if (!r->nonce || nonce != r->nonce || index >= r->sent || member >= SRN_GRP_MEMBERS)
		return;
	r->answers++;
	if (r->idx[member] != PROBE_NONE) {
		if (index < r->idx[member])
			r->idx[member] = (uint16_t)index;
		return;
	}
	r->idx[member] = (uint16_t)index;
	if (r->expect[member] && r->waiting)
		r->waiting--;
}

bool srn_grp_probe_rx(struct srn_udp_group *g, const uint8_t *d, uint32_t len)
{
	if (!srn_grp_is_probe(d, len))
		return false;
	struct grp_probe_pkt p;
	memcpy(&p, d, sizeof(p));
	if (p.secret != g->secret)
		return true;            /* not our group's: it only chose a socket */
	if (p.prober == g->member) {
		record(g, p.nonce, p.index, g->member);
		return true;
	}
	const struct sockaddr_in *to = g->fwd_fd >= 0 ? srn_grp_peer_fwd(g, p.prober) : NULL;
	struct grp_probe_ans a = { .nonce = p.nonce, .index = p.index, .member = (uint8_t)g->member };
	struct sockaddr_in none = { .sin_family = AF_INET };
	if (to && srn_grp_fwd_send(g->fwd_fd, to, PROBE_ANS_MAGIC, 0, g->secret,
				   (const struct sockaddr *)&none, sizeof(none), (const uint8_t *)&a,
				   sizeof(a))) {
		/* Full or gone: the prober's round ends without us. */
	}
	return true;
}

void srn_grp_probe_answer(struct srn_udp_group *g, const uint8_t *d, uint32_t len)
{
	struct grp_probe_ans a;
	if (len != sizeof(a))
		return;
	memcpy(&a, d, sizeof(a));
	record(g, a.nonce, a.index, a.member);
}

/* The order the round found, into o (the file as the round began, under
 * its lock).  0: exact; 1: a guess where members were silent; -1: the
 * answers contradict each other (the group changed meanwhile). */
static int order_from_round(const struct srn_udp_group *g, const struct grp_round *r,
			    struct order_file *o)
{
	int at[SRN_GRP_MEMBERS];
	bool used[SRN_GRP_MEMBERS] = { false };
	unsigned proven = 0, n = 0;
	for (unsigned i = 0; i < SRN_GRP_MEMBERS; i++)
		at[i] = -1;
	for (unsigned m = 0; m < SRN_GRP_MEMBERS; m++) {
		unsigned i = r->idx[m];
		if (i == PROBE_NONE)
			continue;
		if (at[i] >= 0)
			return -1;
		at[i] = (int)m;
		used[m] = true;
		proven++;
		n = i + 1 > n ? i + 1 : n;
	}
	if (r->idx[g->member] == PROBE_NONE)
		return -1;              /* not even ours came back: no probe step attached */
	/* The silent: listed, alive, unheard (stopped or starved).  They
	 * take the indices nobody answered for below the group's size; one
	 * whose index in the file is such a hole stays there. */
	uint8_t silent[SRN_GRP_MEMBERS];
	unsigned ns = 0;
	for (unsigned i = 0; i < o->n; i++) {
		unsigned m = o->member[i];
		if (!used[m] && srn_grp_slot_alive(g, m)) {
			used[m] = true;
			silent[ns++] = (uint8_t)m;
		}
	}
	if (proven + ns > n)
		n = proven + ns;
	unsigned holes = n - proven, next = 0, filler = 0;
	bool placed[SRN_GRP_MEMBERS] = { false };
	for (unsigned i = 0; i < o->n && i < n; i++)
		for (unsigned j = 0; j < ns; j++)
			if (silent[j] == o->member[i] && !placed[j] && at[i] < 0) {
				at[i] = o->member[i];
				placed[j] = true;
			}
	for (unsigned i = 0; i < n; i++) {
		if (at[i] >= 0)
			continue;
		while (next < ns && placed[next])
			next++;
		if (next < ns) {
			at[i] = silent[next];
			placed[next] = true;
			continue;
		}
		/* A socket nobody answered for and no living member to put
		 * there (a dead one not closed yet): a number nobody holds. */
		while (filler < SRN_GRP_MEMBERS && used[filler])
			filler++;
		if (filler == SRN_GRP_MEMBERS)
			return -1;
		used[filler] = true;
		at[i] = (int)filler;
	}
	o->n = n;
	for (unsigned i = 0; i < n; i++)
		o->member[i] = (uint8_t)at[i];
	/* A dead member's socket may still have been in the group (its
	 * exit closed the slot first): an index nobody answered for that
	 * is not the silent member's.  So after a death, a second round. */
	return holes == ns && ns <= 1 && !r->dead_listed ? 0 : 1;
}

/* Write the round's order and steer by it, if the file did not change
 * since the round began.  0 exact, 1 a guess, -1 not written. */
static int round_commit(struct srn_udp *u, int ofd)
{
	struct srn_udp_group *g = u->grp;
	struct grp_round *r = &g->round;
	struct order_file o;
	if (pread(ofd, &o, sizeof(o), 0) != (ssize_t)sizeof(o) || o.magic != ORDER_MAGIC ||
	    o.n != r->nfile || o.secret != g->secret || memcmp(o.member, r->file, o.n))
		return -1;
	/* A member that died during the round may have had the kernel move
	 * another socket after that one answered: its answers would steer
	 * it wrong until the round the death brings.  Leave it to that. */
	for (unsigned m = 0; m < SRN_GRP_MEMBERS; m++)
		if (r->expect[m] && m != g->member && !srn_grp_slot_alive(g, m))
			return -1;
	int res = order_from_round(g, r, &o);
	if (res < 0)
		return -1;
	struct sock_filter prog[SRN_GRP_PROG_MAX];
	if (srn_grp_attach(u, prog, srn_udp_group_prog(o.member, o.n, prog)))
		return -1;
	if (pwrite(ofd, &o, sizeof(o), 0) != (ssize_t)sizeof(o)) {
		/* The program steers right; the next round writes it. */
	}
	return res;
}

static void round_finish(struct srn_udp *u, uint64_t now)
{
	struct srn_udp_group *g = u->grp;
	int ofd = srn_grp_open_ours(g, ".order");
	if (ofd >= 0 && flock(ofd, LOCK_EX | LOCK_NB)) {
		close(ofd);             /* a joiner or leaver holds it: in a moment */
		g->round.end_ns = now + PROBE_RETRY_NS;
		return;
	}
	int res = ofd >= 0 ? round_commit(u, ofd) : -1;
	if (ofd >= 0) {
		flock(ofd, LOCK_UN);
		close(ofd);
	}
	g->round.nonce = 0;
	if (res == 0) {
		g->probe_tries = 0;
		return;
	}
	if (++g->probe_tries > PROBE_TRIES_MAX) {
		g->probe_tries = 0;     /* until the next death, join or stray packet */
		return;
	}
	/* A guess: probe again.  Not written: another round or a join came
	 * between; again only if a dead member is still listed. */
	srn_grp_probe_soon(g, PROBE_RETRY_NS << (g->probe_tries - 1), res < 0);
}

void srn_udp_group_tick(struct srn_udp *u, uint64_t now)
{
	struct srn_udp_group *g = u->grp;
	if (!g || g->watch_fd < 0)
		return;
	/* Every probe answered: each member's lowest is final.  One member
	 * silent: the one index nobody answered for is its own (see
	 * order_from_round), whether it answers later or never (stopped);
	 * the others' late answers and it get PROBE_GRACE_NS. */
	const struct grp_round *r = &g->round;
	if (r->nonce && (r->answers >= r->sent || now >= r->end_ns ||
			 (r->waiting <= 1 && now - r->start_ns >= PROBE_GRACE_NS)))
		round_finish(u, now);
	if (g->probe_at_ns && now >= g->probe_at_ns && !g->round.nonce) {
		bool if_dead = g->probe_if_dead;
		unsigned rank;
		g->probe_at_ns = 0;
		if (!if_dead || lists_dead(g, &rank))
			round_start(u, now);
	}
	publish(g);
}
