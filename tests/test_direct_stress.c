/*
 * test_direct_stress - four processes: one target, two requesters that
 * place directly (transport/direct.c) and one on the UDP link
 * (SOFTRNIC_SHM=0), each with one RC QP to the target, all working on one
 * target region with every remote right (so its pages are on a memfd,
 * core/mr_share.h, and Writes, Reads and atomics all reach the same
 * pages).  Each requester posts lists of 1..16 mixed operations: Writes
 * and Reads of its own slice, Sends and Write-with-immediate, FAA on one
 * word shared by all, CAS on a word of its own.  What is proved:
 *   - Writes byte-exact: each requester keeps a model of its slice; every
 *     Read is checked against the model as it was when the Read was
 *     posted (Read after Write in one list sees the Write), and the target
 *     ships each slice at the end to be compared whole.
 *   - Sends and Write-with-immediate arrive in post order on each QP: the
 *     target checks the sequence number in each (payload or imm) and the
 *     Send payload.
 *   - FAA exact with direct and UDP requesters and the target's own CPU
 *     adding to the same word: it ends at the sum of all adds, and each
 *     requester's originals strictly increase.
 *   - CAS: every hit returns the expected value, every deliberate miss the
 *     current one; each word ends at its requester's count.
 *   - dereg while placements stream: then all three requesters stream
 *     Writes and FAAs into a second region; the target deregisters it and
 *     no byte of it changes after ibv_dereg_mr returns.
 * Every wait is bounded; the whole run gives up after --timeout seconds.
 *
 * Usage: test_direct_stress [--ops N] [--timeout S]   (N total, default 100000)
 */
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "rc_test_conn.h"

#define NREQ 3                       /* 0, 1: direct; 2: UDP link */
#define SLICE (128u << 10)
#define CTR_BYTES 4096u
#define VICTIM (64u << 10)
#define MAXLEN 8192u                 /* one operation's bytes */
#define LIST 16                      /* operations per posted list */
#define NRECV 64
#define MSG 64                       /* Send payload */
#define TMO 60000

/* The target's memory: counters page (word 0: shared FAA; 1 + r: CAS of
 * requester r), then the slices. */
static uint8_t tmem[CTR_BYTES + NREQ * SLICE] __attribute__((aligned(4096)));
static uint8_t victim[VICTIM] __attribute__((aligned(4096)));

struct info {
	union ibv_gid gid;
	uint32_t qpn;
	uint32_t rkey, vkey;
	uint64_t addr, vaddr;
};

struct done_msg {
	uint64_t faa, cas, sends;
};

static double deadline;
static unsigned long total_ops = 100000;

static uint64_t rng_state;
static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 11);
}

static struct ibv_cq *make_cq(struct ibv_context *ctx)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 512, NULL, NULL, 0);
	CHECK(cq);
	return cq;
}

static void up(struct ibv_qp *qp, const struct info *peer)
{
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	o.timeout = 17;          /* 0.54 s, 7 retries: never spent by a starved peer */
	srn_tc_connect(qp, &peer->gid, peer->qpn, 0x100, 0x100, &o);
}

/* ---- requester ----------------------------------------------------- */

static uint8_t model[SLICE];
static uint8_t lbuf[LIST][MAXLEN], expect[LIST][MAXLEN];
static uint64_t res[LIST];

enum kind { K_WRITE, K_READ, K_SEND, K_WIMM, K_FAA, K_CAS, K_CAS_MISS };

static enum kind pick(void)
{
	uint32_t x = rnd() % 100;
	return x < 28 ? K_WRITE : x < 48 ? K_READ : x < 60 ? K_SEND : x < 68 ? K_WIMM
	       : x < 84 ? K_FAA : x < 96 ? K_CAS : K_CAS_MISS;
}

static uint32_t length(void)
{
	uint32_t x = rnd() % 100;
	return x < 70 ? 1 + rnd() % 64 : x < 95 ? 1 + rnd() % 4096 : 1 + rnd() % MAXLEN;
}

static int requester(int fd, unsigned r, unsigned long ops)
{
	if (r == 2)
		setenv("SOFTRNIC_SHM", "0", 1);     /* the UDP link, before the device opens */
	rng_state = 0x9e3779b97f4a7c15ull * (r + 1);
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	struct ibv_mr *ml = ibv_reg_mr(pd, lbuf, sizeof(lbuf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *mres = ibv_reg_mr(pd, res, sizeof(res), IBV_ACCESS_LOCAL_WRITE);
	CHECK(ml && mres);
	struct ibv_cq *cq = make_cq(ctx);
	struct ibv_qp *qp = srn_tc_rc_qp(pd, cq, 64, NRECV);
	struct info me = { .gid = gid, .qpn = qp->qp_num }, t;
	srn_tc_xchg(fd, &me, &t, sizeof(me), TMO);
	up(qp, &t);
	srn_tc_barrier(fd, 0x51, TMO);

	uint64_t slice = t.addr + CTR_BYTES + (uint64_t)r * SLICE;
	uint64_t faa_word = t.addr, cas_word = t.addr + 8 * (1 + r);
	uint64_t faas = 0, cas = 0, seq = 0, last_orig = 0;
	bool any_orig = false;
	unsigned long done = 0;
	while (done < ops) {
		CHECK(srn_tc_now() < deadline, "requester %u: %lu of %lu operations", r, done, ops);
		unsigned n = 1 + rnd() % LIST;
		if (n > ops - done)
			n = (unsigned)(ops - done);
		struct ibv_send_wr wr[LIST], *bad;
		struct ibv_sge sge[LIST];
		enum kind k[LIST];
		uint32_t len[LIST];
		uint64_t cas_want[LIST];
		bool read_before = false;
		for (unsigned i = 0; i < n; i++) {
			k[i] = pick();
			len[i] = length();
			uint32_t off = rnd() % (SLICE - len[i] + 1);
			memset(&wr[i], 0, sizeof(wr[i]));
			wr[i].wr_id = done + i;
			wr[i].sg_list = &sge[i];
			wr[i].num_sge = 1;
			wr[i].send_flags = IBV_SEND_SIGNALED;
			wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
			sge[i] = (struct ibv_sge){ (uintptr_t)lbuf[i], len[i], ml->lkey };
			wr[i].wr.rdma.remote_addr = slice + off;
			wr[i].wr.rdma.rkey = t.rkey;
			switch (k[i]) {
			case K_WRITE:
			case K_WIMM:
				for (uint32_t b = 0; b < len[i]; b++)
					lbuf[i][b] = (uint8_t)rnd();
				memcpy(model + off, lbuf[i], len[i]);
				/* A Read resent after a later Write was executed
				 * would see it (IBTA 9.7.5.1.6): fenced behind the
				 * list's earlier Reads, as the IB model asks. */
				if (read_before)
					wr[i].send_flags |= IBV_SEND_FENCE;
				wr[i].opcode = k[i] == K_WRITE ? IBV_WR_RDMA_WRITE
							       : IBV_WR_RDMA_WRITE_WITH_IMM;
				if (k[i] == K_WIMM)
					wr[i].imm_data = htonl((uint32_t)seq++);
				break;
			case K_READ:
				memcpy(expect[i], model + off, len[i]);
				wr[i].opcode = IBV_WR_RDMA_READ;
				read_before = true;
				break;
			case K_SEND:
				len[i] = sge[i].length = MSG;
				for (uint32_t b = 0; b < MSG; b++)
					lbuf[i][b] = (uint8_t)(seq * 31 + b + r);
				wr[i].opcode = IBV_WR_SEND_WITH_IMM;
				wr[i].imm_data = htonl((uint32_t)seq++);
				break;
			case K_FAA:
			case K_CAS:
			case K_CAS_MISS:
				sge[i] = (struct ibv_sge){ (uintptr_t)&res[i], 8, mres->lkey };
				if (k[i] == K_FAA) {
					wr[i].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
					wr[i].wr.atomic.remote_addr = faa_word;
					wr[i].wr.atomic.compare_add = 1;
					faas++;
				} else {
					/* A hit moves the chain on; a miss (compare
					 * wrong) must return the current value. */
					bool hit = k[i] == K_CAS;
					cas_want[i] = cas;
					wr[i].opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
					wr[i].wr.atomic.remote_addr = cas_word;
					wr[i].wr.atomic.compare_add = hit ? cas : cas + 1000;
					wr[i].wr.atomic.swap = hit ? cas + 1 : 0;
					if (hit)
						cas++;
				}
				wr[i].wr.atomic.rkey = t.rkey;
				break;
			}
		}
		CHECK(ibv_post_send(qp, wr, &bad) == 0);
		for (unsigned i = 0; i < n; i++) {
			struct ibv_wc wc = srn_tc_poll_one(cq, deadline - srn_tc_now() + 1);
			CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == done + i,
			      "requester %u op %lu: %s (wr_id %llu)", r, done + i,
			      ibv_wc_status_str(wc.status), (unsigned long long)wc.wr_id);
		}
		for (unsigned i = 0; i < n; i++) {
			if (k[i] == K_READ && memcmp(lbuf[i], expect[i], len[i])) {
				uint32_t b = 0;
				while (lbuf[i][b] == expect[i][b])
					b++;
				fprintf(stderr, "[requester %u] Read %u of %u in a list of %u: len %u, "
					"first difference at %u (%02x, model %02x)\n", r, i, n, n, len[i], b,
					lbuf[i][b], expect[i][b]);
				for (unsigned j = 0; j < n; j++)
					fprintf(stderr, "  op %u kind %d len %u raddr +%llu\n", j, k[j], len[j],
						(unsigned long long)(wr[j].wr.rdma.remote_addr - slice));
			}
			if (k[i] == K_READ)
				CHECK(!memcmp(lbuf[i], expect[i], len[i]),
				      "requester %u op %lu: Read differs from the model", r, done + i);
			if (k[i] == K_FAA) {
				CHECK(!any_orig || res[i] > last_orig,
				      "requester %u: FAA original %llu after %llu", r,
				      (unsigned long long)res[i], (unsigned long long)last_orig);
				last_orig = res[i];
				any_orig = true;
			}
			if (k[i] == K_CAS || k[i] == K_CAS_MISS)
				CHECK(res[i] == cas_want[i], "requester %u: CAS original %llu, want %llu",
				      r, (unsigned long long)res[i],
				      (unsigned long long)cas_want[i]);
		}
		done += n;
	}
	struct done_msg d = { faas, cas, seq };
	srn_tc_send(fd, &d, sizeof(d));
	static uint8_t back[SLICE];
	srn_tc_recv(fd, back, SLICE, TMO);
	CHECK(!memcmp(back, model, SLICE), "requester %u: the target's slice differs from the model",
	      r);

	/* dereg while placements stream: Writes and FAAs into the victim
	 * region until they fail (the target deregistered it). */
	srn_tc_barrier(fd, 0x52, TMO);
	unsigned long streamed = 0;
	bool failed = false;
	while (!failed) {
		CHECK(srn_tc_now() < deadline, "requester %u: the victim stream never failed", r);
		struct ibv_send_wr wr[8], *bad;
		struct ibv_sge sge[8];
		for (unsigned i = 0; i < 8; i++) {
			bool faa = i % 4 == 3;
			memset(lbuf[i], (int)(streamed % 250) + 1, 4096);
			sge[i] = faa ? (struct ibv_sge){ (uintptr_t)&res[i], 8, mres->lkey }
				     : (struct ibv_sge){ (uintptr_t)lbuf[i], 4096, ml->lkey };
			wr[i] = (struct ibv_send_wr){
				.wr_id = i, .sg_list = &sge[i], .num_sge = 1,
				.send_flags = IBV_SEND_SIGNALED, .next = i < 7 ? &wr[i + 1] : NULL,
				.opcode = faa ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_RDMA_WRITE,
			};
			if (faa)
				wr[i].wr.atomic = (typeof(wr[i].wr.atomic)){
					.remote_addr = t.vaddr, .compare_add = 1, .rkey = t.vkey };
			else
				wr[i].wr.rdma = (typeof(wr[i].wr.rdma)){
					.remote_addr = t.vaddr + 8 + (rnd() % (VICTIM / 4096 - 1)) * 4096,
					.rkey = t.vkey };
		}
		CHECK(ibv_post_send(qp, wr, &bad) == 0);
		for (unsigned i = 0; i < 8; i++) {
			struct ibv_wc wc = srn_tc_poll_one(cq, deadline - srn_tc_now() + 1);
			if (wc.status != IBV_WC_SUCCESS)
				failed = true;
			else
				streamed++;
		}
		/* The first list went through: tell the target we stream. */
		if (streamed == 8 && !failed) {
			uint8_t started = 1;
			srn_tc_send(fd, &started, 1);
		}
		CHECK(streamed >= 8, "requester %u: the victim stream failed at once", r);
	}
	uint8_t verdict = 0;
	srn_tc_recv(fd, &verdict, 1, TMO);
	CHECK(verdict == 1, "requester %u: the victim region changed after dereg returned", r);
	printf("ok: requester %u (%s): %lu operations exact (%llu FAA, %llu CAS hits, %llu "
	       "Sends/Write-imm in order); %lu victim operations before dereg\n",
	       r, r == 2 ? "UDP link" : "direct", ops, (unsigned long long)faas,
	       (unsigned long long)cas, (unsigned long long)seq, streamed);
	return 0;
}

/* ---- target --------------------------------------------------------- */

static uint8_t rbuf[NREQ][NRECV][MSG];
static struct ibv_mr *t_rmr;
static struct ibv_qp *t_qp[NREQ];
static uint64_t t_seq[NREQ];         /* the next message each QP must bring */

static void post_recv(unsigned r, unsigned slot)
{
	struct ibv_sge sge = { (uintptr_t)rbuf[r][slot], MSG, t_rmr->lkey };
	struct ibv_recv_wr rw = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;
	CHECK(ibv_post_recv(t_qp[r], &rw, &bad) == 0);
}

/* One receive completion: the next message of its QP, checked. */
static void on_recv(const struct ibv_wc *wc)
{
	unsigned r = 0;
	while (r < NREQ && t_qp[r]->qp_num != wc->qp_num)
		r++;
	CHECK(r < NREQ && wc->status == IBV_WC_SUCCESS, "target: receive %s",
	      ibv_wc_status_str(wc->status));
	CHECK(wc->wc_flags & IBV_WC_WITH_IMM);
	CHECK(ntohl(wc->imm_data) == (uint32_t)t_seq[r],
	      "target: QP %u got message %u, expected %llu (out of order)", r,
	      ntohl(wc->imm_data), (unsigned long long)t_seq[r]);
	if (wc->opcode == IBV_WC_RECV) {
		CHECK(wc->byte_len == MSG);
		for (uint32_t b = 0; b < MSG; b++)
			CHECK(rbuf[r][wc->wr_id][b] == (uint8_t)(t_seq[r] * 31 + b + r),
			      "target: Send %llu of QP %u: payload differs",
			      (unsigned long long)t_seq[r], r);
	} else {
		CHECK(wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM);
	}
	t_seq[r]++;
	post_recv(r, (unsigned)wc->wr_id);
}

static int target(const int *fd)
{
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_mr *mr = ibv_reg_mr(pd, tmem, sizeof(tmem), all);
	struct ibv_mr *mv = ibv_reg_mr(pd, victim, sizeof(victim), all);
	t_rmr = ibv_reg_mr(pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr && mv && t_rmr);
	struct ibv_cq *cq = make_cq(ctx);
	for (unsigned r = 0; r < NREQ; r++) {
		t_qp[r] = srn_tc_rc_qp(pd, cq, 64, NRECV);
		struct info me = { .gid = gid, .qpn = t_qp[r]->qp_num, .rkey = mr->rkey,
				   .vkey = mv->rkey, .addr = (uintptr_t)tmem,
				   .vaddr = (uintptr_t)victim }, peer;
		srn_tc_xchg(fd[r], &me, &peer, sizeof(me), TMO);
		up(t_qp[r], &peer);
		for (unsigned s = 0; s < NRECV; s++)
			post_recv(r, s);
	}
	for (unsigned r = 0; r < NREQ; r++)
		srn_tc_barrier(fd[r], 0x51, TMO);

	/* Receive in order on each QP, and add to the shared word from this
	 * CPU too, until every requester reported its end and each QP's
	 * messages are all in (a requester reports once they completed,
	 * so its receive completions are in the CQ by then). */
	uint64_t mine = 0;
	struct done_msg d[NREQ];
	bool fin[NREQ] = { false };
	unsigned nfin = 0;
	uint64_t *words = (uint64_t *)tmem;
	for (;;) {
		CHECK(srn_tc_now() < deadline, "target: %u of %u requesters done", nfin, NREQ);
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(cq, 16, wc);
		CHECK(n >= 0);
		for (int i = 0; i < n; i++)
			on_recv(&wc[i]);
		for (unsigned k = 0; k < 64; k++, mine++)
			__atomic_fetch_add(&words[0], 1, __ATOMIC_SEQ_CST);
		for (unsigned r = 0; r < NREQ; r++) {
			struct pollfd pf = { .fd = fd[r], .events = POLLIN };
			if (!fin[r] && poll(&pf, 1, 0) == 1) {
				srn_tc_recv(fd[r], &d[r], sizeof(d[r]), TMO);
				fin[r] = true;
				nfin++;
			}
		}
		unsigned over = 0;
		for (unsigned r = 0; r < NREQ; r++)
			over += fin[r] && t_seq[r] == d[r].sends;
		if (over == NREQ)
			break;
	}
	/* Every requester's operations completed before it reported, so
	 * our responder (for the UDP one) wrote them under the nic lock,
	 * which this poll takes: what it wrote is ours to read now. */
	struct ibv_wc none;
	CHECK(ibv_poll_cq(cq, 1, &none) == 0);
	uint64_t faas = mine;
	for (unsigned r = 0; r < NREQ; r++) {
		faas += d[r].faa;
		uint64_t v = __atomic_load_n(&words[1 + r], __ATOMIC_SEQ_CST);
		CHECK(v == d[r].cas, "target: CAS word %u is %llu, want %llu", r,
		      (unsigned long long)v, (unsigned long long)d[r].cas);
	}
	uint64_t sum = __atomic_load_n(&words[0], __ATOMIC_SEQ_CST);
	CHECK(sum == faas, "target: FAA word %llu, want %llu", (unsigned long long)sum,
	      (unsigned long long)faas);
	for (unsigned r = 0; r < NREQ; r++)
		srn_tc_send(fd[r], tmem + CTR_BYTES + r * SLICE, SLICE);

	/* dereg while all three stream into the victim. */
	for (unsigned r = 0; r < NREQ; r++)
		srn_tc_barrier(fd[r], 0x52, TMO);
	for (unsigned r = 0; r < NREQ; r++) {
		uint8_t started;
		srn_tc_recv(fd[r], &started, 1, TMO);
	}
	usleep(20000);           /* all three streaming */
	CHECK(ibv_dereg_mr(mv) == 0);
	static uint8_t snap[VICTIM];
	memcpy(snap, victim, VICTIM);
	usleep(500000);
	uint8_t verdict = !memcmp(snap, victim, VICTIM);
	for (unsigned r = 0; r < NREQ; r++)
		srn_tc_send(fd[r], &verdict, 1);
	CHECK(verdict, "target: the victim region changed after dereg returned");
	printf("ok: target: FAA word exact at %llu (%llu adds of its own CPU), CAS words exact, "
	       "slices shipped, victim unchanged after dereg\n", (unsigned long long)sum,
	       (unsigned long long)mine);
	return 0;
}

int main(int argc, char **argv)
{
	double timeout = 240;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--ops"))
			total_ops = strtoul(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--timeout"))
			timeout = strtod(argv[i + 1], NULL);
	}
	deadline = srn_tc_now() + timeout;
	int fd[NREQ];
	pid_t pid[NREQ];
	for (unsigned r = 0; r < NREQ; r++) {
		pid[r] = srn_tc_fork(&fd[r]);
		if (pid[r] == 0) {
			/* Earlier pairs' target ends are not ours. */
			for (unsigned q = 0; q < r; q++)
				close(fd[q]);
			unsigned long ops = total_ops / NREQ + (r < total_ops % NREQ);
			return requester(fd[r], r, ops);
		}
	}
	int ret = target(fd);
	for (unsigned r = 0; r < NREQ; r++) {
		int c = srn_tc_wait_child(pid[r], ret ? 5 : 60);
		if (c)
			ret = 1;
	}
	return ret;
}
