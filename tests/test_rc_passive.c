/*
 * test_rc_passive - one-sided RC traffic against a target process that
 * makes no verbs call at all once its QP is connected.
 *
 * The child (target) registers memory, connects, and then either
 *   sleep: blocks in read() on the out-of-band socket, or
 *   spin:  spins reading its own memory until the initiator's last RDMA
 *          Write puts a magic value there,
 * while the parent (initiator) does RDMA Writes (checked by Reads), Reads
 * of a pattern, and FAA / CAS chains against it.  Everything must complete:
 * the target's background progress thread executes the requests and
 * answers them.  The target then checks its own memory (what the Writes
 * and atomics must have left there) and measures its CPU time (all
 * threads) over 1 s of idleness right after the traffic: a progress thread
 * that spins instead of sleeping in the kernel shows up here.
 *
 * Usage: test_rc_passive sleep|spin [--faults SPEC]
 * (SOFTRNIC_FAULTS from the environment applies otherwise.)
 */
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>

#include "rc_test_conn.h"

#define WR_AREA (2u << 20)             /* the initiator writes here */
#define PAT_OFF WR_AREA                /* constant pattern the initiator reads */
#define PAT_SIZE (1u << 20)
#define AT_OFF (PAT_OFF + PAT_SIZE)    /* [0] FAA counter, [1] CAS word, [2] magic */
#define TGT_SIZE (AT_OFF + 4096)
#define N_FAA 1000
#define FAA_INC 5ull
#define N_CAS 200
#define MAGIC 0x5ca1ab1e0ddba11ull
#define IDLE_CPU_MAX 0.10              /* of one core, over the idle second */
#define OP_TIMEOUT_S 20.0

struct tinfo {
	union ibv_gid gid;
	uint32_t qpn, rkey;
	uint64_t addr;
};

/* What the target reports back. */
struct verdict {
	int32_t ok;
	int32_t pad;
	double traffic_cpu, traffic_wall, idle_cpu, idle_wall;
};

static const char *variant;

static void fill_pattern(uint8_t *p, size_t len, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (uint8_t)(x >> 16);
	}
}

static void *xmap(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(p != MAP_FAILED);
	return p;
}

/* The writes the initiator does, as (offset, length, seed); the target
 * replays them to know what its memory must hold. */
static const uint32_t wr_len[] = { 0, 1, 7, 64, 1000, 4096, 4097, 65536, 300000, (1u << 20) - 3 };
static const uint32_t wr_off[] = { 5, 17, 33, 100, 2000, 8192, 20000, 90000, 200000, 700001 };
#define N_WR (sizeof(wr_len) / sizeof(wr_len[0]))
_Static_assert(N_WR == sizeof(wr_off) / sizeof(wr_off[0]), "one offset per write");

static void expected_region(uint8_t *m)
{
	memset(m, 0, WR_AREA);
	for (unsigned i = 0; i < N_WR; i++)
		fill_pattern(m + wr_off[i], wr_len[i], 100 + i);
}

/* ---- target: no verbs call between connect and the end of traffic ---- */

static int target(int fd)
{
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(pd && cq);
	uint8_t *mem = xmap(TGT_SIZE);
	fill_pattern(mem + PAT_OFF, PAT_SIZE, 7);
	struct ibv_mr *mr = ibv_reg_mr(pd, mem, TGT_SIZE, IBV_ACCESS_LOCAL_WRITE |
				       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				       IBV_ACCESS_REMOTE_ATOMIC);
	CHECK(mr);
	struct ibv_qp *qp = srn_tc_rc_qp(pd, cq, 64, 4);
	struct tinfo me = { .gid = gid, .qpn = qp->qp_num, .rkey = mr->rkey,
			    .addr = (uintptr_t)mem }, peer;
	srn_tc_xchg(fd, &me, &peer, sizeof(me), 30000);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	srn_tc_connect(qp, &peer.gid, peer.qpn, 0x777, 0x999, &o);
	srn_tc_barrier(fd, 0x7ead1, 30000);

	/* From here until the initiator says "done": no verbs call. */
	double c0 = srn_tc_cpu_s(), t0 = srn_tc_now();
	volatile uint64_t *at = (volatile uint64_t *)(mem + AT_OFF);
	if (!strcmp(variant, "spin")) {
		double end = t0 + 60;
		while (__atomic_load_n(&at[2], __ATOMIC_ACQUIRE) != MAGIC)
			if (srn_tc_now() > end) {
				fprintf(stderr, "[target] magic value never arrived\n");
				return 1;
			}
	}
	uint32_t done;
	srn_tc_recv(fd, &done, sizeof(done), 60000);
	CHECK(done == 0xd0e);
	struct verdict v = { .ok = 1 };
	v.traffic_cpu = srn_tc_cpu_s() - c0;
	v.traffic_wall = srn_tc_now() - t0;

	/* Idle: the traffic is over and the application is asleep. */
	c0 = srn_tc_cpu_s();
	t0 = srn_tc_now();
	struct timespec ts = { 1, 0 };
	while (nanosleep(&ts, &ts))
		;
	v.idle_cpu = srn_tc_cpu_s() - c0;
	v.idle_wall = srn_tc_now() - t0;

	uint8_t *m = xmap(WR_AREA);
	expected_region(m);
	if (memcmp(m, mem, WR_AREA)) {
		size_t d = 0;
		while (m[d] == mem[d])
			d++;
		fprintf(stderr, "[target] written region differs at offset %zu\n", d);
		v.ok = 0;
	}
	munmap(m, WR_AREA);
	if (at[0] != N_FAA * FAA_INC || at[1] != N_CAS || at[2] != MAGIC) {
		fprintf(stderr, "[target] FAA counter %llu (want %llu), CAS word %llu (want %u), "
			"magic %#llx\n", (unsigned long long)at[0],
			(unsigned long long)(N_FAA * FAA_INC), (unsigned long long)at[1], N_CAS,
			(unsigned long long)at[2]);
		v.ok = 0;
	}
	srn_tc_send(fd, &v, sizeof(v));
	srn_tc_barrier(fd, 0xe2d, 30000);

	struct ibv_wc wc;
	CHECK(ibv_poll_cq(cq, 1, &wc) == 0);   /* the target posted nothing */
	CHECK(ibv_destroy_qp(qp) == 0);
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	munmap(mem, TGT_SIZE);
	return v.ok ? 0 : 1;
}

/* ---- initiator -------------------------------------------------------- */

static struct ibv_qp *iqp;
static struct ibv_cq *icq;
static struct ibv_mr *imr;
static struct tinfo tgt;
static unsigned outstanding;

static void post(enum ibv_wr_opcode op, uint64_t wr_id, void *local, uint32_t len,
		 uint64_t roff, uint64_t cmp_add, uint64_t swap)
{
	struct ibv_sge s = { (uintptr_t)local, len, imr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &s, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = tgt.addr + roff;
		wr.wr.atomic.rkey = tgt.rkey;
		wr.wr.atomic.compare_add = cmp_add;
		wr.wr.atomic.swap = swap;
	} else {
		wr.wr.rdma.remote_addr = tgt.addr + roff;
		wr.wr.rdma.rkey = tgt.rkey;
	}
	CHECK(ibv_post_send(iqp, &wr, &bad) == 0);
	outstanding++;
}

static struct ibv_wc wait_one(uint64_t wr_id)
{
	struct ibv_wc wc = srn_tc_poll_one(icq, OP_TIMEOUT_S);
	outstanding--;
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != wr_id) {
		fprintf(stderr, "[initiator] wr %llu: status %s, expected wr %llu\n",
			(unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status),
			(unsigned long long)wr_id);
		exit(1);
	}
	return wc;
}

static int initiator(int fd, pid_t child)
{
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	icq = ibv_create_cq(ctx, 128, NULL, NULL, 0);
	CHECK(pd && icq);
	size_t lsize = WR_AREA + PAT_SIZE + 8 * (N_FAA + N_CAS + 8);
	uint8_t *loc = xmap(lsize);
	imr = ibv_reg_mr(pd, loc, lsize, IBV_ACCESS_LOCAL_WRITE);
	CHECK(imr);
	iqp = srn_tc_rc_qp(pd, icq, 64, 4);
	struct tinfo me = { .gid = gid, .qpn = iqp->qp_num };
	srn_tc_xchg(fd, &me, &tgt, sizeof(me), 30000);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	srn_tc_connect(iqp, &tgt.gid, tgt.qpn, 0x999, 0x777, &o);
	srn_tc_barrier(fd, 0x7ead1, 30000);
	double t0 = srn_tc_now();
	uint64_t id = 0;

	/* Writes, then one Read of the whole area checked against the model. */
	uint8_t *src = loc, *model = xmap(WR_AREA);
	expected_region(model);
	for (unsigned i = 0; i < N_WR; i++) {
		fill_pattern(src, wr_len[i], 100 + i);
		post(IBV_WR_RDMA_WRITE, ++id, src, wr_len[i], wr_off[i], 0, 0);
		wait_one(id);
	}
	memset(loc, 0, WR_AREA);
	post(IBV_WR_RDMA_READ, ++id, loc, WR_AREA, 0, 0, 0);
	struct ibv_wc wc = wait_one(id);
	CHECK(wc.byte_len == WR_AREA);
	CHECK(memcmp(loc, model, WR_AREA) == 0);
	munmap(model, WR_AREA);

	/* Reads of the target's pattern, several sizes and offsets. */
	uint8_t *pat = xmap(PAT_SIZE), *dst = loc + WR_AREA;
	fill_pattern(pat, PAT_SIZE, 7);
	static const uint32_t rd_len[] = { 0, 1, 8, 4095, 4096, 4097, 70000, PAT_SIZE };
	for (unsigned i = 0; i < sizeof(rd_len) / sizeof(rd_len[0]); i++) {
		uint32_t off = (uint32_t)((PAT_SIZE - rd_len[i]) / 3);
		memset(dst, 0xee, rd_len[i]);
		post(IBV_WR_RDMA_READ, ++id, dst, rd_len[i], PAT_OFF + off, 0, 0);
		wait_one(id);
		CHECK(memcmp(dst, pat + off, rd_len[i]) == 0);
	}
	munmap(pat, PAT_SIZE);

	/* FAA: 32 in flight; every old value distinct and in range. */
	uint64_t *res = (uint64_t *)(loc + WR_AREA + PAT_SIZE);
	uint8_t seen[N_FAA] = { 0 };
	for (unsigned i = 0; i < N_FAA; i++) {
		res[i] = ~0ull;
		post(IBV_WR_ATOMIC_FETCH_AND_ADD, ++id, &res[i], 8, AT_OFF, FAA_INC, 0);
		if (outstanding == 32 || i == N_FAA - 1)
			while (outstanding)
				wait_one(id - outstanding + 1);
	}
	for (unsigned i = 0; i < N_FAA; i++) {
		CHECK(res[i] % FAA_INC == 0 && res[i] / FAA_INC < N_FAA);
		CHECK(!seen[res[i] / FAA_INC]++);
	}

	/* CAS chain: each hit returns the value the previous one left. */
	uint64_t *cres = res + N_FAA;
	for (unsigned i = 0; i < N_CAS; i++) {
		cres[i] = ~0ull;
		post(IBV_WR_ATOMIC_CMP_AND_SWP, ++id, &cres[i], 8, AT_OFF + 8, i, i + 1);
		if (outstanding == 16 || i == N_CAS - 1)
			while (outstanding)
				wait_one(id - outstanding + 1);
	}
	for (unsigned i = 0; i < N_CAS; i++)
		CHECK(cres[i] == i);
	cres[N_CAS] = ~0ull;   /* a miss leaves the word alone */
	post(IBV_WR_ATOMIC_CMP_AND_SWP, ++id, &cres[N_CAS], 8, AT_OFF + 8, 12345, 99);
	wait_one(id);
	CHECK(cres[N_CAS] == N_CAS);
	uint64_t *chk = cres + N_CAS + 1;
	post(IBV_WR_RDMA_READ, ++id, chk, 16, AT_OFF, 0, 0);
	wait_one(id);
	CHECK(chk[0] == N_FAA * FAA_INC && chk[1] == N_CAS);

	/* Last: the magic value the spinning target waits for. */
	uint64_t *magic = chk + 2;
	*magic = MAGIC;
	post(IBV_WR_RDMA_WRITE, ++id, magic, 8, AT_OFF + 16, 0, 0);
	wait_one(id);
	double traffic = srn_tc_now() - t0;
	uint32_t done = 0xd0e;
	srn_tc_send(fd, &done, sizeof(done));

	struct verdict v;
	srn_tc_recv(fd, &v, sizeof(v), 30000);
	srn_tc_barrier(fd, 0xe2d, 30000);
	printf("test_rc_passive %s: %llu operations in %.3f s against a target that made no "
	       "verbs call\n", variant, (unsigned long long)id, traffic);
	printf("  target CPU during traffic: %.3f s over %.3f s; idle: %.4f s over %.3f s "
	       "(%.2f%% of a core, limit %.0f%%)\n", v.traffic_cpu, v.traffic_wall, v.idle_cpu,
	       v.idle_wall, 100.0 * v.idle_cpu / v.idle_wall, 100.0 * IDLE_CPU_MAX);

	CHECK(ibv_destroy_qp(iqp) == 0);
	CHECK(ibv_dereg_mr(imr) == 0);
	CHECK(ibv_destroy_cq(icq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	munmap(loc, lsize);
	int crc = srn_tc_wait_child(child, 30);
	if (!v.ok || crc) {
		fprintf(stderr, "FAIL: the target found its memory wrong\n");
		return 1;
	}
	if (v.idle_cpu / v.idle_wall >= IDLE_CPU_MAX) {
		fprintf(stderr, "FAIL: the idle target used %.1f%% of a core\n",
			100.0 * v.idle_cpu / v.idle_wall);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2 || (strcmp(argv[1], "sleep") && strcmp(argv[1], "spin")) ||
	    (argc != 2 && (argc != 4 || strcmp(argv[2], "--faults")))) {
		fprintf(stderr, "usage: %s sleep|spin [--faults SPEC]\n", argv[0]);
		return 1;
	}
	variant = argv[1];
	if (argc == 4)
		setenv("SOFTRNIC_FAULTS", argv[3], 1);
	int fd;
	pid_t pid = srn_tc_fork(&fd);
	if (pid == 0) {
		srn_tc_role = "target";
		exit(target(fd));
	}
	srn_tc_role = "initiator";
	int rc = initiator(fd, pid);
	if (rc == 0)
		printf("ok\n");
	return rc;
}
