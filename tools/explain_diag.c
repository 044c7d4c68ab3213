/*
 * explain_diag.c - the diagnoses of `softrnic explain` (explain_diag.h).
 *
 * Each diagnosis is a rule over copies the caller made: counter growth
 * over a window (a second sample, or the process's life so far), error
 * lines parsed back from the logs, region slots.  The thresholds are
 * chosen so that a healthy run never trips them (a loss-free RC flow
 * has no go-back-N at all; a network that pauses now and then pauses for
 * well under a tenth of the time) and a storm does at once; each is
 * derived where it is defined.
 */
#include "explain_diag.h"

#include <infiniband/verbs.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

uint64_t srn_xd_delta(const struct srn_xd_set *s, const char *name)
{
	for (uint32_t i = 0; i < s->n; i++) {
		if (strncmp(s->names[i], name, SRN_XD_NAME_LEN))
			continue;
		uint64_t b = s->base ? s->base[i] : 0;
		/* A counter never goes down; a smaller value is another
		 * incarnation's: count it from zero. */
		return s->now[i] >= b ? s->now[i] - b : s->now[i];
	}
	return 0;
}

bool srn_xd_has(const struct srn_xd_set *s, const char *name)
{
	for (uint32_t i = 0; i < s->n; i++)
		if (!strncmp(s->names[i], name, SRN_XD_NAME_LEN))
			return true;
	return false;
}

static void window_str(const struct srn_xd_dev *d, char *buf, size_t len)
{
	if (d->lifetime && d->secs > 0)
		snprintf(buf, len, "in its %.1f s so far", d->secs);
	else if (d->lifetime)
		snprintf(buf, len, "over its life");
	else
		snprintf(buf, len, "in the last %.1f s", d->secs);
}

/* ---- retransmission storm --------------------------------------------- */

/* A requester storm: at least this many go-back-N restarts, and at least
 * one per 100 packets sent.  A loss-free RC flow restarts never; 1 %
 * means each restart resends a window, so the wire carries a good part
 * of the traffic twice. */
#define STORM_MIN_RESTARTS 10
#define STORM_RESTARTS_PER_100 1
/* A responder storm: duplicates and out-of-sequence packets at least 20
 * and at least 1 in 20 packets received (the requester resends, the
 * responder drops what it already has). */
#define STORM_MIN_DUPS 20
#define STORM_DUPS_PER_20 1

/* Restarts that were not RNR waits. */
static uint64_t qp_loss_restarts(const struct srn_xd_qp *q)
{
	return q->retransmits - (q->rnr < q->retransmits ? q->rnr : q->retransmits);
}

static int qp_cmp(const void *pa, const void *pb)
{
	uint64_t a = qp_loss_restarts(pa), b = qp_loss_restarts(pb);
	return (b > a) - (b < a);
}

/* Up to four QPs of d that restarted most after losses, most first. */
static void print_worst_qps(FILE *f, const struct srn_xd_dev *d)
{
	if (!d->nqps)
		return;
	struct srn_xd_qp *q = malloc(d->nqps * sizeof(*q));
	if (!q)
		return;
	memcpy(q, d->qps, d->nqps * sizeof(*q));
	qsort(q, d->nqps, sizeof(*q), qp_cmp);
	for (size_t i = 0; i < d->nqps && i < 4; i++) {
		uint64_t lr = qp_loss_restarts(&q[i]);
		if (!lr)
			break;
		fprintf(f, "  qp 0x%06x to %s: %" PRIu64 " restarts, %" PRIu64
			" timeouts, %" PRIu64 " NAK-sequence, %" PRIu64
			" packets sent\n", q[i].qpn, q[i].peer, lr, q[i].timeouts,
			q[i].seq_naks, q[i].sent);
	}
	free(q);
}

int srn_xd_retransmit_storm(FILE *f, const struct srn_xd_dev *d)
{
	const struct srn_xd_set *c = &d->cnt;
	uint64_t sent = srn_xd_delta(c, "sent_pkts"), rcvd = srn_xd_delta(c, "rcvd_pkts");
	/* An RNR NAK's wait ends in a go-back-N restart too, but nothing was
	 * lost: the receiver had no buffer.  Those are not a storm's. */
	uint64_t all = srn_xd_delta(c, "retransmits"), rnr = srn_xd_delta(c, "rcvd_rnr_err");
	uint64_t restarts = all > rnr ? all - rnr : 0;
	uint64_t timeouts = srn_xd_delta(c, "local_ack_timeout_err");
	uint64_t seq_naks = srn_xd_delta(c, "packet_seq_err");
	uint64_t implied = srn_xd_delta(c, "implied_nak_seq_err");
	uint64_t dups = srn_xd_delta(c, "duplicate_request");
	uint64_t ooo = srn_xd_delta(c, "out_of_sequence");
	uint64_t retry_exc = srn_xd_delta(c, "retry_exceeded_err");
	bool req = restarts >= STORM_MIN_RESTARTS &&
		   restarts * 100 >= sent * STORM_RESTARTS_PER_100;
	bool resp = dups + ooo >= STORM_MIN_DUPS && (dups + ooo) * 20 >= rcvd * STORM_DUPS_PER_20;
	if (!req && !resp)
		return 0;

	char win[48];
	window_str(d, win, sizeof(win));
	fprintf(f, "diagnosis: retransmission storm: %s %s\n", d->who, win);
	if (req)
		fprintf(f, "  %" PRIu64 " go-back-N restarts for %" PRIu64
			" packets sent (%.1f per 1000): %" PRIu64 " after a local ACK timeout, %"
			PRIu64 " after a NAK-sequence, %" PRIu64 " implied NAKs (%" PRIu64
			" more after RNR NAKs, not counted)\n",
			restarts, sent, sent ? 1000.0 * (double)restarts / (double)sent : 0.0,
			timeouts, seq_naks, implied, all - restarts);
	if (resp)
		fprintf(f, "  as responder: %" PRIu64 " duplicate and %" PRIu64
			" out-of-sequence packets of %" PRIu64 " received: the peer resends\n",
			dups, ooo, rcvd);
	if (retry_exc)
		fprintf(f, "  %" PRIu64 " work requests already failed with RETRY_EXC_ERR\n",
			retry_exc);

	/* The QPs that restart most, so the user knows which flows suffer. */
	print_worst_qps(f, d);

	/* Why packets go missing, from the counters that say so. */
	uint64_t inj = srn_xd_delta(c, "fault_tx_dropped") + srn_xd_delta(c, "fault_rx_dropped") +
		       srn_xd_delta(c, "fault_tx_reordered") + srn_xd_delta(c, "fault_rx_reordered") +
		       srn_xd_delta(c, "fault_tx_corrupted") + srn_xd_delta(c, "fault_rx_corrupted");
	uint64_t eagain = srn_xd_delta(c, "tx_eagain"), txerr = srn_xd_delta(c, "tx_err");
	uint64_t icrc = srn_xd_delta(c, "bad_icrc");
	if (inj)
		fprintf(f, "  cause: the fault injector (SOFTRNIC_FAULTS) dropped, reordered or "
			   "corrupted %" PRIu64 " packets here: the storm is the injected loss\n",
			inj);
	if (eagain || txerr)
		fprintf(f, "  cause: %" PRIu64 " packets dropped at this host's own send "
			   "(socket buffer full: tx_eagain %" PRIu64 ", tx_err %" PRIu64 ")\n",
			eagain + txerr, eagain, txerr);
	if (icrc)
		fprintf(f, "  cause: %" PRIu64 " packets arrived damaged (bad_icrc) and were "
			   "dropped\n", icrc);
	if (req && timeouts * 2 > restarts)
		fprintf(f, "  most restarts waited for the ACK timer: the tail of a message or "
			   "its ACK is lost, or the timeout is shorter than the peer's answer "
			   "(duplicate_request climbing at the peer says the latter)\n");
	else if (req && (seq_naks + implied) * 2 > restarts)
		fprintf(f, "  most restarts followed a NAK-sequence: packets are lost or "
			   "reordered on the way, and every loss resends the whole window\n");
	fprintf(f, "  what to do: RoCE needs a network that does not drop: PFC or "
		   "ECN/DCQCN on the path; find the drops (`softrnic stat` on both ends: "
		   "fault_*, tx_eagain, bad_icrc; a switch's drop counters); raise the QP "
		   "timeout only when ACKs arrive late; `softrnic explain --qp-log QPN` "
		   "shows each restart\n");
	return 1;
}

/* ---- PFC pause storm ---------------------------------------------------- */

/* mlx5 (ethtool -S) counts pause frames per direction, globally
 * (rx_pause_ctrl_phy, tx_pause_ctrl_phy) and per priority
 * (rx_prio3_pause, tx_prio3_pause), and the time paused in microseconds
 * (rx_prio3_pause_duration, ...); docs/congestion.md's switch counts like
 * rx_pause_duration.  Every counter whose name starts with rx_/tx_ and
 * contains "pause" counts: *_duration (and *_transition) apart. */
enum pause_kind { P_NONE, P_FRAMES, P_DURATION };

static enum pause_kind pause_kind(const char *name, bool *rx)
{
	if (strncmp(name, "rx_", 3) && strncmp(name, "tx_", 3))
		return P_NONE;
	if (!strstr(name, "pause") || strstr(name, "transition"))
		return P_NONE;
	*rx = name[0] == 'r';
	return strstr(name, "duration") ? P_DURATION : P_FRAMES;
}

/* A storm: paused at least a tenth of the window (then every flow of the
 * priority, congested or not, loses that share), or, when no duration is
 * counted, at least 100 pause frames a second (a frame of quanta 0xffff
 * holds a 100 Gb/s link 336 us: 100 of them are over 3 % of each second,
 * far above a healthy network's occasional pause).  Without a window
 * length, 1000 frames.  The global and the per-priority counters count
 * the same frames: the larger sum stands for them. */
#define PAUSE_SHARE_PCT 10
#define PAUSE_FRAMES_PER_S 100
#define PAUSE_FRAMES_NO_WINDOW 1000

int srn_xd_pause_storm(FILE *f, const struct srn_xd_dev *d)
{
	const struct srn_xd_set *c = &d->cnt;
	uint64_t frames[2] = { 0, 0 }, dur_us[2] = { 0, 0 };   /* [rx] */
	bool has_dur[2] = { false, false }, any = false;
	char biggest[2][SRN_XD_NAME_LEN + 1] = { "", "" };
	uint64_t big_v[2] = { 0, 0 };
	for (uint32_t i = 0; i < c->n; i++) {
		char name[SRN_XD_NAME_LEN + 1];
		memcpy(name, c->names[i], SRN_XD_NAME_LEN);
		name[SRN_XD_NAME_LEN] = 0;
		bool rx = false;
		enum pause_kind k = pause_kind(name, &rx);
		if (k == P_NONE)
			continue;
		any = true;
		uint64_t v = srn_xd_delta(c, name);
		if (k == P_DURATION) {
			has_dur[rx] = true;
			dur_us[rx] = v > dur_us[rx] ? v : dur_us[rx];
		} else {
			/* per-priority and global counters overlap: keep the
			 * largest one as the count of frames */
			if (v > frames[rx])
				frames[rx] = v;
			if (v > big_v[rx]) {
				big_v[rx] = v;
				memcpy(biggest[rx], name, sizeof(biggest[rx]));
			}
		}
	}
	if (!any)
		return 0;

	bool storm[2];
	double share[2] = { 0, 0 };
	for (int rx = 0; rx < 2; rx++) {
		if (d->secs > 0 && has_dur[rx])
			share[rx] = 100.0 * (double)dur_us[rx] / (d->secs * 1e6);
		if (d->secs > 0)
			storm[rx] = (has_dur[rx] && share[rx] >= PAUSE_SHARE_PCT) ||
				    (double)frames[rx] >= PAUSE_FRAMES_PER_S * d->secs;
		else
			storm[rx] = frames[rx] >= PAUSE_FRAMES_NO_WINDOW;
	}
	if (!storm[0] && !storm[1])
		return 0;

	char win[48];
	window_str(d, win, sizeof(win));
	fprintf(f, "diagnosis: PFC pause storm: %s %s\n", d->who, win);
	if (storm[1]) {
		fprintf(f, "  received %" PRIu64 " pause frames (%s)", frames[1], biggest[1]);
		if (has_dur[1])
			fprintf(f, ", paused %.1f ms", (double)dur_us[1] / 1000.0);
		if (share[1] > 0)
			fprintf(f, " = %.0f %% of the time", share[1]);
		fprintf(f, ": the switch in front of this host keeps stopping its sends\n");
		fprintf(f, "  every flow of the paused priority waits, not only the congested "
			   "one (head-of-line blocking), and the pause spreads upstream hop by "
			   "hop\n");
	}
	if (storm[0]) {
		fprintf(f, "  sent %" PRIu64 " pause frames (%s)", frames[0], biggest[0]);
		if (share[0] > 0)
			fprintf(f, ", %.0f %% of the time paused", share[0]);
		fprintf(f, ": this host's receive side cannot keep up and pauses its "
			   "senders (a slow or stuck receiver is the usual source of a storm)\n");
	}
	fprintf(f, "  what to do: find the congested egress (the switch's queue and pause "
		   "counters, e.g. `softrnic switch` pauses= paused_ms=); enable ECN/DCQCN so "
		   "senders slow down before the queue reaches XOFF; a receiver that sends "
		   "pauses without end needs fixing (or the switch's PFC watchdog)\n");
	return 1;
}

/* ---- stale rkey ------------------------------------------------------------ */

/* Requester:  "REM_ACCESS_ERR: RDMA_WRITE wr_id 0x.. [PSN ..] rkey 0x.. va
 *              0x.. len N to QP 0x.. at ADDR: ..." (transport/explain.c)
 * Responder:  "NAK remote access error for OPCODE PSN 0x..: RDMA WRITE rkey
 *              0x.. va 0x.. len N: WHY" (transport/responder.c) */
bool srn_xd_parse_key_err(const char *msg, struct srn_xd_key_err *e)
{
	bool responder = !strncmp(msg, "NAK remote access error", 23);
	if (!responder && strncmp(msg, "REM_ACCESS_ERR: ", 16))
		return false;
	const char *k = strstr(msg, " rkey 0x");
	unsigned rkey, len;
	unsigned long long va;
	int used = 0;
	if (!k || sscanf(k, " rkey 0x%x va 0x%llx len %u%n", &rkey, &va, &len, &used) != 3)
		return false;
	e->responder = responder;
	e->rkey = rkey;
	e->va = va;
	e->len = len;
	e->peer_addr[0] = e->why[0] = 0;
	const char *rest = k + used;
	if (responder) {
		if (!strncmp(rest, ": ", 2))
			snprintf(e->why, sizeof(e->why), "%s", rest + 2);
		return true;
	}
	const char *at = strstr(rest, " at ");
	if (at) {
		at += 4;
		size_t n = strcspn(at, ": ");
		if (n >= sizeof(e->peer_addr))
			n = sizeof(e->peer_addr) - 1;
		memcpy(e->peer_addr, at, n);
		e->peer_addr[n] = 0;
	}
	return true;
}

static bool addr_eq(const char *a, const char *b)
{
	return a && b && *a && !strcmp(a, b);
}

static void size_str(uint64_t n, char *buf, size_t len)
{
	if (n >= (1ull << 20) && !(n % (1ull << 20)))
		snprintf(buf, len, "%" PRIu64 " MiB", n >> 20);
	else if (n >= 1024 && !(n % 1024))
		snprintf(buf, len, "%" PRIu64 " KiB", n >> 10);
	else
		snprintf(buf, len, "%" PRIu64 " bytes", n);
}

/* The region key K named at the responder: prefer the responder's own
 * address, a live region over a freed one. */
static const struct srn_xd_region *find_region(const struct srn_xd_region *r, size_t nr,
					       uint32_t rkey, const char *addr)
{
	const struct srn_xd_region *best = NULL;
	for (size_t i = 0; i < nr; i++) {
		if (r[i].rkey != rkey)
			continue;
		int score = (addr_eq(r[i].addr, addr) ? 2 : 0) + (r[i].live ? 1 : 0);
		int bs = best ? (addr_eq(best->addr, addr) ? 2 : 0) + (best->live ? 1 : 0) : -1;
		if (score > bs)
			best = &r[i];
	}
	return best;
}

/* The requester lines of one process and key, from e[first] on. */
struct key_uses {
	size_t count;           /* lines */
	size_t nq;              /* QPs in qps */
	uint32_t qps[6];        /* the first QPs that used it */
	bool more_qps;          /* and more than those */
	uint64_t t0, t1;        /* first and last */
};

static void key_uses(const struct srn_xd_key_err *e, size_t n, size_t first, struct key_uses *u)
{
	const struct srn_xd_key_err *a = &e[first];
	*u = (struct key_uses){ .t0 = UINT64_MAX };
	for (size_t i = first; i < n; i++) {
		if (e[i].responder || e[i].pid != a->pid || e[i].rkey != a->rkey)
			continue;
		u->count++;
		u->t0 = e[i].when < u->t0 ? e[i].when : u->t0;
		u->t1 = e[i].when > u->t1 ? e[i].when : u->t1;
		bool seen = false;
		for (size_t q = 0; q < u->nq; q++)
			seen |= u->qps[q] == e[i].qpn;
		if (!seen && u->nq < 6)
			u->qps[u->nq++] = e[i].qpn;
		else if (!seen)
			u->more_qps = true;
	}
}

/* A deregistered region reg, and up to three remote regions its owner
 * offers now at the same address. */
static void print_revoked(FILE *f, const struct srn_xd_region *reg,
			  const struct srn_xd_region *r, size_t nr)
{
	char sz[32];
	size_str(reg->len, sz, sizeof(sz));
	fprintf(f, "  rkey 0x%x was the region va 0x%" PRIx64 " len %s of %s; that "
		   "region is deregistered (revoked)\n", reg->rkey, reg->va, sz, reg->who);
	size_t shown = 0;
	for (size_t i = 0; i < nr && shown < 3; i++) {
		if (!r[i].live || r[i].pid != reg->pid || !addr_eq(r[i].addr, reg->addr) ||
		    !(r[i].access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				       IBV_ACCESS_REMOTE_ATOMIC)))
			continue;
		size_str(r[i].len, sz, sizeof(sz));
		fprintf(f, "  %s now offers rkey 0x%x va 0x%" PRIx64 " len %s\n",
			shown ? "   and" : r[i].who, r[i].rkey, r[i].va, sz);
		shown++;
	}
}

/* The responder's lines for the key of requester line a: how many (*naks),
 * the first (*nak), and whether they call it stale or refuse it for
 * another reason. */
static void responder_says(const struct srn_xd_key_err *e, size_t n,
			   const struct srn_xd_key_err *a, size_t *naks,
			   const struct srn_xd_key_err **nak, bool *said_stale, bool *said_other)
{
	for (size_t i = 0; i < n; i++)
		if (e[i].responder && e[i].rkey == a->rkey &&
		    (!a->peer_addr[0] || addr_eq(e[i].self_addr, a->peer_addr))) {
			(*naks)++;
			*nak = *nak ? *nak : &e[i];
			bool st = !strncmp(e[i].why, "stale key", 9) ||
				  !strncmp(e[i].why, "no such key", 11);
			*said_stale |= st;
			*said_other |= !st;
		}
}

/* The story of the key of requester line e[first]; true when told. */
static bool story(FILE *f, const struct srn_xd_key_err *e, size_t n, size_t first,
		  const struct srn_xd_region *r, size_t nr)
{
	const struct srn_xd_key_err *a = &e[first];
	struct key_uses u;
	key_uses(e, n, first, &u);
	size_t count = u.count, nq = u.nq;
	const uint32_t *qps = u.qps;
	const struct srn_xd_region *reg = find_region(r, nr, a->rkey, a->peer_addr);
	/* The responder's side of the same failures: its NAKs for that key. */
	size_t naks = 0;
	const struct srn_xd_key_err *nak = NULL;
	bool said_stale = false, said_other = false;
	responder_says(e, n, a, &naks, &nak, &said_stale, &said_other);
	/* What makes it a stale key: the responder said so ("stale key",
	 * "no such key"), or, when its lines are not here, the key names a
	 * deregistered region.  A key the responder knows but refused for
	 * its range or rights is another mistake, told by the log lines; it
	 * is a diagnosis only when it repeats. */
	bool stale = said_stale || (!said_other && reg && !reg->live);
	bool unknown = !said_stale && !said_other && !reg;   /* nothing here knows the key */
	bool repeated = count > 1;
	if (!stale && !repeated)
		return false;
	if (!stale && !unknown) {
		fprintf(f, "diagnosis: repeated remote access errors: %s used rkey 0x%x %zu times "
			   "on %zu QP%s and was refused each time%s%s\n", a->who, a->rkey, count,
			nq, nq == 1 ? "" : "s", nak ? ": " : "", nak ? nak->why : "");
		fprintf(f, "  what to do: the key is not stale; fix the address, length or "
			   "access the program asks for (`softrnic explain --pid %d` names the "
			   "check); retrying the same request cannot succeed\n", nak ? nak->pid : a->pid);
		return true;
	}
	if (unknown)
		fprintf(f, "diagnosis: repeated remote access errors: %s used rkey 0x%x, which no "
			   "softrnic process on this host has registered%s (a stale key, or a peer "
			   "elsewhere)\n", a->who, a->rkey, a->peer_addr[0] ? " at that address" : "");
	else if (reg && !reg->live)
		fprintf(f, "diagnosis: stale rkey: %s %s rkey 0x%x after %s deregistered it\n",
			a->who, repeated ? "keeps using" : "used", a->rkey, reg->who);
	else
		fprintf(f, "diagnosis: stale rkey: %s %s rkey 0x%x, which its peer%s%s no longer "
			   "knows\n", a->who, repeated ? "keeps using" : "used", a->rkey,
			a->peer_addr[0] ? " at " : "", a->peer_addr);
	fprintf(f, "  in its log: %zu RDMA operation%s failed with REM_ACCESS_ERR on %zu QP%s (", count,
		count == 1 ? "" : "s", nq, nq == 1 ? "" : "s");
	for (size_t q = 0; q < nq; q++)
		fprintf(f, "%s0x%06x", q ? ", " : "", qps[q]);
	fprintf(f, "%s)", u.more_qps ? ", ..." : "");
	if (u.t1 > u.t0)
		fprintf(f, " over %.1f s", (double)(u.t1 - u.t0) / 1e9);
	fprintf(f, ", last at va 0x%" PRIx64 " len %u to %s\n", a->va, a->len,
		a->peer_addr[0] ? a->peer_addr : "the peer");
	if (nq > 1)
		fprintf(f, "  each failure moved the QP to the error state; the program "
			   "connected again and used the same key on the new QP\n");
	if (reg && !reg->live)
		print_revoked(f, reg, r, nr);
	if (naks)
		fprintf(f, "  the responder refused it %zu time%s: %s\n", naks, naks == 1 ? "" : "s",
			nak->why);
	fprintf(f, "  what to do: an rkey dies with its region.  After REM_ACCESS_ERR or a "
		   "disconnect, take the key the server hands out on the new connection (its "
		   "REP private data or your protocol's message) and never reuse one from before; "
		   "servers revoke first (disconnect or tell the clients), then deregister.  "
		   "Check: `softrnic res --pid %d --type mr`\n", reg ? reg->pid : a->pid);
	return true;
}

int srn_xd_stale_rkeys(FILE *f, const struct srn_xd_key_err *e, size_t n,
		       const struct srn_xd_region *r, size_t nr)
{
	int found = 0;
	for (size_t i = 0; i < n; i++) {
		if (e[i].responder)
			continue;
		/* One story per (process, key): the first line of each. */
		bool dup = false;
		for (size_t j = 0; j < i && !dup; j++)
			dup = !e[j].responder && e[j].pid == e[i].pid && e[j].rkey == e[i].rkey;
		if (dup)
			continue;
		found += story(f, e, n, i, r, nr);
	}
	return found;
}
