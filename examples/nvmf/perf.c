/*
 * perf.c - `softrnic-nvmf perf`: random or sequential reads and writes
 * over N I/O queues at a queue depth, for a run time; IOPS and latency
 * percentiles; every block read checked.
 *
 * Self-describing blocks: every 512-byte sector written carries its own
 * LBA, a tag (run id << 32 | the block's write count in this run) and
 * 496 bytes derived from both.  A read checks each sector: its LBA, that
 * the bytes follow from LBA and tag, and, for a block this run wrote, the
 * exact tag of the last write.  A sector of zeros passes only for a block
 * this run never wrote (a fresh namespace).  A block is never read and
 * written at once (one command per block in flight), so the expected tag
 * is always known.
 *
 * One thread drives every queue, polling each in turn; with --spin-us N
 * it sleeps once nothing completed for N us.  Latency is from
 * submit to the completion seen, in a histogram of 100 ns buckets.
 *
 * --invalidate (NVMe/RDMA): keyed SGLs name a memory window per command
 * that the target must invalidate by Send with Invalidate (host_rdma.c
 * checks every response); the result line adds the responses that did
 * (invalidated=) and those that did not (inv_fail=, also in errors=).
 * After the run, a key so invalidated must be dead (stale_key_check).
 */
#include "perf.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define UNCERTAIN 0xffffffffu

struct pslot {
	uint64_t t0, blk;
	bool write, busy;
};

struct pq {
	struct hq *q;
	struct pslot *s;
};

struct perf {
	struct host h;
	const struct perf_opts *o;
	struct pq q[NVMF_MAX_QUEUES];
	uint64_t nblk, seq_next, rng, run;
	uint32_t *ver;
	uint8_t *busy;
	uint32_t *hist;
	uint64_t ios, reads, writes, errors, verify_fail, inflight;
	uint64_t inv_base; /* --invalidate: responses that invalidated before the workload */
	struct pq *cur; /* the queue being polled, for the callback */
};

static uint64_t mix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void fill_sector(uint64_t *w, uint64_t lba, uint64_t tag)
{
	uint64_t s = lba * 0x100000001b3ull ^ tag;
	w[0] = lba;
	w[1] = tag;
	for (unsigned i = 2; i < NVMF_LBA_SIZE / 8; i++)
		w[i] = mix(&s);
}

static bool sector_ok(const uint64_t *w, uint64_t lba, uint32_t ver, uint64_t run)
{
	uint64_t want[NVMF_LBA_SIZE / 8];
	if (!w[0] && !w[1]) {
		for (unsigned i = 2; i < NVMF_LBA_SIZE / 8; i++)
			if (w[i])
				return false;
		return ver == 0 || ver == UNCERTAIN; /* never written: zeros */
	}
	if (w[0] != lba)
		return false;
	if (ver != 0 && ver != UNCERTAIN && w[1] != (run << 32 | ver))
		return false; /* not the last write of this block */
	fill_sector(want, lba, w[1]);
	return !memcmp(w, want, sizeof(want));
}

static uint64_t pick_block(struct perf *p)
{
	for (int tries = 0; tries < 16; tries++) {
		uint64_t b = p->o->seq ? p->seq_next++ % p->nblk : mix(&p->rng) % p->nblk;
		if (!p->busy[b])
			return b;
	}
	return UINT64_MAX;
}

static int submit_one(struct perf *p, struct pq *pq, unsigned si)
{
	uint64_t b = pick_block(p);
	if (b == UINT64_MAX)
		return 1; /* every candidate busy: try later */
	struct pslot *s = &pq->s[si];
	uint32_t nsect = p->o->bs / NVMF_LBA_SIZE;
	uint64_t slba = b * nsect;
	bool write = p->o->op == OP_WRITE ||
		     (p->o->op == OP_RW && (mix(&p->rng) & 1));
	struct nvme_sqe sqe = { .opc = write ? OPC_WRITE : OPC_READ, .nsid = p->h.nsid,
				.cdw10 = (uint32_t)slba, .cdw11 = (uint32_t)(slba >> 32),
				.cdw12 = nsect - 1 };
	if (write) {
		uint32_t v = p->ver[b] == UNCERTAIN ? 1 : p->ver[b] + 1;
		p->ver[b] = v;
		uint8_t *d = p->h.ops->buf(pq->q, si);
		for (uint32_t i = 0; i < nsect; i++)
			fill_sector((uint64_t *)(d + i * NVMF_LBA_SIZE), slba + i, p->run << 32 | v);
	}
	s->blk = b;
	s->write = write;
	s->busy = true;
	p->busy[b] = 1;
	p->inflight++;
	s->t0 = host_now_ns();
	if (p->h.ops->submit(pq->q, si, &sqe, p->o->bs, HQ_AUTO))
		return -1;
	return 0;
}

static void on_done(void *arg, unsigned si, const struct nvme_cqe *c)
{
	struct perf *p = arg;
	struct pslot *s = &p->cur->s[si];
	if (!s->busy)
		return;
	uint64_t lat = (host_now_ns() - s->t0) / HIST_NS;
	p->hist[lat < HIST_N ? lat : HIST_N - 1]++;
	s->busy = false;
	p->busy[s->blk] = 0;
	p->inflight--;
	p->ios++;
	if (cqe_status(c)) {
		p->errors++;
		if (s->write)
			p->ver[s->blk] = UNCERTAIN; /* written or not: unknown */
		if (p->errors < 5)
			fprintf(stderr, "perf: %s of block %llu: status %#x\n",
				s->write ? "write" : "read", (unsigned long long)s->blk, cqe_status(c));
		return;
	}
	if (s->write) {
		p->writes++;
		return;
	}
	p->reads++;
	uint32_t nsect = p->o->bs / NVMF_LBA_SIZE;
	const uint8_t *d = p->h.ops->buf(p->cur->q, si);
	for (uint32_t i = 0; i < nsect; i++) {
		if (sector_ok((const uint64_t *)(d + i * NVMF_LBA_SIZE), s->blk * nsect + i,
			      p->ver[s->blk], p->run))
			continue;
		if (p->verify_fail++ < 5)
			fprintf(stderr, "perf: block %llu sector %u does not verify\n",
				(unsigned long long)s->blk, i);
		break;
	}
}

double perf_pct(const uint32_t *hist, uint64_t n, double q)
{
	uint64_t want = (uint64_t)(q * (double)n), acc = 0;
	for (uint64_t i = 0; i < HIST_N; i++) {
		acc += hist[i];
		if (acc > want)
			return (double)(i * HIST_NS + HIST_NS / 2) / 1000.0;
	}
	return (double)HIST_N * HIST_NS / 1000.0;
}

static double pct(const struct perf *p, double q)
{
	return perf_pct(p->hist, p->ios, q);
}

/* --spin-us: nothing completed for that long, so sleep: arm every
 * queue, look once more (a completion may have come before the arm),
 * then wait on their fds (1 ms at most: new submissions are ours). */
static int sleep_idle(struct perf *p)
{
	struct pollfd fds[NVMF_MAX_QUEUES];
	nfds_t n = 0;
	int seen = 0;
	for (unsigned i = 0; i < p->h.nioq; i++) {
		struct hq *q = p->q[i].q;
		p->h.ops->arm(q);
		p->cur = &p->q[i];
		int r = p->h.ops->poll(q, on_done, p);
		if (r < 0)
			return r;
		seen += r;
		int fd = p->h.ops->wait_fd(q);
		bool dup = false;
		for (nfds_t k = 0; k < n; k++)
			dup |= fds[k].fd == fd;
		if (!dup && fd >= 0)
			fds[n++] = (struct pollfd){ .fd = fd, .events = POLLIN };
	}
	if (!seen)
		poll(fds, n, 1);
	for (unsigned i = 0; i < p->h.nioq; i++)
		p->h.ops->drain(p->q[i].q);
	return 0;
}

/* --invalidate: the responses that invalidated the window as asked, on
 * the I/O queues, and those that did not, on every queue (bring-up
 * commands included). */
static void inv_sum(const struct perf *p, uint64_t *inv_ok, uint64_t *inv_bad)
{
	uint64_t ok, bad;
	hq_rdma_inv_counts(p->h.aq, &ok, inv_bad);
	*inv_ok = 0;
	for (unsigned i = 0; i < p->h.nioq; i++) {
		hq_rdma_inv_counts(p->q[i].q, &ok, &bad);
		*inv_ok += ok;
		*inv_bad += bad;
	}
}

/* The result line; with --invalidate, the workload's responses that
 * invalidated as asked (not the I/O queues' Connects) and, as errors
 * too, all that did not. */
static void report(struct perf *p, double secs)
{
	uint64_t inv_ok = 0, inv_bad = 0;
	if (p->h.o.invalidate) {
		inv_sum(p, &inv_ok, &inv_bad);
		inv_ok -= p->inv_base;
		p->errors += inv_bad;
	}
	const char *opn = p->o->op == OP_READ ? "read" : p->o->op == OP_WRITE ? "write" : "rw";
	printf("result transport=%s op=%s%s bs=%u qd=%u queues=%u seconds=%.2f ios=%llu "
	       "iops=%.0f MBps=%.1f p50_us=%.1f p99_us=%.1f p999_us=%.1f reads=%llu writes=%llu "
	       "errors=%llu verify_fail=%llu",
	       p->h.o.xport == HX_RDMA ? "rdma" : "tcp", p->o->seq ? "seq" : "rand", opn,
	       p->o->bs, p->o->qd, p->h.nioq, secs, (unsigned long long)p->ios,
	       (double)p->ios / secs, (double)p->ios * p->o->bs / secs / 1e6, pct(p, 0.5),
	       pct(p, 0.99), pct(p, 0.999), (unsigned long long)p->reads,
	       (unsigned long long)p->writes, (unsigned long long)p->errors,
	       (unsigned long long)p->verify_fail);
	if (p->h.o.invalidate)
		printf(" invalidated=%llu inv_fail=%llu", (unsigned long long)inv_ok,
		       (unsigned long long)inv_bad);
	printf("\n");
}

/* --invalidate, after the run: a key the target invalidated must be
 * dead.  A read on I/O queue 1's slot 0 (its window bound, then freed by
 * the response's Send with Invalidate), then the same read with that
 * stale key in a plain keyed SGL.  The target's RDMA Write to it must
 * meet a remote access error (IBTA: an access through an invalid rkey is
 * NAKed), after which RC leaves the target nothing but to end the
 * queue's connection: no status may come back, only the queue breaking
 * (or, if our QP stays up, silence).  Returns 0 if so. */
static int stale_key_check(struct perf *p)
{
	struct host *h = &p->h;
	struct hq *q = h->ioq[0];
	uint32_t nsect = p->o->bs / NVMF_LBA_SIZE, rkey = 0;
	struct nvme_sqe s = { .opc = OPC_READ, .nsid = h->nsid, .cdw12 = nsect - 1 };
	struct nvme_cqe c;
	int ret = host_sync(h, q, &s, p->o->bs, HQ_AUTO, &c, 5000);
	if (ret || hq_rdma_stale_rkey(q, 0, &rkey)) {
		printf("stale_key FAIL: the read before it: %s\n",
		       ret ? strerror(-ret) : "did not invalidate its window");
		return -1;
	}
	s = (struct nvme_sqe){ .opc = OPC_READ, .nsid = h->nsid, .cdw12 = nsect - 1,
			       .flags = 1 << 6 };
	s.sgl.type = SGL_KEYED_ADDR;
	s.sgl.addr = (uintptr_t)h->ops->buf(q, 0);
	s.sgl.len[0] = (uint8_t)p->o->bs; /* 24 bits, little-endian */
	s.sgl.len[1] = (uint8_t)(p->o->bs >> 8);
	s.sgl.len[2] = (uint8_t)(p->o->bs >> 16);
	memcpy(s.sgl.key, &rkey, 4);
	bool dead = h->dead;
	ret = host_sync(h, q, &s, 0, HQ_RAW, &c, 3000);
	h->dead = dead; /* only this I/O queue is gone: the controller shuts down cleanly */
	bool ok = ret == -ECONNRESET || ret == -ETIMEDOUT;
	printf("stale_key %s: a read naming invalidated rkey %#x: %s\n", ok ? "ok" : "FAIL", rkey,
	       ret == -ECONNRESET ? "the queue ended" : ret == -ETIMEDOUT ? "no answer in 3 s" :
	       ret == -EPROTO ? "answered with an error status" : ret ? strerror(-ret) :
	       "answered with success");
	return ok ? 0 : -1;
}

static int drive(struct perf *p)
{
	uint64_t t0 = host_now_ns(), end = t0 + (uint64_t)(p->o->seconds * 1e9);
	uint64_t now = t0, last_seen = t0, bad;
	if (p->h.o.invalidate)
		inv_sum(p, &p->inv_base, &bad);
	while (now < end || p->inflight) {
		bool progress = false;
		if (now > end + 5000000000ull) {
			fprintf(stderr, "perf: %llu commands never completed\n",
				(unsigned long long)p->inflight);
			return -ETIMEDOUT;
		}
		for (unsigned i = 0; i < p->h.nioq; i++) {
			struct pq *pq = &p->q[i];
			for (unsigned s = 0; now < end && s < p->o->qd; s++)
				if (!pq->s[s].busy && submit_one(p, pq, s) < 0)
					return -ECONNRESET;
			p->cur = pq;
			int r = p->h.ops->poll(pq->q, on_done, p);
			if (r < 0)
				return -ECONNRESET;
			if (r > 0) {
				last_seen = now;
				progress = true;
			}
		}
		now = host_now_ns();
		if (!progress && p->o->spin_us >= 0 && now - last_seen > (uint64_t)p->o->spin_us * 1000 &&
		    sleep_idle(p) < 0)
			return -ECONNRESET;
	}
	report(p, (double)(now - t0) / 1e9);
	return 0;
}

int nvmf_perf(const struct perf_opts *o)
{
	if (o->bs % NVMF_LBA_SIZE || !o->bs || o->bs > NVMF_MAX_DATA || !o->qd ||
	    o->qd > NVMF_MQES + 1 || !o->queues || o->queues > NVMF_MAX_QUEUES) {
		fprintf(stderr, "perf: bad --bs, --qd (1-%d) or --queues (1-%d)\n", NVMF_MQES + 1,
			NVMF_MAX_QUEUES);
		return 2;
	}
	if (o->host.invalidate && o->host.xport != HX_RDMA) {
		fprintf(stderr, "perf: --invalidate is for NVMe/RDMA (-t rdma) only\n");
		return 2;
	}
	struct perf *p = calloc(1, sizeof(*p));
	if (!p)
		return 1;
	p->o = o;
	/* A fabrics queue of SQSIZE + 1 entries carries that many commands
	 * (the host's view of the head is the completions' SQHD, no slot is
	 * kept empty), so the queue is exactly --qd deep; slot 0's Connect
	 * is over before the workload starts.  Queues have 2 entries at least. */
	int ret = host_start(&p->h, &o->host, o->queues, (uint16_t)(o->qd < 2 ? 2 : o->qd));
	if (ret) {
		fprintf(stderr, "perf: cannot bring the controller up: %s (status %#x)\n",
			strerror(-ret), p->h.last_status);
		host_stop(&p->h);
		free(p);
		return 3;
	}
	uint64_t bytes = p->h.nlb * NVMF_LBA_SIZE;
	if (o->size && o->size < bytes)
		bytes = o->size;
	p->nblk = bytes / o->bs;
	p->rng = host_now_ns() ^ (uint64_t)getpid() << 32;
	p->run = (mix(&p->rng) & 0x7fffffff) | 1;
	p->ver = calloc(p->nblk ? p->nblk : 1, sizeof(*p->ver));
	p->busy = calloc(p->nblk ? p->nblk : 1, 1);
	p->hist = calloc(HIST_N, sizeof(*p->hist));
	for (unsigned i = 0; i < p->h.nioq; i++) {
		p->q[i].q = p->h.ioq[i];
		p->q[i].s = calloc(o->qd, sizeof(struct pslot));
		if (!p->q[i].s)
			ret = -ENOMEM;
	}
	if (!p->nblk || p->nblk < (uint64_t)o->qd * o->queues)
		ret = -ENOSPC; /* fewer blocks than commands in flight */
	if (!ret && p->ver && p->busy && p->hist)
		ret = drive(p);
	else if (!ret)
		ret = -ENOMEM;
	if (ret)
		fprintf(stderr, "perf: %s\n", strerror(-ret));
	int rc = ret || p->errors || p->verify_fail ? 1 : 0;
	if (!ret && o->host.invalidate && stale_key_check(p))
		rc = 1;
	host_stop(&p->h);
	for (unsigned i = 0; i < NVMF_MAX_QUEUES; i++)
		free(p->q[i].s);
	free(p->ver);
	free(p->busy);
	free(p->hist);
	free(p);
	return rc;
}
