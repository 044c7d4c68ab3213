/*
 * test_mr_freed - a registered block the program frees or reallocs
 * before ibv_dereg_mr (issue 27 item 2).  On a kernel NIC the region
 * keeps its pinned pages: a peer's Read returns the registered bytes and
 * its Write lands in pages the program no longer sees; the program's new
 * memory is never touched and nothing crashes.
 *
 *  - the target mallocs and registers four blocks with remote read and
 *    write: 256 KiB and 32 MiB (glibc maps both with mmap, and free()
 *    unmaps them with its own munmap, which no hook sees), one of each
 *    to be freed and one to be realloc'd; it posts a receive into the
 *    first 4 KiB of the freed 256 KiB block (an lkey);
 *  - the peer reads each region whole: the registered bytes;
 *  - the target frees two blocks and reallocs the other two larger,
 *    then fills new memory: malloc'd blocks of the same sizes and, where
 *    libc unmapped the old block, an anonymous mapping at its pages;
 *  - the peer reads each region again through the old rkey: the old
 *    bytes, never the new data; writes each whole; reads it back (the
 *    Write's bytes: the registered pages took them); sends 4 KiB, which
 *    the receive posted into the freed block takes;
 *  - the target is alive, the receive completed, and every new byte it
 *    wrote is as it wrote it.
 *
 * Two processes, one device each: same-host direct placement by default,
 * the rings with SOFTRNIC_DIRECT=0, the system-call copy with
 * SOFTRNIC_DIRECT_MAP=0, the UDP responder with SOFTRNIC_SHM=0.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "rc_test_conn.h"

#define NBLK 4
#define ALLOC_HEAD 64                  /* bytes an allocator may write into a freed block */
#define SEND_LEN 4096u
#define TMO 60000
#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static const size_t blk_len[NBLK] = { 256u << 10, 32u << 20, 256u << 10, 32u << 20 };
static const bool blk_realloc[NBLK] = { false, false, true, true };

struct info {
	union ibv_gid gid;
	uint32_t qpn;
	uint32_t rkey[NBLK];
	uint64_t addr[NBLK];
};

/* The registered bytes, the peer's Write and the program's new data:
 * three patterns that never agree at any offset. */
static uint8_t old_byte(int b, size_t i) { return (uint8_t)(i * 7 + 3 * b + 1); }
static uint8_t write_byte(int b, size_t i) { return (uint8_t)(i * 7 + 3 * b + 2); }
static uint8_t new_byte(size_t i) { return (uint8_t)(i * 7 + 100); }

static void fill_new(uint8_t *p, size_t len, size_t phase)
{
	for (size_t i = 0; i < len; i++)
		p[i] = new_byte(i + phase);
}

static bool new_intact(const uint8_t *p, size_t len, size_t phase)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != new_byte(i + phase))
			return false;
	return true;
}

/* New memory after the frees: a malloc'd block per block, and an
 * anonymous mapping over each freed block's pages libc gave back (a
 * realloc'd block that moved leaves a hole instead: a Write there used
 * to kill the target). */
struct fresh {
	uint8_t *heap[NBLK];
	uint8_t *map[NBLK];
	size_t map_len[NBLK];
};

static void make_fresh(struct fresh *f, uint8_t *const old[NBLK])
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	for (int b = 0; b < NBLK; b++) {
		f->heap[b] = malloc(blk_len[b]);
		CHECK(f->heap[b]);
		fill_new(f->heap[b], blk_len[b], 0);
		if (blk_realloc[b])
			continue;
		uintptr_t s = (uintptr_t)old[b] & ~(pg - 1);
		size_t len = ((uintptr_t)old[b] + blk_len[b] - s + pg - 1) & ~(pg - 1);
		void *m = mmap((void *)s, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (m == (void *)s) {
			f->map[b] = m;
			f->map_len[b] = len;
			fill_new(m, len, (size_t)0 - ((uintptr_t)old[b] - s));
		} else if (m != MAP_FAILED) {
			munmap(m, len);          /* a kernel without NOREPLACE */
		}
		printf("target: block %d (%zu KiB) freed at %p: a new block at %p%s\n", b,
		       blk_len[b] >> 10, (void *)old[b], (void *)f->heap[b],
		       f->map[b] ? ", new pages mapped at the old ones" : "");
	}
}

static void target(int fd)
{
	struct info me = { 0 }, peer;
	struct ibv_context *ctx = srn_tc_open(&me.gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	CHECK(pd && cq);
	struct ibv_qp *qp = srn_tc_rc_qp(pd, cq, 4, 4);
	me.qpn = qp->qp_num;
	uint8_t *blk[NBLK], *grown[NBLK] = { 0 };
	struct ibv_mr *mr[NBLK];
	for (int b = 0; b < NBLK; b++) {
		blk[b] = malloc(blk_len[b]);
		CHECK(blk[b]);
		for (size_t i = 0; i < blk_len[b]; i++)
			blk[b][i] = old_byte(b, i);
		mr[b] = ibv_reg_mr(pd, blk[b], blk_len[b], ACCESS);
		CHECK(mr[b]);
		me.rkey[b] = mr[b]->rkey;
		me.addr[b] = (uintptr_t)blk[b];
	}
	srn_tc_xchg(fd, &me, &peer, sizeof(me), TMO);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	srn_tc_connect(qp, &peer.gid, peer.qpn, 0x100, 0x100, &o);
	struct ibv_sge rs = { (uintptr_t)blk[0], SEND_LEN, mr[0]->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 7, .sg_list = &rs, .num_sge = 1 }, *bad;
	CHECK(ibv_post_recv(qp, &rwr, &bad) == 0);
	srn_tc_barrier(fd, 1, TMO);
	srn_tc_barrier(fd, 2, TMO);       /* the peer read the registered bytes */
	for (int b = 0; b < NBLK; b++) {
		if (!blk_realloc[b]) {
			free(blk[b]);
			continue;
		}
		uint8_t *g = realloc(blk[b], blk_len[b] + blk_len[b] / 4);
		CHECK(g);
		grown[b] = g;
		printf("target: realloc of %zu KiB %s\n", blk_len[b] >> 10,
		       g == blk[b] ? "grew in place" : "moved");
	}
	struct fresh f = { 0 };
	make_fresh(&f, blk);
	srn_tc_barrier(fd, 3, TMO);
	srn_tc_barrier(fd, 4, TMO);       /* the peer read, wrote and sent */
	struct ibv_wc wc = srn_tc_poll_one(cq, 20);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 7 && wc.byte_len == SEND_LEN,
	      "the receive in the freed block: %s", ibv_wc_status_str(wc.status));
	for (int b = 0; b < NBLK; b++) {
		size_t pg = (size_t)sysconf(_SC_PAGESIZE);
		size_t phase = (size_t)0 - ((uintptr_t)blk[b] & (pg - 1));
		CHECK(!f.map[b] || new_intact(f.map[b], f.map_len[b], phase),
		      "block %d (%zu KiB): the memory mapped at its old pages changed", b,
		      blk_len[b] >> 10);
		CHECK(new_intact(f.heap[b], blk_len[b], 0),
		      "block %d (%zu KiB): a block malloc'd after the free changed", b,
		      blk_len[b] >> 10);
	}
	for (int b = 0; b < NBLK; b++) {
		CHECK(ibv_dereg_mr(mr[b]) == 0);
		if (f.map[b])
			munmap(f.map[b], f.map_len[b]);
		free(f.heap[b]);
		free(grown[b]);
	}
	srn_tc_barrier(fd, 5, TMO);
}

/* One RDMA Read or Write of all of block b's region. */
static void rdma(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr, const struct info *tg,
		 int b, enum ibv_wr_opcode op)
{
	struct ibv_sge sge = { (uintptr_t)mr->addr, (uint32_t)blk_len[b], mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = (uint64_t)b, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { tg->addr[b], tg->rkey[b] },
	}, *bad;
	CHECK(ibv_post_send(qp, &wr, &bad) == 0);
	struct ibv_wc wc = srn_tc_poll_one(cq, 30);
	CHECK(wc.status == IBV_WC_SUCCESS, "%s of block %d: %s",
	      op == IBV_WR_RDMA_READ ? "Read" : "Write", b, ibv_wc_status_str(wc.status));
}

static int bad_reads;

/* Where a Read of block b differs from what the region should hold
 * (counted, not fatal: one run shows every block's fate). */
static void check_read(const uint8_t *got, int b, bool written, const char *when)
{
	size_t n_new = 0, n_bad = 0;
	for (size_t i = 0; i < blk_len[b]; i++) {
		uint8_t want = written ? write_byte(b, i) : old_byte(b, i);
		if (got[i] == want)
			continue;
		/* An allocator that keeps a freed block mapped writes its
		 * bookkeeping at its start (AddressSanitizer's quarantine
		 * does): the registered pages' bytes, as a kernel NIC would
		 * read them too. */
		n_bad += i >= ALLOC_HEAD || got[i] == new_byte(i);
		n_new += got[i] == new_byte(i);
	}
	if (!n_bad)
		return;
	bad_reads++;
	fprintf(stderr, "[peer] %s: block %d (%zu KiB%s): %zu bytes not the registered ones, "
		"%zu of them the program's new data\n", when, b, blk_len[b] >> 10,
		blk_realloc[b] ? ", realloc'd" : ", freed", n_bad, n_new);
}

static void peer(int fd)
{
	struct info me = { 0 }, tg;
	struct ibv_context *ctx = srn_tc_open(&me.gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	uint8_t *buf = malloc(32u << 20);
	CHECK(pd && cq && buf);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 32u << 20, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	struct ibv_qp *qp = srn_tc_rc_qp(pd, cq, 4, 4);
	me.qpn = qp->qp_num;
	srn_tc_xchg(fd, &me, &tg, sizeof(me), TMO);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	srn_tc_connect(qp, &tg.gid, tg.qpn, 0x100, 0x100, &o);
	srn_tc_barrier(fd, 1, TMO);
	for (int b = 0; b < NBLK; b++) {
		rdma(qp, cq, mr, &tg, b, IBV_WR_RDMA_READ);
		check_read(buf, b, false, "before the free");
	}
	srn_tc_barrier(fd, 2, TMO);
	srn_tc_barrier(fd, 3, TMO);       /* freed, realloc'd, new data written */
	for (int b = 0; b < NBLK; b++) {
		rdma(qp, cq, mr, &tg, b, IBV_WR_RDMA_READ);
		check_read(buf, b, false, "after the free");
		for (size_t i = 0; i < blk_len[b]; i++)
			buf[i] = write_byte(b, i);
		rdma(qp, cq, mr, &tg, b, IBV_WR_RDMA_WRITE);
		memset(buf, 0, blk_len[b]);
		rdma(qp, cq, mr, &tg, b, IBV_WR_RDMA_READ);
		check_read(buf, b, true, "read back after the Write");
	}
	memset(buf, 0x5c, SEND_LEN);
	struct ibv_sge sge = { (uintptr_t)buf, SEND_LEN, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 9, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
	CHECK(ibv_post_send(qp, &wr, &bad) == 0);
	struct ibv_wc wc = srn_tc_poll_one(cq, 20);
	CHECK(wc.status == IBV_WC_SUCCESS, "Send into the freed block: %s",
	      ibv_wc_status_str(wc.status));
	srn_tc_barrier(fd, 4, TMO);
	srn_tc_barrier(fd, 5, TMO);
	CHECK(!bad_reads, "%d Reads returned other bytes than the region's", bad_reads);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	int fd;
	pid_t pid = srn_tc_fork(&fd);
	srn_tc_role = pid ? "target" : "peer";
	if (!pid) {
		peer(fd);
		exit(srn_check_failures ? 1 : 0);
	}
	target(fd);
	int st = srn_tc_wait_child(pid, 90);
	CHECK(st == 0, "the peer ended with %d", st);
	if (!srn_check_failures)
		printf("ok: freed and realloc'd 256 KiB and 32 MiB blocks: the peer read the "
		       "registered bytes, its Writes reached no new memory, the target lives\n");
	return srn_check_result();
}
