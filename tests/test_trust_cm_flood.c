/*
 * test_trust_cm_flood [-f ADDR:PORT] TARGET NCM SECONDS COUNT [AVOID_PORT...]
 * - the attacker half of test_trust_cm_flood.sh: a remote peer with
 * nothing but UDP sockets floods TARGET:4791 (a shared address, several
 * processes behind it, NCM of them with a CM) with CM REQs for ports
 * nobody listens on, and counts what comes back.
 *
 *   attacker: NSRC (6) addresses 127.r.r.r,        target: the group's
 *   each one socket on :4791 (sends, takes the     QP1 (link/udp_group_fwd.c
 *   REJs) and two on ephemeral ports (send only)   routes, cm/held.c holds)
 *     COUNT packets over SECONDS ------------------>
 *     <------------------------------ REJ per REQ, now or after 1 s
 *
 * Of the packets: ~55% new REQs (random comm ID, port, source), ~20% a
 * retransmission of an earlier one (same bytes, same socket), ~25%
 * malformed (truncated, bad ICRC, bad Q_Key, oversized, and REQs with a
 * correct ICRC but a field the CM's parser refuses).  30% of the new
 * packets come from NDEAD (40) further addresses that take no REJs, so
 * the CM answers more peers than it caches address handles for.  With
 * -f, 15% of the packets (about a quarter of the new REQs) name
 * ADDR:PORT in their IP CM header instead: a port that a process outside
 * the group holds.  Then it listens for
 * 2.5 s more (the hold is 1 s).  Checks:
 *   - nothing but REJs comes back, and only for REQs we sent;
 *   - no REJ for a malformed packet (each was dropped somewhere);
 *   - no amplification: per REQ at most one REJ per copy sent, and REJ
 *     bytes <= REQ bytes sent (a REJ is a MAD as large as the REQ);
 *   - the held REQs stay bounded: a REJ that comes >= 0.9 s after its
 *     REQ was held (cm/held.c answers the others at once; a held one
 *     waits 1 s).  During the flood each such hold spanned [REJ - 1 s,
 *     REJ], and those spans may overlap at most NCM x SRN_CM_NHELD (32)
 *     times, plus a little for jitter; then a probe sends 3 x that many
 *     new REQs at once, of which at most that many may be held.  A
 *     loaded host can delay an immediate REJ past 0.9 s too: when some
 *     answers took 100-900 ms (neither immediate nor held) the flood's
 *     count is only printed, and the probe is tried again (3 tries);
 *   - the test saw its effect: REQs were answered, some held.
 * Prints summary lines ("flood: ...", "probe N: ...").  Exit 0, 1, or 77
 * (no free source address).  Every loop is bounded by count or time.
 */
#include <arpa/inet.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "check.h"
#include "cm_req_craft.h"
#include "diag/clock.h"

#define ROCE_PORT 4791
#define NSRC 6
#define TX_PER_SRC 3
#define NTX (NSRC * TX_PER_SRC)
#define NDEAD 40               /* more sources than the CM caches AHs for (32) */
#define MAXREQ 16000           /* comm IDs carry index + 1 in 14 bits */
#define MAX_COPIES 4
#define TAIL_NS 2500000000ull  /* the 1 s hold, the CM's 5 ms looks, a loaded host */
#define LATE_NS 900000000ull   /* an answer this late was held */
#define HOLD_NS 1000000000ull  /* SRN_CM_HOLD_MS */
#define NHELD 32               /* SRN_CM_NHELD, per process with a CM */
#define HOLD_SLACK 8           /* REJ send and receive jitter across spans */
#define PROBE_TRIES 3

enum kind { K_VALID, K_FOREIGN, K_TRUNC, K_BAD_ICRC, K_BAD_QKEY, K_OVERSIZE, K_BAD_MTU,
	    K_BAD_CLASS_VER, K_BAD_METHOD, K_RD, K_COMM0, K_NKINDS };
static const char *const kind_name[K_NKINDS] = { "valid", "foreign_dst", "truncated", "bad_icrc", "bad_qkey",
	"oversized", "bad_mtu", "bad_class_version", "bad_method", "transport_rd", "comm_id_0" };

struct req {
	uint32_t comm_id;
	enum kind kind;
	int tx;                        /* the socket it goes from (the ICRC covers it) */
	bool dead;                     /* from a source whose REJs nobody takes */
	uint32_t len;
	uint8_t pkt[CRAFT_PKT_LEN + 64];
	unsigned copies, rejs;
	uint64_t t_pending;            /* oldest copy not answered yet; 0: none */
};

static struct req reqs[MAXREQ];
static int nreq;
static int rx_fd[NSRC], tx_fd[NTX + NDEAD];
static struct sockaddr_in tx_addr[NTX + NDEAD], target, foreign;
static bool use_foreign;
static uint64_t rng = 88172645463325252ull;

/* Phase 0 is the flood, 1.. the probes (probe()). */
#define PHASES (1 + PROBE_TRIES)
static int phase;

static struct {
	unsigned sent[K_NKINDS], retx, send_fail;
	unsigned rej, rej_unknown, rej_malformed, other;
	uint64_t req_bytes, rej_bytes;  /* REQs from live sources; REJs to them */
	/* REJ latency from the oldest unanswered copy, by phase, for valid
	 * and foreign_dst REQs: < 10 ms, < 100 ms, < 500 ms, < 900 ms, more
	 * (held).  Nothing belongs in the middle two: there only a loaded
	 * host's delays put answers, and they make "held" a guess. */
	unsigned lat[PHASES][2][5];
	unsigned late[PHASES];
	uint64_t late_at[MAXREQ];      /* the flood's late REJs: arrival times */
} st;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int udp_socket(const struct sockaddr_in *a)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int pmtu = IP_PMTUDISC_DO;     /* ID 0 with DF: what craft_icrc assumes */
	int rcv = 4 << 20;
	if (fd < 0 || setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv)) ||
	    bind(fd, (const struct sockaddr *)a, sizeof(*a))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static struct sockaddr_in random_addr(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	do
		a.sin_addr.s_addr = htonl(0x7f000000u | (uint32_t)(rnd() % 0xfffffe + 1));
	while (a.sin_addr.s_addr == target.sin_addr.s_addr ||
	       (use_foreign && a.sin_addr.s_addr == foreign.sin_addr.s_addr));
	return a;
}

/* NSRC random loopback addresses, each with :4791 free (that is where
 * the CM sends its REJ) and two more sockets on ephemeral ports; then
 * NDEAD addresses with one ephemeral socket each and nothing on :4791
 * (their REJs go nowhere, and the CM's address-handle cache turns over). */
static void open_sources(void)
{
	int n = 0;
	for (int tries = 0; tries < 200 && n < NSRC; tries++) {
		struct sockaddr_in a = random_addr(ROCE_PORT);
		if ((rx_fd[n] = udp_socket(&a)) < 0)
			continue;
		for (int k = 0; k < TX_PER_SRC; k++) {
			struct sockaddr_in e = a;
			if (k)
				e.sin_port = 0;
			int fd = k ? udp_socket(&e) : rx_fd[n];
			socklen_t sl = sizeof(e);
			CHECK(fd >= 0 && getsockname(fd, (struct sockaddr *)&e, &sl) == 0);
			tx_fd[n * TX_PER_SRC + k] = fd;
			tx_addr[n * TX_PER_SRC + k] = e;
		}
		n++;
	}
	if (n < NSRC) {
		fprintf(stderr, "SKIP: no %d free 127.x.y.z:%d for the attacker\n", NSRC, ROCE_PORT);
		exit(77);
	}
	for (int i = NTX; i < NTX + NDEAD; i++) {
		tx_addr[i] = random_addr(0);
		socklen_t sl = sizeof(tx_addr[i]);
		tx_fd[i] = udp_socket(&tx_addr[i]);
		CHECK(tx_fd[i] >= 0 && getsockname(tx_fd[i], (struct sockaddr *)&tx_addr[i], &sl) == 0);
	}
}

static uint16_t pick_port(const uint16_t *avoid, int navoid)
{
	for (;;) {                     /* bounded in practice: navoid is a handful */
		uint16_t p = (uint16_t)(1024 + rnd() % (65536 - 1024));
		bool ok = true;
		for (int i = 0; i < navoid; i++)
			ok = ok && p != avoid[i];
		if (ok)
			return p;
	}
}

/* A new packet of this kind: a REQ, then spoiled as the kind says.  From
 * K_BAD_QKEY on the ICRC is computed again, so only a later check can
 * refuse them: the Q_Key, QP1's receive length, the CM's parser. */
static struct req *new_req(enum kind k, bool may_be_dead, const uint16_t *avoid, int navoid)
{
	struct req *r = &reqs[nreq];
	uint32_t idx = (uint32_t)nreq + 1;
	r->comm_id = k == K_COMM0 ? 0 : (uint32_t)(rnd() & ~0x3fffull) | idx;
	r->kind = k;
	r->dead = may_be_dead && rnd() % 100 < 30;
	r->tx = r->dead ? NTX + (int)(rnd() % NDEAD) : (int)(rnd() % NTX);
	r->len = CRAFT_PKT_LEN;
	const struct sockaddr_in *src = &tx_addr[r->tx];
	uint16_t port = k == K_FOREIGN ? ntohs(foreign.sin_port) : pick_port(avoid, navoid);
	CHECK(craft_req(r->pkt, src, &target, k == K_FOREIGN ? &foreign : NULL, port,
			r->comm_id ? r->comm_id : 1, rnd()) == 0);
	uint8_t *mad = r->pkt + SRN_GSI_MAD_OFF;
	switch (k) {
	case K_TRUNC:    r->len = (uint32_t)(1 + rnd() % (CRAFT_PKT_LEN - 1)); return nreq++, r;
	case K_BAD_ICRC: r->pkt[CRAFT_PKT_LEN - 1 - rnd() % 4] ^= (uint8_t)(1u << rnd() % 8); return nreq++, r;
	case K_BAD_QKEY: r->pkt[SRN_GSI_MAD_OFF - 8] ^= 0x40; break;   /* DETH Q_Key: not GSI's */
	case K_OVERSIZE: r->len += 64; memset(mad + SRN_MAD_LEN, 0xa5, 64); break;
	case K_BAD_MTU:  mad[24 + 50] = (uint8_t)(7 << 4 | (mad[24 + 50] & 15)); break;
	case K_BAD_CLASS_VER: mad[2] = 1; break;
	case K_BAD_METHOD: mad[3] = 0x81; break;
	case K_RD:       mad[24 + 43] = (uint8_t)((mad[24 + 43] & ~6u) | 2u << 1); break;
	case K_COMM0:    memset(mad + 24, 0, 4); break;
	default:         return nreq++, r;
	}
	craft_icrc(r->pkt, r->len, src, &target);
	return nreq++, r;
}

/* A REQ the CM takes: it owes one REJ per copy at most. */
static bool is_valid(enum kind k)
{
	return k == K_VALID || k == K_FOREIGN;
}

static void send_req(struct req *r, uint64_t now)
{
	ssize_t n = sendto(tx_fd[r->tx], r->pkt, r->len, 0, (struct sockaddr *)&target, sizeof(target));
	if (n != (ssize_t)r->len) {
		st.send_fail++;        /* a full socket buffer: as lost on a wire */
		return;
	}
	r->copies++;
	if (!r->dead)
		st.req_bytes += r->len;  /* what could be answered to us */
	if (!r->t_pending)
		r->t_pending = now;
}

static void on_answer(const uint8_t *b, ssize_t n, uint64_t now)
{
	struct craft_answer a;
	craft_parse_answer(b, (size_t)n, &a);
	if (a.attr != SRN_CM_ATTR_REJ) {
		st.other++;
		return;
	}
	st.rej++;
	st.rej_bytes += (uint64_t)n;
	uint32_t idx = a.remote_comm_id & 0x3fff;
	struct req *r = idx >= 1 && (int)idx <= nreq ? &reqs[idx - 1] : NULL;
	if (!r || r->comm_id != a.remote_comm_id) {
		st.rej_unknown++;
		return;
	}
	r->rejs++;
	if (!is_valid(r->kind)) {
		st.rej_malformed++;
		return;
	}
	if (!r->t_pending)
		return;
	uint64_t lat = now - r->t_pending;
	int bk = lat < 10000000 ? 0 : lat < 100000000 ? 1 : lat < 500000000 ? 2 : lat < LATE_NS ? 3 : 4;
	st.lat[phase][r->kind == K_FOREIGN][bk]++;
	if (bk == 4 && !phase)
		st.late_at[st.late[0]] = now;
	st.late[phase] += bk == 4;
	r->t_pending = 0;
}

/* Take what has arrived, waiting up to ms for the first of it. */
static void drain(int ms)
{
	struct pollfd p[NSRC];
	for (int i = 0; i < NSRC; i++)
		p[i] = (struct pollfd){ .fd = rx_fd[i], .events = POLLIN };
	if (poll(p, NSRC, ms) <= 0)
		return;
	uint64_t now = srn_now_ns();
	for (int i = 0; i < NSRC; i++)
		for (int k = 0; k < 256 && (p[i].revents & POLLIN); k++) {
			uint8_t b[2048];
			ssize_t n = recv(rx_fd[i], b, sizeof(b), 0);
			if (n < 0)
				break;
			on_answer(b, n, now);
		}
}

/* ~55% new valid REQs, ~20% copies of earlier ones, the rest spoiled. */
static void flood(double seconds, int count, const uint16_t *avoid, int navoid)
{
	uint64_t t0 = srn_now_ns(), gap = (uint64_t)(seconds * 1e9) / (uint64_t)count;
	int nvalid = 0;
	static int valid[MAXREQ];
	for (int i = 0; i < count && nreq < MAXREQ; i++) {
		while (srn_now_ns() < t0 + gap * (uint64_t)i)
			drain(1);
		unsigned dice = (unsigned)(rnd() % 100);
		struct req *r = NULL;
		if (dice >= 55 && dice < 75 && nvalid) {
			r = &reqs[valid[rnd() % (uint64_t)nvalid]];
			if (r->copies >= MAX_COPIES)
				r = NULL;
			else
				st.retx++;
		}
		if (!r) {
			enum kind k = dice >= 75 ? (enum kind)(K_TRUNC + rnd() % (K_NKINDS - K_TRUNC))
				    : use_foreign && dice < 15 ? K_FOREIGN : K_VALID;
			r = new_req(k, true, avoid, navoid);
			st.sent[k]++;
			if (is_valid(k))
				valid[nvalid++] = (int)(r - reqs);
		}
		send_req(r, srn_now_ns());
		if (i % 16 == 15)
			drain(0);
	}
	uint64_t end = srn_now_ns() + TAIL_NS;
	while (srn_now_ns() < end)
		drain(20);
}

static bool delayed(int ph)
{
	return st.lat[ph][0][2] + st.lat[ph][0][3] + st.lat[ph][1][2] + st.lat[ph][1][3] > 0;
}

/* The table's bound on a quiet host: 3 x its size in new REQs at once,
 * after the flood's holds have ended; at most its size may come late.
 * Answers delayed by the host make a try inconclusive: tried again. */
static void probe(int cap, const uint16_t *avoid, int navoid)
{
	for (phase = 1; phase <= PROBE_TRIES && nreq + 3 * cap <= MAXREQ; phase++) {
		for (int i = 0; i < 3 * cap; i++) {
			struct req *r = new_req(K_VALID, false, avoid, navoid);
			st.sent[K_VALID]++;
			send_req(r, srn_now_ns());
		}
		uint64_t end = srn_now_ns() + TAIL_NS;
		while (srn_now_ns() < end)
			drain(20);
		unsigned *l = st.lat[phase][0];
		printf("probe %d: %d REQs, REJ latency <10ms %u, <100ms %u, <500ms %u, <900ms %u, held %u\n",
		       phase, 3 * cap, l[0], l[1], l[2], l[3], l[4]);
		if (!delayed(phase) || st.late[phase] <= (unsigned)cap)
			break;
	}
	int last = phase <= PROBE_TRIES ? phase : PROBE_TRIES;
	CHECK(st.late[last] <= (unsigned)cap, "%u REQs held at once, > %d", st.late[last], cap);
	CHECK(st.late[last] > 0, "no REQ was held: the hold path was not exercised");
}

/* The most holds alive at once: late REJ at t means a hold over
 * [t - 1 s, t] (a slot is taken again only after its REJ went). */
static int max_held(void)
{
	int best = 0;
	for (unsigned i = 0; i < st.late[0]; i++) {
		int n = 0;
		for (unsigned j = 0; j < st.late[0]; j++)
			n += st.late_at[j] <= st.late_at[i] && st.late_at[j] + HOLD_NS > st.late_at[i];
		if (n > best)
			best = n;
	}
	return best;
}

/* The flood's own view of the table: spans of late REJs.  Only when no
 * answer was delayed into the middle buckets (else a delayed immediate
 * REJ looks held; probe() then decides). */
static void report_flood(int cap)
{
	int held = max_held();
	printf("flood: %u late REJs, at most %d holds at once%s\n", st.late[0], held,
	       delayed(0) ? " (answers were delayed: not judged here)" : "");
	for (int f = 0; f < 2; f++)
		printf("  REJ latency %-11s <10ms %u, <100ms %u, <500ms %u, <900ms %u, more %u\n",
		       f ? "foreign_dst" : "valid", st.lat[0][f][0], st.lat[0][f][1], st.lat[0][f][2],
		       st.lat[0][f][3], st.lat[0][f][4]);
	for (int k = K_FOREIGN; k < K_NKINDS; k++)
		printf("  sent %-18s %u\n", kind_name[k], st.sent[k]);
	if (!delayed(0))
		CHECK(held <= cap + HOLD_SLACK, "%d REQs held at once, > %d", held, cap);
}

/* Everything sent, flood and probes: what came back for it. */
static void check_answers(void)
{
	unsigned distinct = 0, dead = 0, answered = 0, multi = 0, over = 0;
	for (int i = 0; i < nreq; i++) {
		const struct req *r = &reqs[i];
		if (!is_valid(r->kind) || !r->copies)
			continue;
		distinct++;
		dead += r->dead;
		answered += r->rejs > 0;
		multi += r->rejs > 1;
		over += r->rejs > r->copies;
	}
	printf("flood: distinct=%u retx=%u malformed=%u send_fail=%u from_dead_sources=%u rej=%u "
	       "answered=%u multi_rej=%u other=%u req_bytes=%llu rej_bytes=%llu\n",
	       distinct, st.retx, nreq - distinct, st.send_fail, dead, st.rej, answered, multi,
	       st.other, (unsigned long long)st.req_bytes, (unsigned long long)st.rej_bytes);
	CHECK(st.other == 0, "%u answers that are not a REJ", st.other);
	CHECK(st.rej_unknown == 0, "%u REJs for comm IDs we never sent", st.rej_unknown);
	CHECK(st.rej_malformed == 0, "%u REJs for malformed packets", st.rej_malformed);
	CHECK(over == 0, "%u REQs got more REJs than copies sent: amplification", over);
	CHECK(st.rej_bytes <= st.req_bytes, "REJ bytes %llu > REQ bytes %llu",
	      (unsigned long long)st.rej_bytes, (unsigned long long)st.req_bytes);
	CHECK(answered > 0, "no REQ was answered: the flood did not reach a CM");
}

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "-f")) {
		char *colon = strchr(argv[2], ':');
		foreign = (struct sockaddr_in){ .sin_family = AF_INET };
		if (!colon)
			return 2;
		*colon = 0;
		foreign.sin_port = htons((uint16_t)atoi(colon + 1));
		if (inet_pton(AF_INET, argv[2], &foreign.sin_addr) != 1)
			return 2;
		use_foreign = true;
		argv += 2;
		argc -= 2;
	}
	if (argc < 5)
		return 2;
	target = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(ROCE_PORT) };
	if (inet_pton(AF_INET, argv[1], &target.sin_addr) != 1)
		return 2;
	int ncm = atoi(argv[2]), count = atoi(argv[4]);
	double seconds = atof(argv[3]);
	uint16_t avoid[16];
	int navoid = 0;
	for (int i = 5; i < argc && navoid < 16; i++)
		avoid[navoid++] = (uint16_t)atoi(argv[i]);
	if (ncm < 1 || ncm > 8 || count < 1 || count > MAXREQ / 2 || seconds <= 0 || seconds > 60)
		return 2;
	rng ^= srn_now_ns() ^ (uint64_t)getpid() << 32;
	open_sources();
	flood(seconds, count, avoid, navoid);
	report_flood(ncm * NHELD);
	probe(ncm * NHELD, avoid, navoid);
	check_answers();
	return srn_check_result();
}
