/*
 * test_wr_api_packets - the extended work-request API (ibv_create_qp_ex +
 * ibv_wr_*) and the classic ibv_post_send put identical packets on the
 * wire for the same work (issue 4).
 *
 * One process, one loopback device traced with SOFTRNIC_PCAP.  Pair A
 * (ibv_create_qp, ibv_post_send) and pair B (ibv_create_qp_ex, ibv_wr_*)
 * each connect qa -> qb with the same PSNs and path MTU and run the same
 * list of work one request at a time (SENDs of 0..3000 bytes over 0-3
 * SGEs, SEND with immediate and solicited, inline SENDs, RDMA WRITE with
 * and without immediate, inline WRITE, RDMA READ, CAS hit and miss, FAA),
 * with identical wr_ids, flags, remote addresses and payload bytes.  Local
 * buffers differ per pair (so lkeys differ, which never reach the wire);
 * the remote target is ONE memory region used by both pairs (so rkeys and
 * addresses in RETH/AtomicETH are identical), reset to the same content
 * before each pair runs.  Every completion and every byte landed is
 * checked.
 *
 * Then the trace: frames are split by BTH DestQP into four streams
 * (requests and responses of each pair).  Loopback traces every packet
 * twice (sent and received, same bytes), so each stream is reduced to its
 * distinct packets in order of first appearance; every packet must have
 * been seen exactly twice.  The requests of A and B, and the responses of
 * A and B, must then agree packet by packet in count, length and every
 * UDP payload byte except DestQP (BTH bytes 5-7) and the ICRC (last 4
 * bytes, which covers DestQP).  The first difference is reported with the
 * header field it falls in.
 *
 * Work is serialised (each request completes before the next is posted)
 * so ACK coalescing cannot differ between the pairs by timing; the ACK
 * timeout is long (timeout 20, ~4 s) so a slow machine does not produce a
 * retransmission in one pair only.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "pcap_read.h"
#include "rc_test_conn.h"
#include "diag/clock.h"


#define MTU_ENUM IBV_MTU_1024
#define MTU 1024u
#define PSN 0xfffff0u          /* the message sequence crosses the 24-bit wrap */
#define SLOT 8192u             /* local/receive buffer per job */
#define TGT_SZ 65536u
#define ROCE_PORT 4791
#define MAX_FRAMES 4096

/* ---- the work list ----------------------------------------------------- */

struct job {
	const char *what;
	enum ibv_wr_opcode op;
	unsigned flags;         /* IBV_SEND_*; INLINE means inline data */
	int nsge;
	uint32_t len[3];
	uint32_t imm;
	uint32_t tgt_off;       /* WRITE/READ/atomic offset in the target MR */
	uint64_t cmp, swap;     /* CAS: compare, swap; FAA: cmp is the addend */
};

#define SIG IBV_SEND_SIGNALED
#define CAS_OFF 32768u
#define FAA_OFF 32776u
#define CAS_INIT 0x1111222233334444ull
#define FAA_INIT 0x00000000fffffff0ull

static const struct job jobs[] = {
	{ .what = "SEND 0 B, no SGE", .op = IBV_WR_SEND, .flags = SIG },
	{ .what = "SEND 0 B, one empty SGE", .op = IBV_WR_SEND, .flags = SIG, .nsge = 1 },
	{ .what = "SEND 1 B, unsignaled", .op = IBV_WR_SEND, .nsge = 1, .len = { 1 } },
	{ .what = "SEND 100 B, 2 SGEs", .op = IBV_WR_SEND, .flags = SIG, .nsge = 2,
	  .len = { 37, 63 } },
	{ .what = "SEND 3000 B, 3 SGEs", .op = IBV_WR_SEND, .flags = SIG, .nsge = 3,
	  .len = { 1000, 1024, 976 } },
	{ .what = "SEND_WITH_IMM 200 B, solicited", .op = IBV_WR_SEND_WITH_IMM,
	  .flags = SIG | IBV_SEND_SOLICITED, .nsge = 1, .len = { 200 }, .imm = 0xa1b2c3d4 },
	{ .what = "SEND_WITH_IMM 2048 B, 2 SGEs", .op = IBV_WR_SEND_WITH_IMM, .flags = SIG,
	  .nsge = 2, .len = { 1500, 548 }, .imm = 0x01020304 },
	{ .what = "SEND inline 60 B", .op = IBV_WR_SEND, .flags = SIG | IBV_SEND_INLINE, .nsge = 1,
	  .len = { 60 } },
	{ .what = "SEND inline 20+40 B", .op = IBV_WR_SEND, .flags = SIG | IBV_SEND_INLINE,
	  .nsge = 2, .len = { 20, 40 } },
	{ .what = "RDMA WRITE 5000 B, 2 SGEs", .op = IBV_WR_RDMA_WRITE, .flags = SIG, .nsge = 2,
	  .len = { 3000, 2000 } },
	{ .what = "RDMA WRITE_WITH_IMM 1500 B, solicited", .op = IBV_WR_RDMA_WRITE_WITH_IMM,
	  .flags = SIG | IBV_SEND_SOLICITED, .nsge = 1, .len = { 1500 }, .imm = 0xdeadbeef,
	  .tgt_off = 8192 },
	{ .what = "RDMA WRITE_WITH_IMM 0 B", .op = IBV_WR_RDMA_WRITE_WITH_IMM, .flags = SIG,
	  .imm = 0x55aa55aa, .tgt_off = 10240 },
	{ .what = "RDMA WRITE inline 40 B", .op = IBV_WR_RDMA_WRITE, .flags = SIG | IBV_SEND_INLINE,
	  .nsge = 1, .len = { 40 }, .tgt_off = 12288 },
	{ .what = "RDMA READ 2500 B, 3 SGEs", .op = IBV_WR_RDMA_READ, .flags = SIG, .nsge = 3,
	  .len = { 1000, 1000, 500 }, .tgt_off = 16384 },
	{ .what = "CAS hit", .op = IBV_WR_ATOMIC_CMP_AND_SWP, .flags = SIG, .nsge = 1, .len = { 8 },
	  .tgt_off = CAS_OFF, .cmp = CAS_INIT, .swap = 0x5555666677778888ull },
	{ .what = "CAS miss", .op = IBV_WR_ATOMIC_CMP_AND_SWP, .flags = SIG, .nsge = 1,
	  .len = { 8 }, .tgt_off = CAS_OFF, .cmp = CAS_INIT, .swap = 0x99 },
	{ .what = "FAA +0x20, fenced", .op = IBV_WR_ATOMIC_FETCH_AND_ADD,
	  .flags = SIG | IBV_SEND_FENCE, .nsge = 1, .len = { 8 }, .tgt_off = FAA_OFF, .cmp = 0x20 },
};
#define NJOBS (int)(sizeof(jobs) / sizeof(jobs[0]))

static uint32_t job_len(const struct job *j)
{
	uint32_t t = 0;
	for (int i = 0; i < j->nsge; i++)
		t += j->len[i];
	return t;
}

static bool job_recv(const struct job *j)
{
	return j->op == IBV_WR_SEND || j->op == IBV_WR_SEND_WITH_IMM ||
	       j->op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

static bool job_atomic(const struct job *j)
{
	return j->op == IBV_WR_ATOMIC_CMP_AND_SWP || j->op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* ---- verbs objects ----------------------------------------------------- */

struct pair {
	const char *name;
	bool ex;
	struct ibv_qp *qa, *qb;
	struct ibv_qp_ex *x;
	uint8_t *src, *dst;     /* NJOBS slots each */
	struct ibv_mr *src_mr, *dst_mr;
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq_a, *cq_b;
static union ibv_gid gid;
static uint8_t *tgt;
static struct ibv_mr *tgt_mr;

static const struct ibv_qp_cap qcap = { .max_send_wr = 32, .max_recv_wr = 32, .max_send_sge = 3,
					 .max_recv_sge = 1, .max_inline_data = 64 };

static struct ibv_qp *make_qp(bool ex, struct ibv_qp_ex **x)
{
	struct ibv_qp *qp;
	if (ex) {
		struct ibv_qp_init_attr_ex ia = {
			.send_cq = cq_a, .recv_cq = cq_b, .qp_type = IBV_QPT_RC, .cap = qcap,
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
			.pd = pd,
			.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
					  IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
					  IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
					  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
		};
		qp = ibv_create_qp_ex(ctx, &ia);
		CHECK(qp);
		CHECK(ia.cap.max_inline_data >= 64 && ia.cap.max_send_sge >= 3);
		*x = ibv_qp_to_qp_ex(qp);
		CHECK(*x);
	} else {
		struct ibv_qp_init_attr ia = { .send_cq = cq_a, .recv_cq = cq_b, .qp_type = IBV_QPT_RC,
					       .cap = qcap };
		qp = ibv_create_qp(pd, &ia);
		CHECK(qp);
		CHECK(ia.cap.max_inline_data >= 64 && ia.cap.max_send_sge >= 3);
	}
	return qp;
}

static void connect_qp(struct ibv_qp *qp, uint32_t dest)
{
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	o.mtu = MTU_ENUM;
	o.timeout = 20;
	o.min_rnr_timer = 12;
	o.rd_atomic = 4;
	srn_tc_connect(qp, &gid, dest, PSN, PSN, &o);
}

static void fill(uint8_t *p, uint32_t len, uint32_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
}

static void setup_pair(struct pair *p)
{
	size_t sz = (size_t)NJOBS * SLOT;
	p->src = malloc(sz);
	p->dst = malloc(sz);
	CHECK(p->src && p->dst);
	fill(p->src, (uint32_t)sz, 3);    /* identical in both pairs */
	memset(p->dst, 0xee, sz);
	p->src_mr = ibv_reg_mr(pd, p->src, sz, IBV_ACCESS_LOCAL_WRITE);
	p->dst_mr = ibv_reg_mr(pd, p->dst, sz, IBV_ACCESS_LOCAL_WRITE);
	CHECK(p->src_mr && p->dst_mr);
	p->qa = make_qp(p->ex, &p->x);
	p->qb = make_qp(false, NULL);
	connect_qp(p->qa, p->qb->qp_num);
	connect_qp(p->qb, p->qa->qp_num);
}

static void teardown_pair(struct pair *p)
{
	CHECK(ibv_destroy_qp(p->qa) == 0);
	CHECK(ibv_destroy_qp(p->qb) == 0);
	CHECK(ibv_dereg_mr(p->src_mr) == 0);
	CHECK(ibv_dereg_mr(p->dst_mr) == 0);
	free(p->src);
	free(p->dst);
}

/* The target region both pairs write, read and update: same content before
 * each pair runs, so READ responses and atomic originals agree. */
static void reset_target(void)
{
	fill(tgt, TGT_SZ, 77);
	uint64_t c = CAS_INIT, f = FAA_INIT;
	memcpy(tgt + CAS_OFF, &c, 8);
	memcpy(tgt + FAA_OFF, &f, 8);
}

/* Poll until one completion arrives (bounded: 10 s). */
static struct ibv_wc poll_one(struct ibv_cq *cq, const char *what)
{
	struct ibv_wc wc;
	uint64_t end = srn_now_ns() + 10000000000ull;
	for (;;) {
		int n = ibv_poll_cq(cq, 1, &wc);
		CHECK(n >= 0);
		if (n == 1)
			return wc;
		if (srn_now_ns() >= end) {
			fprintf(stderr, "%s: no completion in 10 s\n", what);
			exit(1);
		}
	}
}

/* SGE i of job j: inside slot j, 16 bytes apart so no two are adjacent. */
static void job_sges(const struct pair *p, int j, struct ibv_sge *s)
{
	uint64_t a = (uintptr_t)p->src + (size_t)j * SLOT;
	for (int i = 0; i < jobs[j].nsge; i++) {
		s[i] = (struct ibv_sge){ a, jobs[j].len[i], p->src_mr->lkey };
		a += jobs[j].len[i] + 16;
	}
}

static void post_classic(struct pair *p, int j, const struct ibv_sge *s)
{
	const struct job *jb = &jobs[j];
	struct ibv_send_wr wr = { .wr_id = 0x1000 + (uint64_t)j, .sg_list = (struct ibv_sge *)s,
				  .num_sge = jb->nsge, .opcode = jb->op, .send_flags = jb->flags,
				  .imm_data = htobe32(jb->imm) }, *bad = NULL;
	if (job_atomic(jb)) {
		wr.wr.atomic.remote_addr = (uintptr_t)tgt + jb->tgt_off;
		wr.wr.atomic.rkey = tgt_mr->rkey;
		wr.wr.atomic.compare_add = jb->cmp;
		wr.wr.atomic.swap = jb->swap;
	} else {
		wr.wr.rdma.remote_addr = (uintptr_t)tgt + jb->tgt_off;
		wr.wr.rdma.rkey = tgt_mr->rkey;
	}
	int r = ibv_post_send(p->qa, &wr, &bad);
	if (r)
		fprintf(stderr, "%s: ibv_post_send: %s\n", jb->what, strerror(r));
	CHECK(r == 0);
}

static void post_ex(struct pair *p, int j, const struct ibv_sge *s)
{
	const struct job *jb = &jobs[j];
	struct ibv_qp_ex *x = p->x;
	uint64_t raddr = (uintptr_t)tgt + jb->tgt_off;
	ibv_wr_start(x);
	x->wr_id = 0x1000 + (uint64_t)j;
	x->wr_flags = jb->flags & ~(unsigned)IBV_SEND_INLINE;   /* inline = set_inline_data */
	switch (jb->op) {
	case IBV_WR_SEND: ibv_wr_send(x); break;
	case IBV_WR_SEND_WITH_IMM: ibv_wr_send_imm(x, htobe32(jb->imm)); break;
	case IBV_WR_RDMA_WRITE: ibv_wr_rdma_write(x, tgt_mr->rkey, raddr); break;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		ibv_wr_rdma_write_imm(x, tgt_mr->rkey, raddr, htobe32(jb->imm));
		break;
	case IBV_WR_RDMA_READ: ibv_wr_rdma_read(x, tgt_mr->rkey, raddr); break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		ibv_wr_atomic_cmp_swp(x, tgt_mr->rkey, raddr, jb->cmp, jb->swap);
		break;
	case IBV_WR_ATOMIC_FETCH_AND_ADD: ibv_wr_atomic_fetch_add(x, tgt_mr->rkey, raddr, jb->cmp); break;
	default: CHECK(!"opcode");
	}
	if (jb->flags & IBV_SEND_INLINE) {
		struct ibv_data_buf b[3];
		for (int i = 0; i < jb->nsge; i++)
			b[i] = (struct ibv_data_buf){ (void *)(uintptr_t)s[i].addr, s[i].length };
		if (jb->nsge == 1)
			ibv_wr_set_inline_data(x, b[0].addr, b[0].length);
		else
			ibv_wr_set_inline_data_list(x, (size_t)jb->nsge, b);
	} else if (jb->nsge == 1) {
		ibv_wr_set_sge(x, s[0].lkey, s[0].addr, s[0].length);
	} else {
		ibv_wr_set_sge_list(x, (size_t)jb->nsge, s);
	}
	int r = ibv_wr_complete(x);
	if (r)
		fprintf(stderr, "%s: ibv_wr_complete: %s\n", jb->what, strerror(r));
	CHECK(r == 0);
}

/* Gather what job j sends (or expects back, for READ) into one buffer. */
static void gather(const struct ibv_sge *s, int n, uint8_t *out)
{
	for (int i = 0; i < n; i++) {
		memcpy(out, (const void *)(uintptr_t)s[i].addr, s[i].length);
		out += s[i].length;
	}
}

static void run_job(struct pair *p, int j)
{
	const struct job *jb = &jobs[j];
	uint32_t len = job_len(jb);
	struct ibv_sge s[3];
	uint8_t want[SLOT];
	job_sges(p, j, s);
	if (jb->op == IBV_WR_RDMA_READ)
		for (int i = 0; i < jb->nsge; i++)
			memset((void *)(uintptr_t)s[i].addr, 0, s[i].length);
	else
		gather(s, jb->nsge, want);
	uint64_t tgt_before = 0;
	if (job_atomic(jb))
		memcpy(&tgt_before, tgt + jb->tgt_off, 8);

	if (job_recv(jb)) {
		struct ibv_sge rs = { (uintptr_t)p->dst + (size_t)j * SLOT, SLOT, p->dst_mr->lkey };
		struct ibv_recv_wr rw = { .wr_id = 0x2000 + (uint64_t)j, .sg_list = &rs, .num_sge = 1 },
				   *rbad;
		CHECK(ibv_post_recv(p->qb, &rw, &rbad) == 0);
	}
	if (p->ex)
		post_ex(p, j, s);
	else
		post_classic(p, j, s);

	char what[160];
	snprintf(what, sizeof(what), "pair %s, job %d (%s)", p->name, j, jb->what);
	if (job_recv(jb)) {
		struct ibv_wc w = poll_one(cq_b, what);
		bool imm = jb->op != IBV_WR_SEND;
		if (w.status != IBV_WC_SUCCESS)
			fprintf(stderr, "%s: receive: %s\n", what, ibv_wc_status_str(w.status));
		CHECK(w.status == IBV_WC_SUCCESS);
		CHECK(w.wr_id == 0x2000 + (uint64_t)j && w.qp_num == p->qb->qp_num);
		CHECK(w.src_qp == p->qa->qp_num);
		CHECK(w.opcode == (jb->op == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RECV_RDMA_WITH_IMM
									 : IBV_WC_RECV));
		CHECK(w.byte_len == len);
		CHECK(!!(w.wc_flags & IBV_WC_WITH_IMM) == imm);
		if (imm)
			CHECK(w.imm_data == htobe32(jb->imm));
		if (jb->op != IBV_WR_RDMA_WRITE_WITH_IMM) {
			CHECK(memcmp(p->dst + (size_t)j * SLOT, want, len) == 0);
			CHECK(p->dst[(size_t)j * SLOT + len] == 0xee);
		}
	}
	if (jb->flags & IBV_SEND_SIGNALED) {
		struct ibv_wc w = poll_one(cq_a, what);
		if (w.status != IBV_WC_SUCCESS)
			fprintf(stderr, "%s: %s\n", what, ibv_wc_status_str(w.status));
		CHECK(w.status == IBV_WC_SUCCESS);
		CHECK(w.wr_id == 0x1000 + (uint64_t)j && w.qp_num == p->qa->qp_num);
		enum ibv_wc_opcode op = IBV_WC_SEND;
		switch (jb->op) {
		case IBV_WR_RDMA_WRITE:
		case IBV_WR_RDMA_WRITE_WITH_IMM: op = IBV_WC_RDMA_WRITE; break;
		case IBV_WR_RDMA_READ: op = IBV_WC_RDMA_READ; break;
		case IBV_WR_ATOMIC_CMP_AND_SWP: op = IBV_WC_COMP_SWAP; break;
		case IBV_WR_ATOMIC_FETCH_AND_ADD: op = IBV_WC_FETCH_ADD; break;
		default: break;
		}
		CHECK(w.opcode == op);
		if (jb->op == IBV_WR_RDMA_READ || job_atomic(jb))
			CHECK(w.byte_len == len);
	}
	if (jb->op == IBV_WR_RDMA_WRITE || jb->op == IBV_WR_RDMA_WRITE_WITH_IMM)
		CHECK(memcmp(tgt + jb->tgt_off, want, len) == 0);
	if (jb->op == IBV_WR_RDMA_READ) {
		gather(s, jb->nsge, want);
		CHECK(memcmp(want, tgt + jb->tgt_off, len) == 0);
	}
	if (job_atomic(jb)) {
		uint64_t orig, now;
		memcpy(&orig, (void *)(uintptr_t)s[0].addr, 8);
		memcpy(&now, tgt + jb->tgt_off, 8);
		CHECK(orig == tgt_before);
		if (jb->op == IBV_WR_ATOMIC_FETCH_AND_ADD)
			CHECK(now == tgt_before + jb->cmp);
		else
			CHECK(now == (tgt_before == jb->cmp ? jb->swap : tgt_before));
	}
}

static void run_pair(struct pair *p)
{
	reset_target();
	setup_pair(p);
	for (int j = 0; j < NJOBS; j++)
		run_job(p, j);
	struct ibv_wc w;
	CHECK(ibv_poll_cq(cq_a, 1, &w) == 0 && ibv_poll_cq(cq_b, 1, &w) == 0);
}

/* ---- the trace --------------------------------------------------------- */

struct frame {
	uint8_t *d;             /* UDP payload: BTH .. ICRC */
	uint32_t len;
	int seen;               /* copies in the trace */
};

struct stream {
	const char *name;
	uint32_t qpn;           /* BTH DestQP of its packets */
	struct frame f[MAX_FRAMES];
	int n;
};

/* The RoCEv2 UDP payload of an Ethernet frame, or NULL. */
static const uint8_t *udp_payload(const uint8_t *fr, uint32_t len, uint32_t *plen)
{
	if (len < 14)
		return NULL;
	uint16_t et = (uint16_t)(fr[12] << 8 | fr[13]);
	uint32_t off;
	if (et == 0x0800 && len >= 14 + 20 && fr[14 + 9] == 17)
		off = 14 + (uint32_t)(fr[14] & 15) * 4;
	else if (et == 0x86dd && len >= 14 + 40 && fr[14 + 6] == 17)
		off = 14 + 40;
	else
		return NULL;
	if (len < off + 8 || (fr[off + 2] << 8 | fr[off + 3]) != ROCE_PORT)
		return NULL;
	uint32_t ulen = (uint32_t)(fr[off + 4] << 8 | fr[off + 5]);
	if (ulen < 8 + 12 + 4 || off + ulen > len)
		return NULL;
	*plen = ulen - 8;
	return fr + off + 8;
}

/* A copy of an unmatched packet already in the stream is the other trace
 * record of it (sent / received); anything else is a new packet. */
static void stream_add(struct stream *s, const uint8_t *d, uint32_t len)
{
	for (int i = 0; i < s->n; i++)
		if (s->f[i].seen == 1 && s->f[i].len == len && memcmp(s->f[i].d, d, len) == 0) {
			s->f[i].seen = 2;
			return;
		}
	CHECK(s->n < MAX_FRAMES);
	s->f[s->n].d = malloc(len);
	CHECK(s->f[s->n].d);
	memcpy(s->f[s->n].d, d, len);
	s->f[s->n].len = len;
	s->f[s->n].seen = 1;
	s->n++;
}

static uint32_t psn_of(const uint8_t *d)
{
	return (uint32_t)(d[9] << 16 | d[10] << 8 | d[11]);
}

static const char *op_name(uint8_t op)
{
	static const char *const rc[] = {
		"SEND_FIRST", "SEND_MIDDLE", "SEND_LAST", "SEND_LAST_IMM", "SEND_ONLY",
		"SEND_ONLY_IMM", "WRITE_FIRST", "WRITE_MIDDLE", "WRITE_LAST", "WRITE_LAST_IMM",
		"WRITE_ONLY", "WRITE_ONLY_IMM", "READ_REQUEST", "READ_RESP_FIRST",
		"READ_RESP_MIDDLE", "READ_RESP_LAST", "READ_RESP_ONLY", "ACK", "ATOMIC_ACK",
		"CMP_SWAP", "FETCH_ADD", "op21", "SEND_LAST_INV", "SEND_ONLY_INV",
	};
	if (op >> 5 == 0 && op < sizeof(rc) / sizeof(rc[0]))
		return rc[op];
	return "non-RC opcode";
}

/* Which header field byte off of an RC packet falls in. */
static void field_name(const uint8_t *d, uint32_t len, uint32_t off, char *out, size_t n)
{
	static const char *const bth[12] = { "BTH OpCode", "BTH SE/M/PadCnt/TVer", "BTH P_Key",
		"BTH P_Key", "BTH FECN/BECN/Resv6", "BTH DestQP", "BTH DestQP", "BTH DestQP",
		"BTH AckReq/Resv7", "BTH PSN", "BTH PSN", "BTH PSN" };
	if (off < 12) {
		snprintf(out, n, "%s", bth[off]);
		return;
	}
	uint8_t op = d[0];
	/* extended headers in order: R=RETH(16) A=AETH(4) I=ImmDt(4)
	 * X=AtomicETH(28) K=AtomicAckETH(8) V=IETH(4) */
	static const char *const ext[] = { "", "", "", "I", "", "I", "R", "", "", "I", "R", "RI",
					   "R", "A", "", "A", "A", "A", "AK", "X", "X", "", "V", "V" };
	const char *e = op < sizeof(ext) / sizeof(ext[0]) ? ext[op] : "";
	uint32_t at = 12;
	for (; *e; e++) {
		uint32_t hl = *e == 'R' ? 16 : *e == 'X' ? 28 : *e == 'K' ? 8 : 4;
		if (off < at + hl) {
			uint32_t k = off - at;
			const char *f = "?";
			switch (*e) {
			case 'R': f = k < 8 ? "RETH VA" : k < 12 ? "RETH R_Key" : "RETH DMA Length"; break;
			case 'A': f = k == 0 ? "AETH Syndrome" : "AETH MSN"; break;
			case 'I': f = "ImmDt"; break;
			case 'X': f = k < 8 ? "AtomicETH VA" : k < 12 ? "AtomicETH R_Key" :
				      k < 20 ? "AtomicETH Swap/Add" : "AtomicETH Compare"; break;
			case 'K': f = "AtomicAckETH Original"; break;
			case 'V': f = "IETH R_Key"; break;
			}
			snprintf(out, n, "%s (byte %u of it)", f, k);
			return;
		}
		at += hl;
	}
	uint32_t pad = (d[1] >> 4) & 3;
	if (off + 4 + pad >= len)
		snprintf(out, n, "pad");
	else
		snprintf(out, n, "payload byte %u", off - at);
}

static void dump(const char *who, const uint8_t *d, uint32_t len, uint32_t off)
{
	uint32_t a = off >= 8 ? off - 8 : 0, b = off + 8 < len ? off + 8 : len;
	fprintf(stderr, "  %s [%u..%u):", who, a, b);
	for (uint32_t i = a; i < b; i++)
		fprintf(stderr, i == off ? " [%02x]" : " %02x", d[i]);
	fprintf(stderr, "\n");
}

/* 0 when streams a and b agree except DestQP and ICRC; else reports the
 * first difference. */
static int compare_streams(const struct stream *a, const struct stream *b, const char *what)
{
	int n = a->n < b->n ? a->n : b->n;
	for (int i = 0; i < n; i++) {
		const struct frame *x = &a->f[i], *y = &b->f[i];
		uint32_t diff = UINT32_MAX;
		if (x->len != y->len) {
			diff = 0;
			while (diff < x->len && diff < y->len && x->d[diff] == y->d[diff])
				diff++;
		} else {
			for (uint32_t k = 0; k < x->len - 4; k++)
				if ((k < 5 || k > 7) && x->d[k] != y->d[k]) {
					diff = k;
					break;
				}
		}
		if (diff == UINT32_MAX)
			continue;
		char fld[64] = "";
		if (diff < x->len)
			field_name(x->d, x->len, diff, fld, sizeof(fld));
		fprintf(stderr, "FAIL: %s differ at packet %d: %s %s PSN %#x (%u B) vs %s %s PSN %#x "
			"(%u B); first differing byte %u of the UDP payload: %s\n", what, i, a->name,
			op_name(x->d[0]), psn_of(x->d), x->len, b->name, op_name(y->d[0]),
			psn_of(y->d), y->len, diff, fld);
		if (diff < x->len)
			dump(a->name, x->d, x->len, diff);
		if (diff < y->len)
			dump(b->name, y->d, y->len, diff);
		return 1;
	}
	if (a->n != b->n) {
		const struct stream *l = a->n > b->n ? a : b;
		fprintf(stderr, "FAIL: %s: %s has %d packets, %s has %d; the first extra one is %s "
			"PSN %#x\n", what, a->name, a->n, b->name, b->n, op_name(l->f[n].d[0]),
			psn_of(l->f[n].d));
		return 1;
	}
	return 0;
}

/* The packets the work list must make: requests, and responses (one ACK
 * per message, read response packets, one atomic ACK per atomic). */
static void expected_packets(int *req, int *resp)
{
	*req = *resp = 0;
	for (int j = 0; j < NJOBS; j++) {
		uint32_t len = job_len(&jobs[j]);
		int pk = len ? (int)((len + MTU - 1) / MTU) : 1;
		if (jobs[j].op == IBV_WR_RDMA_READ) {
			*req += 1;
			*resp += pk;
		} else {
			*req += pk;
			*resp += 1;
		}
	}
}

static int check_trace(const char *path, struct stream *st, int nst)
{
	struct pcap_reader r;
	if (pcap_open_read(&r, path)) {
		fprintf(stderr, "FAIL: %s is missing or not a pcap\n", path);
		return 1;
	}
	CHECK(r.linktype == 1);
	static uint8_t fr[262144];
	uint32_t len;
	int rc, frames = 0, fail = 0;
	while ((rc = pcap_next_frame(&r, fr, sizeof(fr), &len)) == 1) {
		frames++;
		uint32_t plen;
		const uint8_t *d = udp_payload(fr, len, &plen);
		if (!d) {
			fprintf(stderr, "FAIL: frame %d is not RoCEv2 over UDP\n", frames);
			fail = 1;
			continue;
		}
		uint32_t qpn = (uint32_t)(d[5] << 16 | d[6] << 8 | d[7]);
		int s;
		for (s = 0; s < nst && st[s].qpn != qpn; s++)
			;
		if (s == nst) {
			fprintf(stderr, "FAIL: frame %d (%s) to QP %#x, not one of the test's\n", frames,
				op_name(d[0]), qpn);
			fail = 1;
			continue;
		}
		stream_add(&st[s], d, plen);
	}
	pcap_close_read(&r);
	if (rc < 0) {
		fprintf(stderr, "FAIL: torn record after frame %d\n", frames);
		fail = 1;
	}
	int want_req, want_resp;
	expected_packets(&want_req, &want_resp);
	for (int s = 0; s < nst; s++) {
		int once = 0;
		for (int i = 0; i < st[s].n; i++)
			once += st[s].f[i].seen != 2;
		int want = s % 2 == 0 ? want_req : want_resp;
		printf("%s (QP %#x): %d packets, want %d\n", st[s].name, st[s].qpn, st[s].n, want);
		if (once) {
			fprintf(stderr, "FAIL: %s: %d packets traced once, not sent and received\n",
				st[s].name, once);
			fail = 1;
		}
		if (st[s].n != want) {
			fprintf(stderr, "FAIL: %s: %d packets, the work makes %d\n", st[s].name,
				st[s].n, want);
			fail = 1;
		}
	}
	printf("%d frames in the trace\n", frames);
	fail |= compare_streams(&st[0], &st[2], "requests (classic vs wr API)");
	fail |= compare_streams(&st[1], &st[3], "responses (to classic vs to wr API)");
	return fail;
}

int main(void)
{
	char path[] = "/tmp/srn_wr_api_XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	close(fd);
	setenv("SOFTRNIC_PCAP", path, 1);
	setenv("SOFTRNIC_DIAG", "0", 1);
	/* The packets each API makes are the subject: with direct placement
	 * the device's Writes, Reads and atomics to itself would be executed
	 * in place and only recorded, once, by the requester. */
	setenv("SOFTRNIC_DIRECT", "0", 1);

	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n < 1) {
		printf("SKIP: no softrnic device\n");
		unlink(path);
		return 77;
	}
	ctx = ibv_open_device(list[0]);
	CHECK(ctx);
	ibv_free_device_list(list);
	CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0);
	pd = ibv_alloc_pd(ctx);
	cq_a = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	cq_b = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	tgt = aligned_alloc(64, TGT_SZ);
	CHECK(pd && cq_a && cq_b && tgt);
	tgt_mr = ibv_reg_mr(pd, tgt, TGT_SZ, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	CHECK(tgt_mr);

	struct pair a = { .name = "classic", .ex = false }, b = { .name = "wr API", .ex = true };
	run_pair(&a);
	run_pair(&b);
	static struct stream st[4];
	st[0] = (struct stream){ .name = "classic requests", .qpn = a.qb->qp_num };
	st[1] = (struct stream){ .name = "classic responses", .qpn = a.qa->qp_num };
	st[2] = (struct stream){ .name = "wr API requests", .qpn = b.qb->qp_num };
	st[3] = (struct stream){ .name = "wr API responses", .qpn = b.qa->qp_num };
	for (int i = 0; i < 4; i++)
		for (int k = 0; k < i; k++)
			CHECK(st[i].qpn != st[k].qpn);
	teardown_pair(&a);
	teardown_pair(&b);
	CHECK(ibv_dereg_mr(tgt_mr) == 0);
	CHECK(ibv_destroy_cq(cq_a) == 0 && ibv_destroy_cq(cq_b) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);   /* writes out the trace */
	free(tgt);

	int fail = check_trace(path, st, 4);
	for (int i = 0; i < 4; i++)
		for (int k = 0; k < st[i].n; k++)
			free(st[i].f[k].d);
	if (fail) {
		fprintf(stderr, "trace kept in %s\n", path);
		return 1;
	}
	unlink(path);
	printf("ok: %d jobs, classic and wr API packets identical but for DestQP and ICRC\n", NJOBS);
	return 0;
}
