/*
 * test_misaligned_sge - every verb that takes a caller's work requests
 * and scatter lists reads them at any alignment (issue 23).
 *
 * libiscsi packs its structs: the struct ibv_sge arrays it posts are not
 * 8-byte aligned.  softrnic read them as aligned structs, which is
 * undefined behaviour, and the UBSan build aborted in srn_rq_post.  Here
 * every caller-owned struct a verb reads (the work request, its chain,
 * its SGE array, an ibv_data_buf array, a window's bind info) is copied
 * to an address 1, 3, 5 or 7 past a multiple of 8 before the call, and
 * the copies are scribbled over as soon as the call returns (a verb may
 * not keep them).  The data pieces the SGEs name lie at odd addresses
 * too.  Each case checks its completions and every byte that landed:
 *
 *   send      ibv_post_recv and ibv_post_send, chains of two, 3 SGEs each
 *   inline    inline SEND gathered from 3 SGEs
 *   rdma      RDMA WRITE of 2 SGEs, RDMA READ scattered into 3
 *   atomic    CAS and FAA, chained
 *   srq       ibv_post_srq_recv on a basic SRQ
 *   xrc       ibv_post_srq_recv on an XRC SRQ, SEND naming it
 *   ud        UD SEND (AH, QPN, Q_Key in the work request), GRH + 2 SGEs
 *   wr_api    ibv_wr_set_sge_list, ibv_wr_set_inline_data_list
 *   bind_mw   ibv_wr_bind_mw's bind info, IBV_WR_BIND_MW by ibv_post_send
 *
 * (ibv_bind_mw, type 1, is left out: libibverbs' inline ibv_bind_mw reads
 * the bind info in the caller's own code before softrnic sees it.)
 *
 * One process; QPs of one device connected to each other over the
 * loopback device.  Usage: test_misaligned_sge [case]; no case runs all.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "rc_test_conn.h"
#include "common/qp_up.h"

#define MEM (1u << 20)
#define SRC 0u                  /* what is sent, written, swapped */
#define DST (256u << 10)        /* where it lands locally (receives, READ) */
#define TGT (512u << 10)        /* the remote side of WRITE, READ, atomics */
#define WIN (768u << 10)        /* memory windows */
#define GUARD 0xee              /* bytes no operation may touch */
#define TIMEOUT_S 10

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static union ibv_gid gid;
static uint8_t *mem;
static struct ibv_mr *mr;

/* ---- caller structs at odd addresses ---------------------------------- */

static unsigned char arena[16384] __attribute__((aligned(64)));
static size_t arena_used;

/* A copy of obj at the next address that is 1, 3, 5 or 7 past a multiple
 * of 8: misaligned for every field wider than a byte. */
static void *misplace(const void *obj, size_t len)
{
	static unsigned turn;
	size_t at = ((arena_used + 7) & ~(size_t)7) + 1 + 2 * (turn++ % 4);
	if (at + len > sizeof(arena)) {
		fprintf(stderr, "arena full\n");
		exit(1);
	}
	memcpy(arena + at, obj, len);
	arena_used = at + len;
	return arena + at;
}

/* The verb has returned: whatever it needed it has copied. */
static void scribble(void)
{
	memset(arena, 0xa5, sizeof(arena));
	arena_used = 0;
}

/* ---- data pieces ------------------------------------------------------ */

static struct ibv_sge piece(uint32_t off, uint32_t len)
{
	return (struct ibv_sge){ (uintptr_t)(mem + off), len, mr->lkey };
}

static void fill(uint32_t off, uint32_t len, uint32_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		mem[off + i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8) + 1);
}

/* The bytes of n pieces in order, into out; returns how many. */
static uint32_t gather(const struct ibv_sge *s, int n, uint8_t *out)
{
	uint32_t t = 0;
	for (int i = 0; i < n; i++) {
		memcpy(out + t, (const void *)(uintptr_t)s[i].addr, s[i].length);
		t += s[i].length;
	}
	return t;
}

/* want[0..len) scattered over the pieces in order, and the rest of the
 * pieces untouched. */
static void check_scatter(const char *what, const struct ibv_sge *s, int n, const uint8_t *want,
			  uint32_t len)
{
	uint32_t t = 0;
	int bad = 0;
	for (int i = 0; i < n; i++) {
		const uint8_t *p = (const uint8_t *)(uintptr_t)s[i].addr;
		for (uint32_t j = 0; j < s[i].length; j++, t++) {
			uint8_t w = t < len ? want[t] : GUARD;
			if (p[j] != w && bad++ < 3)
				fprintf(stderr, "%s: piece %d byte %u is 0x%02x, want 0x%02x\n", what,
					i, j, p[j], w);
		}
	}
	CHECK(bad == 0, "%s: %d bytes wrong", what, bad);
	CHECK(t >= len, "%s: %u bytes do not fit in %u", what, len, t);
}

static struct ibv_wc expect(struct ibv_cq *cq, const char *what, uint64_t wr_id,
			    enum ibv_wc_opcode op)
{
	struct ibv_wc wc = srn_tc_poll_one(cq, TIMEOUT_S);
	if (wc.status != IBV_WC_SUCCESS)
		fprintf(stderr, "%s: wr_id 0x%llx: %s\n", what, (unsigned long long)wc.wr_id,
			ibv_wc_status_str(wc.status));
	CHECK(wc.status == IBV_WC_SUCCESS, "%s", what);
	CHECK(wc.wr_id == wr_id, "%s: wr_id 0x%llx, want 0x%llx", what,
	      (unsigned long long)wc.wr_id, (unsigned long long)wr_id);
	CHECK(wc.opcode == op, "%s: opcode %d, want %d", what, wc.opcode, op);
	return wc;
}

/* ---- QPs -------------------------------------------------------------- */

#define QP_CAP { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 4, .max_recv_sge = 4, \
		 .max_inline_data = 64 }

struct rc_pair {
	struct ibv_qp *qa, *qb;         /* qa has the ibv_wr_* API */
	struct ibv_qp_ex *x;
	struct ibv_cq *ca, *cb;
};

static struct ibv_cq *new_cq(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(cq);
	return cq;
}

static void rc_connect(struct ibv_qp *a, struct ibv_qp *b)
{
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	o.mtu = IBV_MTU_1024;           /* so the larger messages take several packets */
	srn_tc_connect(a, &gid, b->qp_num, 0x100, 0x100, &o);
	srn_tc_connect(b, &gid, a->qp_num, 0x100, 0x100, &o);
}

/* qa (ibv_create_qp_ex, every ibv_wr_* opcode) <-> qb (ibv_create_qp),
 * or qb on srq. */
static struct rc_pair rc_pair_up(struct ibv_srq *srq)
{
	struct rc_pair p = { .ca = new_cq(), .cb = new_cq() };
	struct ibv_qp_init_attr_ex xa = {
		.send_cq = p.ca, .recv_cq = p.ca, .qp_type = IBV_QPT_RC, .cap = QP_CAP,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
				  IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
				  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_BIND_MW,
	};
	p.qa = ibv_create_qp_ex(ctx, &xa);
	CHECK(p.qa);
	p.x = ibv_qp_to_qp_ex(p.qa);
	CHECK(p.x);
	struct ibv_qp_init_attr ia = { .send_cq = p.cb, .recv_cq = p.cb, .srq = srq,
				       .qp_type = IBV_QPT_RC, .cap = QP_CAP };
	if (srq)
		ia.cap.max_recv_wr = ia.cap.max_recv_sge = 0;
	p.qb = ibv_create_qp(pd, &ia);
	CHECK(p.qb);
	rc_connect(p.qa, p.qb);
	return p;
}

static void rc_pair_down(struct rc_pair *p)
{
	CHECK(ibv_destroy_qp(p->qa) == 0);
	CHECK(ibv_destroy_qp(p->qb) == 0);
	CHECK(ibv_destroy_cq(p->ca) == 0);
	CHECK(ibv_destroy_cq(p->cb) == 0);
}

static int post_send(struct ibv_qp *qp, const struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;
	int r = ibv_post_send(qp, misplace(wr, sizeof(*wr)), &bad);
	scribble();
	return r;
}

static int post_recv(struct ibv_qp *qp, const struct ibv_recv_wr *wr)
{
	struct ibv_recv_wr *bad = NULL;
	int r = ibv_post_recv(qp, misplace(wr, sizeof(*wr)), &bad);
	scribble();
	return r;
}

static int post_srq_recv(struct ibv_srq *srq, const struct ibv_recv_wr *wr)
{
	struct ibv_recv_wr *bad = NULL;
	int r = ibv_post_srq_recv(srq, misplace(wr, sizeof(*wr)), &bad);
	scribble();
	return r;
}

/* Two receives, chained, on qb's receive queue or on srq: their pieces
 * are r1 and r2 (all GUARD before). */
static void post_two_recvs(struct ibv_qp *qb, struct ibv_srq *srq, const struct ibv_sge *r1,
			   int n1, const struct ibv_sge *r2, int n2)
{
	for (int i = 0; i < n1; i++)
		memset((void *)(uintptr_t)r1[i].addr, GUARD, r1[i].length);
	for (int i = 0; i < n2; i++)
		memset((void *)(uintptr_t)r2[i].addr, GUARD, r2[i].length);
	struct ibv_recv_wr w2 = { .wr_id = 0x22, .num_sge = n2,
				  .sg_list = misplace(r2, n2 * sizeof(*r2)) };
	struct ibv_recv_wr w1 = { .wr_id = 0x21, .num_sge = n1,
				  .sg_list = misplace(r1, n1 * sizeof(*r1)),
				  .next = misplace(&w2, sizeof(w2)) };
	CHECK((srq ? post_srq_recv(srq, &w1) : post_recv(qb, &w1)) == 0);
}

/* ---- cases ------------------------------------------------------------ */

/* Two SENDs of 3 pieces each into two receives of 3 pieces each; the
 * first takes two packets (MTU 1024). */
static void sends_into(struct ibv_qp *qa, struct ibv_cq *ca, struct ibv_qp *qb,
		       struct ibv_srq *srq, struct ibv_cq *cb, const char *what)
{
	const struct ibv_sge r1[3] = { piece(DST + 1, 50), piece(DST + 101, 1000),
				       piece(DST + 2003, 2000) };
	const struct ibv_sge r2[3] = { piece(DST + 8197, 5), piece(DST + 8303, 500),
				       piece(DST + 9005, 100) };
	post_two_recvs(qb, srq, r1, 3, r2, 3);

	fill(SRC, 8192, 1);
	const struct ibv_sge s1[3] = { piece(SRC + 1, 100), piece(SRC + 203, 1),
				       piece(SRC + 305, 1500) };
	const struct ibv_sge s2[3] = { piece(SRC + 4103, 7), piece(SRC + 4201, 0),
				       piece(SRC + 4303, 333) };
	uint8_t want1[2048], want2[512];
	uint32_t l1 = gather(s1, 3, want1), l2 = gather(s2, 3, want2);
	struct ibv_send_wr w2 = { .wr_id = 0x12, .opcode = IBV_WR_SEND, .num_sge = 3,
				  .send_flags = IBV_SEND_SIGNALED, .sg_list = misplace(s2, sizeof(s2)) };
	struct ibv_send_wr w1 = { .wr_id = 0x11, .opcode = IBV_WR_SEND, .num_sge = 3,
				  .send_flags = IBV_SEND_SIGNALED, .sg_list = misplace(s1, sizeof(s1)),
				  .next = misplace(&w2, sizeof(w2)) };
	CHECK(post_send(qa, &w1) == 0);

	struct ibv_wc wc = expect(cb, what, 0x21, IBV_WC_RECV);
	CHECK(wc.byte_len == l1, "%s: byte_len %u, want %u", what, wc.byte_len, l1);
	wc = expect(cb, what, 0x22, IBV_WC_RECV);
	CHECK(wc.byte_len == l2, "%s: byte_len %u, want %u", what, wc.byte_len, l2);
	expect(ca, what, 0x11, IBV_WC_SEND);
	expect(ca, what, 0x12, IBV_WC_SEND);
	check_scatter(what, r1, 3, want1, l1);
	check_scatter(what, r2, 3, want2, l2);
}

static void case_send(void)
{
	struct rc_pair p = rc_pair_up(NULL);
	sends_into(p.qa, p.ca, p.qb, NULL, p.cb, "RC SEND chain");
	rc_pair_down(&p);
}

static void case_inline(void)
{
	struct rc_pair p = rc_pair_up(NULL);
	const struct ibv_sge r[1] = { piece(DST + 3, 256) };
	post_two_recvs(p.qb, NULL, r, 1, r, 0);
	fill(SRC, 256, 2);
	/* Inline data needs no key: 0 names none. */
	struct ibv_sge s[3] = { piece(SRC + 1, 10), piece(SRC + 33, 1), piece(SRC + 67, 40) };
	for (int i = 0; i < 3; i++)
		s[i].lkey = 0;
	uint8_t want[64];
	uint32_t len = gather(s, 3, want);
	struct ibv_send_wr w = { .wr_id = 0x31, .opcode = IBV_WR_SEND, .num_sge = 3,
				 .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE,
				 .sg_list = misplace(s, sizeof(s)) };
	CHECK(post_send(p.qa, &w) == 0);
	memset(mem + SRC, 0, 256);      /* inline: copied by the time post returns */
	struct ibv_wc wc = expect(p.cb, "inline SEND", 0x21, IBV_WC_RECV);
	CHECK(wc.byte_len == len);
	expect(p.ca, "inline SEND", 0x31, IBV_WC_SEND);
	check_scatter("inline SEND", r, 1, want, len);
	/* The second receive (no pieces) is still posted: destroyed with qb. */
	rc_pair_down(&p);
}

static void case_rdma(void)
{
	struct rc_pair p = rc_pair_up(NULL);
	fill(SRC, 8192, 3);
	memset(mem + TGT, GUARD, 16384);
	const struct ibv_sge s[2] = { piece(SRC + 5, 1000), piece(SRC + 2001, 1500) };
	uint8_t want[4096];
	uint32_t len = gather(s, 2, want);
	struct ibv_send_wr w = { .wr_id = 0x41, .opcode = IBV_WR_RDMA_WRITE, .num_sge = 2,
				 .send_flags = IBV_SEND_SIGNALED, .sg_list = misplace(s, sizeof(s)) };
	w.wr.rdma.remote_addr = (uintptr_t)(mem + TGT + 7);
	w.wr.rdma.rkey = mr->rkey;
	CHECK(post_send(p.qa, &w) == 0);
	expect(p.ca, "RDMA WRITE", 0x41, IBV_WC_RDMA_WRITE);
	const struct ibv_sge t[1] = { { (uintptr_t)(mem + TGT), len + 16, 0 } };
	uint8_t twant[4096 + 16];
	memset(twant, GUARD, sizeof(twant));
	memcpy(twant + 7, want, len);
	check_scatter("RDMA WRITE target", t, 1, twant, len + 16);

	/* Read it back with the guard after it, scattered over three pieces. */
	uint8_t rwant[2703];
	memcpy(rwant, mem + TGT + 7, sizeof(rwant));
	const struct ibv_sge d[3] = { piece(DST + 1, 700), piece(DST + 1003, 3),
				      piece(DST + 2005, 2000) };
	for (int i = 0; i < 3; i++)
		memset((void *)(uintptr_t)d[i].addr, GUARD, d[i].length);
	struct ibv_send_wr rd = { .wr_id = 0x42, .opcode = IBV_WR_RDMA_READ, .num_sge = 3,
				  .send_flags = IBV_SEND_SIGNALED, .sg_list = misplace(d, sizeof(d)) };
	rd.wr.rdma.remote_addr = (uintptr_t)(mem + TGT + 7);
	rd.wr.rdma.rkey = mr->rkey;
	CHECK(post_send(p.qa, &rd) == 0);
	struct ibv_wc wc = expect(p.ca, "RDMA READ", 0x42, IBV_WC_RDMA_READ);
	CHECK(wc.byte_len == sizeof(rwant));
	check_scatter("RDMA READ", d, 3, rwant, sizeof(rwant));
	rc_pair_down(&p);
}

static void case_atomic(void)
{
	struct rc_pair p = rc_pair_up(NULL);
	const uint64_t cas0 = 0x1111222233334444ull, faa0 = 0xfffffff0ull;
	memcpy(mem + TGT, &cas0, 8);
	memcpy(mem + TGT + 8, &faa0, 8);
	memset(mem + DST, GUARD, 64);
	const struct ibv_sge s1[1] = { piece(DST + 1, 8) }, s2[1] = { piece(DST + 13, 8) };
	struct ibv_send_wr w2 = { .wr_id = 0x52, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				  .num_sge = 1, .send_flags = IBV_SEND_SIGNALED,
				  .sg_list = misplace(s2, sizeof(s2)) };
	w2.wr.atomic.remote_addr = (uintptr_t)(mem + TGT + 8);
	w2.wr.atomic.rkey = mr->rkey;
	w2.wr.atomic.compare_add = 0x20;
	struct ibv_send_wr w1 = { .wr_id = 0x51, .opcode = IBV_WR_ATOMIC_CMP_AND_SWP,
				  .num_sge = 1, .send_flags = IBV_SEND_SIGNALED,
				  .sg_list = misplace(s1, sizeof(s1)),
				  .next = misplace(&w2, sizeof(w2)) };
	w1.wr.atomic.remote_addr = (uintptr_t)(mem + TGT);
	w1.wr.atomic.rkey = mr->rkey;
	w1.wr.atomic.compare_add = cas0;
	w1.wr.atomic.swap = 0x5555666677778888ull;
	CHECK(post_send(p.qa, &w1) == 0);
	CHECK(expect(p.ca, "CAS", 0x51, IBV_WC_COMP_SWAP).byte_len == 8);
	CHECK(expect(p.ca, "FAA", 0x52, IBV_WC_FETCH_ADD).byte_len == 8);
	uint64_t v;
	memcpy(&v, mem + TGT, 8);
	CHECK(v == 0x5555666677778888ull, "CAS target 0x%llx", (unsigned long long)v);
	memcpy(&v, mem + TGT + 8, 8);
	CHECK(v == faa0 + 0x20, "FAA target 0x%llx", (unsigned long long)v);
	check_scatter("CAS original", s1, 1, (const uint8_t *)&cas0, 8);
	check_scatter("FAA original", s2, 1, (const uint8_t *)&faa0, 8);
	CHECK(mem[DST] == GUARD && mem[DST + 9] == GUARD && mem[DST + 21] == GUARD);
	rc_pair_down(&p);
}

static void case_srq(void)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 4 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	CHECK(srq);
	struct rc_pair p = rc_pair_up(srq);
	sends_into(p.qa, p.ca, p.qb, srq, p.cb, "SRQ SEND chain");
	rc_pair_down(&p);
	CHECK(ibv_destroy_srq(srq) == 0);
}

/* RESET -> INIT -> RTR (-> RTS for the send QP) for the two XRC types (an
 * XRC receive QP only receives: it stays in RTR). */
static void xrc_connect(struct ibv_qp *qp, uint32_t dqpn, bool send)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			    IBV_QP_ACCESS_FLAGS) == 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.rq_psn = 0x100;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr = (struct ibv_ah_attr){ .is_global = 1, .port_num = 1,
					  .grh = { .dgid = gid, .hop_limit = 1 } };
	int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	if (!send)
		rtr |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	CHECK(ibv_modify_qp(qp, &a, rtr) == 0);
	if (!send)
		return;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x100;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			    IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0);
}

static void case_xrc(void)
{
	struct ibv_cq *cq = new_cq();
	struct ibv_xrcd_init_attr xa = { .comp_mask = IBV_XRCD_INIT_ATTR_FD |
						      IBV_XRCD_INIT_ATTR_OFLAGS,
					 .fd = -1, .oflags = O_CREAT };
	struct ibv_xrcd *xrcd = ibv_open_xrcd(ctx, &xa);
	CHECK(xrcd);
	struct ibv_srq_init_attr_ex sa = {
		.attr = { .max_wr = 8, .max_sge = 3 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			     IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ,
		.srq_type = IBV_SRQT_XRC, .pd = pd, .xrcd = xrcd, .cq = cq,
	};
	struct ibv_srq *srq = ibv_create_srq_ex(ctx, &sa);
	CHECK(srq);
	uint32_t srqn;
	CHECK(ibv_get_srq_num(srq, &srqn) == 0);
	struct ibv_qp_init_attr_ex ra = { .qp_type = IBV_QPT_XRC_RECV,
					  .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = xrcd };
	struct ibv_qp *rqp = ibv_create_qp_ex(ctx, &ra);
	CHECK(rqp);
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_XRC_SEND, .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd,
		.send_cq = cq, .cap = { .max_send_wr = 8, .max_send_sge = 3 },
	};
	struct ibv_qp *sqp = ibv_create_qp_ex(ctx, &ia);
	CHECK(sqp);
	xrc_connect(rqp, sqp->qp_num, false);
	xrc_connect(sqp, rqp->qp_num, true);

	const struct ibv_sge r[3] = { piece(DST + 1, 30), piece(DST + 67, 1), piece(DST + 131, 2000) };
	post_two_recvs(NULL, srq, r, 3, r, 0);
	fill(SRC, 4096, 4);
	const struct ibv_sge s[3] = { piece(SRC + 3, 1200), piece(SRC + 1301, 0),
				      piece(SRC + 1403, 11) };
	uint8_t want[2048];
	uint32_t len = gather(s, 3, want);
	struct ibv_send_wr w = { .wr_id = 0x61, .opcode = IBV_WR_SEND, .num_sge = 3,
				 .send_flags = IBV_SEND_SIGNALED, .sg_list = misplace(s, sizeof(s)) };
	w.qp_type.xrc.remote_srqn = srqn;
	CHECK(post_send(sqp, &w) == 0);
	bool got_send = false, got_recv = false;
	for (int i = 0; i < 2; i++) {
		struct ibv_wc wc = srn_tc_poll_one(cq, TIMEOUT_S);
		CHECK(wc.status == IBV_WC_SUCCESS, "XRC: %s", ibv_wc_status_str(wc.status));
		if (wc.opcode == IBV_WC_RECV) {
			CHECK(wc.wr_id == 0x21 && wc.byte_len == len);
			got_recv = true;
		} else {
			CHECK(wc.wr_id == 0x61 && wc.opcode == IBV_WC_SEND);
			got_send = true;
		}
	}
	CHECK(got_send && got_recv);
	check_scatter("XRC SEND", r, 3, want, len);

	CHECK(ibv_destroy_qp(rqp) == 0);
	CHECK(ibv_destroy_srq(srq) == 0);
	CHECK(ibv_destroy_qp(sqp) == 0);
	CHECK(ibv_close_xrcd(xrcd) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
}

static void case_ud(void)
{
	struct ibv_cq *ca = new_cq(), *cb = new_cq();
	struct ibv_qp_init_attr ia = { .send_cq = ca, .recv_cq = ca, .qp_type = IBV_QPT_UD,
				       .cap = QP_CAP };
	struct ibv_qp *ua = ibv_create_qp(pd, &ia);
	ia.send_cq = ia.recv_cq = cb;
	struct ibv_qp *ub = ibv_create_qp(pd, &ia);
	CHECK(ua && ub);
	struct srn_qp_up_attr a = srn_qp_up_defaults();
	a.hop_limit = 1;
	const struct srn_qp_up_peer self = { .gid = gid };
	const char *step;
	CHECK(srn_qp_up(ua, &a, 0x100, &self, &step) == 0);
	CHECK(srn_qp_up(ub, &a, 0x100, &self, &step) == 0);
	struct ibv_ah_attr aa;
	srn_qp_up_ah_attr(&aa, &a, &self);
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	CHECK(ah);

	/* The GRH (40 bytes) lands in the first piece. */
	const struct ibv_sge r[3] = { piece(DST + 1, 40), piece(DST + 99, 200),
				      piece(DST + 403, 500) };
	post_two_recvs(ub, NULL, r, 3, r, 0);
	fill(SRC, 1024, 5);
	const struct ibv_sge s[2] = { piece(SRC + 1, 150), piece(SRC + 301, 250) };
	uint8_t want[512];
	uint32_t len = gather(s, 2, want);
	struct ibv_send_wr w = { .wr_id = 0x71, .opcode = IBV_WR_SEND, .num_sge = 2,
				 .send_flags = IBV_SEND_SIGNALED, .sg_list = misplace(s, sizeof(s)) };
	w.wr.ud.ah = ah;
	w.wr.ud.remote_qpn = ub->qp_num;
	w.wr.ud.remote_qkey = a.qkey;
	CHECK(post_send(ua, &w) == 0);
	expect(ca, "UD SEND", 0x71, IBV_WC_SEND);
	struct ibv_wc wc = expect(cb, "UD receive", 0x21, IBV_WC_RECV);
	CHECK(wc.byte_len == 40 + len, "UD: byte_len %u", wc.byte_len);
	CHECK(wc.src_qp == ua->qp_num && (wc.wc_flags & IBV_WC_GRH));
	check_scatter("UD SEND", r + 1, 2, want, len);

	CHECK(ibv_destroy_qp(ua) == 0);
	CHECK(ibv_destroy_qp(ub) == 0);
	CHECK(ibv_destroy_ah(ah) == 0);
	CHECK(ibv_destroy_cq(ca) == 0);
	CHECK(ibv_destroy_cq(cb) == 0);
}

static void case_wr_api(void)
{
	struct rc_pair p = rc_pair_up(NULL);
	const struct ibv_sge r1[2] = { piece(DST + 1, 1500), piece(DST + 2003, 1500) };
	const struct ibv_sge r2[1] = { piece(DST + 4005, 100) };
	post_two_recvs(p.qb, NULL, r1, 2, r2, 1);
	fill(SRC, 8192, 6);
	memset(mem + TGT, GUARD, 4096);

	const struct ibv_sge s1[3] = { piece(SRC + 1, 999), piece(SRC + 1003, 1), piece(SRC + 2005, 1200) };
	const struct ibv_data_buf b2[3] = { { mem + SRC + 4097, 3 }, { mem + SRC + 4203, 0 },
					    { mem + SRC + 4301, 50 } };
	const struct ibv_sge s3[2] = { piece(SRC + 6001, 17), piece(SRC + 6103, 300) };
	uint8_t want1[2400], want2[64], want3[512];
	uint32_t l1 = gather(s1, 3, want1), l3 = gather(s3, 2, want3), l2 = 0;
	for (int i = 0; i < 3; i++) {
		memcpy(want2 + l2, b2[i].addr, b2[i].length);
		l2 += (uint32_t)b2[i].length;
	}

	struct ibv_qp_ex *x = p.x;
	ibv_wr_start(x);
	x->wr_flags = IBV_SEND_SIGNALED;
	x->wr_id = 0x81;
	ibv_wr_send(x);
	ibv_wr_set_sge_list(x, 3, misplace(s1, sizeof(s1)));
	scribble();
	x->wr_id = 0x82;
	ibv_wr_send(x);
	ibv_wr_set_inline_data_list(x, 3, misplace(b2, sizeof(b2)));
	scribble();
	memset(mem + SRC + 4096, 0, 512);       /* inline: copied by now */
	x->wr_id = 0x83;
	ibv_wr_rdma_write(x, mr->rkey, (uintptr_t)(mem + TGT + 3));
	ibv_wr_set_sge_list(x, 2, misplace(s3, sizeof(s3)));
	scribble();
	CHECK(ibv_wr_complete(x) == 0);

	CHECK(expect(p.cb, "wr_set_sge_list SEND", 0x21, IBV_WC_RECV).byte_len == l1);
	CHECK(expect(p.cb, "wr_set_inline_data_list SEND", 0x22, IBV_WC_RECV).byte_len == l2);
	expect(p.ca, "wr_set_sge_list SEND", 0x81, IBV_WC_SEND);
	expect(p.ca, "wr_set_inline_data_list SEND", 0x82, IBV_WC_SEND);
	expect(p.ca, "wr_set_sge_list WRITE", 0x83, IBV_WC_RDMA_WRITE);
	check_scatter("wr_set_sge_list SEND", r1, 2, want1, l1);
	check_scatter("wr_set_inline_data_list SEND", r2, 1, want2, l2);
	const struct ibv_sge t[1] = { piece(TGT + 3, l3 + 8) };
	check_scatter("wr_set_sge_list WRITE", t, 1, want3, l3);
	CHECK(mem[TGT + 2] == GUARD);
	rc_pair_down(&p);
}

/* Two type-2 windows bound on qa, one by ibv_wr_bind_mw, one by
 * ibv_post_send; qb writes through each. */
static void case_bind_mw(void)
{
	struct rc_pair p = rc_pair_up(NULL);
	memset(mem + WIN, GUARD, 16384);
	struct ibv_mw *mw[2] = { ibv_alloc_mw(pd, IBV_MW_TYPE_2), ibv_alloc_mw(pd, IBV_MW_TYPE_2) };
	CHECK(mw[0] && mw[1]);
	uint32_t key[2] = { ibv_inc_rkey(mw[0]->rkey), ibv_inc_rkey(mw[1]->rkey) };
	uint64_t at[2] = { (uintptr_t)(mem + WIN + 1), (uintptr_t)(mem + WIN + 8195) };
	const int rights = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

	const struct ibv_mw_bind_info bi = { .mr = mr, .addr = at[0], .length = 4096,
					     .mw_access_flags = rights };
	ibv_wr_start(p.x);
	p.x->wr_id = 0x91;
	p.x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(p.x, mw[0], key[0], misplace(&bi, sizeof(bi)));
	scribble();
	CHECK(ibv_wr_complete(p.x) == 0);
	expect(p.ca, "ibv_wr_bind_mw", 0x91, IBV_WC_BIND_MW);

	struct ibv_send_wr w = { .wr_id = 0x92, .opcode = IBV_WR_BIND_MW,
				 .send_flags = IBV_SEND_SIGNALED };
	w.bind_mw.mw = mw[1];
	w.bind_mw.rkey = key[1];
	w.bind_mw.bind_info = (struct ibv_mw_bind_info){ .mr = mr, .addr = at[1], .length = 4096,
							 .mw_access_flags = rights };
	CHECK(post_send(p.qa, &w) == 0);
	expect(p.ca, "IBV_WR_BIND_MW", 0x92, IBV_WC_BIND_MW);
	CHECK(mw[0]->rkey == key[0] && mw[1]->rkey == key[1]);

	fill(SRC, 8192, 7);
	for (int i = 0; i < 2; i++) {
		const struct ibv_sge s[1] = { piece(SRC + 1 + 4096 * (uint32_t)i, 4096) };
		struct ibv_send_wr wr = { .wr_id = 0xa1 + (uint64_t)i, .opcode = IBV_WR_RDMA_WRITE,
					  .num_sge = 1, .send_flags = IBV_SEND_SIGNALED,
					  .sg_list = misplace(s, sizeof(s)) };
		wr.wr.rdma.remote_addr = at[i];
		wr.wr.rdma.rkey = key[i];
		CHECK(post_send(p.qb, &wr) == 0);
		expect(p.cb, "WRITE through a window", 0xa1 + (uint64_t)i, IBV_WC_RDMA_WRITE);
		const struct ibv_sge t[1] = { { at[i] - 1, 4096 + 2, 0 } };
		uint8_t want[4096 + 2];
		memset(want, GUARD, sizeof(want));
		gather(s, 1, want + 1);
		check_scatter("window", t, 1, want, sizeof(want));
	}
	rc_pair_down(&p);
	CHECK(ibv_dealloc_mw(mw[0]) == 0);
	CHECK(ibv_dealloc_mw(mw[1]) == 0);
}

static const struct {
	const char *name;
	void (*run)(void);
} cases[] = {
	{ "send", case_send },     { "inline", case_inline }, { "rdma", case_rdma },
	{ "atomic", case_atomic }, { "srq", case_srq },       { "xrc", case_xrc },
	{ "ud", case_ud },         { "wr_api", case_wr_api }, { "bind_mw", case_bind_mw },
};

int main(int argc, char **argv)
{
	srn_tc_role = "misaligned";
	const char *only = argc > 1 ? argv[1] : NULL;
	bool known = !only;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		known |= only && strcmp(only, cases[i].name) == 0;
	if (!known) {
		fprintf(stderr, "usage: %s [case]: no case %s\n", argv[0], only);
		return 1;
	}
	ctx = srn_tc_open(&gid);
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	mem = aligned_alloc(4096, MEM);
	CHECK(mem);
	memset(mem, GUARD, MEM);
	mr = ibv_reg_mr(pd, mem, MEM, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND);
	CHECK(mr);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (only && strcmp(only, cases[i].name) != 0)
			continue;
		cases[i].run();
		printf("%s: ok\n", cases[i].name);
	}
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	free(mem);
	return 0;
}
