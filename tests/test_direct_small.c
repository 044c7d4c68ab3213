/*
 * test_direct_small - same-host direct placement into regions under
 * 64 KiB (issue 29): their pages move onto a memfd at registration
 * (core/mr_share.c), so a small Write or Read is a copy through the
 * requester's mapping instead of a system call.  Two processes, each its
 * own device; test_direct_small.sh runs every mode mapped (the default),
 * by system call (SOFTRNIC_DIRECT_MAP=0) and on the rings
 * (SOFTRNIC_DIRECT=0), and checks the counters say which path ran.
 *
 *   test_direct_small data   three regions inside malloc'd heap blocks
 *                            (8 B, 100 B at an odd address, 3000 B across
 *                            a page boundary), other heap objects on the
 *                            same pages: random Writes and Reads of every
 *                            length, byte-exact; the target keeps storing
 *                            into its neighbouring objects all along and
 *                            none of its stores is lost; a child forked by
 *                            the target after the move writes its own copy
 *                            and the parent never sees it
 *   test_direct_small dereg  the target deregisters the 8-byte region while
 *                            8-byte Writes stream into it: no byte changes
 *                            after ibv_dereg_mr returns, and the stream
 *                            ends in an error completion
 *   test_direct_small many   160 small regions, one per page: more than
 *                            move (the rest keep the system-call copy),
 *                            more than a requester keeps mapped (it then
 *                            copies by system call rather than remap per
 *                            Write), each gets its Writes, byte-exact
 *
 * The parent is the requester, the child the target; the target never
 * polls: only its progress thread serves it.
 */
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "rc_test_conn.h"

#define TMO 30000
#define NREG 3
#define MANY 160
#define PAGE 4096u
#define CANARY 64u                    /* neighbour bytes on each side */

static const uint32_t reg_len[NREG] = { 8, 100, 3000 };

struct info {
	union ibv_gid gid;
	uint32_t qpn;
	uint32_t rkey[MANY];
	uint64_t addr[MANY];
};

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct info me, peer;
};

static struct side S;
static uint64_t rng = 0x243f6a8885a308d3ull;
static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)rng;
}

static void side_open(void)
{
	S.ctx = srn_tc_open(&S.me.gid);
	S.pd = ibv_alloc_pd(S.ctx);
	CHECK(S.pd);
	S.cq = ibv_create_cq(S.ctx, 256, NULL, NULL, 0);
	CHECK(S.cq);
	struct ibv_qp_init_attr ia = {
		.send_cq = S.cq, .recv_cq = S.cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64, .max_recv_wr = 4, .max_send_sge = 2, .max_recv_sge = 1 },
	};
	S.qp = ibv_create_qp(S.pd, &ia);
	CHECK(S.qp);
	S.me.qpn = S.qp->qp_num;
}

static void side_connect(int fd)
{
	srn_tc_xchg(fd, &S.me, &S.peer, sizeof(S.me), TMO);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	o.timeout = 17;     /* no retry timeout even when the machine is busy */
	srn_tc_connect(S.qp, &S.peer.gid, S.peer.qpn, 0x300, 0x300, &o);
	srn_tc_barrier(fd, 0xa1, TMO);
}

/* One signalled Write or Read of len bytes between local and the peer's
 * region r at offset off; returns its completion status. */
static enum ibv_wc_status op(bool write, uint8_t *local, struct ibv_mr *lmr, int r, uint32_t off,
			     uint32_t len)
{
	/* Two SGEs now and then: the gather path too. */
	struct ibv_sge sge[2] = { { (uintptr_t)local, len, lmr->lkey } };
	int n = 1;
	if (len >= 2 && rnd() % 3 == 0) {
		sge[0].length = len / 2;
		sge[1] = (struct ibv_sge){ (uintptr_t)local + len / 2, len - len / 2, lmr->lkey };
		n = 2;
	}
	struct ibv_send_wr wr = {
		.sg_list = sge, .num_sge = n, .send_flags = IBV_SEND_SIGNALED,
		.opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ,
		.wr.rdma = { .remote_addr = S.peer.addr[r] + off, .rkey = S.peer.rkey[r] },
	}, *bad;
	CHECK(ibv_post_send(S.qp, &wr, &bad) == 0);
	return srn_tc_poll_one(S.cq, 20).status;
}

/* ---- data ---- */

/* The target's heap block for region i: CANARY bytes, the region, CANARY
 * bytes; region 1 starts at an odd address, region 2 crosses a page. */
static uint8_t *blk[NREG];
static uint8_t *reg_at(int i)
{
	return blk[i] + CANARY + (i == 1);
}

static void data_target(int fd)
{
	side_open();
	struct ibv_mr *mr[NREG];
	for (int i = 0; i < NREG; i++) {
		size_t sz = 2 * CANARY + reg_len[i] + 1;
		if (i == 2) {
			/* Across a page boundary inside one heap block. */
			uint8_t *p = aligned_alloc(PAGE, 2 * PAGE);
			CHECK(p);
			blk[i] = p + PAGE - 1000 - CANARY;
		} else {
			blk[i] = malloc(sz);
			CHECK(blk[i]);
		}
		memset(blk[i], 0, sz);
		mr[i] = ibv_reg_mr(S.pd, reg_at(i), reg_len[i], IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
		CHECK(mr[i]);
		S.me.rkey[i] = mr[i]->rkey;
		S.me.addr[i] = (uintptr_t)reg_at(i);
	}
	side_connect(fd);
	/* The program keeps using the objects next to its regions while
	 * peers place into them: every store must stay. */
	uint8_t v = 0;
	bool done = false;
	double end = srn_tc_now() + 120;
	while (!srn_tc_peer_closed(fd) && !done && srn_tc_now() < end) {
		v++;
		for (int i = 0; i < NREG; i++) {
			memset(blk[i], v, CANARY);
			memset(reg_at(i) + reg_len[i], v, CANARY);
		}
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
		done = __atomic_load_n(&reg_at(0)[0], __ATOMIC_ACQUIRE) == 0xee &&
		       __atomic_load_n(&reg_at(0)[7], __ATOMIC_ACQUIRE) == 0xee;
	}
	CHECK(done);
	/* A forked child writes its copy of the pages; the parent's stay. */
	pid_t c = fork();
	CHECK(c >= 0);
	if (c == 0) {
		for (int i = 0; i < NREG; i++)
			memset(reg_at(i) - CANARY, 0x5a, reg_len[i] + 2 * CANARY);
		_exit(0);
	}
	int st;
	CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	uint32_t bad = 0;
	for (int i = 0; i < NREG; i++)
		for (uint32_t k = 0; k < CANARY; k++)
			bad += (blk[i][k] != v) + (reg_at(i)[reg_len[i] + k] != v);
	srn_tc_send(fd, &bad, sizeof(bad));
	for (int i = 0; i < NREG; i++)
		srn_tc_send(fd, reg_at(i), reg_len[i]);
	srn_tc_barrier(fd, 0xa2, TMO);
	for (int i = 0; i < NREG; i++)
		CHECK(ibv_dereg_mr(mr[i]) == 0);
}

static int data_requester(int fd)
{
	side_open();
	static uint8_t src[4096], dst[4096], model[NREG][4096];
	struct ibv_mr *ms = ibv_reg_mr(S.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *md = ibv_reg_mr(S.pd, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE);
	CHECK(ms && md);
	side_connect(fd);
	unsigned writes = 0, reads = 0;
	for (int k = 0; k < 6000; k++) {
		int r = (int)(rnd() % NREG);
		uint32_t len = 1 + rnd() % reg_len[r], off = rnd() % (reg_len[r] - len + 1);
		if (rnd() % 3) {
			for (uint32_t i = 0; i < len; i++)
				src[i] = (uint8_t)rnd();
			CHECK(op(true, src, ms, r, off, len) == IBV_WC_SUCCESS);
			memcpy(model[r] + off, src, len);
			writes++;
		} else {
			CHECK(op(false, dst, md, r, off, len) == IBV_WC_SUCCESS);
			CHECK(memcmp(dst, model[r] + off, len) == 0);
			reads++;
		}
	}
	/* The end mark: the first region all 0xee. */
	memset(src, 0xee, 8);
	CHECK(op(true, src, ms, 0, 0, 8) == IBV_WC_SUCCESS);
	memcpy(model[0], src, 8);
	uint32_t bad = 1;
	srn_tc_recv(fd, &bad, sizeof(bad), TMO);
	CHECK(bad == 0);
	for (int i = 0; i < NREG; i++) {
		srn_tc_recv(fd, dst, reg_len[i], TMO);
		CHECK(memcmp(dst, model[i], reg_len[i]) == 0);
	}
	srn_tc_barrier(fd, 0xa2, TMO);
	printf("ok: %u Writes and %u Reads into regions of 8, 100 and 3000 B, byte-exact; the "
	       "target's neighbouring stores kept; a forked child's stores stayed its own\n",
	       writes, reads);
	return 0;
}

/* ---- dereg ---- */

static void dereg_target(int fd)
{
	side_open();
	uint8_t *b = malloc(256);
	CHECK(b);
	memset(b, 0, 256);
	uint8_t *r = b + 64;
	struct ibv_mr *mr = ibv_reg_mr(S.pd, r, 8, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr);
	S.me.rkey[0] = mr->rkey;
	S.me.addr[0] = (uintptr_t)r;
	side_connect(fd);
	double end = srn_tc_now() + 20;
	while (srn_tc_now() < end && !__atomic_load_n(&r[7], __ATOMIC_ACQUIRE))
		usleep(1000);
	CHECK(r[7]);
	usleep(50000);
	CHECK(ibv_dereg_mr(mr) == 0);
	uint8_t snap[8];
	memcpy(snap, r, 8);
	usleep(300000);
	uint8_t verdict = memcmp(snap, r, 8) == 0;
	srn_tc_send(fd, &verdict, 1);
	srn_tc_barrier(fd, 0xa3, TMO);
}

static int dereg_requester(int fd)
{
	side_open();
	static uint8_t src[8 * 8];
	struct ibv_mr *ms = ibv_reg_mr(S.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	CHECK(ms);
	side_connect(fd);
	unsigned n = 0, ok = 0, inflight = 0;
	bool failed = false;
	double end = srn_tc_now() + 30;
	while (!failed && srn_tc_now() < end) {
		while (inflight < 8) {
			uint8_t *p = src + (n % 8) * 8;
			memset(p, (int)(n % 250) + 1, 8);
			struct ibv_sge sge = { (uintptr_t)p, 8, ms->lkey };
			struct ibv_send_wr wr = {
				.wr_id = n, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				.send_flags = IBV_SEND_SIGNALED,
				.wr.rdma = { .remote_addr = S.peer.addr[0], .rkey = S.peer.rkey[0] },
			}, *bad;
			if (ibv_post_send(S.qp, &wr, &bad))
				break;
			inflight++;
			n++;
		}
		struct ibv_wc wc[8];
		int got = ibv_poll_cq(S.cq, 8, wc);
		CHECK(got >= 0);
		for (int i = 0; i < got; i++, inflight--) {
			if (wc[i].status != IBV_WC_SUCCESS)
				failed = true;
			else
				ok++;
		}
	}
	CHECK(failed);
	uint8_t verdict = 0;
	srn_tc_recv(fd, &verdict, 1, TMO);
	CHECK(verdict == 1);
	srn_tc_barrier(fd, 0xa3, TMO);
	printf("ok: %u Writes of 8 B before dereg; none changed a byte after it returned, the "
	       "stream ended in an error\n", ok);
	return 0;
}

/* ---- many ---- */

static void many_target(int fd)
{
	side_open();
	uint8_t *pages = aligned_alloc(PAGE, (size_t)MANY * PAGE);
	CHECK(pages);
	memset(pages, 0, (size_t)MANY * PAGE);
	struct ibv_mr *mr[MANY];
	for (int i = 0; i < MANY; i++) {
		uint8_t *r = pages + (size_t)i * PAGE + 100;
		mr[i] = ibv_reg_mr(S.pd, r, 16, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		CHECK(mr[i]);
		S.me.rkey[i] = mr[i]->rkey;
		S.me.addr[i] = (uintptr_t)r;
	}
	side_connect(fd);
	srn_tc_barrier(fd, 0xa4, 120000);
	uint32_t bad = 0;
	for (int i = 0; i < MANY; i++)
		for (uint32_t k = 0; k < 16; k++)
			bad += pages[(size_t)i * PAGE + 100 + k] != (uint8_t)(i * 16 + k + 1);
	srn_tc_send(fd, &bad, sizeof(bad));
	for (int i = 0; i < MANY; i++)
		CHECK(ibv_dereg_mr(mr[i]) == 0);
}

static int many_requester(int fd)
{
	side_open();
	static uint8_t src[16];
	struct ibv_mr *ms = ibv_reg_mr(S.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	CHECK(ms);
	side_connect(fd);
	/* Twice round, so the requester's mappings are reused and evicted. */
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < MANY; i++) {
			for (uint32_t k = 0; k < 16; k++)
				src[k] = (uint8_t)(round ? i * 16 + k + 1 : 0xff);
			CHECK(op(true, src, ms, i, 0, 16) == IBV_WC_SUCCESS);
		}
	srn_tc_barrier(fd, 0xa4, TMO);
	uint32_t bad = 1;
	srn_tc_recv(fd, &bad, sizeof(bad), TMO);
	CHECK(bad == 0);
	printf("ok: %d small regions, 2 Writes each, byte-exact\n", MANY);
	return 0;
}

int main(int argc, char **argv)
{
	const char *m = argc == 2 ? argv[1] : "";
	int (*req)(int) = !strcmp(m, "data") ? data_requester : !strcmp(m, "dereg") ? dereg_requester
			: !strcmp(m, "many") ? many_requester : NULL;
	void (*tgt)(int) = !strcmp(m, "data") ? data_target : !strcmp(m, "dereg") ? dereg_target
			 : many_target;
	if (!req) {
		fprintf(stderr, "usage: %s data|dereg|many\n", argv[0]);
		return 2;
	}
	int fd;
	pid_t pid = srn_tc_fork(&fd);
	if (pid == 0) {
		tgt(fd);
		return 0;
	}
	int ret = req(fd);
	int cret = srn_tc_wait_child(pid, 60);
	return ret ? ret : cret;
}
