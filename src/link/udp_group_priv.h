/*
 * udp_group_priv.h - what udp_group.c (joining, leaving, the order and
 * the program) and udp_group_fwd.c (forwarding, doorbells, QP1's MADs)
 * share about a shared address's group.  Not for other files.
 */
#ifndef SRN_LINK_UDP_GROUP_PRIV_H
#define SRN_LINK_UDP_GROUP_PRIV_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "link/rundir.h"
#include "link/udp.h"
#include "link/udp_group.h"



#define ORDER_MAGIC 0x31505247u         /* "GRP1" */
#define FWD_MAGIC 0x32445746u           /* "FWD2" */
#define RESTEER_MAGIC 0x31545352u       /* "RST1": a leaver asks a member to steer again */
#define FWD_SOCKBUF (4u << 20)          /* a burst of forwarded packets */
#define SLOT_MAGIC 0x32544c53u          /* "SLT2" */
#define SLOT_GSI 1u                     /* slot_rec.flags: its CM serves QP1 */
#define FWD_ROUTE 1u                    /* fwd_hdr.flags: a REQ for the receiver's CM to route */
#define FWD_UNHEARD 0x100u              /* owner_of only, never sent: a REQ nobody listens for */
#define PROBE_ANS_MAGIC 0x31534e41u     /* "ANS1": a member says which index a probe found it at */

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
	uint32_t flags;                 /* SLOT_GSI */
};

/* What precedes a forwarded packet.  The forwarding socket is a UDP port
 * on loopback that any local user can reach; the group's secret, in a
 * file only our user can read, tells our members' packets apart. */
struct fwd_hdr {
	uint32_t magic;
	uint32_t srclen;
	uint32_t flags;                 /* FWD_ROUTE */
	uint64_t secret;
	struct sockaddr_storage src;    /* the packet's source on the wire */
};

/* REQs our CM holds because nobody on the host listens for them yet
 * (cm/held.c): the packet as it came, so that when another member
 * starts to listen the CM can have it passed on (srn_udp_group_reroute)
 * instead of answering it with a REJ.  A REQ on the wire is 280 bytes;
 * the CM holds at most 32 and each for a second, so the oldest entry
 * gives way. */
#define GRP_STASH_N 32
#define GRP_STASH_MAX 320
#define GRP_STASH_NS 2000000000ull      /* longer than the CM's hold */

struct grp_stashed_req {
	uint64_t t_ns;                  /* 0: empty */
	uint32_t len;
	socklen_t srclen;
	struct sockaddr_storage src;
	uint8_t pkt[GRP_STASH_MAX];
};

/* Probing the kernel's real order (udp_group_probe.c).  A probe is a
 * datagram to the shared address that every program we attach steers to
 * the socket index it names (udp_group_prog.c); whoever receives it
 * answers the prober through its forwarding socket.  Its first word can
 * start no packet of ours (BTH opcode 0xff: manufacturer-specific) and
 * its length is fixed, so the program tells it apart in two loads. */
#define PROBE_WORD 0xff50524fu          /* "\xffPRO", big-endian on the wire */
struct grp_probe_pkt {
	uint32_t word;                  /* htonl(PROBE_WORD) */
	uint8_t index;                  /* the socket index the program steers it to */
	uint8_t prober;                 /* the member to answer */
	uint16_t zero;
	uint64_t secret;                /* the group's: only our members' probes count */
	uint64_t nonce;                 /* the prober's round */
};
#define PROBE_LEN 24u
#define PROBE_INDEX_OFF 4u
_Static_assert(sizeof(struct grp_probe_pkt) == PROBE_LEN, "probe layout");
_Static_assert(__builtin_offsetof(struct grp_probe_pkt, index) == PROBE_INDEX_OFF, "probe index");

/* The answer, after a fwd_hdr with PROBE_ANS_MAGIC. */
struct grp_probe_ans {
	uint64_t nonce;
	uint8_t index;                  /* the probe's */
	uint8_t member;                 /* who found it on its socket */
	uint8_t zero[6];
};

#define PROBE_NONE 0xffffu
/* One round: probes to indices 0..sent-1, and the lowest index each
 * member answered for.  An index past the kernel's group goes by hash to
 * any socket, so a member's lowest is its index; its first answer need
 * not be (loopback queues each sender CPU's packets apart, and the
 * prober may move between sends), so a round is complete only when
 * every probe was answered. */
struct grp_round {
	uint64_t nonce;                 /* 0: no round open */
	uint64_t start_ns;
	uint64_t end_ns;                /* finish then, answered or not */
	bool dead_listed;               /* the file listed a dead member: maybe a socket not closed yet */
	unsigned sent;
	unsigned nfile;                 /* the order file when the round began */
	uint8_t file[SRN_GRP_MEMBERS];
	unsigned waiting;               /* expected members not heard yet */
	unsigned answers;               /* probes answered, of sent */
	bool expect[SRN_GRP_MEMBERS];   /* listed and alive when it began */
	uint16_t idx[SRN_GRP_MEMBERS];  /* member -> index, PROBE_NONE: not heard */
};

/* A member that finds another's packet on its socket while steering is
 * on re-reads the group's order and attaches the program again (the
 * order changed under it: a member left or died), at most this often. */
#define RESTEER_GAP_NS 1000000ull

struct srn_udp_group {
	unsigned member;
	int slot_fd;                    /* flock'ed: our member slot */
	int fwd_fd;                     /* our forwarding socket, -1: none */
	struct slot_rec rec;            /* what our slot file says */
	_Atomic(srn_gsi_listener_fn *) gsi_fn;  /* our CM's listener lookup */
	unsigned gsi_hint;              /* the member whose CM took the last REQ we could not */
	uint64_t gsi_none_ns;           /* when a scan last found no member with a CM */
	uint64_t secret;
	char dir[SRN_RUNDIR_PATH_MAX];
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
	uint64_t fwd_gap_ns;            /* until the next look (FWD_POLL_GAP_NS..MAX) */
	bool fwd_busy;                  /* and it had something */
	struct fwd_hdr rx_hdr[SRN_RX_BATCH];
	struct grp_stashed_req stash[GRP_STASH_N];
	unsigned stash_next;            /* the entry the next REQ takes */
	/* The probe (udp_group_probe.c). */
	int watch_fd;                   /* inotify: a slot file closed by a writer, -1: none */
	int poll_fd;                    /* epoll of fwd_fd and watch_fd for the engine, -1: none */
	int probe_fd;                   /* sends probes to the shared address, -1: none */
	uint64_t watch_ns;              /* last read of the watch */
	struct grp_round round;
	uint64_t probe_at_ns;           /* a round is due then, 0: none */
	bool probe_if_dead;             /* ... only if the order still lists a dead member */
	unsigned probe_tries;           /* rounds since the last exact one */
	_Atomic uint64_t next_ns;       /* the earliest of the two, for the engine's sleep */
};

/* With steering right nothing is forwarded, and a look at an empty
 * forwarding socket on every poll would double the receive path's system
 * calls (half the bandwidth of a lone shared process).  A polling
 * process looks 20 us after a look found packets (or steering was seen
 * stale), and each empty look doubles the gap up to 1 ms: at 20 us the
 * empty looks still cost 7-9 % of the UDP path's 8-byte latency and
 * 64 KiB bandwidth (bench/shared_addr_ab.sh).  Only a packet that
 * steering sent astray, or a REQ, waits that long, and only while the
 * process polls: the progress thread's epoll and a waiting thread's
 * poll watch the socket, so a sleeping process still wakes at once. */
#define FWD_POLL_GAP_NS 20000ull
#define FWD_POLL_GAP_MAX_NS 1000000ull

/* udp_group.c */
int srn_grp_addr_key(const struct sockaddr *a, char *out, size_t n);
int srn_grp_dir_name(char *out, size_t n);
/* Open (create) the 0600 file <dir>/<key><suffix> of ours. */
int srn_grp_open_ours(const struct srn_udp_group *g, const char *suffix);
/* The same file if it exists, not created. */
int srn_grp_open_existing(const struct srn_udp_group *g, const char *suffix);
/* The members the order file lists, as the kernel's group holds their
 * sockets, into out; how many (0 if it cannot be read).  Unlocked, for
 * the receive path: a read torn by a joiner's write may name wrong
 * members, which the callers' slot checks turn away. */
unsigned srn_grp_order_members(const struct srn_udp_group *g, uint8_t out[SRN_GRP_MEMBERS]);
/* Attach the group's program again from the order file (udp_group.c). */
void srn_grp_resteer(struct srn_udp *u);

/* Is this member's slot held (the member lives)?  Opened read-only: a
 * close by a writer is what the watch hears (udp_group_probe.c). */
bool srn_grp_slot_alive(const struct srn_udp_group *g, unsigned k);
/* Put prog[0..n) on the group through our socket. */
int srn_grp_attach(struct srn_udp *u, struct sock_filter *prog, int n);

/* udp_group_probe.c */
int srn_grp_watch_open(struct srn_udp_group *g);
void srn_grp_watch_close(struct srn_udp_group *g);
/* Read the watch (non-blocking): a listed member died, so a round.  At
 * most every WATCH_GAP_NS unless a poll saw poll_fd readable. */
#define WATCH_GAP_NS 1000000ull
void srn_grp_watch_read(struct srn_udp_group *g, uint64_t now);
/* A round at now + delay_ns (sooner if one is due sooner). */
void srn_grp_probe_soon(struct srn_udp_group *g, uint64_t delay_ns, bool if_dead);
/* A probe on our socket: answered (or dropped); false: not a probe. */
bool srn_grp_probe_rx(struct srn_udp_group *g, const uint8_t *d, uint32_t len);
/* An answer on our forwarding socket (after its fwd_hdr). */
void srn_grp_probe_answer(struct srn_udp_group *g, const uint8_t *d, uint32_t len);

/* udp_group_fwd.c */
const struct sockaddr_in *srn_grp_peer_fwd(struct srn_udp_group *g, unsigned k);
int srn_grp_fwd_send(int from, const struct sockaddr_in *to, uint32_t magic, uint32_t flags,
		     uint64_t secret, const struct sockaddr *src, socklen_t srclen,
		     const uint8_t *data, uint32_t len);
void srn_grp_drain_for_others(struct srn_udp *u);

#endif
