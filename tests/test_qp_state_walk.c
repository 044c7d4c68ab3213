/*
 * test_qp_state_walk.c - every QP state transition, legal or not, through
 * the public verbs API of libsoftrnic.
 *
 * For RC, UC and UD, and for every (cur, next) pair of states, a fresh QP
 * is driven to `cur` with full, sane attributes, then:
 *  - a legal transition is tried with each required attribute left out,
 *    with each attribute the transition does not allow added, with an
 *    alternate path (RoCE has none), and with a wrong CUR_STATE: each must
 *    fail with EINVAL and leave the QP's state and attributes as they were;
 *    then the full set must succeed and ibv_query_qp must show the new
 *    state and the values just set;
 *  - an illegal transition is tried with STATE alone and with STATE plus
 *    each other attribute bit: each must fail and change nothing.
 * Which transitions are legal, and with what, comes from core/qp_rules.c,
 * compiled into this program; tests/test_qp_rules.c checks that table
 * against the specification separately.
 *
 * SQE is never a starting state: a QP enters SQE only when a UC/UD send
 * completes in error, which verbs cannot request on purpose.  It is still
 * tried as a destination (always illegal from verbs).
 *
 * Attribute bits 21..25 (historical SMAC/VID bits and RATE_LIMIT) may also
 * fail with EOPNOTSUPP: rdma-core's rxe provider refuses them before the
 * kernel's table is consulted.
 *
 * Exit 0 pass, 1 fail, 77 skip (no device).
 */
#include "core/qp_rules.h"
#include "diag/clock.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define QKEY_SET 0x11111111u
#define QKEY_ALT 0x22222222u
#define ACCESS_SET (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define ACCESS_ALT IBV_ACCESS_REMOTE_WRITE
#define MAX_REPORTS 200
#define DRAIN_WAIT_NS 2000000000ll
#define RUN_LIMIT_S 90

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	union ibv_gid gid;
};

/* One QP under test and what has been set on it so far. */
struct walk {
	struct env *env;
	struct ibv_qp *qp;
	enum ibv_qp_type type;
	struct ibv_qp_cap cap;
	int set_mask;  /* attribute bits applied since the last RESET */
};

static int failures, checks;
static time_t started;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	va_list ap;

	if (++failures > MAX_REPORTS)
		return;
	fputs("FAIL ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static const char *tname(enum ibv_qp_type t)
{
	return srn_qp_type_name(t);
}

static const char *sname(int s)
{
	return srn_qp_state_name((enum ibv_qp_state)s);
}

/* Several buffers in rotation, so one message can name several masks. */
static const char *bits(int mask)
{
	static char buf[4][512];
	static unsigned turn;

	turn = (turn + 1) % 4;
	return srn_qp_mask_str(mask, buf[turn], sizeof(buf[turn]));
}

/*
 * Attribute values.  `alt` gives different but equally valid values, used
 * in the attempts that must fail: if a rejected modify applied any of its
 * attributes anyway, the query afterwards shows it.  Port, P_Key index and
 * GID index have a single valid value and cannot differ.
 */
static struct ibv_qp_attr make_attr(const struct walk *w, int cur, int next, bool alt)
{
	struct ibv_qp_attr a = {
		.qp_state = (enum ibv_qp_state)next,
		.cur_qp_state = (enum ibv_qp_state)cur,
		.path_mtu = alt ? IBV_MTU_512 : IBV_MTU_1024,
		.path_mig_state = IBV_MIG_MIGRATED,
		.qkey = alt ? QKEY_ALT : QKEY_SET,
		.rq_psn = alt ? 6 : 0,
		.sq_psn = alt ? 5 : 0,
		.dest_qp_num = w->qp->qp_num,
		.qp_access_flags = alt ? ACCESS_ALT : ACCESS_SET,
		.cap = w->cap,
		.pkey_index = 0,
		.alt_pkey_index = 0,
		.en_sqd_async_notify = alt ? 0 : 1,
		.max_rd_atomic = 1,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = alt ? 13 : 12,
		.port_num = 1,
		.timeout = alt ? 15 : 14,
		.retry_cnt = alt ? 6 : 7,
		.rnr_retry = alt ? 6 : 7,
		.alt_port_num = 1,
		.alt_timeout = 14,
	};
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = w->env->gid;
	a.ah_attr.grh.sgid_index = 0;
	a.ah_attr.grh.hop_limit = alt ? 2 : 1;
	a.alt_ah_attr = a.ah_attr;
	return a;
}

/* Compares the queried values of the attributes in `mask` with `want`;
 * returns the bits that differ. */
static int differing(const struct ibv_qp_attr *q, const struct ibv_qp_attr *want, int mask)
{
	int bad = 0;

	if ((mask & IBV_QP_PKEY_INDEX) && q->pkey_index != want->pkey_index)
		bad |= IBV_QP_PKEY_INDEX;
	if ((mask & IBV_QP_PORT) && q->port_num != want->port_num)
		bad |= IBV_QP_PORT;
	if ((mask & IBV_QP_QKEY) && q->qkey != want->qkey)
		bad |= IBV_QP_QKEY;
	if ((mask & IBV_QP_ACCESS_FLAGS) && q->qp_access_flags != want->qp_access_flags)
		bad |= IBV_QP_ACCESS_FLAGS;
	if ((mask & IBV_QP_AV) &&
	    (!q->ah_attr.is_global || q->ah_attr.port_num != want->ah_attr.port_num ||
	     q->ah_attr.grh.sgid_index != want->ah_attr.grh.sgid_index ||
	     q->ah_attr.grh.hop_limit != want->ah_attr.grh.hop_limit ||
	     memcmp(&q->ah_attr.grh.dgid, &want->ah_attr.grh.dgid, sizeof(union ibv_gid))))
		bad |= IBV_QP_AV;
	if ((mask & IBV_QP_PATH_MTU) && q->path_mtu != want->path_mtu)
		bad |= IBV_QP_PATH_MTU;
	if ((mask & IBV_QP_TIMEOUT) && q->timeout != want->timeout)
		bad |= IBV_QP_TIMEOUT;
	if ((mask & IBV_QP_RETRY_CNT) && q->retry_cnt != want->retry_cnt)
		bad |= IBV_QP_RETRY_CNT;
	if ((mask & IBV_QP_RNR_RETRY) && q->rnr_retry != want->rnr_retry)
		bad |= IBV_QP_RNR_RETRY;
	/* No traffic has flowed, so the live PSNs are the ones set. */
	if ((mask & IBV_QP_RQ_PSN) && q->rq_psn != want->rq_psn)
		bad |= IBV_QP_RQ_PSN;
	if ((mask & IBV_QP_SQ_PSN) && q->sq_psn != want->sq_psn)
		bad |= IBV_QP_SQ_PSN;
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && q->max_rd_atomic != want->max_rd_atomic)
		bad |= IBV_QP_MAX_QP_RD_ATOMIC;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && q->max_dest_rd_atomic != want->max_dest_rd_atomic)
		bad |= IBV_QP_MAX_DEST_RD_ATOMIC;
	if ((mask & IBV_QP_MIN_RNR_TIMER) && q->min_rnr_timer != want->min_rnr_timer)
		bad |= IBV_QP_MIN_RNR_TIMER;
	if ((mask & IBV_QP_PATH_MIG_STATE) && q->path_mig_state != want->path_mig_state)
		bad |= IBV_QP_PATH_MIG_STATE;
	if ((mask & IBV_QP_DEST_QPN) && q->dest_qp_num != want->dest_qp_num)
		bad |= IBV_QP_DEST_QPN;
	if ((mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) && q->en_sqd_async_notify != want->en_sqd_async_notify)
		bad |= IBV_QP_EN_SQD_ASYNC_NOTIFY;
	return bad;
}

static int query(struct walk *w, struct ibv_qp_attr *q)
{
	struct ibv_qp_init_attr init;
	int mask = SRN_QP_ATTR_CMD_BITS;

	memset(q, 0, sizeof(*q));
	memset(&init, 0, sizeof(init));
	return ibv_query_qp(w->qp, q, mask, &init);
}

/* After RTS->SQD the send queue drains asynchronously; the QP may not
 * leave SQD (except to ERR) until it has.  Bounded wait. */
static int wait_drained(struct walk *w)
{
	int64_t deadline = (int64_t)srn_now_ns() + DRAIN_WAIT_NS;
	struct ibv_qp_attr q;

	for (int i = 0; i < 20000 && (int64_t)srn_now_ns() < deadline; i++) {
		if (query(w, &q))
			return -1;
		if (q.qp_state == IBV_QPS_SQD && !q.sq_draining)
			return 0;
		struct timespec ts = { 0, 100000 };
		nanosleep(&ts, NULL);
	}
	return -1;
}

/* The mask the legal transition is driven with: everything required and
 * allowed, except the alternate path, which RoCE refuses. */
static int full_mask(enum ibv_qp_type type, int cur, int next)
{
	int req, opt;

	if (srn_qp_transition_masks(type, (enum ibv_qp_state)cur, (enum ibv_qp_state)next, &req, &opt))
		return -1;
	return IBV_QP_STATE | req | (opt & ~IBV_QP_ALT_PATH);
}

static void note_applied(struct walk *w, int next, int mask)
{
	if (next == IBV_QPS_RESET)
		w->set_mask = 0;
	else
		w->set_mask |= mask & ~(IBV_QP_STATE | IBV_QP_CUR_STATE);
}

static int step(struct walk *w, int cur, int next)
{
	int mask = full_mask(w->type, cur, next);
	struct ibv_qp_attr a = make_attr(w, cur, next, false);
	int rc;

	if (mask < 0) {
		fail("%s: no legal %s->%s in the table", tname(w->type), sname(cur), sname(next));
		return -1;
	}
	rc = ibv_modify_qp(w->qp, &a, mask);
	if (rc) {
		fail("%s: driving %s->%s with %s: ibv_modify_qp returned %d (%s)", tname(w->type),
		     sname(cur), sname(next), bits(mask), rc, strerror(rc));
		return -1;
	}
	note_applied(w, next, mask);
	if (next == IBV_QPS_SQD && wait_drained(w)) {
		fail("%s: RTS->SQD: send queue never reported drained", tname(w->type));
		return -1;
	}
	/* Check each step too, so that a later report is not blamed on
	 * the transition under test when the walk there went wrong. */
	struct ibv_qp_attr q;
	if (query(w, &q) || (int)q.qp_state != next) {
		fail("%s: driving %s->%s: ibv_query_qp fails or shows another state", tname(w->type),
		     sname(cur), sname(next));
		return -1;
	}
	int changed = next == IBV_QPS_ERR ? 0 : differing(&q, &a, mask);
	if (changed) {
		fail("%s: driving %s->%s with %s: ibv_query_qp shows other values for %s",
		     tname(w->type), sname(cur), sname(next), bits(mask), bits(changed));
		return -1;
	}
	return 0;
}

static int drive(struct walk *w, int target)
{
	static const int path_to[7][5] = {
		[IBV_QPS_RESET] = { -1 },
		[IBV_QPS_INIT] = { IBV_QPS_INIT, -1 },
		[IBV_QPS_RTR] = { IBV_QPS_INIT, IBV_QPS_RTR, -1 },
		[IBV_QPS_RTS] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, -1 },
		[IBV_QPS_SQD] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_SQD, -1 },
		[IBV_QPS_ERR] = { IBV_QPS_INIT, IBV_QPS_ERR, -1 },
	};
	int cur = IBV_QPS_RESET;

	for (int i = 0; i < 5 && path_to[target][i] >= 0; i++) {
		if (step(w, cur, path_to[target][i]))
			return -1;
		cur = path_to[target][i];
	}
	return 0;
}

static bool mask_errno_ok(int mask_added, int rc)
{
	/* See the header comment: bits above DEST_QPN may be EOPNOTSUPP. */
	if (mask_added & ~SRN_QP_ATTR_CMD_BITS)
		return rc == EINVAL || rc == EOPNOTSUPP;
	return rc == EINVAL;
}

/* One modify that must fail; then the QP must be exactly as before.
 * Returns false once the QP has been changed, so that one bug does not
 * cascade into a report for every later attempt on the same QP. */
static bool expect_refused(struct walk *w, int cur, int next, struct ibv_qp_attr *a, int mask,
			   int culprit, const char *what)
{
	struct ibv_qp_attr q, before = make_attr(w, cur, cur, false);
	int rc = ibv_modify_qp(w->qp, a, mask);

	checks++;
	if (!mask_errno_ok(culprit, rc))
		fail("%s %s->%s %s %s (mask %s): ibv_modify_qp returned %d (%s), expected EINVAL",
		     tname(w->type), sname(cur), sname(next), what, bits(culprit), bits(mask), rc,
		     rc ? strerror(rc) : "success");
	if (query(w, &q)) {
		fail("%s %s->%s: ibv_query_qp failed after a refused modify", tname(w->type),
		     sname(cur), sname(next));
		return false;
	}
	if ((int)q.qp_state != cur) {
		fail("%s %s->%s %s %s: state is %s after the refused modify, expected %s",
		     tname(w->type), sname(cur), sname(next), what, bits(culprit),
		     sname(q.qp_state), sname(cur));
		return false;
	}
	/* RESET and ERR QPs need not report attributes. */
	if (cur == IBV_QPS_RESET || cur == IBV_QPS_ERR)
		return true;
	int changed = differing(&q, &before, w->set_mask);
	if (changed) {
		fail("%s %s->%s %s %s: the refused modify changed %s", tname(w->type), sname(cur),
		     sname(next), what, bits(culprit), bits(changed));
		return false;
	}
	return true;
}

static void try_legal(struct walk *w, int cur, int next)
{
	int req, opt;

	srn_qp_transition_masks(w->type, (enum ibv_qp_state)cur, (enum ibv_qp_state)next, &req, &opt);
	int full = IBV_QP_STATE | req | (opt & ~IBV_QP_ALT_PATH);
	struct ibv_qp_attr alt = make_attr(w, cur, next, true);

	for (int b = 0; b < 26; b++) {
		int bit = 1 << b;
		if ((req & bit) &&
		    !expect_refused(w, cur, next, &alt, full & ~bit, bit, "without required"))
			return;
		if (!((req | opt | IBV_QP_STATE) & bit) &&
		    !expect_refused(w, cur, next, &alt, full | bit, bit, "with disallowed"))
			return;
	}
	if ((opt & IBV_QP_ALT_PATH) &&
	    !expect_refused(w, cur, next, &alt, full | IBV_QP_ALT_PATH, IBV_QP_ALT_PATH,
			    "with (RoCE-banned)"))
		return;
	if (opt & IBV_QP_CUR_STATE) {
		alt.cur_qp_state = cur == IBV_QPS_RTS ? IBV_QPS_SQD : IBV_QPS_RTS;
		if (!expect_refused(w, cur, next, &alt, full, IBV_QP_CUR_STATE, "with a wrong"))
			return;
	}

	struct ibv_qp_attr a = make_attr(w, cur, next, false), q;
	int rc = ibv_modify_qp(w->qp, &a, full);
	checks++;
	if (rc) {
		fail("%s %s->%s with %s: ibv_modify_qp returned %d (%s), expected success",
		     tname(w->type), sname(cur), sname(next), bits(full), rc, strerror(rc));
		return;
	}
	note_applied(w, next, full);
	if (query(w, &q)) {
		fail("%s %s->%s: ibv_query_qp failed", tname(w->type), sname(cur), sname(next));
		return;
	}
	if ((int)q.qp_state != next) {
		fail("%s %s->%s: ibv_query_qp shows %s", tname(w->type), sname(cur), sname(next),
		     sname(q.qp_state));
		return;
	}
	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR)
		return;
	int changed = differing(&q, &a, full);
	if (changed)
		fail("%s %s->%s with %s: ibv_query_qp shows other values for %s", tname(w->type),
		     sname(cur), sname(next), bits(full), bits(changed));
	if (next == IBV_QPS_SQD && wait_drained(w))
		fail("%s %s->SQD: send queue never reported drained", tname(w->type), sname(cur));
}

static void try_illegal(struct walk *w, int cur, int next)
{
	struct ibv_qp_attr alt = make_attr(w, cur, next, true);

	if (!expect_refused(w, cur, next, &alt, IBV_QP_STATE, IBV_QP_STATE, "illegal, with only"))
		return;
	for (int b = 1; b < 26; b++)
		if (!expect_refused(w, cur, next, &alt, IBV_QP_STATE | 1 << b, 1 << b, "illegal, with"))
			return;
}

static struct ibv_qp *make_qp(struct env *e, enum ibv_qp_type type, struct ibv_qp_cap *cap)
{
	struct ibv_qp_init_attr init = {
		.send_cq = e->cq, .recv_cq = e->cq, .qp_type = type,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(e->pd, &init);

	if (qp)
		*cap = init.cap;
	return qp;
}

static void walk_one(struct env *e, enum ibv_qp_type type, int cur, int next)
{
	struct walk w = { .env = e, .type = type };

	w.qp = make_qp(e, type, &w.cap);
	if (!w.qp) {
		fail("%s: ibv_create_qp failed: %s", tname(type), strerror(errno));
		return;
	}
	if (drive(&w, cur) == 0) {
		if (full_mask(type, cur, next) >= 0)
			try_legal(&w, cur, next);
		else
			try_illegal(&w, cur, next);
	} else {
		fail("%s: could not reach %s; %s->%s not tested", tname(type), sname(cur),
		     sname(cur), sname(next));
	}
	if (ibv_destroy_qp(w.qp))
		fail("%s: ibv_destroy_qp failed in %s", tname(type), sname(next));
}

static int open_env(struct env *e)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);

	if (!list || n <= 0) {
		printf("SKIP: ibv_get_device_list found no device\n");
		if (list)
			ibv_free_device_list(list);
		return 77;
	}
	e->ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!e->ctx) {
		fail("ibv_open_device: %s", strerror(errno));
		return 1;
	}
	if (ibv_query_gid(e->ctx, 1, 0, &e->gid)) {
		fail("ibv_query_gid(port 1, index 0) failed");
		return 1;
	}
	e->pd = ibv_alloc_pd(e->ctx);
	if (!e->pd) {
		fail("ibv_alloc_pd: %s", strerror(errno));
		return 1;
	}
	e->cq = ibv_create_cq(e->ctx, 16, NULL, NULL, 0);
	if (!e->cq) {
		fail("ibv_create_cq: %s", strerror(errno));
		return 1;
	}
	return 0;
}

static void close_env(struct env *e)
{
	if (e->cq && ibv_destroy_cq(e->cq))
		fail("ibv_destroy_cq failed");
	if (e->pd && ibv_dealloc_pd(e->pd))
		fail("ibv_dealloc_pd failed");
	if (e->ctx && ibv_close_device(e->ctx))
		fail("ibv_close_device failed");
}

int main(void)
{
	static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };
	/* SQE is left out as a starting state: see the header comment. */
	static const int starts[] = { IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR,
				      IBV_QPS_RTS,   IBV_QPS_SQD,  IBV_QPS_ERR };
	struct env e = { 0 };
	int rc;

	started = time(NULL);
	rc = open_env(&e);
	if (rc) {
		close_env(&e);
		return rc == 77 ? 77 : 1;
	}
	for (size_t t = 0; t < 3; t++)
		for (size_t s = 0; s < sizeof(starts) / sizeof(starts[0]); s++)
			for (int next = IBV_QPS_RESET; next <= IBV_QPS_ERR; next++) {
				if (time(NULL) - started > RUN_LIMIT_S) {
					fail("gave up after %d s", RUN_LIMIT_S);
					goto out;
				}
				walk_one(&e, types[t], starts[s], next);
			}
out:
	close_env(&e);
	if (failures) {
		if (failures > MAX_REPORTS)
			fprintf(stderr, "(%d more failures not shown)\n", failures - MAX_REPORTS);
		fprintf(stderr, "%d failure(s) in %d checked modifies\n", failures, checks);
		return 1;
	}
	printf("qp state walk: %d modifies checked, all as expected\n", checks);
	return 0;
}
