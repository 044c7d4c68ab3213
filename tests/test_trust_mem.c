/*
 * test_trust_mem.c - registered memory against guessing, unmapping and
 * re-registration (issue 10, items 2, 8 and 13).
 *
 *   keys    20 processes each register a region: no first rkey is the old
 *           fixed 0x126, their key bytes are not all the same, and two
 *           regions of one process have different keys.
 *   fault   ibv_reg_mr of an unmapped range, and with write access of a
 *           read-only mapping, fails with EFAULT, as the kernel's pin does.
 *   unmap   two processes: the target registers two mmap'd regions, then
 *           unmaps one and maps a secret at the same address, and unmaps
 *           the other; the peer's RDMA READ and WRITE with the old rkeys
 *           fail with a remote access error, never see or change the
 *           secret, and the target lives.
 *   guess   another user's attack: a root victim serves RC connections and
 *           registers a secret first; a peer running as uid 65534 (a
 *           legitimate client over RoCE/UDP from another 127.x address, told
 *           the secret's address but not its rkey) tries the keys the old
 *           allocator gave (0x126, then slot s with key byte s*37+1): every
 *           READ gets a remote access error and nothing of the secret.
 *   race    while READs of a region are answered (the progress thread), the
 *           program maps a secret over it with MAP_FIXED: each READ either
 *           completes with the old bytes or fails, never carries the
 *           secret, and nothing crashes (30 rounds).
 *   detach  the same for the other ways memory goes: a System V segment
 *           detached and another (a secret) attached at its address, a
 *           region moved away with mremap and a secret mapped in its place,
 *           a region made PROT_NONE: a loopback READ with the old rkey
 *           fails, carries no secret, and does not crash the process.
 *   rereg   every ibv_rereg_mr flag combination and error path, and over a
 *           loopback connection: a moved region's old rkey fails, its new
 *           one reaches the new memory; an access change is enforced.
 *
 * Exit 0 pass, 1 fail.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rc_test_conn.h"

#define LEN 8192
#define SECRET 0x5e

static void *map_rw(void *at, size_t len, int extra)
{
	void *p = mmap(at, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra, -1, 0);
	CHECK(p != MAP_FAILED);
	return p;
}

/* One RDMA READ or WRITE; returns the completion status. */
static enum ibv_wc_status rdma(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr,
			       enum ibv_wr_opcode op, uint64_t raddr, uint32_t rkey, uint32_t len)
{
	struct ibv_sge s = { (uintptr_t)mr->addr, len, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &s, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	CHECK(ibv_post_send(qp, &wr, &bad) == 0);
	return srn_tc_poll_one(cq, 10).status;
}

/* ---- keys --------------------------------------------------------------- */

static int test_keys(void)
{
	enum { N = 20 };
	uint32_t first[N];
	for (int i = 0; i < N; i++) {
		int p[2];
		CHECK(pipe(p) == 0);
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			union ibv_gid gid;
			struct ibv_context *ctx = srn_tc_open(&gid);
			struct ibv_pd *pd = ibv_alloc_pd(ctx);
			void *b = map_rw(NULL, LEN, 0);
			struct ibv_mr *a = ibv_reg_mr(pd, b, LEN, IBV_ACCESS_LOCAL_WRITE);
			struct ibv_mr *c = ibv_reg_mr(pd, b, LEN, IBV_ACCESS_LOCAL_WRITE);
			CHECK(a && c && a->rkey != c->rkey && a->lkey == a->rkey);
			CHECK(write(p[1], &a->rkey, 4) == 4);
			_exit(0);
		}
		close(p[1]);
		CHECK(read(p[0], &first[i], 4) == 4);
		close(p[0]);
		int st;
		CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	int same_byte = 1, same_key = 1;
	for (int i = 0; i < N; i++) {
		fprintf(stderr, "first rkey of process %d: 0x%08x\n", i, first[i]);
		CHECK(first[i] != 0x126);
		same_byte &= (first[i] & 0xff) == (first[0] & 0xff);
		same_key &= first[i] == first[0];
	}
	CHECK(!same_byte && !same_key);
	return 0;
}

/* ---- fault -------------------------------------------------------------- */

static int test_fault(void)
{
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	uint8_t *b = map_rw(NULL, 3 * LEN, 0);
	CHECK(munmap(b + LEN, LEN) == 0);       /* a hole in the middle */
	errno = 0;
	CHECK(!ibv_reg_mr(pd, b + LEN, LEN, IBV_ACCESS_LOCAL_WRITE) && errno == EFAULT);
	errno = 0;
	CHECK(!ibv_reg_mr(pd, b, 3 * LEN, IBV_ACCESS_REMOTE_READ) && errno == EFAULT);
	errno = 0;
	CHECK(!ibv_reg_mr(pd, b + LEN - 1, 2, 0) && errno == EFAULT);   /* one byte past */
	struct ibv_mr *ok = ibv_reg_mr(pd, b, LEN, IBV_ACCESS_LOCAL_WRITE);
	CHECK(ok && ibv_dereg_mr(ok) == 0);
	/* A read-only mapping: readable regions yes, writable ones EFAULT. */
	CHECK(mprotect(b, LEN, PROT_READ) == 0);
	struct ibv_mr *ro = ibv_reg_mr(pd, b, LEN, IBV_ACCESS_REMOTE_READ);
	CHECK(ro);
	static const int writable[] = { IBV_ACCESS_LOCAL_WRITE,
					IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
					IBV_ACCESS_MW_BIND };
	for (unsigned i = 0; i < sizeof(writable) / sizeof(writable[0]); i++) {
		errno = 0;
		CHECK(!ibv_reg_mr(pd, b, LEN, writable[i]) && errno == EFAULT);
	}
	/* PROT_NONE: nothing. */
	CHECK(mprotect(b + 2 * LEN, LEN, PROT_NONE) == 0);
	errno = 0;
	CHECK(!ibv_reg_mr(pd, b + 2 * LEN, LEN, IBV_ACCESS_REMOTE_READ) && errno == EFAULT);
	CHECK(ibv_dereg_mr(ro) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	return 0;
}

/* ---- unmap (two processes) --------------------------------------------- */

struct info {
	union ibv_gid gid;
	uint32_t qpn[3];
	uint64_t addr_a, addr_b;
	uint32_t rkey_a, rkey_b;
};

static int target(int fd)
{
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(pd && cq);
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
	uint8_t *a = map_rw(NULL, LEN, 0), *b = map_rw(NULL, LEN, 0);
	memset(a, 0x11, LEN);
	memset(b, 0x22, LEN);
	struct ibv_mr *ma = ibv_reg_mr(pd, a, LEN, acc), *mb = ibv_reg_mr(pd, b, LEN, acc);
	CHECK(ma && mb);
	struct info me = { .gid = gid, .addr_a = (uintptr_t)a, .addr_b = (uintptr_t)b,
			   .rkey_a = ma->rkey, .rkey_b = mb->rkey }, peer;
	struct ibv_qp *qp[3];
	for (int i = 0; i < 3; i++) {
		qp[i] = srn_tc_rc_qp(pd, cq, 4, 4);
		me.qpn[i] = qp[i]->qp_num;
	}
	srn_tc_xchg(fd, &me, &peer, sizeof(me), 30000);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	for (int i = 0; i < 3; i++)
		srn_tc_connect(qp[i], &peer.gid, peer.qpn[i], 0x100, 0x200, &o);
	/* The program lets go of both regions' memory without deregistering:
	 * a at once gets a new, never registered mapping holding a secret. */
	CHECK(munmap(a, LEN) == 0);
	uint8_t *s = map_rw(a, LEN, MAP_FIXED_NOREPLACE);
	CHECK(s == a);
	memset(s, SECRET, LEN);
	CHECK(munmap(b, LEN) == 0);
	srn_tc_barrier(fd, 1, 30000);
	srn_tc_barrier(fd, 2, 30000);           /* the peer has tried */
	for (int i = 0; i < LEN; i++)
		CHECK(s[i] == SECRET);          /* no WRITE reached it */
	return 0;
}

static int attacker(int fd, pid_t child)
{
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	uint8_t *buf = map_rw(NULL, LEN, 0);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, LEN, IBV_ACCESS_LOCAL_WRITE);
	CHECK(pd && cq && mr);
	struct info me = { .gid = gid }, t;
	struct ibv_qp *qp[3];
	for (int i = 0; i < 3; i++) {
		qp[i] = srn_tc_rc_qp(pd, cq, 4, 4);
		me.qpn[i] = qp[i]->qp_num;
	}
	srn_tc_xchg(fd, &me, &t, sizeof(me), 30000);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	for (int i = 0; i < 3; i++)
		srn_tc_connect(qp[i], &t.gid, t.qpn[i], 0x200, 0x100, &o);
	srn_tc_barrier(fd, 1, 30000);
	memset(buf, 0, LEN);
	enum ibv_wc_status st = rdma(qp[0], cq, mr, IBV_WR_RDMA_READ, t.addr_a, t.rkey_a, LEN);
	fprintf(stderr, "READ through the unmapped-and-replaced region: %s\n",
		ibv_wc_status_str(st));
	CHECK(st == IBV_WC_REM_ACCESS_ERR);
	for (int i = 0; i < LEN; i++)
		CHECK(buf[i] != SECRET);
	memset(buf, 0xee, LEN);
	st = rdma(qp[1], cq, mr, IBV_WR_RDMA_WRITE, t.addr_a, t.rkey_a, LEN);
	fprintf(stderr, "WRITE through it: %s\n", ibv_wc_status_str(st));
	CHECK(st == IBV_WC_REM_ACCESS_ERR);
	st = rdma(qp[2], cq, mr, IBV_WR_RDMA_READ, t.addr_b, t.rkey_b, LEN);
	fprintf(stderr, "READ through the unmapped region: %s\n", ibv_wc_status_str(st));
	CHECK(st == IBV_WC_REM_ACCESS_ERR);
	srn_tc_barrier(fd, 2, 30000);
	return srn_tc_wait_child(child, 30);
}

static int test_unmap(void)
{
	unsetenv("SOFTRNIC_FAULTS");            /* a lost NAK would turn into a retry error */
	int fd;
	pid_t pid = srn_tc_fork(&fd);
	if (pid == 0) {
		srn_tc_role = "target";
		exit(target(fd));
	}
	srn_tc_role = "peer";
	return attacker(fd, pid);
}

/* ---- guess (another uid) ---------------------------------------------- */

enum { GUESSES = 8 };

struct ginfo {
	union ibv_gid gid;
	uint32_t qpn[GUESSES];
	uint64_t secret_addr;
};

static int victim(int fd, pid_t child)
{
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4 * GUESSES, NULL, NULL, 0);
	uint8_t *secret = map_rw(NULL, LEN, 0);
	memset(secret, SECRET, LEN);
	/* The process's first region, as in the report. */
	struct ibv_mr *mr = ibv_reg_mr(pd, secret, LEN, IBV_ACCESS_LOCAL_WRITE |
				       IBV_ACCESS_REMOTE_READ);
	CHECK(pd && cq && mr);
	fprintf(stderr, "victim's secret region: rkey 0x%08x (not told to the peer)\n", mr->rkey);
	struct ginfo me = { .gid = gid, .secret_addr = (uintptr_t)secret }, peer;
	struct ibv_qp *qp[GUESSES];
	for (int i = 0; i < GUESSES; i++) {
		qp[i] = srn_tc_rc_qp(pd, cq, 4, 4);
		me.qpn[i] = qp[i]->qp_num;
	}
	srn_tc_xchg(fd, &me, &peer, sizeof(me), 30000);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	for (int i = 0; i < GUESSES; i++)
		srn_tc_connect(qp[i], &peer.gid, peer.qpn[i], 0x300, 0x400, &o);
	srn_tc_barrier(fd, 1, 30000);
	srn_tc_barrier(fd, 2, 60000);           /* the peer has guessed */
	return srn_tc_wait_child(child, 30);
}

static int guesser(int fd)
{
	/* Drop to nobody before any verbs call: the attacker's device,
	 * files and socket are another user's. */
	if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) ||
	    setresuid(65534, 65534, 65534))
		return 1;
	CHECK(getuid() == 65534 && geteuid() == 65534);
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4 * GUESSES, NULL, NULL, 0);
	uint8_t *buf = map_rw(NULL, LEN, 0);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, LEN, IBV_ACCESS_LOCAL_WRITE);
	CHECK(pd && cq && mr);
	struct ginfo me = { .gid = gid }, v;
	struct ibv_qp *qp[GUESSES];
	for (int i = 0; i < GUESSES; i++) {
		qp[i] = srn_tc_rc_qp(pd, cq, 4, 4);
		me.qpn[i] = qp[i]->qp_num;
	}
	srn_tc_xchg(fd, &me, &v, sizeof(me), 30000);
	CHECK(memcmp(&v.gid, &gid, sizeof(gid)) != 0);   /* another address */
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	for (int i = 0; i < GUESSES; i++)
		srn_tc_connect(qp[i], &v.gid, v.qpn[i], 0x400, 0x300, &o);
	srn_tc_barrier(fd, 1, 30000);
	/* A failed guess puts the QP in error: one QP per guess. */
	for (uint32_t s = 1; s <= GUESSES; s++) {
		uint32_t key = s << 8 | (uint8_t)(s * 37 + 1);
		memset(buf, 0, LEN);
		enum ibv_wc_status st = rdma(qp[s - 1], cq, mr, IBV_WR_RDMA_READ, v.secret_addr, key,
					     LEN);
		fprintf(stderr, "guess rkey 0x%x: %s\n", key, ibv_wc_status_str(st));
		CHECK(st == IBV_WC_REM_ACCESS_ERR);
		for (int i = 0; i < LEN; i++)
			CHECK(buf[i] != SECRET);
	}
	srn_tc_barrier(fd, 2, 30000);
	return 0;
}

static int test_guess(void)
{
	if (geteuid() != 0) {
		fprintf(stderr, "SKIP: needs root to play another uid\n");
		return 77;
	}
	unsetenv("SOFTRNIC_FAULTS");
	setenv("SOFTRNIC_SHM", "0", 1);         /* RoCE over UDP, as between hosts */
	int fd;
	pid_t pid = srn_tc_fork(&fd);
	if (pid == 0) {
		srn_tc_role = "uid 65534";
		exit(guesser(fd));
	}
	srn_tc_role = "victim";
	return victim(fd, pid);
}

/* ---- race ------------------------------------------------------------- */

static int test_race(void)
{
	enum { ROUNDS = 30, NREAD = 16, PIECE = 16384 };
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4 * NREAD, NULL, NULL, 0);
	uint8_t *loc = map_rw(NULL, NREAD * PIECE, 0);
	struct ibv_mr *lmr = ibv_reg_mr(pd, loc, NREAD * PIECE, IBV_ACCESS_LOCAL_WRITE);
	CHECK(pd && cq && lmr);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	int failed = 0, ok = 0;
	for (int r = 0; r < ROUNDS; r++) {
		uint8_t *reg = map_rw(NULL, PIECE, 0);
		memset(reg, 0x11, PIECE);
		memset(loc, 0, NREAD * PIECE);
		struct ibv_mr *mr = ibv_reg_mr(pd, reg, PIECE, IBV_ACCESS_LOCAL_WRITE |
					       IBV_ACCESS_REMOTE_READ);
		CHECK(mr);
		struct ibv_qp_init_attr ia = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = NREAD, .max_recv_wr = 1, .max_send_sge = 1,
				 .max_recv_sge = 1 },
		};
		struct ibv_qp *qa = ibv_create_qp(pd, &ia), *qb = ibv_create_qp(pd, &ia);
		CHECK(qa && qb);
		srn_tc_connect(qa, &gid, qb->qp_num, 0x50, 0x60, &o);
		srn_tc_connect(qb, &gid, qa->qp_num, 0x60, 0x50, &o);
		for (int i = 0; i < NREAD; i++) {
			struct ibv_sge sg = { (uintptr_t)(loc + i * PIECE), PIECE, lmr->lkey };
			struct ibv_send_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sg, .num_sge = 1,
						  .opcode = IBV_WR_RDMA_READ,
						  .send_flags = IBV_SEND_SIGNALED }, *bad;
			wr.wr.rdma.remote_addr = (uintptr_t)reg;
			wr.wr.rdma.rkey = mr->rkey;
			CHECK(ibv_post_send(qa, &wr, &bad) == 0);
		}
		/* Give the progress thread a head start of r microseconds. */
		struct timespec ts = { 0, r * 1000L };
		nanosleep(&ts, NULL);
		CHECK(mmap(reg, PIECE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			   -1, 0) == reg);
		memset(reg, SECRET, PIECE);
		for (int n = 0; n < NREAD; n++) {
			struct ibv_wc wc = srn_tc_poll_one(cq, 10);
			CHECK(wc.wr_id < NREAD);
			const uint8_t *got = loc + wc.wr_id * PIECE;
			if (wc.status == IBV_WC_SUCCESS) {
				ok++;
				for (int i = 0; i < PIECE; i++)
					CHECK(got[i] == 0x11);
			} else {
				failed++;
				CHECK(wc.status == IBV_WC_REM_ACCESS_ERR ||
				      wc.status == IBV_WC_WR_FLUSH_ERR);
				for (int i = 0; i < PIECE; i++)
					CHECK(got[i] != SECRET);
			}
		}
		CHECK(ibv_destroy_qp(qa) == 0 && ibv_destroy_qp(qb) == 0);
		CHECK(ibv_dereg_mr(mr) == 0);
		CHECK(munmap(reg, PIECE) == 0);
	}
	fprintf(stderr, "%d READs completed before the remap, %d failed after it\n", ok, failed);
	return 0;
}

/* ---- detach ----------------------------------------------------------- */

struct loop {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *lmr;
	uint8_t *loc;
	union ibv_gid gid;
};

/* A READ of LEN bytes at addr through rkey over a fresh loopback QP pair
 * (a failed access leaves the pair in error). */
static enum ibv_wc_status loop_read(struct loop *l, const void *addr, uint32_t rkey)
{
	struct ibv_qp *qa = srn_tc_rc_qp(l->pd, l->cq, 4, 4), *qb = srn_tc_rc_qp(l->pd, l->cq, 4, 4);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	srn_tc_connect(qa, &l->gid, qb->qp_num, 0x10, 0x20, &o);
	srn_tc_connect(qb, &l->gid, qa->qp_num, 0x20, 0x10, &o);
	memset(l->loc, 0, LEN);
	enum ibv_wc_status st = rdma(qa, l->cq, l->lmr, IBV_WR_RDMA_READ, (uintptr_t)addr, rkey, LEN);
	CHECK(ibv_destroy_qp(qa) == 0 && ibv_destroy_qp(qb) == 0);
	struct ibv_wc wc;
	while (ibv_poll_cq(l->cq, 1, &wc) > 0)
		;
	for (int i = 0; i < LEN && st != IBV_WC_SUCCESS; i++)
		CHECK(l->loc[i] != SECRET);
	return st;
}

static int test_detach(void)
{
	struct loop l;
	struct ibv_context *ctx = srn_tc_open(&l.gid);
	l.pd = ibv_alloc_pd(ctx);
	l.cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	l.loc = map_rw(NULL, LEN, 0);
	l.lmr = ibv_reg_mr(l.pd, l.loc, LEN, IBV_ACCESS_LOCAL_WRITE);
	CHECK(l.pd && l.cq && l.lmr);
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;

	/* System V: removed at once, they go with their last attachment. */
	int id1 = shmget(IPC_PRIVATE, LEN, IPC_CREAT | 0600);
	int id2 = shmget(IPC_PRIVATE, LEN, IPC_CREAT | 0600);
	CHECK(id1 >= 0 && id2 >= 0);
	uint8_t *a = shmat(id1, NULL, 0);
	CHECK(a != (void *)-1 && shmctl(id1, IPC_RMID, NULL) == 0);
	memset(a, 0x11, LEN);
	struct ibv_mr *mr = ibv_reg_mr(l.pd, a, LEN, acc);
	CHECK(mr);
	CHECK(loop_read(&l, a, mr->rkey) == IBV_WC_SUCCESS && l.loc[0] == 0x11);
	CHECK(shmdt(a) == 0);
	uint8_t *b = shmat(id2, a, 0);
	CHECK(b == a && shmctl(id2, IPC_RMID, NULL) == 0);
	memset(b, SECRET, LEN);
	enum ibv_wc_status st = loop_read(&l, a, mr->rkey);
	fprintf(stderr, "READ through the detached segment: %s\n", ibv_wc_status_str(st));
	CHECK(st == IBV_WC_REM_ACCESS_ERR);
	CHECK(ibv_dereg_mr(mr) == 0 && shmdt(b) == 0);

	/* mremap: the pages move elsewhere, a secret takes their place. */
	uint8_t *c = map_rw(NULL, LEN, 0), *away = map_rw(NULL, LEN, 0);
	memset(c, 0x22, LEN);
	mr = ibv_reg_mr(l.pd, c, LEN, acc);
	CHECK(mr);
	CHECK(mremap(c, LEN, LEN, MREMAP_MAYMOVE | MREMAP_FIXED, away) == away);
	CHECK(map_rw(c, LEN, MAP_FIXED_NOREPLACE) == c);
	memset(c, SECRET, LEN);
	st = loop_read(&l, c, mr->rkey);
	fprintf(stderr, "READ through the moved region: %s\n", ibv_wc_status_str(st));
	CHECK(st == IBV_WC_REM_ACCESS_ERR);
	CHECK(ibv_dereg_mr(mr) == 0);

	/* PROT_NONE: a READ must not fault inside the library. */
	uint8_t *d = map_rw(NULL, LEN, 0);
	mr = ibv_reg_mr(l.pd, d, LEN, acc);
	CHECK(mr && mprotect(d, LEN, PROT_NONE) == 0);
	st = loop_read(&l, d, mr->rkey);
	fprintf(stderr, "READ through the PROT_NONE region: %s\n", ibv_wc_status_str(st));
	CHECK(st == IBV_WC_REM_ACCESS_ERR);
	CHECK(ibv_dereg_mr(mr) == 0);
	return 0;
}

/* ---- rereg -------------------------------------------------------------- */

static int test_rereg(void)
{
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *pd2 = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(pd && pd2 && cq);
	int rd = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
	uint8_t *old = map_rw(NULL, LEN, 0), *new = map_rw(NULL, LEN, 0), *loc = map_rw(NULL, LEN, 0);
	memset(old, 0x0d, LEN);
	memset(new, 0x4e, LEN);
	struct ibv_mr *mr = ibv_reg_mr(pd, old, LEN, rd), *lmr = ibv_reg_mr(pd, loc, LEN, rd);
	CHECK(mr && lmr);
	uint32_t key0 = mr->rkey;

	/* Input errors: the region is untouched, errno EINVAL. */
	struct { int flags; void *addr; size_t len; int access; } bad_input[] = {
		{ 1 << 3, NULL, 0, 0 },                                  /* unknown flag */
		{ IBV_REREG_MR_CHANGE_TRANSLATION, NULL, LEN, 0 },       /* no address */
		{ IBV_REREG_MR_CHANGE_TRANSLATION, new, 0, 0 },          /* no length */
		{ IBV_REREG_MR_CHANGE_PD, NULL, 0, rd },                 /* access w/o flag */
	};
	for (unsigned i = 0; i < sizeof(bad_input) / sizeof(bad_input[0]); i++) {
		errno = 0;
		CHECK(ibv_rereg_mr(mr, bad_input[i].flags, pd2, bad_input[i].addr, bad_input[i].len,
				   bad_input[i].access) == IBV_REREG_MR_ERR_INPUT && errno == EINVAL);
	}
	/* Refused by the device: IBV_REREG_MR_ERR_CMD with the errno reg_mr
	 * gives; the region stays as it was. */
	errno = 0;
	CHECK(ibv_rereg_mr(mr, 0, NULL, NULL, 0, 0) == IBV_REREG_MR_ERR_CMD && errno == EINVAL);
	errno = 0;
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   IBV_ACCESS_REMOTE_WRITE) == IBV_REREG_MR_ERR_CMD && errno == EINVAL);
	errno = 0;
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, NULL, NULL, 0, 0) == IBV_REREG_MR_ERR_CMD &&
	      errno == EINVAL);
	uint8_t *hole = map_rw(NULL, LEN, 0);
	CHECK(munmap(hole, LEN) == 0);
	errno = 0;
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, hole, LEN, 0) ==
	      IBV_REREG_MR_ERR_CMD && errno == EFAULT);
	uint8_t *ro = mmap(NULL, LEN, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(ro != MAP_FAILED);
	errno = 0;
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, ro, LEN, 0) ==
	      IBV_REREG_MR_ERR_CMD && errno == EFAULT);   /* LOCAL_WRITE on a read-only map */
	CHECK(mr->rkey == key0 && mr->addr == old && mr->pd == pd);

	/* Loopback: qa reads through qb's side of the same context. */
	struct ibv_qp *qa = srn_tc_rc_qp(pd, cq, 4, 4), *qb = srn_tc_rc_qp(pd, cq, 4, 4);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	srn_tc_connect(qa, &gid, qb->qp_num, 0x10, 0x20, &o);
	srn_tc_connect(qb, &gid, qa->qp_num, 0x20, 0x10, &o);
	CHECK(rdma(qa, cq, lmr, IBV_WR_RDMA_READ, (uintptr_t)old, key0, 64) == IBV_WC_SUCCESS);
	CHECK(loc[0] == 0x0d);

	/* Access only: keys kept, the new rights hold at once. */
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   IBV_ACCESS_LOCAL_WRITE) == 0 && mr->rkey == key0 && mr->lkey == key0);
	CHECK(rdma(qa, cq, lmr, IBV_WR_RDMA_READ, (uintptr_t)old, key0, 64) ==
	      IBV_WC_REM_ACCESS_ERR);
	CHECK(ibv_destroy_qp(qa) == 0 && ibv_destroy_qp(qb) == 0);
	qa = srn_tc_rc_qp(pd, cq, 4, 4);
	qb = srn_tc_rc_qp(pd, cq, 4, 4);
	srn_tc_connect(qa, &gid, qb->qp_num, 0x30, 0x40, &o);
	srn_tc_connect(qb, &gid, qa->qp_num, 0x40, 0x30, &o);

	/* Translation and access: new keys; the old rkey no longer reaches
	 * anything, the new one reaches the new memory. */
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS, NULL,
			   new, LEN, rd) == 0);
	CHECK(mr->addr == new && mr->length == LEN && mr->rkey != key0 &&
	      (mr->rkey & 0xffff00) == (key0 & 0xffff00) && mr->lkey == mr->rkey);
	CHECK(rdma(qa, cq, lmr, IBV_WR_RDMA_READ, (uintptr_t)new, mr->rkey, 64) == IBV_WC_SUCCESS);
	CHECK(loc[0] == 0x4e);
	CHECK(rdma(qa, cq, lmr, IBV_WR_RDMA_READ, (uintptr_t)old, key0, 64) ==
	      IBV_WC_REM_ACCESS_ERR);
	CHECK(ibv_destroy_qp(qa) == 0 && ibv_destroy_qp(qb) == 0);

	/* PD: keys kept; pd2 is now in use and pd's refcount dropped. */
	uint32_t key1 = mr->rkey;
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0) == 0 && mr->pd == pd2 &&
	      mr->rkey == key1);
	CHECK(ibv_dealloc_pd(pd2) == EBUSY);
	/* All three at once. */
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_FLAGS_SUPPORTED, pd, old, LEN,
			   IBV_ACCESS_REMOTE_READ) == 0 && mr->pd == pd && mr->addr == old &&
	      mr->rkey != key1);
	CHECK(ibv_dealloc_pd(pd2) == 0);
	/* A region whose memory was unmapped is revoked: rereg refuses it. */
	CHECK(munmap(old, LEN) == 0);
	errno = 0;
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, new, LEN, 0) ==
	      IBV_REREG_MR_ERR_CMD && errno == EFAULT);
	CHECK(ibv_dereg_mr(mr) == 0 && ibv_dereg_mr(lmr) == 0);
	CHECK(ibv_destroy_cq(cq) == 0 && ibv_dealloc_pd(pd) == 0 && ibv_close_device(ctx) == 0);
	return 0;
}

int main(int argc, char **argv)
{
	const char *t = argc > 1 ? argv[1] : "";
	srn_tc_role = t;
	if (!strcmp(t, "keys"))
		return test_keys();
	if (!strcmp(t, "fault"))
		return test_fault();
	if (!strcmp(t, "unmap"))
		return test_unmap();
	if (!strcmp(t, "rereg"))
		return test_rereg();
	if (!strcmp(t, "guess"))
		return test_guess();
	if (!strcmp(t, "race"))
		return test_race();
	if (!strcmp(t, "detach"))
		return test_detach();
	fprintf(stderr, "usage: %s keys|fault|unmap|rereg|guess|race|detach\n", argv[0]);
	return 2;
}
