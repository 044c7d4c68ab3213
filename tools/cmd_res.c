/*
 * cmd_res.c - `softrnic res`: every PD, MR, CQ, QP, SRQ and AH of every
 * softrnic process on this host (like `rdma resource show`), read from
 * their diagnostic segments.  A program that forgets to deregister memory
 * shows its MRs here, with their age.
 *
 *   softrnic res [--pid N] [--dev NAME] [--type KIND[,KIND]] [--qp QPN]
 *                [--json | --dump]
 *
 * Objects are numbered by their slot in the segment; an MR's "pd 0" is the
 * PD in slot 0 (handles in the segment are resolved to those numbers).
 * Invariants: read-only; every live slot is copied once per run (seqlock
 * read) and everything printed comes from those copies.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "diag_opts.h"
#include "diag_read.h"
#include "subcommands.h"

struct res_opts {
	struct srn_diag_opts d;   /* --pid, --dev, --qp, --json, --dump */
	unsigned kinds;           /* bit per enum srn_diag_kind; 0 = all */
};

struct live {
	uint32_t idx;
	bool torn;
	struct srn_diag_slot s;
};

struct live_set {
	struct live *v;
	size_t n;
};

void srn_usage_res(FILE *out)
{
	fprintf(out,
		"Usage: softrnic res [options]\n"
		"\n"
		"Shows the RDMA resources of every softrnic process on this host (like\n"
		"`rdma resource show`): PDs, MRs (address, length, keys, access, age),\n"
		"CQs (depth, fill), QPs (type, state, PSNs, outstanding work, peer,\n"
		"retry state), SRQs and AHs. Read from the processes' diagnostic\n"
		"segments, so it works while they run and after they crashed. You see\n"
		"your own processes (root sees all) and how many of other users not.\n"
		"\n"
		"Options:\n"
		"  --pid N             only process N\n"
		"  --dev NAME          only device NAME\n"
		"  --type KIND[,KIND]  only these kinds: pd, mr, cq, qp, srq, ah\n"
		"  --qp QPN            only this QP\n"
		"  --json              JSON\n"
		"  --dump              tab-separated, one object per line, for scripts:\n"
		"                      pid dev state kind id key=value...\n"
		"  -h, --help          show this help\n"
		"\n"
		"QP fields: sq_psn is the next PSN to send, una_psn the oldest one not\n"
		"yet acknowledged, rq_psn the next one expected from the peer; send_out\n"
		"counts posted send WQEs not completed (send_unsent of them not yet\n"
		"transmitted), recv_posted receive WQEs waiting; retry and rnr show the\n"
		"retries left of retry_cnt / rnr_retry; last_peer is the last ACK or NAK\n"
		"the peer sent.\n");
}

static int load_live(const struct srn_seg *s, struct live_set *ls)
{
	ls->v = NULL;
	ls->n = 0;
	size_t cap = 0;
	struct srn_diag_slot tmp;
	for (uint32_t i = 0; i < s->nslots; i++) {
		int r = srn_seg_slot(s, i, &tmp);
		if (r == 0)
			continue;
		if (ls->n == cap) {
			cap = cap ? cap * 2 : 64;
			struct live *v = realloc(ls->v, cap * sizeof(*v));
			if (!v)
				return -1;
			ls->v = v;
		}
		ls->v[ls->n++] = (struct live){ .idx = i, .torn = r < 0, .s = tmp };
	}
	return 0;
}

/* The slot number of the live object of kind with this handle, -1 if none. */
static long id_of(const struct live_set *ls, uint64_t handle, enum srn_diag_kind kind)
{
	if (!handle)
		return -1;
	for (size_t i = 0; i < ls->n; i++)
		if (ls->v[i].s.kind == (uint32_t)kind && ls->v[i].s.handle == handle)
			return (long)ls->v[i].idx;
	return -1;
}

static void out_ref(struct srn_out *o, const char *key, const struct live_set *ls, uint64_t h,
		    enum srn_diag_kind kind)
{
	long id = id_of(ls, h, kind);
	if (id >= 0)
		srn_out_u64(o, key, (uint64_t)id);
	else if (h && o->mode != SRN_OUT_JSON)
		srn_out_str(o, key, "?");
}

/* Table output breaks long records over lines; other formats keep one. */
static void wrap(struct srn_out *o)
{
	if (o->mode == SRN_OUT_TABLE)
		fputs("\n       ", o->f);
}

static void out_age(struct srn_out *o, const struct live *l, uint64_t now)
{
	uint64_t c = l->s.created_ns;
	srn_out_secs(o, "age", now > c ? (double)(now - c) / 1e9 : 0);
	if (l->torn)
		srn_out_str(o, "torn", "yes");   /* the writer died while updating it */
}

static void print_mr(struct srn_out *o, const struct live_set *ls, const struct live *l)
{
	const struct srn_diag_mr *m = &l->s.mr;
	char acc[160];
	srn_access_str(m->access, acc, sizeof(acc));
	out_ref(o, "pd", ls, m->pd, SRN_DIAG_PD);
	srn_out_hex(o, "addr", m->addr, 0);
	srn_out_u64(o, "length", m->length);
	srn_out_hex(o, "lkey", m->lkey, 0);
	srn_out_hex(o, "rkey", m->rkey, 0);
	srn_out_str(o, "access", acc);
}

static void print_cq(struct srn_out *o, const struct live *l)
{
	const struct srn_diag_cq *c = &l->s.cq;
	srn_out_u64(o, "cqe", c->cqe);
	srn_out_u64(o, "size", c->size);
	srn_out_u64(o, "fill", c->fill);
	srn_out_u64(o, "qps", c->nqps);
	srn_out_str(o, "armed", c->arm == 1 ? "next" : c->arm == 2 ? "solicited" : "no");
	srn_out_str(o, "channel", c->has_channel ? "yes" : "no");
	if (c->overflowed || o->mode == SRN_OUT_JSON)
		srn_out_str(o, "overflowed", c->overflowed ? "yes" : "no");
}

static void qp_flags_str(uint32_t f, char *buf, size_t len)
{
	static const struct { uint32_t bit; const char *name; } names[] = {
		{ SRN_DIAG_QPF_RNR_WAIT, "rnr_wait" },   { SRN_DIAG_QPF_REWOUND, "retransmitting" },
		{ SRN_DIAG_QPF_TX_BLOCKED, "tx_blocked" }, { SRN_DIAG_QPF_ACK_TIMER, "ack_timer" },
		{ SRN_DIAG_QPF_IN_MSG, "in_message" },   { SRN_DIAG_QPF_SQ_DRAINING, "sq_draining" },
		{ SRN_DIAG_QPF_SHM, "same_host_ring" }, { SRN_DIAG_QPF_DIRECT, "places_direct" },
	};
	size_t off = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && off < len; i++)
		if (f & names[i].bit)
			off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? "," : "",
						names[i].name);
	if (!off)
		snprintf(buf, len, "-");
}

static void last_peer_str(const struct srn_diag_qp *q, uint64_t now, char *buf, size_t len)
{
	static const char *const nak[] = { "NAK_SEQ", "NAK_INV_REQ", "NAK_REM_ACCESS",
					   "NAK_REM_OP", "NAK_INV_RD" };
	uint32_t syn = q->last_peer_syndrome;
	if (syn == SRN_DIAG_PEER_NONE) {
		snprintf(buf, len, "nothing");
		return;
	}
	char what[32];
	switch (syn & 0x60) {   /* AETH type bits, IBTA 9.7.5.2.1 */
	case 0x00: snprintf(what, sizeof(what), "ACK"); break;
	case 0x20: snprintf(what, sizeof(what), "RNR_NAK(timer %u)", syn & 0x1f); break;
	case 0x60:
		snprintf(what, sizeof(what), "%s",
			 (syn & 0x1f) < 5 ? nak[syn & 0x1f] : "NAK(reserved)");
		break;
	default: snprintf(what, sizeof(what), "syndrome 0x%02x", syn);
	}
	double ago = now > q->last_peer_ns ? (double)(now - q->last_peer_ns) / 1e9 : 0;
	snprintf(buf, len, "%s,psn=0x%06x,%.3fs_ago", what, q->last_peer_psn, ago);
}

static void print_qp(struct srn_out *o, const struct live_set *ls, const struct live *l,
		     uint64_t now)
{
	const struct srn_diag_qp *q = &l->s.qp;
	char peer[64], flags[128], lp[96];
	srn_gid_addr_str(q->peer_gid, peer, sizeof(peer));
	qp_flags_str(q->flags, flags, sizeof(flags));
	last_peer_str(q, now, lp, sizeof(lp));

	srn_out_hex(o, "qpn", q->qpn, 6);
	srn_out_str(o, "type", srn_qp_type_str(q->type));
	srn_out_str(o, "state", srn_qp_state_name(q->state));
	out_ref(o, "pd", ls, q->pd, SRN_DIAG_PD);
	out_ref(o, "scq", ls, q->scq, SRN_DIAG_CQ);
	out_ref(o, "rcq", ls, q->rcq, SRN_DIAG_CQ);
	if (q->srq)
		out_ref(o, "srq", ls, q->srq, SRN_DIAG_SRQ);
	wrap(o);
	srn_out_hex(o, "sq_psn", q->sq_psn, 6);
	srn_out_hex(o, "una_psn", q->una_psn, 6);
	srn_out_hex(o, "rq_psn", q->rq_psn, 6);
	srn_out_u64(o, "send_out", q->sq_outstanding);
	srn_out_u64(o, "send_unsent", q->sq_unsent);
	srn_out_u64(o, "sq_size", q->sq_size);
	srn_out_u64(o, "recv_posted", q->rq_posted);
	srn_out_u64(o, "rq_size", q->rq_size);
	srn_out_u64(o, "rd_atomic_inflight", q->rd_atomic_inflight);
	wrap(o);
	srn_out_str(o, "peer", peer);
	srn_out_hex(o, "peer_qpn", q->peer_qpn, 6);
	srn_out_u64(o, "mtu", q->mtu);
	/* The rate DCQCN or a rate limit paces it at; 0: not paced. */
	srn_out_u64(o, "rate_mbps", q->rate_mbps);
	srn_out_u64(o, "retry_left", q->retry_left);
	srn_out_u64(o, "retry_cnt", q->retry_cnt);
	srn_out_u64(o, "rnr_left", q->rnr_left);
	srn_out_u64(o, "rnr_retry", q->rnr_retry);
	srn_out_u64(o, "timeout", q->timeout);
	srn_out_u64(o, "min_rnr_timer", q->min_rnr_timer);
	wrap(o);
	srn_out_str(o, "flags", flags);
	srn_out_str(o, "last_peer", lp);
}

static void print_srq(struct srn_out *o, const struct live_set *ls, const struct live *l)
{
	const struct srn_diag_srq *s = &l->s.srq;
	out_ref(o, "pd", ls, s->pd, SRN_DIAG_PD);
	srn_out_u64(o, "max_wr", s->max_wr);
	srn_out_u64(o, "posted", s->posted);
	srn_out_u64(o, "limit", s->limit);
	srn_out_u64(o, "qps", s->nqps);
}

static void print_ah(struct srn_out *o, const struct live_set *ls, const struct live *l)
{
	const struct srn_diag_ah *a = &l->s.ah;
	char dst[64];
	srn_gid_addr_str(a->dgid, dst, sizeof(dst));
	out_ref(o, "pd", ls, a->pd, SRN_DIAG_PD);
	srn_out_str(o, "dest", a->is_global ? dst : "-");
	srn_out_u64(o, "sgid_index", a->sgid_index);
	srn_out_u64(o, "hop_limit", a->hop_limit);
	srn_out_u64(o, "traffic_class", a->traffic_class);
}

static bool wanted(const struct res_opts *op, const struct live *l)
{
	if (op->kinds && !(op->kinds & 1u << l->s.kind))
		return false;
	if (op->d.has_qp && (l->s.kind != SRN_DIAG_QP || l->s.qp.qpn != op->d.qpn))
		return false;
	return true;
}

static void print_kind(struct srn_out *o, const struct res_opts *op, const struct live_set *ls,
		       enum srn_diag_kind kind, uint64_t now)
{
	static const char *const arrays[SRN_DIAG__KINDS] = {
		[SRN_DIAG_PD] = "pds", [SRN_DIAG_MR] = "mrs",   [SRN_DIAG_CQ] = "cqs",
		[SRN_DIAG_QP] = "qps", [SRN_DIAG_SRQ] = "srqs", [SRN_DIAG_AH] = "ahs",
	};
	if (op->kinds && !(op->kinds & 1u << kind))
		return;
	if (op->d.has_qp && kind != SRN_DIAG_QP)
		return;
	srn_out_arr_begin(o, arrays[kind]);
	for (size_t i = 0; i < ls->n; i++) {
		const struct live *l = &ls->v[i];
		if (l->s.kind != (uint32_t)kind || !wanted(op, l))
			continue;
		char head[32];
		snprintf(head, sizeof(head), "%s %u", srn_kind_name(kind), l->idx);
		if (o->mode == SRN_OUT_DUMP)
			snprintf(head, sizeof(head), "%s\t%u", srn_kind_name(kind), l->idx);
		srn_out_obj_begin(o, NULL);
		srn_out_rec_begin(o, 2, head);
		if (o->mode == SRN_OUT_JSON)
			srn_out_u64(o, "id", l->idx);
		switch (kind) {
		case SRN_DIAG_PD: srn_out_u64(o, "users", l->s.pd.users); break;
		case SRN_DIAG_MR: print_mr(o, ls, l); break;
		case SRN_DIAG_CQ: print_cq(o, l); break;
		case SRN_DIAG_QP: print_qp(o, ls, l, now); break;
		case SRN_DIAG_SRQ: print_srq(o, ls, l); break;
		case SRN_DIAG_AH: print_ah(o, ls, l); break;
		default: break;
		}
		out_age(o, l, now);
		srn_out_rec_end(o);
		srn_out_obj_end(o);
	}
	srn_out_arr_end(o);
}

static void print_seg(struct srn_out *o, const struct res_opts *op, const struct srn_seg *s,
		      const struct live_set *ls)
{
	uint64_t now = srn_now_ns();
	unsigned count[SRN_DIAG__KINDS] = { 0 };
	uint64_t mr_bytes = 0;
	for (size_t i = 0; i < ls->n; i++) {
		count[ls->v[i].s.kind]++;
		if (ls->v[i].s.kind == SRN_DIAG_MR)
			mr_bytes += ls->v[i].s.mr.length;
	}
	uint64_t untracked = atomic_load_explicit(&s->hdr.table_full, memory_order_relaxed);

	snprintf(o->prefix, sizeof(o->prefix), "%d\t%s\t%s", s->pid, s->dev,
		 srn_proc_state_name(s->state));
	srn_out_obj_begin(o, NULL);
	if (o->mode == SRN_OUT_TABLE)
		printf("%s  pid %d (%s)  %s  %s\n", s->dev, s->pid, s->comm, s->addr,
		       srn_proc_state_name(s->state));
	srn_out_u64(o, "pid", (uint64_t)s->pid);
	srn_out_str(o, "comm", s->comm);
	srn_out_str(o, "dev", s->dev);
	srn_out_str(o, "addr", s->addr);
	srn_out_str(o, "state", srn_proc_state_name(s->state));
	srn_out_u64(o, "mr_bytes", mr_bytes);
	srn_out_u64(o, "objects_untracked", untracked);
	for (int k = SRN_DIAG_PD; k < SRN_DIAG__KINDS; k++)
		print_kind(o, op, ls, (enum srn_diag_kind)k, now);
	if (o->mode == SRN_OUT_TABLE) {
		printf("  total: %u PD, %u MR (%" PRIu64 " bytes), %u CQ, %u QP, %u SRQ, %u AH\n",
		       count[SRN_DIAG_PD], count[SRN_DIAG_MR], mr_bytes, count[SRN_DIAG_CQ],
		       count[SRN_DIAG_QP], count[SRN_DIAG_SRQ], count[SRN_DIAG_AH]);
		if (untracked)
			printf("  (%" PRIu64 " objects not shown: the table was full)\n", untracked);
	}
	srn_out_obj_end(o);
}

static int parse_kinds(const char *arg, unsigned *kinds)
{
	char buf[128];
	snprintf(buf, sizeof(buf), "%s", arg);
	char *save = NULL;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int k;
		for (k = SRN_DIAG_PD; k < SRN_DIAG__KINDS; k++)
			if (!strcmp(t, srn_kind_name((uint32_t)k)))
				break;
		if (k == SRN_DIAG__KINDS)
			return -1;
		*kinds |= 1u << k;
	}
	return *kinds ? 0 : -1;
}

/* --type, the one option of res's own. */
static int res_opt(void *ctx, int c, int argc, char *argv[])
{
	(void)c;   /* 't' */
	(void)argc;
	(void)argv;
	return parse_kinds(optarg, &((struct res_opts *)ctx)->kinds);
}

int srn_cmd_res(int argc, char *argv[])
{
	static const struct option longopts[] = {
		SRN_DIAG_LONGOPTS,
		{ "type", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	struct res_opts op = { 0 };
	const struct srn_diag_cmd cmd = { .name = "res", .usage = srn_usage_res,
					  .longopts = longopts, .own_opt = res_opt, .ctx = &op };
	int r = srn_diag_opts_parse(&cmd, argc, argv, &op.d);
	if (r != SRN_DIAG_OPTS_GO)
		return r;

	struct srn_seg_set set;
	r = srn_segs_load(&set, &op.d.filt, op.d.mode != SRN_OUT_TABLE);
	if (r) {
		fprintf(stderr, "softrnic res: %s: %s\n", srn_diag_dir(), strerror(-r));
		return SRN_EXIT_FAIL;
	}
	struct srn_out o;
	srn_out_init(&o, stdout, op.d.mode);
	int ret = SRN_EXIT_OK;
	srn_out_obj_begin(&o, NULL);
	srn_out_arr_begin(&o, "devices");
	for (size_t i = 0; i < set.n; i++) {
		struct live_set ls;
		if (load_live(&set.v[i], &ls)) {
			fprintf(stderr, "softrnic res: out of memory\n");
			ret = SRN_EXIT_FAIL;
			free(ls.v);
			break;
		}
		if (o.mode == SRN_OUT_TABLE && i)
			putchar('\n');
		print_seg(&o, &op, &set.v[i], &ls);
		free(ls.v);
	}
	srn_out_arr_end(&o);
	srn_out_u64(&o, "stale_files", set.stale);
	srn_out_u64(&o, "unreadable_files", set.unreadable);
	srn_out_u64(&o, "other_users_files", set.others);
	srn_out_obj_end(&o);
	if (o.mode == SRN_OUT_TABLE && !set.n)
		printf("no softrnic devices in use%s\n",
		       op.d.filt.pid || op.d.filt.dev ? " matching the filter" : "");
	if (o.mode == SRN_OUT_TABLE)
		srn_segs_note_others(stdout, &set);
	srn_segs_free(&set);
	return ret;
}
