/*
 * perf_run.c - the measurement loops of `softrnic perf`: ping-pong and
 * one-sided latency, windowed bandwidth, the receiving side of send, and
 * the data checks (layout, roles and verification: perf_run.h; the
 * resources they run on: perf_res.c).
 *
 * Invariants the loops rely on:
 *   - wr_id = QP index << 48 | (session-wide send index + 1); a QP's send
 *     queue completes in order, so a signaled completion with count n
 *     means sends [0, n) of that QP are done, data placed.  Counts are
 *     never reset between runs, so a late completion cannot corrupt the
 *     next run's window.
 *   - bw: a QP has at most tx_depth WRs outstanding and one in every
 *     cq_mod is signaled (cq_mod <= tx_depth - post_list + 1, checked by
 *     the caller), and the last WR of the run is always signaled, so a
 *     full window always holds a signaled WR and the loop cannot stall on
 *     itself.
 *   - atomic n of a QP (session-wide) finds the peer's counter at n: CAS
 *     compares n and swaps n + 1, FAA adds 1; its result goes to slot
 *     1 + n % tx_depth, reused only after that WR completed and its value
 *     was checked.
 *   - ping-pong: the j-th message on a QP carries 1 + j % 254 in its last
 *     byte, the final one 0xff, so a receiver polling that byte sees each
 *     new message and knows when the client stopped, with no count agreed
 *     in advance (this is what makes --duration work for ping-pong).
 *   - UD: receives scatter to rx - grh, so the message starts at rx as
 *     for RC and UC, and a receive's byte_len is its size + grh.
 *   - every wait polls the CQ (polling drives softrnic's progress, as it
 *     drives a real NIC's completion processing) and is bounded by
 *     run->stall_ns without progress; peer_poll lets a control message
 *     from the peer (abort, done) end a wait at once.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf_run.h"

#define POLL_BATCH 32
#define RECV_CHAIN 32            /* receive WRs reposted per ibv_post_recv */
#define FINAL_BYTE 0xff
#define PEER_POLL_NS 1000000ull  /* look at the control socket every 1 ms */
#define PROGRESS_NS 100000000ull /* progress callback every 100 ms */
#define WRID_SHIFT 48
#define WRID_MASK ((UINT64_C(1) << WRID_SHIFT) - 1)

static const struct {
	const char *name, *title;
} ops[SRN_PERF_NOPS] = {
	[SRN_PERF_WRITE] = { "write", "RDMA Write" },
	[SRN_PERF_SEND] = { "send", "Send" },
	[SRN_PERF_READ] = { "read", "RDMA Read" },
	[SRN_PERF_CAS] = { "cas", "Atomic Compare&Swap" },
	[SRN_PERF_FAA] = { "faa", "Atomic Fetch&Add" },
};

static const struct {
	enum ibv_qp_type type;
	const char *name, *title;
} qp_types[] = {
	{ IBV_QPT_RC, "rc", "RC" },
	{ IBV_QPT_UC, "uc", "UC" },
	{ IBV_QPT_UD, "ud", "UD" },
};

#define NQP_TYPES (sizeof(qp_types) / sizeof(qp_types[0]))

static int qp_type_index(enum ibv_qp_type t)
{
	for (size_t i = 0; i < NQP_TYPES; i++)
		if (qp_types[i].type == t)
			return (int)i;
	return -1;
}

const char *srn_perf_qp_type_name(enum ibv_qp_type t)
{
	int i = qp_type_index(t);

	return i < 0 ? "?" : qp_types[i].name;
}

const char *srn_perf_qp_type_title(enum ibv_qp_type t)
{
	int i = qp_type_index(t);

	return i < 0 ? "?" : qp_types[i].title;
}

bool srn_perf_qp_type_known(enum ibv_qp_type t)
{
	return qp_type_index(t) >= 0;
}

int srn_perf_qp_type_parse(const char *s)
{
	for (size_t i = 0; i < NQP_TYPES; i++)
		if (!strcmp(s, qp_types[i].name))
			return (int)qp_types[i].type;
	return -1;
}

const char *srn_perf_op_name(enum srn_perf_op op)
{
	return op < SRN_PERF_NOPS ? ops[op].name : "?";
}

const char *srn_perf_op_title(enum srn_perf_op op)
{
	return op < SRN_PERF_NOPS ? ops[op].title : "?";
}

int srn_perf_op_parse(const char *s)
{
	for (int i = 0; i < SRN_PERF_NOPS; i++)
		if (!strcmp(s, ops[i].name))
			return i;
	return -1;
}

bool srn_perf_op_one_sided_lat(enum srn_perf_op op)
{
	return op == SRN_PERF_READ || op == SRN_PERF_CAS || op == SRN_PERF_FAA;
}

bool srn_perf_op_atomic(enum srn_perf_op op)
{
	return op == SRN_PERF_CAS || op == SRN_PERF_FAA;
}

int srn_perf_fail(struct srn_perf_ctx *c, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->err, sizeof(c->err), fmt, ap);
	va_end(ap);
	return err;
}

/* Byte i of the run's pattern: differs between seeds and is not periodic
 * in 256, so a misplaced block or a stale run shows. */
static inline uint8_t pattern(uint32_t seed, size_t i)
{
	return (uint8_t)(seed * 0x9du + i * 7u + (i >> 8) * 13u + (i >> 16) * 5u + 1u);
}

static uint64_t wrid(uint32_t q, uint64_t count)
{
	return (uint64_t)q << WRID_SHIFT | count;
}

/* ---- posting and completions ---- */

static int post_recvs(struct srn_perf_ctx *c, uint32_t q, uint32_t n)
{
	struct srn_perf_qp *x = &c->qps[q];
	struct ibv_recv_wr wr[RECV_CHAIN], *bad;
	struct ibv_sge sge = { .addr = (uintptr_t)(x->rx - c->grh),
			       .length = c->grh + c->p.max_size, .lkey = c->mr->lkey };

	while (n) {
		uint32_t k = n < RECV_CHAIN ? n : RECV_CHAIN;
		int ret;

		for (uint32_t i = 0; i < k; i++)
			wr[i] = (struct ibv_recv_wr){ .wr_id = wrid(q, 0), .sg_list = &sge,
						      .num_sge = 1,
						      .next = i + 1 < k ? &wr[i + 1] : NULL };
		ret = ibv_post_recv(x->qp, wr, &bad);
		if (ret)
			return srn_perf_fail(c, -ret, "ibv_post_recv(QP 0x%x): %s", x->qp->qp_num,
					     strerror(ret));
		x->rx_posted += k;
		n -= k;
	}
	return 0;
}

/* Send number `idx` (session-wide) on QP q. */
static void build_wr(struct srn_perf_ctx *c, uint32_t q, uint64_t idx, uint32_t size,
		     bool signaled, struct ibv_send_wr *wr, struct ibv_sge *sge)
{
	const struct srn_perf_params *p = &c->p;
	struct srn_perf_qp *x = &c->qps[q];

	memset(wr, 0, sizeof(*wr));
	wr->wr_id = wrid(q, idx + 1);
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->send_flags = signaled ? IBV_SEND_SIGNALED : 0;
	*sge = (struct ibv_sge){ .addr = (uintptr_t)x->tx, .length = size, .lkey = c->mr->lkey };
	switch (p->op) {
	case SRN_PERF_WRITE:
		wr->opcode = IBV_WR_RDMA_WRITE;
		wr->wr.rdma.remote_addr = x->remote.rx;
		wr->wr.rdma.rkey = c->remote_rkey;
		break;
	case SRN_PERF_SEND:
		wr->opcode = IBV_WR_SEND;
		if (p->qp_type == IBV_QPT_UD) {
			wr->wr.ud.ah = x->ah;
			wr->wr.ud.remote_qpn = x->remote.addr.qpn;
			wr->wr.ud.remote_qkey = SRN_CONN_UD_QKEY;
		}
		break;
	case SRN_PERF_READ:
		wr->opcode = IBV_WR_RDMA_READ;
		sge->addr = (uintptr_t)x->rx;
		wr->wr.rdma.remote_addr = x->remote.tx;
		wr->wr.rdma.rkey = c->remote_rkey;
		break;
	case SRN_PERF_CAS:
	case SRN_PERF_FAA:
		/* In-order execution on one QP: atomic idx finds the counter at
		 * idx, so CAS always succeeds and both return idx. */
		wr->opcode = p->op == SRN_PERF_CAS ? IBV_WR_ATOMIC_CMP_AND_SWP :
						     IBV_WR_ATOMIC_FETCH_AND_ADD;
		sge->addr = (uintptr_t)&x->slots[1 + idx % p->tx_depth];
		sge->length = SRN_PERF_ATOMIC_SIZE;
		wr->wr.atomic.remote_addr = x->remote.slots;
		wr->wr.atomic.rkey = c->remote_rkey;
		wr->wr.atomic.compare_add = p->op == SRN_PERF_CAS ? idx : 1;
		wr->wr.atomic.swap = idx + 1;
		break;
	default:
		break;
	}
	if ((p->op == SRN_PERF_WRITE || p->op == SRN_PERF_SEND) && size <= p->inline_size)
		wr->send_flags |= IBV_SEND_INLINE;
}

static int post_fail(struct srn_perf_ctx *c, uint32_t q, int ret)
{
	return srn_perf_fail(c, -ret, "ibv_post_send(%s, QP 0x%x): %s", srn_perf_op_title(c->p.op),
			     c->qps[q].qp->qp_num, strerror(ret));
}

static const char *wc_opcode_name(enum ibv_wc_opcode op)
{
	switch (op) {
	case IBV_WC_SEND: return "send";
	case IBV_WC_RDMA_WRITE: return "RDMA write";
	case IBV_WC_RDMA_READ: return "RDMA read";
	case IBV_WC_COMP_SWAP: return "compare&swap";
	case IBV_WC_FETCH_ADD: return "fetch&add";
	case IBV_WC_RECV: return "receive";
	default: return "work request";
	}
}

static int wc_fail(struct srn_perf_ctx *c, const struct ibv_wc *wc)
{
	/* A failed WC's opcode is undefined; only a receive is told apart. */
	const char *what = wc->wr_id & WRID_MASK ? srn_perf_op_title(c->p.op) :
						    wc_opcode_name(IBV_WC_RECV);

	return srn_perf_fail(c, -EIO, "%s completion error on QP 0x%x (message %" PRIu64 "): %s "
			     "(status %d, vendor error 0x%x)", what, wc->qp_num,
			     (uint64_t)(wc->wr_id & WRID_MASK), ibv_wc_status_str(wc->status), wc->status,
			     wc->vendor_err);
}

/* Check the atomic results of messages [from, to) of QP q. */
static int check_atomics(struct srn_perf_ctx *c, uint32_t q, uint64_t from, uint64_t to)
{
	struct srn_perf_qp *x = &c->qps[q];

	for (uint64_t i = from; i < to; i++) {
		uint64_t got = x->slots[1 + i % c->p.tx_depth];

		if (got != i)
			return srn_perf_fail(c, -EILSEQ, "data check: %s #%" PRIu64 " on QP 0x%x returned %"
					     PRIu64 ", expected %" PRIu64, srn_perf_op_title(c->p.op), i,
					     x->qp->qp_num, got, i);
	}
	return 0;
}

/* Poll once. Send completions advance `completed` (atomics are checked as
 * they complete); receive completions are handed to `on_recv` when set. */
static int poll_cq(struct srn_perf_ctx *c, int (*on_recv)(struct srn_perf_ctx *, const struct ibv_wc *, void *),
		   void *arg)
{
	struct ibv_wc wc[POLL_BATCH];
	int n = ibv_poll_cq(c->cq, POLL_BATCH, wc);

	if (n < 0)
		return srn_perf_fail(c, -EIO, "ibv_poll_cq: error %d", n);
	for (int i = 0; i < n; i++) {
		uint32_t q = (uint32_t)(wc[i].wr_id >> WRID_SHIFT);
		uint64_t count = wc[i].wr_id & WRID_MASK;
		int ret;

		if (wc[i].status != IBV_WC_SUCCESS)
			return wc_fail(c, &wc[i]);
		if (q >= c->p.qps)
			return srn_perf_fail(c, -EPROTO, "completion with a foreign wr_id 0x%" PRIx64,
					     wc[i].wr_id);
		if (wc[i].opcode & IBV_WC_RECV) {
			c->qps[q].rx_posted--;
			if (!on_recv)
				return srn_perf_fail(c, -EPROTO, "unexpected receive on QP 0x%x",
						     wc[i].qp_num);
			ret = on_recv(c, &wc[i], arg);
		} else {
			ret = srn_perf_op_atomic(c->p.op) ?
				      check_atomics(c, q, c->qps[q].completed, count) : 0;
			c->qps[q].completed = count;
		}
		if (ret)
			return ret;
	}
	return n;
}

/* Timekeeping shared by every waiting loop. */
struct waiter {
	const struct srn_perf_run *run;
	uint64_t start, last_progress, last_peer, last_cb, done, total;
	const char *what;
	bool ignore_peer;   /* the peer's next message is expected meanwhile */
};

static void waiter_init(struct waiter *w, const struct srn_perf_run *run, const char *what)
{
	uint64_t now = srn_now_ns();

	*w = (struct waiter){ .run = run, .start = now, .last_progress = now,
			      .last_peer = now, .last_cb = now, .what = what };
}

/* Called on every spin: stall bound, control socket, progress line. */
static int tick(struct srn_perf_ctx *c, struct waiter *w, uint64_t now)
{
	const struct srn_perf_run *run = w->run;

	if (now - w->last_progress > run->stall_ns)
		return srn_perf_fail(c, -ETIMEDOUT, "no progress for %.1f s while %s",
				     (double)run->stall_ns / 1e9, w->what);
	if (run->peer_poll && !w->ignore_peer && now - w->last_peer >= PEER_POLL_NS) {
		w->last_peer = now;
		if (run->peer_poll(run->arg))
			return srn_perf_fail(c, -EINTR, "the peer ended the run while %s", w->what);
	}
	if (run->progress && now - w->last_cb >= PROGRESS_NS) {
		w->last_cb = now;
		run->progress(run->arg, w->done, w->total, now - w->start);
	}
	return 0;
}

/* Wait until every send posted on every QP completed.  The peer may
 * already have sent its next control message (it has what it needs), so
 * that does not end the wait; the stall bound does. */
static int reap(struct srn_perf_ctx *c, struct waiter *w)
{
	w->ignore_peer = true;
	w->what = "waiting for the last send completions";
	for (uint32_t q = 0; q < c->p.qps; q++) {
		while (c->qps[q].completed < c->qps[q].posted) {
			int n = poll_cq(c, NULL, NULL), ret;

			if (n < 0)
				return n;
			uint64_t now = srn_now_ns();
			if (n)
				w->last_progress = now;
			ret = tick(c, w, now);
			if (ret)
				return ret;
		}
	}
	return 0;
}

int srn_perf_prepare(struct srn_perf_ctx *c, uint32_t size, uint32_t seed)
{
	for (uint32_t q = 0; q < c->p.qps; q++) {
		struct srn_perf_qp *x = &c->qps[q];

		for (size_t i = 0; i < size; i++)
			x->tx[i] = pattern(seed, i);
		memset(x->rx, 0, size);
		/* Slot 0 is the target's counter: it lives across runs.  The
		 * result slots get a value no atomic of this session returns. */
		memset(x->slots + 1, 0xff, (size_t)c->p.tx_depth * 8);
		if (x->completed != x->posted)
			return srn_perf_fail(c, -EPROTO, "QP 0x%x: %" PRIu64 " sends of the last run "
					     "never completed", x->qp->qp_num, x->posted - x->completed);
		x->run_base = x->posted;
		x->target = x->uses = x->received = 0;
		x->final_posted = false;
		if (c->p.op == SRN_PERF_SEND && x->rx_posted < c->p.rx_depth) {
			int ret = post_recvs(c, q, c->p.rx_depth - x->rx_posted);

			if (ret)
				return ret;
		}
	}
	return 0;
}

uint64_t srn_perf_sent(const struct srn_perf_ctx *c, uint32_t q)
{
	return c->qps[q].posted - c->qps[q].run_base;
}

int srn_perf_check_rx(struct srn_perf_ctx *c, size_t len, uint32_t seed,
		      const uint64_t *msgs)
{
	for (uint32_t q = 0; q < c->p.qps; q++) {
		const uint8_t *rx = c->qps[q].rx;

		/* Fewer messages than QPs leave some QPs idle this run. */
		if (!msgs[q])
			continue;
		for (size_t i = 0; i < len; i++)
			if (rx[i] != pattern(seed, i))
				return srn_perf_fail(c, -EILSEQ, "data check: QP 0x%x byte %zu of %zu is "
						     "0x%02x, expected 0x%02x", c->qps[q].qp->qp_num, i,
						     len, rx[i], pattern(seed, i));
	}
	return 0;
}

int srn_perf_check_counter(struct srn_perf_ctx *c, uint32_t q, uint64_t expected)
{
	uint64_t got = __atomic_load_n(&c->qps[q].slots[0], __ATOMIC_ACQUIRE);

	if (got != expected)
		return srn_perf_fail(c, -EILSEQ, "data check: atomic counter of QP 0x%x is %" PRIu64
				     ", expected %" PRIu64 " after the peer's atomics",
				     c->qps[q].qp->qp_num, got, expected);
	return 0;
}

/* ---- latency: ping-pong and one-sided round trips ---- */

static int post_one(struct srn_perf_ctx *c, uint32_t q, uint32_t size, struct waiter *w)
{
	struct srn_perf_qp *x = &c->qps[q];
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	int ret;

	/* Every ping-pong send is signaled; keep the send queue from filling
	 * when completions lag behind the peer's answers. */
	while (x->posted - x->completed >= c->p.tx_depth) {
		int n = poll_cq(c, NULL, NULL);

		if (n < 0)
			return n;
		ret = tick(c, w, srn_now_ns());
		if (ret)
			return ret;
	}
	build_wr(c, q, x->posted, size, true, &wr, &sge);
	ret = ibv_post_send(x->qp, &wr, &bad);
	if (ret)
		return post_fail(c, q, ret);
	x->posted++;
	return 0;
}

/* Every received message is one of the run's: `size` bytes, plus the
 * GRH on UD. */
static int check_recv_len(struct srn_perf_ctx *c, const struct ibv_wc *wc, uint32_t size)
{
	if (wc->byte_len != size + c->grh)
		return srn_perf_fail(c, -EILSEQ, "data check: received %u bytes on QP 0x%x, "
				     "expected %u (a %u-byte message%s)", wc->byte_len, wc->qp_num,
				     size + c->grh, size, c->grh ? " after the 40-byte GRH" : "");
	return 0;
}

/* A receive in a ping-pong: remember which QP, check the length. */
struct pp_recv {
	uint32_t size;
	int got;      /* QP index of the last receive, -1 = none yet */
};

static int on_pp_recv(struct srn_perf_ctx *c, const struct ibv_wc *wc, void *arg)
{
	struct pp_recv *r = arg;
	int ret = check_recv_len(c, wc, r->size);

	if (ret)
		return ret;
	r->got = (int)(wc->wr_id >> WRID_SHIFT);
	return 0;
}

/* Wait for the next ping on QP q and return its marker
 * byte.  write: the last byte of rx changes to `want` or FINAL_BYTE;
 * send: a receive completion arrives, and is replaced at once. */
/* The waiting loops read the clock (for the stall bound, the deadline and
 * the progress line) every CLOCK_EVERY spins, not on each: one read cost
 * about as much as the library's whole poll on this VM.  perftest reads
 * the cycle counter instead. */
#define CLOCK_EVERY 16
#define LOOKS_PER_POLL 16

static int wait_ping(struct srn_perf_ctx *c, int q, uint32_t size, uint8_t want,
		     struct waiter *w, int *from)
{
	struct pp_recv r = { .size = size, .got = -1 };
	unsigned spin = 0;

	for (;;) {
		int n, ret;

		/* A Write lands in memory: look there a few times between
		 * polls, as perftest's ib_write_lat spins on the byte alone.
		 * A poll (and its clock read) on every look made the look
		 * that finds the answer come up to a poll late.  The polls
		 * stay: on the rings they are what places the Write. */
		for (int k = 0; c->p.op == SRN_PERF_WRITE && k < LOOKS_PER_POLL; k++) {
			uint8_t b = __atomic_load_n(&c->qps[q].rx[size - 1], __ATOMIC_ACQUIRE);

			if (b == want || b == FINAL_BYTE) {
				*from = q;
				return b;
			}
		}
		n = poll_cq(c, c->p.op == SRN_PERF_SEND ? on_pp_recv : NULL, &r);
		if (n < 0)
			return n;
		if (r.got >= 0) {
			ret = post_recvs(c, (uint32_t)r.got, 1);
			if (ret)
				return ret;
			*from = r.got;
			return __atomic_load_n(&c->qps[r.got].rx[size - 1], __ATOMIC_ACQUIRE);
		}
		/* The poll may just have written the answer: look before the
		 * clock read of the stall check, which is not on this path. */
		if (c->p.op == SRN_PERF_WRITE) {
			uint8_t b = __atomic_load_n(&c->qps[q].rx[size - 1], __ATOMIC_ACQUIRE);

			if (b == want || b == FINAL_BYTE) {
				*from = q;
				return b;
			}
		}
		if (++spin % CLOCK_EVERY)
			continue;
		ret = tick(c, w, srn_now_ns());
		if (ret == -ETIMEDOUT) {
			const struct srn_perf_qp *x = &c->qps[q];
			size_t len = strlen(c->err);

			/* What a bug report needs: where the ping-pong stopped. */
			snprintf(c->err + len, sizeof(c->err) - len, " (QP 0x%x, %u B message %"
				 PRIu64 ", want 0x%02x, last byte 0x%02x; sends posted %" PRIu64
				 ", completed %" PRIu64 ")", x->qp->qp_num, size, x->uses, want,
				 x->rx[size - 1], x->posted, x->completed);
		}
		if (ret)
			return ret;
	}
}

static int grow_samples(struct srn_perf_ctx *c, uint64_t n)
{
	uint64_t *s;

	if (n <= c->samples_cap)
		return 0;
	s = realloc(c->samples, n * sizeof(*s));
	if (!s)
		return srn_perf_fail(c, -ENOMEM, "out of memory for %" PRIu64 " samples", n);
	c->samples = s;
	c->samples_cap = n;
	return 0;
}

static int client_lat(struct srn_perf_ctx *c, const struct srn_perf_run *run,
		      struct srn_perf_result *res)
{
	uint64_t iters = run->iters < SRN_PERF_MAX_LAT_ITERS ? run->iters : SRN_PERF_MAX_LAT_ITERS;
	bool one_sided = srn_perf_op_one_sided_lat(c->p.op);
	uint32_t size = run->size;
	uint64_t deadline, i;
	struct waiter w;
	int ret;

	ret = grow_samples(c, iters);
	if (ret)
		return ret;
	waiter_init(&w, run, "waiting for the peer's answer");
	w.total = run->duration_ns ? 0 : iters;
	deadline = run->duration_ns ? w.start + run->duration_ns : 0;
	for (i = 0; i < iters;) {
		uint32_t q = (uint32_t)(i % c->p.qps);
		struct srn_perf_qp *x = &c->qps[q];
		uint8_t mark = (uint8_t)(1 + x->uses++ % 254);
		uint64_t t0 = srn_now_ns(), t1, idx = x->posted;
		bool final = i + 1 == iters || (deadline && t0 >= deadline);
		int from;

		if (final)
			mark = FINAL_BYTE;
		if (c->p.op == SRN_PERF_READ)
			x->rx[size - 1] = (uint8_t)~pattern(run->seed, size - 1);
		else if (!one_sided)
			x->tx[size - 1] = mark;
		ret = post_one(c, q, size, &w);
		if (ret)
			return ret;
		if (one_sided) {
			while (x->completed < x->posted) {
				int n = poll_cq(c, NULL, NULL);

				if (n < 0)
					return n;
				ret = n ? 0 : tick(c, &w, srn_now_ns());
				if (ret)
					return ret;
			}
		} else {
			ret = wait_ping(c, (int)q, size, mark, &w, &from);
			if (ret < 0)
				return ret;
			if (from != (int)q || ret != mark)
				return srn_perf_fail(c, -EILSEQ, "data check: answer on QP index %d carries "
						     "0x%02x, expected QP index %u, 0x%02x", from, ret, q,
						     mark);
		}
		t1 = srn_now_ns();
		c->samples[i++] = t1 - t0;
		w.done = i;
		w.last_progress = t1;
		if (c->p.op == SRN_PERF_READ && x->rx[size - 1] != pattern(run->seed, size - 1))
			return srn_perf_fail(c, -EILSEQ, "data check: RDMA Read #%" PRIu64 " on QP 0x%x "
					     "did not bring the peer's last byte", idx, x->qp->qp_num);
		ret = tick(c, &w, t1);
		if (ret)
			return ret;
		if (final)
			break;
	}
	res->iters = i;
	res->elapsed_ns = srn_now_ns() - w.start;
	res->samples = c->samples;
	return reap(c, &w);
}

/* The server half of a ping-pong: answer each ping with the same marker,
 * until the final one. */
static int serve_pingpong(struct srn_perf_ctx *c, const struct srn_perf_run *run,
			  uint64_t *received)
{
	struct waiter w;
	uint64_t i;
	int ret;

	waiter_init(&w, run, "waiting for the client's ping");
	for (i = 0; i < SRN_PERF_MAX_BW_ITERS; i++) {
		uint32_t q = (uint32_t)(i % c->p.qps);
		uint8_t want = (uint8_t)(1 + c->qps[q].uses++ % 254);
		int from, b;

		b = wait_ping(c, (int)q, run->size, want, &w, &from);
		if (b < 0)
			return b;
		w.last_progress = srn_now_ns();
		c->qps[from].tx[run->size - 1] = (uint8_t)b;
		ret = post_one(c, (uint32_t)from, run->size, &w);
		if (ret)
			return ret;
		*received = i + 1;
		if (b == FINAL_BYTE)
			break;
	}
	return reap(c, &w);
}

/* ---- bandwidth / message rate ---- */

static int post_batch(struct srn_perf_ctx *c, uint32_t q, uint32_t k, bool final,
		      uint32_t size)
{
	struct srn_perf_qp *x = &c->qps[q];
	struct ibv_send_wr wr[k], *bad;
	struct ibv_sge sge[k];
	int ret;

	for (uint32_t j = 0; j < k; j++) {
		uint64_t idx = x->posted + j;
		bool sig = (idx + 1) % c->p.cq_mod == 0 || (final && j + 1 == k);

		build_wr(c, q, idx, size, sig, &wr[j], &sge[j]);
		wr[j].next = j + 1 < k ? &wr[j + 1] : NULL;
	}
	ret = ibv_post_send(x->qp, wr, &bad);
	if (ret)
		return post_fail(c, q, ret);
	x->posted += k;
	x->final_posted = final;
	return 0;
}

static int client_bw(struct srn_perf_ctx *c, const struct srn_perf_run *run,
		     struct srn_perf_result *res)
{
	const struct srn_perf_params *p = &c->p;
	uint64_t deadline, total = 0, iters = run->iters;
	uint32_t active = 0;
	struct waiter w;
	int ret;

	waiter_init(&w, run, "waiting for send completions");
	deadline = run->duration_ns ? w.start + run->duration_ns : 0;
	w.total = deadline ? 0 : iters;
	for (uint32_t q = 0; q < p->qps; q++) {
		struct srn_perf_qp *x = &c->qps[q];

		x->target = x->run_base + iters / p->qps + (q < iters % p->qps);
		x->final_posted = x->target == x->run_base;
		active += !x->final_posted;
	}
	/* The clock every CLOCK_EVERY spins: the deadline and the stall
	 * bound are late by at most that many. */
	uint64_t now = w.start;
	unsigned spin = 0;
	while (active) {
		int n;

		if (++spin % CLOCK_EVERY == 0)
			now = srn_now_ns();
		for (uint32_t q = 0; q < p->qps; q++) {
			struct srn_perf_qp *x = &c->qps[q];
			uint64_t left = x->target - x->posted, room;
			uint32_t k;

			if (x->final_posted)
				continue;
			room = p->tx_depth - (x->posted - x->completed);
			k = left < p->post_list ? (uint32_t)left : p->post_list;
			if (room < k)
				continue;
			ret = post_batch(c, q, k, k == left || (deadline && now >= deadline),
					 run->size);
			if (ret)
				return ret;
		}
		n = poll_cq(c, NULL, NULL);
		if (n < 0)
			return n;
		active = 0;
		total = 0;
		for (uint32_t q = 0; q < p->qps; q++) {
			struct srn_perf_qp *x = &c->qps[q];

			active += !x->final_posted || x->completed < x->posted;
			total += x->completed - x->run_base;
		}
		if (n)
			w.last_progress = now;
		w.done = total;
		ret = tick(c, &w, now);
		if (ret)
			return ret;
	}
	res->iters = total;
	res->elapsed_ns = srn_now_ns() - w.start;
	res->samples = NULL;
	return 0;
}

int srn_perf_client_run(struct srn_perf_ctx *c, const struct srn_perf_run *run,
			struct srn_perf_result *res)
{
	memset(res, 0, sizeof(*res));
	if (!run->size || run->size > c->p.max_size || !run->iters)
		return srn_perf_fail(c, -EINVAL, "bad run: size %u, iters %" PRIu64, run->size, run->iters);
	return c->p.test == SRN_PERF_LAT ? client_lat(c, run, res) : client_bw(c, run, res);
}

/* ---- receiving side of send bw ---- */

struct bw_recv {
	uint32_t size;
	uint64_t count;
};

static int on_bw_recv(struct srn_perf_ctx *c, const struct ibv_wc *wc, void *arg)
{
	struct bw_recv *r = arg;
	int ret = check_recv_len(c, wc, r->size);

	if (ret)
		return ret;
	r->count++;
	c->qps[wc->wr_id >> WRID_SHIFT].received++;
	return 0;
}

/* Receive until `expected` arrived (UINT64_MAX: until peer_poll fires or
 * `limit_ns` passed). Receive WRs are replaced in chains, before the queue
 * runs low: a missing receive would be an RNR NAK (RC) or a drop (UC, UD). */
static int receive(struct srn_perf_ctx *c, const struct srn_perf_run *run, uint64_t expected,
		   uint64_t limit_ns, uint64_t *received)
{
	struct bw_recv r = { .size = run->size, .count = *received };
	struct waiter w;
	int ret = 0;

	waiter_init(&w, run, "receiving the client's sends");
	while (r.count < expected) {
		uint64_t now;
		int n = poll_cq(c, on_bw_recv, &r);

		if (n < 0) {
			ret = n;
			break;
		}
		for (uint32_t q = 0; q < c->p.qps; q++) {
			uint32_t missing = c->p.rx_depth - c->qps[q].rx_posted;

			if (missing >= RECV_CHAIN || (missing && !n)) {
				ret = post_recvs(c, q, missing);
				if (ret)
					goto out;
			}
		}
		now = srn_now_ns();
		if (n)
			w.last_progress = now;
		w.done = r.count;
		if (limit_ns && now - w.start > limit_ns)
			break;
		ret = tick(c, &w, now);
		if (ret)
			break;
	}
out:
	*received = r.count;
	return ret;
}

int srn_perf_serve(struct srn_perf_ctx *c, const struct srn_perf_run *run,
		   uint64_t *received)
{
	*received = 0;
	if (!run->size || run->size > c->p.max_size)
		return srn_perf_fail(c, -EINVAL, "bad run: size %u", run->size);
	if (c->p.test == SRN_PERF_LAT && !srn_perf_op_one_sided_lat(c->p.op))
		return serve_pingpong(c, run, received);
	if (c->p.op == SRN_PERF_SEND)
		return receive(c, run, UINT64_MAX, 0, received);
	return 0;
}

int srn_perf_drain(struct srn_perf_ctx *c, const struct srn_perf_run *run,
		   uint64_t expected, uint64_t grace_ns, uint64_t quiet_ns,
		   uint64_t *received)
{
	struct srn_perf_run r = *run;
	int ret;

	/* The peer's control message was read; nothing more will come on the
	 * socket during the grace period. */
	r.peer_poll = NULL;
	r.stall_ns = quiet_ns ? quiet_ns : grace_ns + 1;
	ret = receive(c, &r, expected, grace_ns, received);
	/* The stall bound is the quiet period here: the end of the
	 * messages that survived, not a failure. */
	return ret == -ETIMEDOUT && quiet_ns ? 0 : ret;
}
