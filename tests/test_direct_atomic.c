/*
 * test_direct_atomic - same-host Compare-and-Swap and Fetch-and-Add
 * executed by the requester on the target's page (transport/direct.c,
 * core/mr_share.h), against the rules its responder keeps.  Two
 * processes (fork before any verbs call, each its own device); the same
 * checks must hold with SOFTRNIC_DIRECT=0, and test_direct_atomic.sh
 * checks the direct_atomic counter says which path ran.
 *
 *   exact    CAS (hit and miss) and FAA return the original value; FAAs
 *            race with the target CPU's own __atomic adds on the same
 *            word: the sum is exact.  The region is a malloc'd block
 *            that shares its pages with other data (the edge pages
 *            moved onto the memfd whole): those bytes survive.  A
 *            file-backed region (never moved: its atomics take the
 *            rings) is exact too.  After a fork, the child has its
 *            own copy of the moved pages (as with a kernel NIC on
 *            Linux 5.13+: core/mr_share_maps.c) and its store to the
 *            word does not reach the parent, whose region still works.
 *   errors   misaligned (REM_INV_REQ_ERR), a region without remote
 *            atomic (REM_ACCESS_ERR), a target QP with
 *            max_dest_rd_atomic 0 (REM_INV_REQ_ERR): as over the rings,
 *            nothing changed
 *   dereg    the target deregisters while FAAs stream: the word never
 *            changes after ibv_dereg_mr returns
 *   unmap    the target unmaps the region while FAAs stream and maps
 *            fresh memory at the same address: it stays zero
 *   rereg    the target changes the region's rights (ibv_rereg_mr)
 *            half-way through 2000 FAAs: it stops sharing its pages, the
 *            rest go over the rings, and the word ends exact
 *
 * The parent is the requester, the child the target, which never polls.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rc_test_conn.h"

#define NQP 3
#define TMO 30000
#define BLOCK 6000        /* the malloc'd block: not page-aligned, not whole pages */
#define ROFF 1000         /* the region inside it */
#define RLEN 2048

struct info {
	union ibv_gid gid;
	uint32_t qpn[NQP];
	uint32_t rkey_a, rkey_f, rkey_w;   /* atomic (malloc'd), atomic (file), write only */
	uint64_t addr_a, addr_f, addr_w;
};

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp[NQP];
	struct info me, peer;
};

static struct side S;
static uint8_t *block;                       /* target: the malloc'd block */
static uint64_t *fmem;                       /* target: the file-backed page */
static uint8_t wonly[4096];                  /* target: a region without atomics */
static struct ibv_mr *mr_a, *mr_f, *mr_w;
static uint64_t *res;                        /* requester: 8-byte results */
static struct ibv_mr *mr_res;

static const int ATOMIC_ACCESS = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

/* QP 0, 1: everything; QP 2 of the target: max_dest_rd_atomic 0. */
static void connect_side(int fd, bool target)
{
	S.cq = ibv_create_cq(S.ctx, 256, NULL, NULL, 0);
	CHECK(S.cq);
	for (int i = 0; i < NQP; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = S.cq, .recv_cq = S.cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 64, .max_recv_wr = 4, .max_send_sge = 2,
				 .max_recv_sge = 1 },
		};
		S.qp[i] = ibv_create_qp(S.pd, &ia);
		CHECK(S.qp[i]);
		S.me.qpn[i] = S.qp[i]->qp_num;
	}
	srn_tc_xchg(fd, &S.me, &S.peer, sizeof(S.me), TMO);
	for (int i = 0; i < NQP; i++) {
		struct srn_tc_qp_opts o = srn_tc_default_opts();
		o.timeout = 17;          /* 0.54 s: never a retry on a loaded machine */
		if (target && i == 2)
			o.rd_atomic = 0;
		srn_tc_connect(S.qp[i], &S.peer.gid, S.peer.qpn[i], 0x300, 0x300, &o);
	}
	srn_tc_barrier(fd, 0xa1, TMO);
}

static void open_dev(void)
{
	S.ctx = srn_tc_open(&S.me.gid);
	S.pd = ibv_alloc_pd(S.ctx);
	CHECK(S.pd);
}

/* The target's regions: the word at the start of the malloc'd region,
 * a file-backed page (a temporary file, MAP_SHARED), a write-only one. */
static void target_open(int fd, uint8_t *anon, size_t anon_len)
{
	open_dev();
	char path[] = "/tmp/srn-direct-atomic-XXXXXX";
	int tf = mkstemp(path);
	CHECK(tf >= 0);
	unlink(path);
	CHECK(ftruncate(tf, 4096) == 0);
	fmem = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, tf, 0);
	CHECK(fmem != MAP_FAILED);
	close(tf);
	mr_a = ibv_reg_mr(S.pd, anon, anon_len, ATOMIC_ACCESS);
	mr_f = ibv_reg_mr(S.pd, fmem, 4096, ATOMIC_ACCESS);
	mr_w = ibv_reg_mr(S.pd, wonly, sizeof(wonly),
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr_a && mr_f && mr_w);
	S.me.rkey_a = mr_a->rkey;
	S.me.rkey_f = mr_f->rkey;
	S.me.rkey_w = mr_w->rkey;
	S.me.addr_a = (uintptr_t)anon;
	S.me.addr_f = (uintptr_t)fmem;
	S.me.addr_w = (uintptr_t)wonly;
	connect_side(fd, true);
}

static void requester_open(int fd)
{
	open_dev();
	res = aligned_alloc(64, 4096);
	CHECK(res);
	memset(res, 0, 4096);
	mr_res = ibv_reg_mr(S.pd, res, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr_res);
	connect_side(fd, false);
}

/* One atomic, its original value into res[slot]; waits for it. */
static enum ibv_wc_status atomic_op(int qp, bool cas, uint64_t addr, uint32_t rkey,
				    uint64_t cmp_add, uint64_t swap, unsigned slot)
{
	struct ibv_sge sge = { (uintptr_t)&res[slot], 8, mr_res->lkey };
	struct ibv_send_wr wr = {
		.wr_id = slot, .sg_list = &sge, .num_sge = 1,
		.opcode = cas ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.atomic = { .remote_addr = addr, .compare_add = cmp_add, .swap = swap,
			       .rkey = rkey },
	}, *bad;
	CHECK(ibv_post_send(S.qp[qp], &wr, &bad) == 0);
	struct ibv_wc wc = srn_tc_poll_one(S.cq, 20);
	CHECK(wc.wr_id == slot);
	return wc.status;
}

enum { NFAA = 4000 };

static int exact_target(int fd)
{
	block = malloc(BLOCK);
	CHECK(block);
	for (unsigned i = 0; i < BLOCK; i++)
		block[i] = (uint8_t)(i * 7 + 3);
	uint8_t *reg = block + ROFF;            /* 8-byte aligned: malloc gives 16 */
	target_open(fd, reg, RLEN);
	/* Registration kept the bytes (the pages moved with them). */
	for (unsigned i = 0; i < BLOCK; i++)
		CHECK(block[i] == (uint8_t)(i * 7 + 3), "byte %u changed by registration", i);
	uint64_t *w = (uint64_t *)reg;
	*w = 100;
	fmem[0] = 100;
	srn_tc_barrier(fd, 0xa2, TMO);             /* words set */
	srn_tc_barrier(fd, 0xa6, TMO);             /* CAS/FAA checks done, FAA race starts */
	/* Add on both words from this CPU until the requester says it is
	 * done (its byte on the channel), so the two streams overlap. */
	uint64_t self = 0;
	double end = srn_tc_now() + 120;
	for (;;) {
		for (unsigned i = 0; i < 1000; i++) {
			__atomic_fetch_add(w, 1000000, __ATOMIC_SEQ_CST);
			__atomic_fetch_add(&fmem[0], 1000000, __ATOMIC_SEQ_CST);
		}
		self += 1000;
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		if (poll(&pf, 1, 0) == 1 || srn_tc_now() > end)
			break;
	}
	uint8_t done;
	srn_tc_recv(fd, &done, 1, TMO);
	uint64_t got[3] = { *w, fmem[0], self };
	srn_tc_send(fd, got, sizeof(got));
	/* Other data in the edge pages is untouched (the region's first
	 * 8 bytes are the word). */
	uint8_t edges = 1;
	for (unsigned i = 0; i < BLOCK; i++)
		if ((i < ROFF || i >= ROFF + 8) && block[i] != (uint8_t)(i * 7 + 3))
			edges = 0;
	/* fork: the child has a private copy of the moved pages (readable,
	 * the word's value at the fork); its store to the word stays its
	 * own, so the requester's last CAS below still finds its value. */
	int pp[2];      /* a pipe copies what is written (/dev/null would not look) */
	CHECK(pipe(pp) == 0);
	int dn = pp[1];
	pid_t c = fork();
	CHECK(c >= 0);
	if (c == 0) {
		uint64_t seen = __atomic_load_n(w, __ATOMIC_SEQ_CST);
		ssize_t n = write(dn, reg, 8);
		__atomic_store_n(w, 0xdeadbeefull, __ATOMIC_SEQ_CST);
		_exit(n == 8 && seen == got[0] ? 0 : 3);
	}
	int st = srn_tc_wait_child(c, 20);
	close(pp[0]);
	close(pp[1]);
	uint8_t verdict[2] = { edges, (uint8_t)(st == 0) };
	srn_tc_send(fd, verdict, sizeof(verdict));
	srn_tc_barrier(fd, 0xa4, TMO);
	uint64_t last = *w;
	srn_tc_send(fd, &last, sizeof(last));
	return edges ? 0 : 1;
}

static int exact_requester(int fd)
{
	requester_open(fd);
	uint64_t a = S.peer.addr_a, f = S.peer.addr_f;
	uint32_t ka = S.peer.rkey_a, kf = S.peer.rkey_f;
	srn_tc_barrier(fd, 0xa2, TMO);
	/* CAS that hits, one that misses, FAA; the original each time. */
	for (int r = 0; r < 2; r++) {
		uint64_t at = r ? f : a;
		uint32_t k = r ? kf : ka;
		CHECK(atomic_op(0, true, at, k, 7, 1, 0) == IBV_WC_SUCCESS);   /* miss: 100 */
		CHECK(res[0] == 100, "CAS miss returned %llu", (unsigned long long)res[0]);
		CHECK(atomic_op(0, true, at, k, 100, 500, 1) == IBV_WC_SUCCESS);
		CHECK(res[1] == 100);
		CHECK(atomic_op(0, false, at, k, 5, 0, 2) == IBV_WC_SUCCESS);
		CHECK(res[2] == 500);
		CHECK(atomic_op(1, false, at, k, 0, 0, 3) == IBV_WC_SUCCESS);  /* other QP */
		CHECK(res[3] == 505);
	}
	srn_tc_barrier(fd, 0xa6, TMO);
	/* The FAA race: NFAA adds of 1 to each word, 8 in flight, while the
	 * target adds 1e6 at a time until told to stop.  The anonymous word's
	 * adds go on QP 0 and the file-backed word's on QP 1: a direct op
	 * waits for nothing outstanding ahead of it on its QP, so mixing the
	 * two on one QP made the number that went direct depend on how fast
	 * the rings answered (206 of 2000 on a loaded machine). */
	enum { DEPTH = 8 };
	unsigned posted = 0, done = 0;
	double end = srn_tc_now() + 90;
	while (done < 2 * NFAA) {
		CHECK(srn_tc_now() < end, "FAA race: %u of %u done", done, 2 * NFAA);
		while (posted < 2 * NFAA && posted - done < DEPTH) {
			bool file = posted & 1;
			struct ibv_sge sge = { (uintptr_t)&res[8 + posted % DEPTH], 8, mr_res->lkey };
			struct ibv_send_wr wr = {
				.wr_id = posted, .sg_list = &sge, .num_sge = 1,
				.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				.send_flags = IBV_SEND_SIGNALED,
				.wr.atomic = { .remote_addr = file ? f : a, .compare_add = 1,
					       .rkey = file ? kf : ka },
			}, *bad;
			CHECK(ibv_post_send(S.qp[file], &wr, &bad) == 0);
			posted++;
		}
		struct ibv_wc wc[DEPTH];
		int n = ibv_poll_cq(S.cq, DEPTH, wc);
		CHECK(n >= 0);
		for (int i = 0; i < n; i++)
			CHECK(wc[i].status == IBV_WC_SUCCESS, "FAA: %s",
			      ibv_wc_status_str(wc[i].status));
		done += (unsigned)n;
	}
	uint8_t one = 1;
	srn_tc_send(fd, &one, 1);
	uint64_t got[3];
	srn_tc_recv(fd, got, sizeof(got), 120000);
	uint64_t want = 505 + NFAA + got[2] * 1000000;
	CHECK(got[0] == want && got[1] == want, "sums %llu %llu, want %llu",
	      (unsigned long long)got[0], (unsigned long long)got[1], (unsigned long long)want);
	uint8_t verdict[2];
	srn_tc_recv(fd, verdict, sizeof(verdict), TMO);
	CHECK(verdict[0], "bytes next to the region changed");
	CHECK(verdict[1], "the forked child could not read its copy of the moved pages");
	CHECK(atomic_op(0, true, a, ka, want, 42, 0) == IBV_WC_SUCCESS && res[0] == want);
	srn_tc_barrier(fd, 0xa4, TMO);
	uint64_t last;
	srn_tc_recv(fd, &last, sizeof(last), TMO);
	CHECK(last == 42);
	printf("ok: CAS/FAA original values; %u FAAs raced %llu target CPU adds on each of two "
	       "words (anonymous, file-backed): sums exact; edge bytes kept; fork child "
	       "with its own copy\n", NFAA, (unsigned long long)got[2]);
	return 0;
}

static int errors_target(int fd)
{
	static uint64_t words[512] __attribute__((aligned(4096)));
	words[1] = 77;
	target_open(fd, (uint8_t *)words, sizeof(words));
	srn_tc_barrier(fd, 0xa5, TMO);
	uint8_t ok = words[0] == 0 && words[1] == 77 && wonly[0] == 0;
	srn_tc_send(fd, &ok, 1);
	return ok ? 0 : 1;
}

static int errors_requester(int fd)
{
	requester_open(fd);
	uint64_t a = S.peer.addr_a;
	/* A good one first, so the direct path is set up. */
	CHECK(atomic_op(0, false, a + 8, S.peer.rkey_a, 0, 0, 0) == IBV_WC_SUCCESS);
	CHECK(res[0] == 77);
	enum ibv_wc_status st = atomic_op(0, false, a + 4, S.peer.rkey_a, 1, 0, 1);
	CHECK(st == IBV_WC_REM_INV_REQ_ERR, "misaligned: %s", ibv_wc_status_str(st));
	st = atomic_op(1, false, S.peer.addr_w, S.peer.rkey_w, 1, 0, 2);
	CHECK(st == IBV_WC_REM_ACCESS_ERR, "no atomic right: %s", ibv_wc_status_str(st));
	st = atomic_op(2, false, a, S.peer.rkey_a, 1, 0, 3);
	CHECK(st == IBV_WC_REM_INV_REQ_ERR, "max_dest_rd_atomic 0: %s", ibv_wc_status_str(st));
	srn_tc_barrier(fd, 0xa5, TMO);
	uint8_t ok = 0;
	srn_tc_recv(fd, &ok, 1, TMO);
	CHECK(ok, "a refused atomic changed the target's memory");
	printf("ok: misaligned, no right, max_dest_rd_atomic 0 refused as by the responder\n");
	return 0;
}

/* dereg/unmap, requester: FAAs of 1 on the word, 8 in flight, until an
 * error completion or 30 s; then the target's verdict. */
static int stream_requester(int fd, const char *what)
{
	requester_open(fd);
	enum { DEPTH = 8 };
	unsigned inflight = 0, done = 0, n = 0;
	bool failed = false;
	double end = srn_tc_now() + 30;
	while (!failed && srn_tc_now() < end) {
		while (inflight < DEPTH) {
			struct ibv_sge sge = { (uintptr_t)&res[n % DEPTH], 8, mr_res->lkey };
			struct ibv_send_wr wr = {
				.wr_id = n, .sg_list = &sge, .num_sge = 1,
				.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				.send_flags = IBV_SEND_SIGNALED,
				.wr.atomic = { .remote_addr = S.peer.addr_a, .compare_add = 1,
					       .rkey = S.peer.rkey_a },
			}, *bad;
			if (ibv_post_send(S.qp[0], &wr, &bad))
				break;
			inflight++;
			n++;
		}
		struct ibv_wc wc[DEPTH];
		int got = ibv_poll_cq(S.cq, DEPTH, wc);
		CHECK(got >= 0);
		for (int i = 0; i < got; i++) {
			inflight--;
			if (wc[i].status != IBV_WC_SUCCESS)
				failed = true;
			else
				done++;
		}
	}
	CHECK(failed, "the FAAs never failed after the %s", what);
	uint8_t verdict = 0;
	srn_tc_recv(fd, &verdict, 1, TMO);
	CHECK(verdict == 1, "the word changed after the %s returned", what);
	printf("ok: %u FAAs, then %s: the word never changed after it returned\n", done, what);
	return 0;
}

/* Wait until the word counts at least 500 FAAs. */
static void wait_count(const uint64_t *w)
{
	double end = srn_tc_now() + 20;
	while (srn_tc_now() < end && __atomic_load_n(w, __ATOMIC_RELAXED) < 500)
		usleep(1000);
	CHECK(__atomic_load_n(w, __ATOMIC_RELAXED) >= 500);
}

static int dereg_target(int fd)
{
	static uint64_t words[512] __attribute__((aligned(4096)));
	target_open(fd, (uint8_t *)words, sizeof(words));
	wait_count(&words[0]);
	CHECK(ibv_dereg_mr(mr_a) == 0);
	uint64_t snap = __atomic_load_n(&words[0], __ATOMIC_SEQ_CST);
	usleep(300000);
	uint8_t verdict = __atomic_load_n(&words[0], __ATOMIC_SEQ_CST) == snap;
	srn_tc_send(fd, &verdict, 1);
	return verdict ? 0 : 1;
}

static int unmap_target(int fd)
{
	uint8_t *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED);
	target_open(fd, m, 8192);
	wait_count((uint64_t *)m);
	CHECK(munmap(m, 8192) == 0);
	uint8_t *again = mmap(m, 8192, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	CHECK(again == m);
	usleep(300000);
	uint8_t verdict = 1;
	for (unsigned i = 0; i < 8192; i++)
		if (again[i])
			verdict = 0;
	srn_tc_send(fd, &verdict, 1);
	return verdict ? 0 : 1;
}

/* rereg: 2000 FAAs in lists of 8; the target rereg's the region's
 * rights (without remote read) half-way; the sum is exact. */
static int rereg_target(int fd)
{
	static uint64_t words[512] __attribute__((aligned(4096)));
	target_open(fd, (uint8_t *)words, sizeof(words));
	srn_tc_barrier(fd, 0xa8, 120000);
	CHECK(ibv_rereg_mr(mr_a, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   ATOMIC_ACCESS & ~IBV_ACCESS_REMOTE_READ) == 0);
	srn_tc_barrier(fd, 0xa9, 120000);
	srn_tc_barrier(fd, 0xa7, 120000);
	uint64_t v = __atomic_load_n(&words[0], __ATOMIC_SEQ_CST);
	srn_tc_send(fd, &v, sizeof(v));
	return 0;
}

static int rereg_requester(int fd)
{
	requester_open(fd);
	enum { N = 2000, DEPTH = 8 };
	for (unsigned done = 0; done < N; done += DEPTH) {
		if (done == N / 2) {
			srn_tc_barrier(fd, 0xa8, 120000);    /* the target rereg's */
			srn_tc_barrier(fd, 0xa9, 120000);
		}
		struct ibv_send_wr wr[DEPTH], *bad;
		struct ibv_sge sge[DEPTH];
		for (unsigned i = 0; i < DEPTH; i++) {
			sge[i] = (struct ibv_sge){ (uintptr_t)&res[i], 8, mr_res->lkey };
			wr[i] = (struct ibv_send_wr){
				.wr_id = done + i, .sg_list = &sge[i], .num_sge = 1,
				.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD, .send_flags = IBV_SEND_SIGNALED,
				.next = i + 1 < DEPTH ? &wr[i + 1] : NULL,
				.wr.atomic = { .remote_addr = S.peer.addr_a, .compare_add = 1,
					       .rkey = S.peer.rkey_a },
			};
		}
		CHECK(ibv_post_send(S.qp[0], wr, &bad) == 0);
		for (unsigned i = 0; i < DEPTH; i++) {
			struct ibv_wc wc = srn_tc_poll_one(S.cq, 20);
			CHECK(wc.status == IBV_WC_SUCCESS, "FAA %u: %s", done + i,
			      ibv_wc_status_str(wc.status));
		}
	}
	srn_tc_barrier(fd, 0xa7, 120000);
	uint64_t v;
	srn_tc_recv(fd, &v, sizeof(v), TMO);
	CHECK(v == N, "after rereg the word is %llu, want %u", (unsigned long long)v, N);
	printf("ok: %u FAAs across a rereg of the region's rights: exact\n", N);
	return 0;
}

int main(int argc, char **argv)
{
	const char *m = argc == 2 ? argv[1] : "";
	int (*tgt)(int) = NULL, (*req)(int) = NULL;
	const char *what = NULL;
	if (!strcmp(m, "exact")) {
		tgt = exact_target;
		req = exact_requester;
	} else if (!strcmp(m, "errors")) {
		tgt = errors_target;
		req = errors_requester;
	} else if (!strcmp(m, "dereg")) {
		tgt = dereg_target;
		what = "dereg";
	} else if (!strcmp(m, "rereg")) {
		tgt = rereg_target;
		req = rereg_requester;
	} else if (!strcmp(m, "unmap")) {
		tgt = unmap_target;
		what = "unmap";
	} else {
		fprintf(stderr, "usage: %s exact|errors|dereg|unmap|rereg\n", argv[0]);
		return 2;
	}
	int fd;
	pid_t pid = srn_tc_fork(&fd);
	if (pid == 0)
		return tgt(fd);
	int ret = req ? req(fd) : stream_requester(fd, what);
	int cret = srn_tc_wait_child(pid, 60);
	return ret ? ret : cret;
}
