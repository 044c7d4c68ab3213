/* Tests for the diagnostic segment (src/diag/shm.c, log.c, names.c; core/snap.c;
 * transport/explain.c; engine/diag_tick.c):
 * - the file: name, mode 0600 (its owner's alone), size, header, counter
 *   names, and counters written through srn_count() visible through a
 *   second, read-only mapping;
 * - the slot seqlock: one thread rewrites a QP slot (fields that must stay
 *   consistent with each other) while another reads it; every successful
 *   read is consistent and PSNs never go backwards (bounded; TSan-clean:
 *   both threads use the same mapping, all accesses atomic);
 * - log rings: QP ring wraparound keeps the newest 16 in order, errors are
 *   copied into the device ring (which wraps at 64), a reused slot does
 *   not show its previous occupant's lines, a freed QP's log stays findable;
 * - the object table: full table -> sink objects (counted), all slots free
 *   again after deleting;
 * - snapshots of real core objects (MR, QP) and the send-error explanation;
 * - closing: "closed cleanly" flag; the file kept after errors, removed
 *   without; an own closed file replaced on re-create; SOFTRNIC_DIAG=0;
 *   a forked child's exit leaves the parent's segment open;
 * - SOFTRNIC_LOG=warn: the stderr echo, its format, level filter and
 *   burst limit (in a child, as the threshold is read once). */
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/mr.h"
#include "core/qp.h"
#include "core/snap.h"
#include "diag/names.h"
#include "diag/shm.h"
#include "engine/diag_tick.h"
#include "transport/explain.h"
#include "check.h"
#include "diag/clock.h"

static char dir[64];
static const uint8_t gid5[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 5 };

static void seg_path(const char *dev, char *buf, size_t len)
{
	snprintf(buf, len, "%s/softrnic.%d.%s", dir, (int)getpid(), dev);
}

/* A second, read-only mapping of the file, as `softrnic stat` makes. */
static const struct srn_diag_seg *map_ro(const char *path)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	void *p = mmap(NULL, sizeof(struct srn_diag_seg), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

static void test_file_and_counters(struct srn_diag *d, const struct srn_diag_seg **ro_out)
{
	char path[256];
	seg_path("testdev", path, sizeof(path));
	struct stat st;
	CHECK(stat(path, &st) == 0, "segment file %s missing", path);
	CHECK((st.st_mode & 0777) == 0600, "mode %o", st.st_mode & 0777);
	CHECK((size_t)st.st_size == sizeof(struct srn_diag_seg), "size %lld", (long long)st.st_size);
	CHECK(srn_diag_is_shared(d) && !strcmp(srn_diag_path(d), path), "path %s",
	      srn_diag_path(d));

	const struct srn_diag_seg *ro = map_ro(path);
	CHECK(ro != NULL, "cannot map %s", path);
	if (!ro)
		return;
	*ro_out = ro;
	const struct srn_diag_hdr *h = &ro->hdr;
	CHECK(h->magic == SRN_DIAG_MAGIC && h->layout == SRN_DIAG_LAYOUT, "magic/layout");
	CHECK(h->pid == (int)getpid(), "pid %d", h->pid);
	CHECK(!strcmp(h->devname, "testdev"), "devname %s", h->devname);
	CHECK(!strcmp(h->addr, "127.0.0.5"), "addr %s", h->addr);
	CHECK(!memcmp(h->gid, gid5, 16), "gid");
	CHECK(h->comm[0] != '\0', "comm empty");
	CHECK(h->closed == 0, "closed %u at start", h->closed);
	CHECK(h->proc_start_ticks == srn_diag_proc_start_ticks((int)getpid()) &&
		      h->proc_start_ticks != 0,
	      "start ticks %llu", (unsigned long long)h->proc_start_ticks);
	CHECK(h->ncounters == SRN_CNT__MAX && h->nqp_counters == SRN_QPC__MAX, "counts");

	/* Names: present, unique, and the same in the segment. */
	for (int i = 0; i < SRN_CNT__MAX; i++) {
		CHECK(srn_counter_names[i] != NULL, "counter %d has no name", i);
		if (!srn_counter_names[i])
			continue;
		CHECK(!strcmp(ro->counter_names[i], srn_counter_names[i]), "name %d", i);
		for (int j = 0; j < i; j++)
			CHECK(!srn_counter_names[j] || strcmp(srn_counter_names[i], srn_counter_names[j]),
			      "duplicate counter name %s", srn_counter_names[i]);
	}
	for (int i = 0; i < SRN_QPC__MAX; i++)
		CHECK(!strcmp(ro->qp_counter_names[i], srn_diag_qp_counter_names[i]), "qp name %d", i);

	struct srn_counters *c = srn_diag_counters(d);
	srn_count(c, SRN_CNT_SENT_PKTS, 5);
	srn_count(c, SRN_CNT_SENT_PKTS, 2);
	srn_count(c, SRN_CNT_BAD_ICRC, 1);
	CHECK(atomic_load(&ro->counters.v[SRN_CNT_SENT_PKTS]) == 7, "sent_pkts %llu",
	      (unsigned long long)atomic_load(&ro->counters.v[SRN_CNT_SENT_PKTS]));
	CHECK(atomic_load(&ro->counters.v[SRN_CNT_BAD_ICRC]) == 1, "bad_icrc");
	CHECK(atomic_load(&ro->counters.v[SRN_CNT_RCVD_PKTS]) == 0, "rcvd_pkts");
}

/* ---- seqlock under concurrency ---------------------------------------- */

#define WRITES 200000

struct race {
	struct srn_diag_obj *o;
	const struct srn_diag_slot *slot;   /* the writer's own mapping */
	_Atomic bool done;
	_Atomic bool reading;      /* the writer starts once the reader runs */
	unsigned long consistent, retries_exhausted, bad;
};

static void race_write(struct race *r, uint32_t i)
{
	srn_diag_obj_begin(r->o);
	SRN_DIAG_SET(r->o->s->qp.sq_psn, i);
	SRN_DIAG_SET(r->o->s->qp.una_psn, i);
	SRN_DIAG_SET(r->o->s->qp.rq_psn, i ^ 0x5a5a5au);
	SRN_DIAG_SET(r->o->s->qp.sq_outstanding, i * 3u);
	SRN_DIAG_SET(r->o->s->qp.ack_deadline_ns, (uint64_t)i << 20);
	srn_diag_obj_end(r->o);
}

static void *writer(void *arg)
{
	struct race *r = arg;
	uint64_t until = srn_now_ns() + 5ull * 1000000000ull;
	while (!atomic_load(&r->reading) && srn_now_ns() < until)
		sched_yield();
	for (uint32_t i = 1; i <= WRITES; i++) {
		race_write(r, i);
		srn_diag_qp_count(r->o, SRN_QPC_SENT_PKTS, 1);
	}
	atomic_store(&r->done, true);
	return NULL;
}

static void *reader(void *arg)
{
	struct race *r = arg;
	struct srn_diag_slot copy;
	uint32_t last = 0;
	uint64_t deadline = srn_now_ns() + 30ull * 1000000000ull;
	atomic_store(&r->reading, true);
	for (unsigned long n = 0; n < 50000000ul; n++) {
		bool finished = atomic_load(&r->done);
		if (srn_diag_slot_read(r->slot, &copy)) {
			r->retries_exhausted++;
		} else {
			const struct srn_diag_qp *q = &copy.qp;
			uint32_t i = q->sq_psn;
			if (q->una_psn != i || q->rq_psn != (i ^ 0x5a5a5au) || q->sq_outstanding != i * 3u ||
			    q->ack_deadline_ns != (uint64_t)i << 20 || i < last || copy.kind != SRN_DIAG_QP)
				r->bad++;
			else
				r->consistent++;
			last = i;
		}
		if (finished || srn_now_ns() > deadline)
			break;
	}
	return NULL;
}

static void test_seqlock(struct srn_diag *d)
{
	struct race r = { 0 };
	r.o = srn_diag_obj_add(d, SRN_DIAG_QP, NULL);
	r.slot = r.o->s;
	CHECK(r.o->idx < SRN_DIAG_SLOTS, "no slot");
	race_write(&r, 0);   /* consistent before the writer starts */
	pthread_t tw, tr;
	pthread_create(&tr, NULL, reader, &r);
	pthread_create(&tw, NULL, writer, &r);
	pthread_join(tw, NULL);
	pthread_join(tr, NULL);
	CHECK(r.bad == 0, "%lu inconsistent reads (%lu consistent)", r.bad, r.consistent);
	CHECK(r.consistent > 0, "no consistent read");
	struct srn_diag_slot copy;
	CHECK(srn_diag_slot_read(r.o->s, &copy) == 0 && copy.qp.sq_psn == WRITES &&
		      copy.qp.cnt[SRN_QPC_SENT_PKTS] == WRITES,
	      "final state sq_psn %u sent %llu", copy.qp.sq_psn,
	      (unsigned long long)copy.qp.cnt[SRN_QPC_SENT_PKTS]);
	fprintf(stderr, "seqlock: %lu consistent reads, %lu exhausted retries\n", r.consistent,
		r.retries_exhausted);
	srn_diag_obj_del(r.o);
}

/* ---- log rings --------------------------------------------------------- */

static size_t read_ring(const struct srn_diag_log_entry *ring, const _Atomic uint64_t *headp,
			uint32_t nent, struct srn_diag_log_entry *out)
{
	uint64_t head = atomic_load(headp);
	size_t k = 0;
	for (uint64_t n = head > nent ? head - nent : 0; n < head; n++)
		if (!srn_diag_entry_read(ring, nent, n, &out[k]))
			k++;
	return k;
}

static void test_logs(struct srn_diag *d, const struct srn_diag_seg *ro)
{
	struct srn_diag_obj *qp = srn_diag_obj_add(d, SRN_DIAG_QP, NULL);
	uint32_t idx = qp->idx;
	srn_diag_obj_begin(qp);
	SRN_DIAG_SET(qp->s->qp.qpn, 0x123u);
	srn_diag_obj_end(qp);
	uint64_t dev_head0 = atomic_load(&ro->dev_log.head);

	for (int i = 0; i < 40; i++)
		srn_diag_log(qp, i == 39 ? SRN_LOG_ERROR : SRN_LOG_INFO, "msg %d", i);
	struct srn_diag_log_entry e[SRN_DIAG_DEV_LOG_ENTRIES];
	size_t k = read_ring(ro->logs[idx].e, &ro->logs[idx].head, SRN_DIAG_LOG_ENTRIES, e);
	CHECK(k == SRN_DIAG_LOG_ENTRIES, "qp ring holds %zu", k);
	for (size_t j = 0; j < k; j++) {
		char want[32];
		snprintf(want, sizeof(want), "msg %zu", 40 - SRN_DIAG_LOG_ENTRIES + j);
		CHECK(!strcmp(e[j].msg, want), "entry %zu: '%s' want '%s'", j, e[j].msg, want);
		CHECK(e[j].qpn == 0x123 && e[j].kind == SRN_DIAG_QP, "entry %zu qpn/kind", j);
		CHECK(j == 0 || e[j].ts_ns >= e[j - 1].ts_ns, "timestamps go backwards");
	}
	CHECK(k && e[k - 1].level == SRN_LOG_ERROR, "last level %u", k ? e[k - 1].level : 0);
	/* Only the ERROR line went to the device ring. */
	CHECK(atomic_load(&ro->dev_log.head) == dev_head0 + 1, "dev ring grew by %llu",
	      (unsigned long long)(atomic_load(&ro->dev_log.head) - dev_head0));
	CHECK(ro->hdr.errors_logged >= 1, "errors_logged");

	/* A long line is cut, never overflows. */
	char longs[400];
	memset(longs, 'x', sizeof(longs) - 1);
	longs[sizeof(longs) - 1] = '\0';
	srn_diag_log(qp, SRN_LOG_WARN, "%s", longs);
	k = read_ring(ro->logs[idx].e, &ro->logs[idx].head, SRN_DIAG_LOG_ENTRIES, e);
	CHECK(k && strlen(e[k - 1].msg) == SRN_DIAG_LOG_MSG - 1, "long line length %zu",
	      k ? strlen(e[k - 1].msg) : 0);

	/* Device ring wraps at 64, newest kept, in order. */
	for (int i = 0; i < 70; i++)
		srn_diag_dev_log(d, SRN_LOG_WARN, "dev %d", i);
	k = read_ring(ro->dev_log.e, &ro->dev_log.head, SRN_DIAG_DEV_LOG_ENTRIES, e);
	CHECK(k == SRN_DIAG_DEV_LOG_ENTRIES, "dev ring holds %zu", k);
	CHECK(k && !strcmp(e[k - 1].msg, "dev 69") && !strcmp(e[0].msg, "dev 6"),
	      "dev ring ends '%s'..'%s'", k ? e[0].msg : "", k ? e[k - 1].msg : "");

	/* Freed: the slot keeps the QPN and log for explain --qp-log ... */
	uint32_t gen = ro->slots[idx].gen;
	srn_diag_obj_del(qp);
	struct srn_diag_slot copy;
	CHECK(srn_diag_slot_read(&ro->slots[idx], &copy) == 0 && copy.kind == SRN_DIAG_FREE &&
		      copy.last_kind == SRN_DIAG_QP && copy.qp.qpn == 0x123 && copy.gen == gen,
	      "freed slot kind %u last %u qpn %x", copy.kind, copy.last_kind, copy.qp.qpn);
	/* ... until reused: the new occupant's generation hides the old lines. */
	struct srn_diag_obj *qp2 = srn_diag_obj_add(d, SRN_DIAG_QP, NULL);
	CHECK(qp2->idx == idx, "LIFO free list: got slot %u, want %u", qp2->idx, idx);
	CHECK(srn_diag_slot_read(&ro->slots[idx], &copy) == 0 && copy.gen == gen + 1 &&
		      copy.qp.qpn == 0 && copy.qp.last_peer_syndrome == SRN_DIAG_PEER_NONE,
	      "reused slot gen %u qpn %x", copy.gen, copy.qp.qpn);
	size_t same_gen = 0;
	k = read_ring(ro->logs[idx].e, &ro->logs[idx].head, SRN_DIAG_LOG_ENTRIES, e);
	for (size_t j = 0; j < k; j++)
		same_gen += e[j].gen == copy.gen;
	CHECK(same_gen == 0, "%zu old lines look new", same_gen);
	srn_diag_log(qp2, SRN_LOG_INFO, "fresh");
	k = read_ring(ro->logs[idx].e, &ro->logs[idx].head, SRN_DIAG_LOG_ENTRIES, e);
	CHECK(k && e[k - 1].gen == copy.gen && !strcmp(e[k - 1].msg, "fresh"), "fresh line");

	srn_diag_qp_peer_said(qp2, 0x62, 0x777, 0);
	CHECK(ro->slots[idx].qp.last_peer_syndrome == 0x62 && ro->slots[idx].qp.last_peer_psn == 0x777,
	      "peer said");
	char buf[128];
	srn_diag_last_peer_str(qp2, buf, sizeof(buf));
	CHECK(strstr(buf, "NAK remote access error PSN 0x000777") != NULL, "last peer '%s'", buf);
	srn_diag_obj_del(qp2);
	srn_diag_log(NULL, SRN_LOG_ERROR, "ignored");
}

/* ---- object table ------------------------------------------------------ */

static void test_table_full(struct srn_diag *d, const struct srn_diag_seg *ro)
{
	static struct srn_diag_obj *objs[SRN_DIAG_SLOTS];
	uint32_t used0 = ro->hdr.slots_used;
	uint64_t full0 = ro->hdr.table_full;
	int n = 0;
	for (int i = 0; i < SRN_DIAG_SLOTS + 1; i++) {
		struct srn_diag_obj *o = srn_diag_obj_add(d, SRN_DIAG_MR, NULL);
		if (o->idx >= SRN_DIAG_SLOTS) {
			CHECK(n == SRN_DIAG_SLOTS - (int)used0, "sink after %d objects", n);
			/* The sink takes writes and deletes harmlessly. */
			srn_diag_obj_begin(o);
			SRN_DIAG_SET(o->s->mr.length, 1);
			srn_diag_obj_end(o);
			srn_diag_log(o, SRN_LOG_ERROR, "sink line");
			srn_diag_obj_del(o);
			break;
		}
		objs[n++] = o;
	}
	CHECK(ro->hdr.table_full == full0 + 1, "table_full %llu",
	      (unsigned long long)ro->hdr.table_full);
	CHECK(ro->hdr.slots_used == SRN_DIAG_SLOTS, "slots_used %u", ro->hdr.slots_used);
	int live = 0;
	for (struct srn_diag_obj *o = srn_diag_obj_next(d, NULL); o; o = srn_diag_obj_next(d, o))
		live++;
	CHECK(live == SRN_DIAG_SLOTS, "iterator saw %d", live);
	for (int i = 0; i < n; i++)
		srn_diag_obj_del(objs[i]);
	CHECK(ro->hdr.slots_used == used0, "slots_used %u after delete", ro->hdr.slots_used);
	struct srn_diag_obj *o = srn_diag_obj_add(d, SRN_DIAG_PD, NULL);
	CHECK(o->idx < SRN_DIAG_SLOTS, "table still full after deleting");
	srn_diag_obj_del(o);
}

/* ---- snapshots of core objects ----------------------------------------- */

static void test_snapshots(struct srn_diag *d, const struct srn_diag_seg *ro)
{
	struct srn_pd pd = { 0 };
	atomic_store(&pd.refs, 2);
	struct srn_mr mr = { .pd = &pd, .iova = 0x7f0000001000ull, .length = 65536,
			     .access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ };
	mr.ibmr.lkey = mr.ibmr.rkey = 0x1234;
	struct srn_diag_obj *opd = srn_diag_obj_add(d, SRN_DIAG_PD, &pd);
	struct srn_diag_obj *omr = srn_diag_obj_add(d, SRN_DIAG_MR, &mr);
	srn_diag_snap(opd);
	srn_diag_snap(omr);
	const struct srn_diag_slot *s = &ro->slots[omr->idx];
	CHECK(s->kind == SRN_DIAG_MR && s->mr.addr == mr.iova && s->mr.length == 65536 &&
		      s->mr.lkey == 0x1234 && s->mr.rkey == 0x1234 && s->mr.access == mr.access,
	      "mr slot");
	CHECK(s->mr.pd == ro->slots[opd->idx].handle && s->mr.pd != 0 &&
		      s->mr.pd != (uint64_t)(uintptr_t)&pd,
	      "pd handle links MR to PD without publishing the address");
	CHECK(ro->slots[opd->idx].pd.users == 2, "pd users");

	/* srn_diag_tick refreshes at most every SRN_DIAG_TICK_NS. */
	uint64_t t0 = srn_now_ns() + 2 * SRN_DIAG_TICK_NS;
	srn_diag_tick(d, t0);
	CHECK(srn_diag_deadline(d) == 0, "deadline right after a refresh");
	mr.length = 4096;
	srn_diag_tick(d, t0 + 1);
	CHECK(s->mr.length == 65536, "tick refreshed too early");
	CHECK(srn_diag_deadline(d) == t0 + SRN_DIAG_TICK_NS, "skipped tick sets no deadline");
	srn_diag_tick(d, t0 + SRN_DIAG_TICK_NS);
	CHECK(s->mr.length == 4096, "tick did not refresh: %llu", (unsigned long long)s->mr.length);
	CHECK(srn_diag_deadline(d) == 0, "deadline stays after the refresh");

	struct srn_qp *qp = calloc(1, sizeof(*qp));
	struct srn_swqe sq[4] = { 0 };
	qp->pd = &pd;
	qp->type = IBV_QPT_RC;
	qp->qpn = 0xabc123;
	qp->state = IBV_QPS_RTS;
	qp->attr.dest_qp_num = 0x000456;
	qp->attr.retry_cnt = 7;
	qp->attr.timeout = 14;
	qp->attr.ah_attr.grh.dgid.raw[10] = qp->attr.ah_attr.grh.dgid.raw[11] = 0xff;
	qp->attr.ah_attr.grh.dgid.raw[12] = 127;
	qp->attr.ah_attr.grh.dgid.raw[15] = 2;
	struct sockaddr_in *sin = (struct sockaddr_in *)&qp->path.peer;
	sin->sin_family = AF_INET;
	inet_pton(AF_INET, "127.0.0.2", &sin->sin_addr);
	qp->path.peer_len = sizeof(*sin);
	qp->sq.wqe = sq;
	qp->sq.size = 4;
	qp->sq.tail = 0;
	qp->req.cur = 1;
	qp->sq.head = 3;
	qp->req.psn = 0x10;
	qp->comp.una = 0x0c;
	qp->resp.epsn = 0x99;
	qp->path.mtu = 4096;
	sq[0] = (struct srn_swqe){ .wr_id = 0x2a, .opcode = IBV_WR_RDMA_WRITE, .length = 8192,
				   .rkey = 0x5678, .remote_addr = 0x1000, .first_psn = 0x0c,
				   .last_psn = 0x0d };
	struct srn_diag_obj *oqp = srn_diag_obj_add(d, SRN_DIAG_QP, qp);
	srn_diag_snap(oqp);
	const struct srn_diag_qp *q = &ro->slots[oqp->idx].qp;
	CHECK(q->qpn == 0xabc123 && q->state == IBV_QPS_RTS && q->type == IBV_QPT_RC &&
		      q->sq_psn == 0x10 && q->una_psn == 0x0c && q->rq_psn == 0x99 &&
		      q->sq_outstanding == 3 && q->sq_unsent == 2 && q->peer_qpn == 0x456 &&
		      q->retry_cnt == 7 && q->timeout == 14 && q->mtu == 4096 &&
		      q->pd == ro->slots[opd->idx].handle && q->peer_gid[12] == 127,
	      "qp slot");

	uint64_t dev_head = atomic_load(&ro->dev_log.head);
	srn_diag_explain_send(oqp, qp, &sq[0], IBV_WC_REM_ACCESS_ERR,
			      "the responder NAKed remote access error");
	struct srn_diag_log_entry e;
	CHECK(atomic_load(&ro->dev_log.head) == dev_head + 1 &&
		      srn_diag_entry_read(ro->dev_log.e, SRN_DIAG_DEV_LOG_ENTRIES, dev_head, &e) == 0,
	      "explanation not in the device log");
	const char *want = "REM_ACCESS_ERR: RDMA_WRITE wr_id 0x2a PSN 0x00000c-0x00000d rkey 0x5678 "
			   "va 0x1000 len 8192 to QP 0x000456 at 127.0.0.2: the responder NAKed "
			   "remote access error";
	CHECK(!strcmp(e.msg, want), "explanation\n  got  '%s'\n  want '%s'", e.msg, want);
	CHECK(e.level == SRN_LOG_ERROR && e.qpn == 0xabc123, "level/qpn");
	CHECK(q->cnt[SRN_QPC_ERR_COMPLETIONS] == 1, "error_completions");
	srn_diag_explain_recv(oqp, qp, 0x77, IBV_WC_LOC_LEN_ERR, "message of %u bytes, buffer %u",
			      100u, 64u);
	CHECK(srn_diag_entry_read(ro->dev_log.e, SRN_DIAG_DEV_LOG_ENTRIES, dev_head + 1, &e) == 0 &&
		      !strcmp(e.msg, "LOC_LEN_ERR: RECV wr_id 0x77 from QP 0x000456 at 127.0.0.2: "
				     "message of 100 bytes, buffer 64"),
	      "recv explanation '%s'", e.msg);
	CHECK(!strcmp(srn_diag_wc_status_name(IBV_WC_RNR_RETRY_EXC_ERR), "RNR_RETRY_EXC_ERR") &&
		      !strcmp(srn_diag_wc_status_name((enum ibv_wc_status)99), "UNKNOWN_STATUS"),
	      "status names");

	srn_diag_obj_del(oqp);
	srn_diag_obj_del(omr);
	srn_diag_obj_del(opd);
	free(qp);
}

/* ---- fork and stderr ---------------------------------------------------- */

static void test_fork_child_exit(const struct srn_diag_seg *ro)
{
	char path[256];
	seg_path("testdev", path, sizeof(path));
	pid_t c = fork();
	if (c == 0)
		exit(0);   /* runs the library's exit hook */
	int st;
	waitpid(c, &st, 0);
	CHECK(atomic_load(&ro->hdr.closed) == 0 && access(path, F_OK) == 0,
	      "a child's exit closed the parent's segment (closed %u)", atomic_load(&ro->hdr.closed));
}

static void test_stderr_echo(void)
{
	int p[2];
	if (pipe(p))
		return;
	pid_t c = fork();
	if (c == 0) {
		char err[256];
		dup2(p[1], STDERR_FILENO);
		close(p[0]);
		setenv("SOFTRNIC_LOG", "warn", 1);
		setenv("SOFTRNIC_DIAG", "0", 1);
		struct srn_diag *d = srn_diag_create("echodev", gid5, err, sizeof(err));
		struct srn_diag_obj *o = srn_diag_obj_add(d, SRN_DIAG_QP, NULL);
		srn_diag_obj_begin(o);
		SRN_DIAG_SET(o->s->qp.qpn, 0x42u);
		srn_diag_obj_end(o);
		srn_diag_log(o, SRN_LOG_INFO, "quiet");
		for (int i = 0; i < 30; i++)
			srn_diag_log(o, SRN_LOG_ERROR, "boom %d", i);
		_exit(0);
	}
	close(p[1]);
	char buf[8192];
	size_t len = 0;
	ssize_t n;
	while (len < sizeof(buf) - 1 && (n = read(p[0], buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	close(p[0]);
	waitpid(c, NULL, 0);
	int lines = 0;
	for (char *s = buf; (s = strstr(s, "softrnic: echodev qp 0x000042: error: boom ")); s++)
		lines++;
	CHECK(strstr(buf, "softrnic: echodev qp 0x000042: error: boom 0\n") != NULL,
	      "echo format: '%s'", buf);
	CHECK(!strstr(buf, "quiet"), "info printed at warn");
	CHECK(lines >= 20 && lines <= 22, "burst limit: %d lines", lines);
}

/* ---- close, keep, replace, private ------------------------------------- */

static void test_close(struct srn_diag *d, const struct srn_diag_seg *ro)
{
	char path[256], err[256];
	seg_path("testdev", path, sizeof(path));
	srn_diag_close(d);   /* errors were logged: the file stays */
	CHECK(atomic_load(&ro->hdr.closed) == 1, "closed flag %u", atomic_load(&ro->hdr.closed));
	CHECK(access(path, F_OK) == 0, "file with errors removed at close");

	/* Same device again in this process: the closed file is replaced. */
	struct srn_diag *d2 = srn_diag_create("testdev", gid5, err, sizeof(err));
	CHECK(d2 && srn_diag_is_shared(d2), "re-create: %s", err);
	const struct srn_diag_seg *ro2 = map_ro(path);
	CHECK(ro2 && ro2->hdr.closed == 0 && atomic_load(&ro2->counters.v[SRN_CNT_SENT_PKTS]) == 0,
	      "re-created segment not fresh");
	srn_diag_close(d2);   /* no errors: removed */
	CHECK(access(path, F_OK) != 0, "file without errors kept at close");
	if (ro2)
		munmap((void *)ro2, sizeof(*ro2));

	setenv("SOFTRNIC_DIAG_KEEP", "1", 1);
	d2 = srn_diag_create("keepdev", gid5, err, sizeof(err));
	srn_diag_close(d2);
	seg_path("keepdev", path, sizeof(path));
	CHECK(access(path, F_OK) == 0, "SOFTRNIC_DIAG_KEEP=1 did not keep the file");
	unlink(path);
	unsetenv("SOFTRNIC_DIAG_KEEP");

	setenv("SOFTRNIC_DIAG", "0", 1);
	d2 = srn_diag_create("privdev", gid5, err, sizeof(err));
	seg_path("privdev", path, sizeof(path));
	CHECK(d2 && !srn_diag_is_shared(d2) && access(path, F_OK) != 0, "SOFTRNIC_DIAG=0 made a file");
	if (d2) {
		srn_count(srn_diag_counters(d2), SRN_CNT_RCVD_PKTS, 3);
		struct srn_diag_obj *o = srn_diag_obj_add(d2, SRN_DIAG_QP, NULL);
		srn_diag_log(o, SRN_LOG_ERROR, "private");
		srn_diag_obj_del(o);
		srn_diag_close(d2);
	}
	unsetenv("SOFTRNIC_DIAG");

	/* An unusable directory: private fallback, err says why. */
	setenv(SRN_DIAG_DIR_ENV, "/nonexistent/softrnic-diag", 1);
	d2 = srn_diag_create("nodir", gid5, err, sizeof(err));
	CHECK(d2 && !srn_diag_is_shared(d2) && strstr(err, "/nonexistent/") != NULL,
	      "fallback: '%s'", err);
	srn_diag_close(d2);
	setenv(SRN_DIAG_DIR_ENV, dir, 1);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/srn-diag-test-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	setenv(SRN_DIAG_DIR_ENV, dir, 1);
	unsetenv("SOFTRNIC_DIAG");
	unsetenv("SOFTRNIC_DIAG_KEEP");
	unsetenv("SOFTRNIC_LOG");

	/* First: the child must not inherit a threshold this process has
	 * already read (it is parsed once). */
	test_stderr_echo();

	char err[256];
	struct srn_diag *d = srn_diag_create("testdev", gid5, err, sizeof(err));
	if (!d) {
		fprintf(stderr, "srn_diag_create: %s\n", err);
		return 1;
	}
	const struct srn_diag_seg *ro = NULL;
	test_file_and_counters(d, &ro);
	if (ro) {
		test_seqlock(d);
		test_logs(d, ro);
		test_table_full(d, ro);
		test_snapshots(d, ro);
		test_fork_child_exit(ro);
		test_close(d, ro);
		munmap((void *)ro, sizeof(*ro));
	} else {
		srn_diag_close(d);
	}

	/* Remove what is left of the directory. */
	DIR *dp = opendir(dir);
	struct dirent *de;
	while (dp && (de = readdir(dp))) {
		char p[512];
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		unlink(p);
	}
	if (dp)
		closedir(dp);
	rmdir(dir);
	if (srn_check_failures)
		fprintf(stderr, "%d check(s) failed\n", srn_check_failures);
	return srn_check_failures ? 1 : 0;
}
