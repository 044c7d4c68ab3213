/*
 * explain_seg.c - feeding the diagnoses (explain_diag.c) from the
 * diagnostic segments: copies of each device's counters and QP counters,
 * the key errors in the device logs, every region slot (live, or freed
 * and keeping its last region).  Read-only; every value comes from the
 * segment reader's validated copies (diag_seg.h).
 */
#include <stdlib.h>
#include <string.h>

#include "diag_read.h"
#include "explain_diag.h"

struct who {
	char s[96];
};

static void seg_who(const struct srn_seg *s, struct who *w)
{
	snprintf(w->s, sizeof(w->s), "pid %d (%s) %s", s->pid, s->comm, s->dev);
}

/* The same device of the same process in the earlier sample. */
static const struct srn_seg *base_of(const struct srn_seg_set *base, const struct srn_seg *s)
{
	for (size_t i = 0; base && i < base->n; i++)
		if (!strcmp(base->v[i].path, s->path) && base->v[i].pid == s->pid &&
		    base->v[i].start_mono_ns == s->start_mono_ns)
			return &base->v[i];
	return NULL;
}

static uint64_t qp_cnt(const struct srn_seg *s, const struct srn_diag_slot *sl, const char *name)
{
	for (uint32_t i = 0; i < s->nqp_counters; i++)
		if (!strncmp(s->qpcnames[i], name, SRN_DIAG_NAME_LEN))
			return sl->qp.cnt[i];
	return 0;
}

static void qp_of(const struct srn_seg *s, const struct srn_diag_slot *sl, struct srn_xd_qp *q)
{
	char addr[64];
	q->qpn = sl->qp.qpn;
	srn_gid_addr_str(sl->qp.peer_gid, addr, sizeof(addr));
	snprintf(q->peer, sizeof(q->peer), "QP 0x%06x at %s", sl->qp.peer_qpn, addr);
	q->retransmits = qp_cnt(s, sl, "retransmits");
	q->timeouts = qp_cnt(s, sl, "local_ack_timeout_err");
	q->seq_naks = qp_cnt(s, sl, "packet_seq_err");
	q->sent = qp_cnt(s, sl, "sent_pkts");
	q->rnr = qp_cnt(s, sl, "rcvd_rnr_err");
}

/* Every QP of s (destroyed ones too, while their slot keeps them), as
 * growth since the same QP in b (by QP number) when b is given. */
static size_t seg_qps(const struct srn_seg *s, const struct srn_seg *b, struct srn_xd_qp **out)
{
	size_t n = 0, cap = 0;
	struct srn_xd_qp *v = NULL;
	struct srn_diag_slot sl;
	for (uint32_t idx = 0; idx < s->nslots; idx++) {
		if (!srn_seg_slot_any(s, idx, &sl) || sl.last_kind != SRN_DIAG_QP)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			struct srn_xd_qp *nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				break;
			v = nv;
		}
		struct srn_xd_qp *q = &v[n++];
		qp_of(s, &sl, q);
		if (!b || idx >= b->nslots || !srn_seg_slot_any(b, idx, &sl) ||
		    sl.last_kind != SRN_DIAG_QP || sl.qp.qpn != q->qpn)
			continue;
		struct srn_xd_qp old;
		qp_of(b, &sl, &old);
		q->retransmits -= old.retransmits <= q->retransmits ? old.retransmits : 0;
		q->timeouts -= old.timeouts <= q->timeouts ? old.timeouts : 0;
		q->seq_naks -= old.seq_naks <= q->seq_naks ? old.seq_naks : 0;
		q->sent -= old.sent <= q->sent ? old.sent : 0;
		q->rnr -= old.rnr <= q->rnr ? old.rnr : 0;
	}
	*out = v;
	return n;
}

static int storms(const struct srn_seg_set *set, const struct srn_seg_set *base, double secs)
{
	int found = 0;
	uint64_t now = srn_now_ns();
	for (size_t i = 0; i < set->n; i++) {
		const struct srn_seg *s = &set->v[i];
		const struct srn_seg *b = base_of(base, s);
		struct who w;
		seg_who(s, &w);
		struct srn_xd_qp *qps = NULL;
		size_t nq = seg_qps(s, b, &qps);
		struct srn_xd_dev d = {
			.who = w.s,
			.cnt = { s->ncounters, s->cnames, s->counters, b ? b->counters : NULL },
			.secs = b ? secs : 0,
			.lifetime = !b,
			.qps = qps,
			.nqps = nq,
		};
		/* A running process's life so far is a window of known length;
		 * a gone one's end is not recorded. */
		if (!b && !s->gone && s->state == SRN_PROC_RUNNING && now > s->start_mono_ns)
			d.secs = (double)(now - s->start_mono_ns) / 1e9;
		found += srn_xd_retransmit_storm(stdout, &d);
		found += srn_xd_pause_storm(stdout, &d);
		free(qps);
	}
	return found;
}

struct vec {
	void *v;
	size_t n, cap, size;
};

static void *vec_push(struct vec *x)
{
	if (x->n == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 64;
		void *nv = realloc(x->v, cap * x->size);
		if (!nv)
			return NULL;
		x->v = nv;
		x->cap = cap;
	}
	void *p = (char *)x->v + x->n++ * x->size;
	memset(p, 0, x->size);
	return p;
}

static int stale_keys(const struct srn_seg_set *set, bool has_qp, uint32_t qpn)
{
	struct who *who = calloc(set->n ? set->n : 1, sizeof(*who));
	struct vec errs = { .size = sizeof(struct srn_xd_key_err) };
	struct vec regs = { .size = sizeof(struct srn_xd_region) };
	struct srn_diag_log_entry e[SRN_DIAG_DEV_LOG_ENTRIES];
	struct srn_diag_slot sl;
	int found = 0;
	if (!who)
		return 0;
	for (size_t i = 0; i < set->n; i++) {
		const struct srn_seg *s = &set->v[i];
		seg_who(s, &who[i]);
		size_t k = srn_seg_dev_log(s, e, SRN_DIAG_DEV_LOG_ENTRIES);
		for (size_t j = 0; j < k; j++) {
			struct srn_xd_key_err ke;
			e[j].msg[sizeof(e[j].msg) - 1] = 0;
			if (!srn_xd_parse_key_err(e[j].msg, &ke))
				continue;
			if (has_qp && !ke.responder && e[j].qpn != qpn)
				continue;
			ke.pid = s->pid;
			ke.who = who[i].s;
			ke.self_addr = s->addr;
			ke.qpn = e[j].qpn;
			ke.when = srn_seg_realtime(s, e[j].ts_ns);
			struct srn_xd_key_err *p = vec_push(&errs);
			if (p)
				*p = ke;
		}
	}
	bool any_req = false;
	for (size_t i = 0; i < errs.n; i++)
		any_req |= !((struct srn_xd_key_err *)errs.v)[i].responder;
	/* Regions only when there is a key to look up: the slot tables are
	 * the larger read. */
	for (size_t i = 0; any_req && i < set->n; i++) {
		const struct srn_seg *s = &set->v[i];
		for (uint32_t idx = 0; idx < s->nslots; idx++) {
			if (!srn_seg_slot_any(s, idx, &sl) || sl.last_kind != SRN_DIAG_MR)
				continue;
			struct srn_xd_region *r = vec_push(&regs);
			if (!r)
				break;
			*r = (struct srn_xd_region){ .pid = s->pid, .who = who[i].s, .addr = s->addr,
						     .rkey = sl.mr.rkey, .access = sl.mr.access,
						     .va = sl.mr.addr, .len = sl.mr.length,
						     .live = sl.kind == SRN_DIAG_MR };
		}
	}
	if (any_req)
		found = srn_xd_stale_rkeys(stdout, errs.v, errs.n, regs.v, regs.n);
	free(errs.v);
	free(regs.v);
	free(who);
	return found;
}

int srn_explain_diagnose(const struct srn_seg_set *set, const struct srn_seg_set *base,
			 double secs, bool has_qp, uint32_t qpn)
{
	int found = stale_keys(set, has_qp, qpn);
	if (!has_qp)
		found += storms(set, base, secs);
	return found;
}
