/*
 * test_direct - same-host RDMA Write and Read placed directly by the
 * requester (transport/direct.c, link/direct.h), against the rules a
 * responder keeps.  Two processes (fork before any verbs call, each its
 * own device on its own 127.0.0.N); the same checks must hold with
 * SOFTRNIC_DIRECT=0 (the rings), which is how test_direct.sh runs it
 * too, and the script checks the direct_* counters say which path ran.
 *
 *   test_direct data     random Writes and Reads, multi-SGE, Write then
 *                        Read of the same range in one post list, and
 *                        lists of up to 40 small overlapping Writes (one
 *                        batch, one copy); the target's memory is compared
 *                        byte for byte
 *   test_direct errors   bad rkey, no right in the region, out of range,
 *                        QP without the remote right: REM_ACCESS_ERR as
 *                        over the rings, nothing placed; a list of Writes
 *                        with a bad rkey in the middle: those before it
 *                        land and complete, it fails, those after are
 *                        flushed and never land
 *   test_direct qp_err   a target QP moved to ERR gets no placement
 *   test_direct dereg    the target deregisters while Writes stream: no
 *                        byte changes after ibv_dereg_mr returns
 *   test_direct killed   the requester is killed mid-stream: the target's
 *                        dereg still returns (bounded), nothing changes
 *   test_direct order    a Write posted behind a Send that waits for a
 *                        receive (RNR) is not placed ahead of it
 *   test_direct imm      Write-with-immediate (data direct, the immediate
 *                        alone over the ring) interleaved with Sends: the
 *                        target's completions come in order, with the imm
 *                        and the whole length, and the data is in place
 *                        when the completion is seen
 *   test_direct unmap    the target unmaps its region while Writes stream
 *                        and maps fresh memory at the same address: the
 *                        new pages never receive a byte
 *   test_direct stale_span
 *                        a moved region's memory replaced behind the
 *                        library's back: a region over the new memory
 *                        gets the Writes
 *   test_direct last_byte
 *                        the target spins on each Write's last byte (as
 *                        ib_write_lat does) and then finds the whole
 *                        message there
 *   test_direct reopen   the target closes its device after a first Write
 *                        and opens a new one in the same process, with
 *                        the same memory registered again: the
 *                        requester's QP, which kept the old target
 *                        (transport/direct.c), must not place into the
 *                        new registration; its next Write fails, nothing
 *                        lands
 *   test_direct trace    a fixed set at a 1024-byte path MTU, one at a
 *                        time: Writes of 5000 B, 40000 B and 1 MiB, Reads
 *                        of 3000 B and 100 B, a list of 4 Writes of 16 B,
 *                        a CAS and an FAA, then one Send (over the ring);
 *                        test_direct_pcap.sh finds their packets in the
 *                        requester's trace (SOFTRNIC_PCAP)
 *
 * The parent is the requester, the child the target (killed: the other
 * way round).  The target never polls: only its progress thread runs.
 */
#define _GNU_SOURCE     /* sched_setaffinity */
#include <arpa/inet.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "rc_test_conn.h"

#define BIG (1u << 20)
#define SMALL (64u << 10)
#define NQP 6
#define TMO 30000

struct info {
	union ibv_gid gid;
	uint32_t qpn[NQP];
	uint32_t rkey_rw, rkey_ro, rkey_wo;
	uint64_t addr_rw, addr_ro, addr_wo;
};

static uint8_t t_rw[BIG], t_ro[SMALL], t_wo[SMALL];   /* the target's regions */
static uint8_t r_src[BIG], r_dst[BIG], model[BIG];    /* the requester's */

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp[NQP];
	struct info me, peer;
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

static bool short_timers;      /* qp_err */
static bool trace_mode;        /* trace: MTU 1024, atomics on the rw region, a receive */

/* CQ and NQP RC QPs, exchanged with the peer and connected (QP i of the
 * one to QP i of the other; access[i] their remote rights, NULL: all). */
static void connect_side(struct side *s, int fd, const int *access)
{
	s->cq = ibv_create_cq(s->ctx, 256, NULL, NULL, 0);
	CHECK(s->cq);
	for (int i = 0; i < NQP; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 64, .max_recv_wr = 4, .max_send_sge = 4,
				 .max_recv_sge = 1 },
		};
		s->qp[i] = ibv_create_qp(s->pd, &ia);
		CHECK(s->qp[i]);
		s->me.qpn[i] = s->qp[i]->qp_num;
	}
	srn_tc_xchg(fd, &s->me, &s->peer, sizeof(s->me), TMO);
	for (int i = 0; i < NQP; i++) {
		struct srn_tc_qp_opts o = srn_tc_default_opts();
		if (access)
			o.access = access[i];
		/* qp_err finds a target in ERR by retries: short ones (17 ms,
		 * 3).  Everything else must never see a timeout, even with
		 * the target's progress thread unscheduled for a second at
		 * load 20: 0.54 s, 7 retries. */
		o.timeout = short_timers ? 12 : 17;
		if (trace_mode)
			o.mtu = IBV_MTU_1024;   /* messages of several packets */
		o.retry_cnt = short_timers ? 3 : 7;
		srn_tc_connect(s->qp[i], &s->peer.gid, s->peer.qpn[i], 0x200, 0x200, &o);
	}
	srn_tc_barrier(fd, 0xd1, TMO);
}

/* The target's three regions, registered before the exchange. */
static struct ibv_mr *mr_rw, *mr_ro, *mr_wo;
static uint8_t *alt_rw;          /* unmap: an mmap'd SMALL region instead of t_rw */
static void target_regions(struct side *s)
{
	mr_rw = ibv_reg_mr(s->pd, alt_rw ? alt_rw : t_rw, alt_rw ? SMALL : BIG,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			   (trace_mode ? IBV_ACCESS_REMOTE_ATOMIC : 0));
	mr_ro = ibv_reg_mr(s->pd, t_ro, SMALL, IBV_ACCESS_REMOTE_READ);
	mr_wo = ibv_reg_mr(s->pd, t_wo, SMALL, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr_rw && mr_ro && mr_wo);
	s->me.rkey_rw = mr_rw->rkey;
	s->me.rkey_ro = mr_ro->rkey;
	s->me.rkey_wo = mr_wo->rkey;
	s->me.addr_rw = (uintptr_t)(alt_rw ? alt_rw : t_rw);
	s->me.addr_ro = (uintptr_t)t_ro;
	s->me.addr_wo = (uintptr_t)t_wo;
}

/* Target side of most modes: regions, connect, then wait for the
 * requester's word (the progress thread does everything meanwhile). */
static struct side T;
static void target_open(int fd, const int *access)
{
	T.ctx = srn_tc_open(&T.me.gid);
	T.pd = ibv_alloc_pd(T.ctx);
	CHECK(T.pd);
	target_regions(&T);
	connect_side(&T, fd, access);
}

static struct ibv_mr *req_mr_src, *req_mr_dst;
static struct side R;
static void requester_open(int fd)
{
	memset(&R, 0, sizeof(R));
	R.ctx = srn_tc_open(&R.me.gid);
	R.pd = ibv_alloc_pd(R.ctx);
	CHECK(R.pd);
	req_mr_src = ibv_reg_mr(R.pd, r_src, BIG, IBV_ACCESS_LOCAL_WRITE);
	req_mr_dst = ibv_reg_mr(R.pd, r_dst, BIG, IBV_ACCESS_LOCAL_WRITE);
	CHECK(req_mr_src && req_mr_dst);
	connect_side(&R, fd, NULL);
}

/* One Write or Read of [off, off+len) of the target's rw region (or the
 * given rkey/addr), from/into the requester's buffer at loff, split into
 * up to 3 SGEs; filled, not posted (callers chain them into lists). */
static void make_wr(struct ibv_send_wr *wr, struct ibv_sge *sge, bool write, uint32_t loff,
		    uint64_t raddr, uint32_t rkey, uint32_t len, uint64_t id)
{
	struct ibv_mr *m = write ? req_mr_src : req_mr_dst;
	uint8_t *base = write ? r_src : r_dst;
	int n = len >= 3 ? 1 + (int)(rnd() % 3) : 1;
	uint32_t done = 0;
	for (int i = 0; i < n; i++) {
		uint32_t take = i == n - 1 ? len - done : (len - done) / (uint32_t)(n - i);
		sge[i] = (struct ibv_sge){ (uintptr_t)(base + loff + done), take, m->lkey };
		done += take;
	}
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = id;
	wr->sg_list = sge;
	wr->num_sge = n;
	wr->opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
	wr->send_flags = IBV_SEND_SIGNALED;
	wr->wr.rdma.remote_addr = raddr;
	wr->wr.rdma.rkey = rkey;
}

static enum ibv_wc_status post_wait(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	CHECK(ibv_post_send(qp, wr, &bad) == 0);
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	for (struct ibv_send_wr *w = wr; w; w = w->next) {
		struct ibv_wc wc = srn_tc_poll_one(R.cq, 20);
		CHECK(wc.wr_id == w->wr_id);
		if (wc.status != IBV_WC_SUCCESS && st == IBV_WC_SUCCESS)
			st = wc.status;
	}
	return st;
}

static void target_wait_done(int fd)
{
	srn_tc_barrier(fd, 0xd2, 120000);
}

/* data: the target ships its region at the end; it must equal the model. */
static int mode_data(int fd, bool parent)
{
	if (!parent) {
		target_open(fd, NULL);
		target_wait_done(fd);
		srn_tc_send(fd, t_rw, BIG);
		srn_tc_barrier(fd, 0xd3, TMO);
		return 0;
	}
	requester_open(fd);
	for (uint32_t i = 0; i < BIG; i++)
		r_src[i] = (uint8_t)rnd();
	struct ibv_qp *qp = R.qp[0];
	for (int op = 0; op < 1500; op++) {
		uint32_t len = 1 + rnd() % (op % 7 == 0 ? SMALL : 512);
		uint32_t off = rnd() % (BIG - len + 1), loff = rnd() % (BIG - len + 1);
		struct ibv_sge s1[4], s2[4];
		struct ibv_send_wr w1, w2;
		make_wr(&w1, s1, true, loff, R.peer.addr_rw + off, R.peer.rkey_rw, len,
			(uint64_t)op * 2);
		memcpy(model + off, r_src + loff, len);
		if (op % 3 == 0) {
			/* Read after Write in one post list: sees the Write. */
			uint32_t doff = rnd() % (BIG - len + 1);
			make_wr(&w2, s2, false, doff, R.peer.addr_rw + off, R.peer.rkey_rw, len,
				(uint64_t)op * 2 + 1);
			w1.next = &w2;
			CHECK(post_wait(qp, &w1) == IBV_WC_SUCCESS);
			CHECK(memcmp(r_dst + doff, model + off, len) == 0);
		} else {
			CHECK(post_wait(qp, &w1) == IBV_WC_SUCCESS);
		}
	}
	/* Lists of small Writes, overlapping at times: the direct path
	 * places a run of them with one copy, in order (later bytes win). */
	for (int l = 0; l < 200; l++) {
		struct ibv_sge ls[40][4];
		struct ibv_send_wr lw[40];
		int n = 1 + (int)(rnd() % 40);
		uint32_t base = rnd() % (BIG - 8192);
		for (int i = 0; i < n; i++) {
			uint32_t len = 1 + rnd() % 256;
			uint32_t off = base + rnd() % 4096, loff = rnd() % (BIG - len + 1);
			make_wr(&lw[i], ls[i], true, loff, R.peer.addr_rw + off, R.peer.rkey_rw, len,
				100000 + (uint64_t)l * 64 + (uint64_t)i);
			lw[i].send_flags = (i == n - 1 || rnd() % 4 == 0) ? IBV_SEND_SIGNALED : 0;
			lw[i].next = i + 1 < n ? &lw[i + 1] : NULL;
			memcpy(model + off, r_src + loff, len);
		}
		struct ibv_send_wr *bad;
		CHECK(ibv_post_send(qp, lw, &bad) == 0);
		for (int i = 0; i < n; i++) {
			if (!(lw[i].send_flags & IBV_SEND_SIGNALED))
				continue;
			struct ibv_wc wc = srn_tc_poll_one(R.cq, 20);
			CHECK(wc.wr_id == lw[i].wr_id && wc.status == IBV_WC_SUCCESS);
		}
	}
	/* A Read of the whole region, in one message. */
	struct ibv_sge s[4];
	struct ibv_send_wr w;
	make_wr(&w, s, false, 0, R.peer.addr_rw, R.peer.rkey_rw, BIG, 99999);
	CHECK(post_wait(qp, &w) == IBV_WC_SUCCESS);
	CHECK(memcmp(r_dst, model, BIG) == 0);
	srn_tc_barrier(fd, 0xd2, TMO);
	srn_tc_recv(fd, r_dst, BIG, TMO);
	CHECK(memcmp(r_dst, model, BIG) == 0);
	srn_tc_barrier(fd, 0xd3, TMO);
	printf("ok: 1500 Writes, 500 Reads after Write, 200 lists of small Writes, byte-exact\n");
	return 0;
}

/* errors: each refused request fails its QP; the target's bytes stay. */
static int mode_errors(int fd, bool parent)
{
	/* QP 4 of the target takes no remote write. */
	int access[NQP] = { 0, 0, 0, 0, IBV_ACCESS_REMOTE_READ, 0 };
	for (int i = 0; i < NQP; i++)
		if (i != 4)
			access[i] = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				    IBV_ACCESS_REMOTE_ATOMIC;
	if (!parent) {
		memset(t_rw, 0x11, BIG);
		memset(t_ro, 0x22, SMALL);
		memset(t_wo, 0x33, SMALL);
		target_open(fd, access);
		target_wait_done(fd);
		uint8_t verdict = 1;
		for (uint32_t i = 0; i < SMALL; i++)
			if (t_ro[i] != 0x22 || t_wo[i] != 0x33)
				verdict = 0;
		for (uint32_t i = 4096; i < BIG; i++)    /* the first page took the good Writes */
			if (t_rw[i] != 0x11)
				verdict = 0;
		for (uint32_t i = 0; i < 32; i++)       /* the list's four before its bad one */
			if (t_rw[512 + i] != 0x5a)
				verdict = 0;
		srn_tc_send(fd, &verdict, 1);
		return verdict ? 0 : 1;
	}
	requester_open(fd);
	memset(r_src, 0x5a, BIG);
	struct ibv_sge s[4];
	struct ibv_send_wr w;
	/* A good Write first on each QP, so the direct path is set up. */
	for (int q = 0; q < 4; q++) {
		make_wr(&w, s, true, 0, R.peer.addr_rw + (uint64_t)q * 64, R.peer.rkey_rw, 64, 1);
		CHECK(post_wait(R.qp[q], &w) == IBV_WC_SUCCESS);
	}
	struct {
		int qp;
		bool write;
		uint64_t addr;
		uint32_t rkey, len;
		const char *what;
	} c[] = {
		{ 0, true, R.peer.addr_rw + 8192, R.peer.rkey_rw ^ 0x01000000u, 8, "bad rkey" },
		{ 1, true, R.peer.addr_ro, R.peer.rkey_ro, 8, "Write into a read-only region" },
		{ 2, true, R.peer.addr_rw + BIG - 10, R.peer.rkey_rw, 100, "Write past the end" },
		{ 3, false, R.peer.addr_wo, R.peer.rkey_wo, 8, "Read without remote read" },
		{ 4, true, R.peer.addr_rw + 8192, R.peer.rkey_rw, 8, "QP without remote write" },
	};
	for (unsigned i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		make_wr(&w, s, c[i].write, 0, c[i].addr, c[i].rkey, c[i].len, 10 + i);
		enum ibv_wc_status st = post_wait(R.qp[c[i].qp], &w);
		if (st != IBV_WC_REM_ACCESS_ERR) {
			fprintf(stderr, "[parent] %s: %s, not REM_ACCESS_ERR\n", c[i].what,
				ibv_wc_status_str(st));
			return 1;
		}
	}
	/* A list of eight Writes on QP 5, the fifth with a bad rkey: four
	 * land and succeed, the fifth fails, the last three are flushed and
	 * their bytes (at 16 KiB on) never land. */
	struct ibv_sge ls[8][4];
	struct ibv_send_wr lw[8], *bad;
	for (int i = 0; i < 8; i++) {
		uint64_t at = i < 4 ? 512 + (uint64_t)i * 8 : 16384 + (uint64_t)i * 8;
		make_wr(&lw[i], ls[i], true, 0, R.peer.addr_rw + at,
			i == 4 ? R.peer.rkey_rw ^ 0x01000000u : R.peer.rkey_rw, 8, 200 + (uint64_t)i);
		lw[i].next = i < 7 ? &lw[i + 1] : NULL;
	}
	CHECK(ibv_post_send(R.qp[5], lw, &bad) == 0);
	for (int i = 0; i < 8; i++) {
		struct ibv_wc wc = srn_tc_poll_one(R.cq, 20);
		enum ibv_wc_status want = i < 4 ? IBV_WC_SUCCESS :
					  i == 4 ? IBV_WC_REM_ACCESS_ERR : IBV_WC_WR_FLUSH_ERR;
		if (wc.wr_id != lw[i].wr_id || wc.status != want) {
			fprintf(stderr, "[parent] list Write %d: wr_id %llu %s, want %s\n", i,
				(unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status),
				ibv_wc_status_str(want));
			return 1;
		}
	}
	srn_tc_barrier(fd, 0xd2, TMO);
	uint8_t verdict = 0;
	srn_tc_recv(fd, &verdict, 1, TMO);
	CHECK(verdict == 1);
	printf("ok: 5 refused requests gave REM_ACCESS_ERR, no byte placed; a list stopped at its bad Write\n");
	return 0;
}

/* qp_err: after the target's QP goes to ERR, a Write must not land. */
/* The requester's half of qp_err and reopen: 64 bytes of 0x44 land at
 * the rw region's start; after the target's two barriers (its change)
 * 4000 bytes of 0x66 at offset `at` must fail.  Returns that status. */
static enum ibv_wc_status write_then_refused(int fd, uint32_t tag1, uint32_t tag2, uint32_t at)
{
	requester_open(fd);
	memset(r_src, 0x44, 64);
	memset(r_src + 64, 0x66, 4096);
	struct ibv_sge s[4];
	struct ibv_send_wr w;
	make_wr(&w, s, true, 0, R.peer.addr_rw, R.peer.rkey_rw, 64, 1);
	CHECK(post_wait(R.qp[0], &w) == IBV_WC_SUCCESS);
	srn_tc_barrier(fd, tag1, TMO);
	srn_tc_barrier(fd, tag2, TMO);
	make_wr(&w, s, true, 64, R.peer.addr_rw + at, R.peer.rkey_rw, 4000, 2);
	enum ibv_wc_status st = post_wait(R.qp[0], &w);
	CHECK(st != IBV_WC_SUCCESS);
	return st;
}

static int mode_qp_err(int fd, bool parent)
{
	short_timers = true;
	if (!parent) {
		target_open(fd, NULL);
		srn_tc_barrier(fd, 0xe1, TMO);       /* first Write done */
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
		CHECK(ibv_modify_qp(T.qp[0], &a, IBV_QP_STATE) == 0);
		srn_tc_barrier(fd, 0xe2, TMO);
		target_wait_done(fd);
		uint8_t verdict = 1;
		for (uint32_t i = 0; i < 4096; i++)
			if (t_rw[i] != (i < 64 ? 0x44 : 0))
				verdict = 0;
		srn_tc_send(fd, &verdict, 1);
		return verdict ? 0 : 1;
	}
	enum ibv_wc_status st = write_then_refused(fd, 0xe1, 0xe2, 64);
	srn_tc_barrier(fd, 0xd2, TMO);
	uint8_t verdict = 0;
	srn_tc_recv(fd, &verdict, 1, TMO);
	CHECK(verdict == 1);
	printf("ok: Write to a target QP in ERR: %s, nothing placed\n", ibv_wc_status_str(st));
	return 0;
}

/* order: Send (the target has no receive yet: RNR, retried forever),
 * then a Write, in one post list.  Until the target posts its receive the
 * Write must not have landed; then both complete, in order. */
static int mode_order(int fd, bool parent)
{
	if (!parent) {
		target_open(fd, NULL);
		srn_tc_barrier(fd, 0xf1, TMO);       /* both posted */
		usleep(300000);                      /* the requester retries meanwhile */
		uint8_t early = 0;
		for (uint32_t i = 0; i < 4096; i++)
			early |= t_rw[i];
		struct ibv_sge sge = { (uintptr_t)t_wo, 64, mr_wo->lkey };
		struct ibv_recv_wr rw = { .wr_id = 7, .sg_list = &sge, .num_sge = 1 }, *bad;
		CHECK(ibv_post_recv(T.qp[0], &rw, &bad) == 0);
		struct ibv_wc wc = srn_tc_poll_one(T.cq, 20);
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 7);
		target_wait_done(fd);
		uint8_t verdict = !early;
		for (uint32_t i = 0; i < 4096; i++)
			if (t_rw[i] != 0x77)
				verdict = 0;
		srn_tc_send(fd, &verdict, 1);
		return verdict ? 0 : 1;
	}
	requester_open(fd);
	memset(r_src, 0x77, 4096);
	struct ibv_sge s1[4], s2 = { (uintptr_t)r_src, 16, req_mr_src->lkey };
	struct ibv_send_wr w1, w0 = {
		.wr_id = 100, .sg_list = &s2, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED, .next = &w1,
	}, *bad;
	make_wr(&w1, s1, true, 0, R.peer.addr_rw, R.peer.rkey_rw, 4096, 101);
	CHECK(ibv_post_send(R.qp[0], &w0, &bad) == 0);
	srn_tc_barrier(fd, 0xf1, TMO);
	struct ibv_wc a = srn_tc_poll_one(R.cq, 20), b = srn_tc_poll_one(R.cq, 20);
	CHECK(a.status == IBV_WC_SUCCESS && a.wr_id == 100);
	CHECK(b.status == IBV_WC_SUCCESS && b.wr_id == 101);
	srn_tc_barrier(fd, 0xd2, TMO);
	uint8_t verdict = 0;
	srn_tc_recv(fd, &verdict, 1, TMO);
	CHECK(verdict == 1);
	printf("ok: a Write behind a Send waiting for a receive landed only after it\n");
	return 0;
}

/* imm: NIMM messages on QP 0, every third a Send, the others
 * Write-with-immediate of 1 .. 20000 bytes (multi-packet on the rings,
 * one placement direct) into one of 40 places; each message's bytes are
 * its index, its imm the index too.  The target checks each completion
 * against what the requester will post (the same generator). */
enum { NIMM = 600 };
static uint32_t imm_len(unsigned i) { return 1 + (i * 7919u) % 20000u; }
/* 40 places: the requester runs at most 4 receives (plus RNR retries)
 * ahead of the target's check, so a place is not rewritten before. */
static uint32_t imm_off(unsigned i) { return (i % 40u) * 20000u + i % 13u; }

static int mode_imm(int fd, bool parent)
{
	if (!parent) {
		target_open(fd, NULL);
		struct ibv_sge sge = { (uintptr_t)t_wo, SMALL, mr_wo->lkey };
		struct ibv_recv_wr rw = { .sg_list = &sge, .num_sge = 1 }, *bad;
		unsigned posted = 0;
		uint8_t verdict = 1;
		for (; posted < 4; posted++) {       /* max_recv_wr 4 */
			rw.wr_id = posted;
			CHECK(ibv_post_recv(T.qp[0], &rw, &bad) == 0);
		}
		for (unsigned i = 0; i < NIMM && verdict; i++) {
			struct ibv_wc wc = srn_tc_poll_one(T.cq, 60);
			CHECK(wc.status == IBV_WC_SUCCESS, "recv %u: %s", i,
			      ibv_wc_status_str(wc.status));
			bool send = i % 3 == 0;
			uint32_t len = send ? 16 : imm_len(i);
			if (wc.opcode != (send ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM) ||
			    !(wc.wc_flags & IBV_WC_WITH_IMM) || ntohl(wc.imm_data) != i ||
			    wc.byte_len != len) {
				fprintf(stderr, "[child] message %u: opcode %d imm %u len %u\n", i,
					wc.opcode, ntohl(wc.imm_data), wc.byte_len);
				verdict = 0;
			}
			if (!send)
				for (uint32_t k = 0; k < len; k++)
					if (t_rw[imm_off(i) + k] != (uint8_t)i) {
						fprintf(stderr, "[child] message %u: byte %u not there\n",
							i, k);
						verdict = 0;
						break;
					}
			rw.wr_id = posted++;
			CHECK(ibv_post_recv(T.qp[0], &rw, &bad) == 0);
		}
		target_wait_done(fd);
		srn_tc_send(fd, &verdict, 1);
		return verdict ? 0 : 1;
	}
	requester_open(fd);
	enum { DEPTH = 4 };
	unsigned posted = 0, done = 0;
	double end = srn_tc_now() + 120;
	while (done < NIMM) {
		CHECK(srn_tc_now() < end, "imm: %u of %u done", done, NIMM);
		/* The first 60 one at a time: each then finds nothing before
		 * it outstanding, so the 40 Write-with-immediate among them go
		 * direct however loaded the machine is (test_direct.sh counts
		 * them); the rest DEPTH deep, where direct and ring mix. */
		while (posted < NIMM && posted - done < (posted < 60 ? 1u : DEPTH)) {
			unsigned i = posted;
			bool send = i % 3 == 0;
			uint32_t len = send ? 16 : imm_len(i);
			uint8_t *src = r_src + (i % DEPTH) * 20000u;
			memset(src, (int)(uint8_t)i, len);
			struct ibv_sge sge = { (uintptr_t)src, len, req_mr_src->lkey };
			struct ibv_send_wr wr = {
				.wr_id = i, .sg_list = &sge, .num_sge = 1,
				.opcode = send ? IBV_WR_SEND_WITH_IMM : IBV_WR_RDMA_WRITE_WITH_IMM,
				.send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(i),
				.wr.rdma = { .remote_addr = R.peer.addr_rw + imm_off(i),
					     .rkey = R.peer.rkey_rw },
			}, *bad;
			CHECK(ibv_post_send(R.qp[0], &wr, &bad) == 0);
			posted++;
		}
		struct ibv_wc wc;
		int n = ibv_poll_cq(R.cq, 1, &wc);
		CHECK(n >= 0);
		if (n) {
			CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == done, "send %u: %s",
			      done, ibv_wc_status_str(wc.status));
			done++;
		}
	}
	srn_tc_barrier(fd, 0xd2, TMO);
	uint8_t verdict = 0;
	srn_tc_recv(fd, &verdict, 1, TMO);
	CHECK(verdict == 1);
	printf("ok: %u Write-with-immediate and %u Sends: in order, imm and length exact, data "
	       "in place at the completion\n", NIMM - NIMM / 3, NIMM / 3);
	return 0;
}

/* The requester's stream for dereg/killed: 16 KiB Writes into the first
 * 64 KiB of the rw region, each with its own byte value, 8 in flight,
 * until an error completion or `seconds` pass (0: until killed). */
static unsigned stream(double seconds)
{
	enum { DEPTH = 8, CH = 16384 };
	unsigned inflight = 0, done = 0, n = 0;
	double end = srn_tc_now() + (seconds > 0 ? seconds : 3600);
	while (srn_tc_now() < end) {
		while (inflight < DEPTH) {
			uint32_t slot = n % DEPTH;
			memset(r_src + slot * CH, (int)(n % 250) + 1, CH);
			struct ibv_sge sge = { (uintptr_t)(r_src + slot * CH), CH, req_mr_src->lkey };
			struct ibv_send_wr wr = {
				.wr_id = n, .sg_list = &sge, .num_sge = 1,
				.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
				.wr.rdma = { .remote_addr = R.peer.addr_rw + (n % 4) * CH,
					     .rkey = R.peer.rkey_rw },
			}, *bad;
			if (ibv_post_send(R.qp[0], &wr, &bad))
				return done;
			inflight++;
			n++;
		}
		struct ibv_wc wc[DEPTH];
		int got = ibv_poll_cq(R.cq, DEPTH, wc);
		CHECK(got >= 0);
		for (int i = 0; i < got; i++) {
			inflight--;
			if (wc[i].status != IBV_WC_SUCCESS)
				return done;
			done++;
		}
	}
	return done;
}

/* The requester's side of dereg/unmap: stream until the Writes fail,
 * then take the target's verdict (1: nothing changed). */
static unsigned stream_until_verdict(int fd)
{
	requester_open(fd);
	unsigned done = stream(30);
	uint8_t verdict = 0;
	srn_tc_recv(fd, &verdict, 1, TMO);
	CHECK(verdict == 1);
	return done;
}

/* The target's side of dereg/killed: wait for bytes, dereg, then watch. */
static bool dereg_and_watch(pid_t kill_first, double *dereg_s)
{
	double end = srn_tc_now() + 20;
	while (srn_tc_now() < end && !__atomic_load_n(&t_rw[SMALL - 1], __ATOMIC_RELAXED))
		usleep(1000);
	CHECK(t_rw[SMALL - 1]);
	usleep(50000);
	if (kill_first > 0)
		CHECK(kill(kill_first, SIGKILL) == 0);
	double t0 = srn_tc_now();
	CHECK(ibv_dereg_mr(mr_rw) == 0);
	*dereg_s = srn_tc_now() - t0;
	static uint8_t snap[SMALL];
	memcpy(snap, t_rw, SMALL);
	usleep(300000);
	return memcmp(snap, t_rw, SMALL) == 0;
}

static int mode_dereg(int fd, bool parent)
{
	if (!parent) {
		target_open(fd, NULL);
		double s;
		uint8_t verdict = dereg_and_watch(0, &s);
		srn_tc_send(fd, &verdict, 1);
		return verdict ? 0 : 1;
	}
	printf("ok: %u Writes of 16 KiB before dereg; no byte changed after it returned\n",
	       stream_until_verdict(fd));
	return 0;
}

/* unmap: the registered pages go while Writes stream (the munmap hook
 * revokes the region and fences placements first); fresh pages mapped at
 * the same address must stay zero. */
static int mode_unmap(int fd, bool parent)
{
	if (!parent) {
		alt_rw = mmap(NULL, SMALL, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		CHECK(alt_rw != MAP_FAILED);
		target_open(fd, NULL);
		double end = srn_tc_now() + 20;
		while (srn_tc_now() < end && !__atomic_load_n(&alt_rw[SMALL - 1], __ATOMIC_RELAXED))
			usleep(1000);
		CHECK(alt_rw[SMALL - 1]);
		usleep(50000);
		CHECK(munmap(alt_rw, SMALL) == 0);
		uint8_t *again = mmap(alt_rw, SMALL, PROT_READ | PROT_WRITE,
				      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		CHECK(again == alt_rw);
		usleep(300000);
		uint8_t verdict = 1;
		for (uint32_t i = 0; i < SMALL; i++)
			if (again[i])
				verdict = 0;
		srn_tc_send(fd, &verdict, 1);
		return verdict ? 0 : 1;
	}
	printf("ok: %u Writes of 16 KiB, then the target unmapped: the new pages stayed zero\n",
	       stream_until_verdict(fd));
	return 0;
}

/* stale_span: the target's region was moved onto a memfd (64 KiB and
 * remote write), then its memory went without our hooks seeing it (as
 * libc's free of a large block unmaps) and new memory took its place; a
 * region registered over the new memory must receive the Writes, not the
 * old memfd.  The old region stays registered throughout, so its span
 * is still on the list. */
static int mode_stale_span(int fd, bool parent)
{
	if (!parent) {
		alt_rw = mmap(NULL, SMALL, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		CHECK(alt_rw != MAP_FAILED);
		T.ctx = srn_tc_open(&T.me.gid);
		T.pd = ibv_alloc_pd(T.ctx);
		CHECK(T.pd);
		struct ibv_mr *old = ibv_reg_mr(T.pd, alt_rw, SMALL, IBV_ACCESS_LOCAL_WRITE |
						IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
		CHECK(old);
		/* Raw system calls: the library's hooks do not see them. */
		CHECK(syscall(SYS_munmap, alt_rw, SMALL) == 0);
		void *again = (void *)syscall(SYS_mmap, alt_rw, SMALL, PROT_READ | PROT_WRITE,
					      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		CHECK(again == alt_rw);
		target_regions(&T);      /* mr_rw over the new memory */
		connect_side(&T, fd, NULL);
		target_wait_done(fd);
		uint32_t bad = 0;
		for (uint32_t i = 0; i < SMALL; i++)
			if (alt_rw[i] != (uint8_t)(i * 7 + 3))
				bad++;
		CHECK(ibv_dereg_mr(old) == 0);
		srn_tc_send(fd, &bad, sizeof(bad));
		return bad ? 1 : 0;
	}
	requester_open(fd);
	for (uint32_t i = 0; i < SMALL; i++)
		r_src[i] = (uint8_t)(i * 7 + 3);
	struct ibv_sge sg[4];
	struct ibv_send_wr w;
	make_wr(&w, sg, true, 0, R.peer.addr_rw, R.peer.rkey_rw, SMALL, 1);
	CHECK(post_wait(R.qp[0], &w) == IBV_WC_SUCCESS);
	target_wait_done(fd);
	uint32_t bad = 1;
	srn_tc_recv(fd, &bad, sizeof(bad), TMO);
	CHECK(bad == 0);
	printf("ok: a Write to a region over memory that replaced a moved span landed in it\n");
	return 0;
}

/* killed: the child streams, the parent (target) kills it mid-stream
 * and deregisters at once. */
static int mode_killed(int fd, bool parent, pid_t child)
{
	if (!parent) {
		requester_open(fd);
		stream(0);
		return 0;
	}
	target_open(fd, NULL);
	double s = 0;
	bool same = dereg_and_watch(child, &s);
	CHECK(waitpid(child, NULL, 0) == child);
	CHECK(same);
	CHECK(s < 5.0);
	printf("ok: requester killed mid-stream; dereg took %.3f s; no byte changed after\n", s);
	return 0;
}

/* last_byte: the target spins on the last byte of each Write, as
 * ib_write_lat does, and then finds the whole message there.  Message k
 * fills [off, off+len) with one value, new each time; sizes span one
 * byte, the 64-128 bytes memcpy stores out of order, unaligned tails and
 * whole chunks.  Both sides draw the same (off, len) sequence. */
#define LB_ROUNDS 300
static void lb_msg(unsigned k, uint32_t *off, uint32_t *len)
{
	static const uint32_t sizes[] = { 1, 2, 7, 8, 9, 63, 64, 65, 96, 127, 128, 129,
					  4095, 4096, 4103, SMALL, BIG / 2 };
	uint32_t x = k * 2654435761u;
	*len = sizes[k % (sizeof(sizes) / sizeof(sizes[0]))];
	*off = (x >> 8) % (BIG - *len + 1);
}

/* This thread alone on the allowed CPU of the given rank from the end
 * (0: the last), when there are two or more: the target's spinner and
 * the requester's copy then run at once, so a message whose last byte
 * landed early is seen torn.  With one CPU nothing changes. */
static void pin_self(int from_end)
{
	cpu_set_t all, one;
	if (sched_getaffinity(0, sizeof(all), &all) || CPU_COUNT(&all) < 2)
		return;
	int seen = 0;
	for (int c = CPU_SETSIZE - 1; c >= 0; c--) {
		if (!CPU_ISSET(c, &all) || seen++ != from_end)
			continue;
		CPU_ZERO(&one);
		CPU_SET(c, &one);
		sched_setaffinity(0, sizeof(one), &one);    /* this thread only */
		return;
	}
}

static int mode_last_byte(int fd, bool parent)
{
	if (!parent) {
		target_open(fd, NULL);
		pin_self(0);
		unsigned torn = 0;
		for (unsigned k = 0; k < LB_ROUNDS; k++) {
			uint32_t off, len;
			lb_msg(k, &off, &len);
			uint8_t v = (uint8_t)(1 + k % 255);
			const uint8_t *lastp = &t_rw[off + len - 1];
			double t0 = srn_tc_now();
			while (__atomic_load_n(lastp, __ATOMIC_ACQUIRE) != v)
				CHECK(srn_tc_now() - t0 < 20);   /* bounded: the Write never came */
			/* From the end down: the bytes a copy out of order
			 * would store last are the ones right before the tail. */
			for (uint32_t i = len; i-- > 0;)
				if (((const volatile uint8_t *)t_rw)[off + i] != v) {
					torn++;
					break;
				}
			/* Zero again before the next message: its value is then
			 * new to every byte it covers. */
			memset(t_rw + off, 0, len);
			srn_tc_barrier(fd, 0xd5, TMO);
		}
		CHECK(torn == 0);
		target_wait_done(fd);
		return 0;
	}
	requester_open(fd);
	pin_self(1);
	for (unsigned k = 0; k < LB_ROUNDS; k++) {
		uint32_t off, len;
		lb_msg(k, &off, &len);
		memset(r_src, 1 + k % 255, len);
		struct ibv_sge s[4];
		struct ibv_send_wr w;
		make_wr(&w, s, true, 0, R.peer.addr_rw + off, R.peer.rkey_rw, len, k);
		CHECK(post_wait(R.qp[0], &w) == IBV_WC_SUCCESS);
		srn_tc_barrier(fd, 0xd5, TMO);
	}
	target_wait_done(fd);
	printf("ok: %u Writes of 1 B to 512 KiB; the target, spinning on each last byte, "
	       "found every message whole\n", LB_ROUNDS);
	return 0;
}

/* One atomic on the target's rw region at off (8-byte aligned); returns
 * the original value. */
static uint64_t trace_atomic(bool cas, uint64_t off, uint64_t cmp_add, uint64_t swap)
{
	uint64_t *res = (uint64_t *)(r_dst + BIG - 8);
	struct ibv_sge s = { (uintptr_t)res, 8, req_mr_dst->lkey };
	struct ibv_send_wr w = {
		.wr_id = 7000 + cas, .sg_list = &s, .num_sge = 1, .send_flags = IBV_SEND_SIGNALED,
		.opcode = cas ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD,
		.wr.atomic = { .remote_addr = R.peer.addr_rw + off, .rkey = R.peer.rkey_rw,
			       .compare_add = cmp_add, .swap = swap },
	};
	CHECK(post_wait(R.qp[0], &w) == IBV_WC_SUCCESS);
	return *res;
}

/* trace: each operation alone (nothing outstanding: all go direct), in
 * the order test_direct_pcap.sh counts them.  r_src[i] = 7i + 3, so a
 * payload's bytes say where they came from. */
static int mode_trace(int fd, bool parent)
{
	trace_mode = true;
	if (!parent) {
		target_open(fd, NULL);
		struct ibv_sge sge = { (uintptr_t)t_wo, SMALL, mr_wo->lkey };
		struct ibv_recv_wr rw = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;
		CHECK(ibv_post_recv(T.qp[0], &rw, &bad) == 0);
		srn_tc_barrier(fd, 0xd4, TMO);          /* the receive for the Send is there */
		target_wait_done(fd);
		return 0;
	}
	requester_open(fd);
	for (uint32_t i = 0; i < BIG; i++)
		r_src[i] = (uint8_t)(7 * i + 3);
	uint64_t raddr = R.peer.addr_rw;
	uint64_t a8 = (8 - raddr % 8) % 8;       /* the first 8-byte aligned offset */
	struct ibv_qp *qp = R.qp[0];
	struct ibv_sge s[4];
	struct ibv_send_wr w;
	static const uint32_t writes[3] = { 5000, 40000, BIG };
	make_wr(&w, s, true, 0, raddr, R.peer.rkey_rw, writes[0], 1);
	CHECK(post_wait(qp, &w) == IBV_WC_SUCCESS);
	make_wr(&w, s, false, 0, raddr, R.peer.rkey_rw, 3000, 2);
	CHECK(post_wait(qp, &w) == IBV_WC_SUCCESS);
	CHECK(memcmp(r_dst, r_src, 3000) == 0);
	make_wr(&w, s, false, 0, raddr + 4096, R.peer.rkey_rw, 100, 3);
	CHECK(post_wait(qp, &w) == IBV_WC_SUCCESS);
	CHECK(memcmp(r_dst, r_src + 4096, 100) == 0);
	struct ibv_sge ls[4][4];
	struct ibv_send_wr lw[4];
	for (int i = 0; i < 4; i++) {
		make_wr(&lw[i], ls[i], true, 16 * (uint32_t)i, raddr + 65536 + 16 * (uint32_t)i,
			R.peer.rkey_rw, 16, 10 + (uint64_t)i);
		lw[i].next = i < 3 ? &lw[i + 1] : NULL;
	}
	CHECK(post_wait(qp, lw) == IBV_WC_SUCCESS);
	for (int i = 1; i < 3; i++) {
		make_wr(&w, s, true, 0, raddr, R.peer.rkey_rw, writes[i], 20 + (uint64_t)i);
		CHECK(post_wait(qp, &w) == IBV_WC_SUCCESS);
	}
	/* The region now holds r_src: the CAS hits, the FAA sees the swap. */
	uint64_t was;
	memcpy(&was, r_src + a8, 8);
	CHECK(trace_atomic(true, a8, was, 0x1122334455667788ull) == was);
	CHECK(trace_atomic(false, a8, 5, 0) == 0x1122334455667788ull);
	/* One real packet: the Send takes the ring, with the PSN the direct
	 * operations took and gave back. */
	srn_tc_barrier(fd, 0xd4, TMO);
	struct ibv_sge ss = { (uintptr_t)r_src, 16, req_mr_src->lkey };
	struct ibv_send_wr sw = { .wr_id = 30, .sg_list = &ss, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	CHECK(post_wait(qp, &sw) == IBV_WC_SUCCESS);
	srn_tc_barrier(fd, 0xd2, TMO);
	printf("ok: 7 Writes, 2 Reads, 2 atomics, 1 Send (requester pid %d)\n", (int)getpid());
	return 0;
}

/* reopen: see the top.  The old QP's Write finds its target QP gone
 * (retries, then an error), direct or not. */
static void target_close(void)
{
	for (int i = 0; i < NQP; i++)
		CHECK(ibv_destroy_qp(T.qp[i]) == 0);
	CHECK(ibv_destroy_cq(T.cq) == 0);
	CHECK(ibv_dereg_mr(mr_rw) == 0 && ibv_dereg_mr(mr_ro) == 0 && ibv_dereg_mr(mr_wo) == 0);
	CHECK(ibv_dealloc_pd(T.pd) == 0);
	CHECK(ibv_close_device(T.ctx) == 0);
}

static int mode_reopen(int fd, bool parent)
{
	short_timers = true;
	if (!parent) {
		target_open(fd, NULL);
		srn_tc_barrier(fd, 0xf1, TMO);       /* first Write done */
		uint8_t first = t_rw[0] == 0x44 && t_rw[63] == 0x44;
		target_close();
		memset(t_rw, 0, 4096);
		struct side again = { 0 };
		again.ctx = srn_tc_open(&again.me.gid);
		again.pd = ibv_alloc_pd(again.ctx);
		CHECK(again.pd);
		target_regions(&again);
		srn_tc_barrier(fd, 0xf2, TMO);       /* reopened, registered */
		target_wait_done(fd);
		uint8_t verdict = first;
		for (uint32_t i = 0; i < 4096; i++)
			if (t_rw[i])
				verdict = 0;
		srn_tc_send(fd, &verdict, 1);
		CHECK(ibv_dereg_mr(mr_rw) == 0 && ibv_dereg_mr(mr_ro) == 0 && ibv_dereg_mr(mr_wo) == 0);
		CHECK(ibv_dealloc_pd(again.pd) == 0);
		CHECK(ibv_close_device(again.ctx) == 0);
		return verdict ? 0 : 1;
	}
	enum ibv_wc_status st = write_then_refused(fd, 0xf1, 0xf2, 0);
	srn_tc_barrier(fd, 0xd2, TMO);
	uint8_t verdict = 0;
	srn_tc_recv(fd, &verdict, 1, TMO);
	CHECK(verdict == 1, "a Write of the old QP landed in the reopened target's region");
	printf("ok: a Write to a target that reopened its device: %s, nothing placed\n",
	       ibv_wc_status_str(st));
	return 0;
}

int main(int argc, char **argv)
{
	const char *m = argc == 2 ? argv[1] : "";
	int (*fn)(int, bool) = !strcmp(m, "data") ? mode_data : !strcmp(m, "errors") ? mode_errors
			     : !strcmp(m, "qp_err") ? mode_qp_err : !strcmp(m, "dereg") ? mode_dereg
			     : !strcmp(m, "order") ? mode_order : !strcmp(m, "imm") ? mode_imm
			     : !strcmp(m, "unmap") ? mode_unmap : !strcmp(m, "trace") ? mode_trace
			     : !strcmp(m, "last_byte") ? mode_last_byte
			     : !strcmp(m, "stale_span") ? mode_stale_span
			     : !strcmp(m, "reopen") ? mode_reopen : NULL;
	if (!fn && strcmp(m, "killed")) {
		fprintf(stderr, "usage: %s data|errors|qp_err|dereg|killed|order|imm|unmap|last_byte|"
			"trace|stale_span|reopen\n",
			argv[0]);
		return 2;
	}
	int fd;
	pid_t pid = srn_tc_fork(&fd);
	if (!fn) {
		if (pid == 0)
			return mode_killed(fd, false, 0);
		return mode_killed(fd, true, pid);
	}
	if (pid == 0)
		return fn(fd, false);
	int ret = fn(fd, true);
	int cret = srn_tc_wait_child(pid, 60);
	return ret ? ret : cret;
}
