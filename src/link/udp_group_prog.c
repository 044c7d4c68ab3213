/*
 * udp_group_prog.c - the classic BPF programs that steer a shared
 * address's datagrams to the member that owns them (udp_group.h).
 *
 * The kernel runs the program on every datagram for the group's port and
 * takes its result as the index of the socket to deliver to; an index
 * past the group's end makes it pick by hash instead.  The program reads
 * the member number from the BTH's destination QPN, or, for a CM MAD to
 * QP1, from the receiver's communication ID (wire/gsi_route.h), and looks
 * it up in the kernel's order of the group's sockets.
 *
 * The group's program also steers probes (udp_group_priv.h, PROBE_WORD):
 * a datagram of exactly PROBE_LEN bytes whose first word is PROBE_WORD
 * goes to the index its byte PROBE_INDEX_OFF names, which is how members
 * learn where the kernel really holds their sockets (udp_group_probe.c).
 * Anyone may send one; it chooses a socket, as a QPN does, and nothing
 * else (members answer only probes that carry the group's secret).
 *
 * The lookup is a binary search, with long branches through BPF_JA (a
 * conditional jump reaches only 255 instructions), so a group of 256
 * members costs a packet eight comparisons, not 256.
 */
#include <linux/filter.h>
#include <stdbool.h>
#include <string.h>

#include "link/udp_group.h"
#include "link/udp_group_priv.h"
#include "wire/gsi_route.h"

/* A program under construction; `ends` are the JAs that leave the lookup
 * when no member matches, patched to its end. */
struct emit {
	struct sock_filter *p;
	int k;
	int ends[SRN_GRP_MEMBERS];
	int nends;
};

struct pair {
	uint8_t member;
	uint8_t index;
};

static void op(struct emit *e, struct sock_filter f)
{
	e->p[e->k++] = f;
}

/* Jump from instruction `at` (a JA) to `to`. */
static void patch_ja(struct emit *e, int at, int to)
{
	e->p[at].k = (uint32_t)(to - at - 1);
}

/* Return the index of pairs[lo..hi)'s member in A; fall out (a JA to the
 * lookup's end) when A is none of them.  pairs are sorted by member. */
static void emit_tree(struct emit *e, const struct pair *pairs, unsigned lo, unsigned hi)
{
	if (hi - lo <= 3) {
		for (unsigned i = lo; i < hi; i++) {
			op(e, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, pairs[i].member, 0, 1));
			op(e, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, pairs[i].index));
		}
		e->ends[e->nends++] = e->k;
		op(e, (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, 0));
		return;
	}
	unsigned mid = lo + (hi - lo) / 2;
	/* A >= mid's member: the JA to the upper half; else skip it. */
	op(e, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, pairs[mid].member, 0, 1));
	int to_upper = e->k;
	op(e, (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, 0));
	emit_tree(e, pairs, lo, mid);
	patch_ja(e, to_upper, e->k);
	emit_tree(e, pairs, mid, hi);
}

/* The steering part: load the packet's member into A and return the index
 * (never `skip`) whose order[i] it is; falls through when there is none,
 * or when the packet is a REQ or SIDR_REQ (a listener's, found by the
 * members' own lookup).  Returns the instructions written. */
static int emit_steer(const uint8_t *order, unsigned n, unsigned skip, struct sock_filter *p)
{
	struct emit e = { .p = p };
	/* Offsets below are of the instructions as numbered in comments. */
	/*  0 */ op(&e, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0));
	/*  1 */ op(&e, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 8, 0, 19)); /* -> 21 */
	/* The BTH's word at byte 4 is reserved:8 | DestQP:24 (IBTA 9.2),
	 * loaded big-endian.  A packet too short to have one (an empty
	 * doorbell) is member 0's. */
	/*  2 */ op(&e, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 4));
	/*  3 */ op(&e, (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, SRN_QPN_MCAST));
	/*  4 */ op(&e, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 1, 3, 0));   /* -> 8 */
	/*  5 */ op(&e, (struct sock_filter)BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, SRN_QPN_MEMBER_SHIFT));
	/*  6 */ op(&e, (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, SRN_GRP_MEMBERS - 1));
	/*  7 */ op(&e, (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, 14));                 /* -> 22 */
	/* QP1: a CM MAD names its receiver (wire/gsi_route.h). */
	/*  8 */ op(&e, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0));
	/*  9 */ op(&e, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, SRN_GSI_ROUTE_MIN, 0, 11));
	/* 10 */ op(&e, (struct sock_filter)BPF_STMT(BPF_LD | BPF_B | BPF_ABS, SRN_GSI_CLASS_OFF));
	/* 11 */ op(&e, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SRN_GSI_CLASS_CM, 0, 9));
	/* 12 */ op(&e, (struct sock_filter)BPF_STMT(BPF_LD | BPF_H | BPF_ABS, SRN_GSI_ATTR_OFF));
	/* 13 */ op(&e, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SRN_GSI_ATTR_REQ, 6, 0));   /* -> 20 */
	/* 14 */ op(&e, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SRN_GSI_ATTR_SIDR_REQ, 5, 0));
	/* 15 */ op(&e, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SRN_GSI_ATTR_SIDR_REP, 0, 2));
	/* 16 */ op(&e, (struct sock_filter)BPF_STMT(BPF_LD | BPF_B | BPF_ABS, SRN_GSI_SIDR_ID_OFF));
	/* 17 */ op(&e, (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, 4));                  /* -> 22 */
	/* 18 */ op(&e, (struct sock_filter)BPF_STMT(BPF_LD | BPF_B | BPF_ABS, SRN_GSI_RCV_ID_OFF));
	/* 19 */ op(&e, (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, 2));                  /* -> 22 */
	/* 20: a REQ or SIDR_REQ leaves the lookup (patched below). */
	int req_out = e.k;
	/* 20 */ op(&e, (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, 0));
	/* 21 */ op(&e, (struct sock_filter)BPF_STMT(BPF_LD | BPF_IMM, 0));
	/* 22: the lookup of A. */
	struct pair pairs[SRN_GRP_MEMBERS];
	unsigned np = 0;
	for (unsigned i = 0; i < n; i++)
		if (i != skip)
			pairs[np++] = (struct pair){ order[i], (uint8_t)i };
	/* Insertion sort by member: n is small, and this runs at a join. */
	for (unsigned i = 1; i < np; i++)
		for (unsigned j = i; j > 0 && pairs[j - 1].member > pairs[j].member; j--) {
			struct pair t = pairs[j];
			pairs[j] = pairs[j - 1];
			pairs[j - 1] = t;
		}
	if (np)
		emit_tree(&e, pairs, 0, np);
	patch_ja(&e, req_out, e.k);
	for (int i = 0; i < e.nends; i++)
		patch_ja(&e, e.ends[i], e.k);
	return e.k;
}

int srn_udp_group_prog(const uint8_t *order, unsigned n, struct sock_filter *p)
{
	if (n > SRN_GRP_MEMBERS)
		n = SRN_GRP_MEMBERS;
	/* A probe: to the index it names (past the group: by hash). */
	p[0] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0);
	p[1] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROBE_LEN, 0, 4);   /* -> 6 */
	p[2] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0);
	p[3] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROBE_WORD, 0, 2);  /* -> 6 */
	p[4] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_B | BPF_ABS, PROBE_INDEX_OFF);
	p[5] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_A, 0);
	int k = 6 + emit_steer(order, n, n, p + 6);
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
