/*
 * workload.c - `blockstore bench`: random 4 KiB reads and writes at a
 * queue depth, every block checked, latencies and IOPS measured.
 *
 * Each block this tool writes describes itself: a header (magic, writer,
 * LBA, version, CRC32C of the rest) and pseudo-random bytes derived from
 * them.  So any block read back can be checked on its own (right LBA,
 * intact), and a block this process wrote must come back with exactly
 * the version it last had acknowledged.  Two requests for one LBA are
 * never in flight at once, so "last acknowledged" is well defined.
 *
 * With --shared other clients write the same range.  The store's
 * promise for a read racing writers of its LBA: a whole block of that
 * LBA (never torn: the tag's CRCs), written by the last write the server
 * committed before the read or by one committed while it ran; so the
 * server's version (the tag's seq) a client sees for an LBA never goes
 * back, and is never older than the client's own last acknowledged write
 * there (if it is that write's seq, the block is that write's).  A read
 * that breaks this is counted as a stale read (and a verify failure).
 * seq 0 means "loaded from the file" (versions are not stored there;
 * the file holds the newest), which any seq may precede.
 *
 * Output: one line `result key=value ...` for scripts (bench.sh).
 */
#include "workload.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

#define BLK_MAGIC 0x424c4b57u /* "BLKW" */
#define MAX_LAT (4u << 20)    /* latency samples kept */

struct blk_hdr {
	uint32_t magic;
	uint32_t writer;
	uint64_t lba;
	uint64_t version;
	uint32_t crc; /* CRC32C of bytes 32..4095 */
	uint32_t pad;
};
_Static_assert(sizeof(struct blk_hdr) == 32, "block header is 32 bytes");

static void fill_block(uint8_t *b, uint64_t lba, uint64_t version, uint32_t writer)
{
	uint64_t x = (lba + 1) * 0x9e3779b97f4a7c15ull ^ version ^ (uint64_t)writer << 48;
	uint64_t *w = (uint64_t *)b;
	for (unsigned i = 4; i < BS_BLOCK / 8; i++) {
		x ^= x << 13; /* xorshift64 */
		x ^= x >> 7;
		x ^= x << 17;
		w[i] = x;
	}
	struct blk_hdr h = { BLK_MAGIC, writer, lba, version, 0, 0 };
	h.crc = bs_crc32c(0, b + sizeof(h), BS_BLOCK - sizeof(h));
	memcpy(b, &h, sizeof(h));
}

/* 0: a whole block of LBA (or never written: all zero, *version 0). */
static int check_block(const uint8_t *b, uint64_t lba, uint64_t *version, uint32_t *writer)
{
	struct blk_hdr h;
	memcpy(&h, b, sizeof(h));
	*version = 0;
	*writer = 0;
	if (!h.magic) {
		for (unsigned i = 0; i < BS_BLOCK; i++)
			if (b[i])
				return -1;
		return 0;
	}
	if (h.magic != BLK_MAGIC || h.lba != lba ||
	    h.crc != bs_crc32c(0, b + sizeof(h), BS_BLOCK - sizeof(h)))
		return -1;
	*version = h.version;
	*writer = h.writer;
	return 0;
}

struct run {
	struct bs_client *c;
	struct bs_client_opts co;
	unsigned qd, writer;
	uint64_t start, count; /* LBA range */
	uint64_t *expect;      /* version this process last wrote there, 0: none */
	uint8_t *busy;
	uint64_t *io_version;  /* per request: the version being written */
	uint64_t *seen_seq;    /* newest server version seen per LBA (reads and own writes) */
	uint64_t *own_seq;     /* server version of this process's last acknowledged write */
	bool shared;           /* other clients write the same range */
	uint64_t stale_reads;
	uint64_t version, rng;
	uint32_t *lat;
	uint64_t nlat, ops, errors, verify_fail;
	int first_errors;
};

static uint64_t rnd(struct run *r)
{
	r->rng ^= r->rng << 13;
	r->rng ^= r->rng >> 7;
	r->rng ^= r->rng << 17;
	return r->rng;
}

static void complain(struct run *r, const char *what, uint64_t lba, int status)
{
	if (r->first_errors++ < 10)
		fprintf(stderr, "blockstore bench: %s lba %llu: %s\n", what, (unsigned long long)lba,
			status ? strerror(-status) : "bad data");
}

/* One finished request: check it, account it. */
static void finish(struct run *r, struct bs_io *io, bool timed)
{
	uint64_t idx = io->lba - r->start;
	r->busy[idx] = 0;
	if (timed && r->nlat < MAX_LAT) {
		uint64_t ns = bs_client_now() - io->t_submit;
		r->lat[r->nlat++] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
	}
	r->ops++;
	if (io->status) {
		r->errors++;
		complain(r, io->op == BS_OP_WRITE ? "write" : "read", io->lba, io->status);
		return;
	}
	if (io->op == BS_OP_WRITE) {
		r->expect[idx] = r->io_version[io->index];
		r->own_seq[idx] = io->seq;
		if (io->seq > r->seen_seq[idx])
			r->seen_seq[idx] = io->seq;
		return;
	}
	uint64_t v;
	uint32_t w;
	bool mine = !r->shared || (io->seq && io->seq == r->own_seq[idx]);
	if (check_block(io->buf, io->lba, &v, &w) ||
	    (mine && r->expect[idx] && (v != r->expect[idx] || w != r->writer))) {
		r->verify_fail++;
		complain(r, "verify", io->lba, 0);
	}
	if (io->seq && io->seq < r->seen_seq[idx]) {
		r->stale_reads++;
		r->verify_fail++;
		if (r->first_errors++ < 10)
			fprintf(stderr, "blockstore bench: read lba %llu returned version %llu after "
				"%llu was seen\n", (unsigned long long)io->lba,
				(unsigned long long)io->seq, (unsigned long long)r->seen_seq[idx]);
	}
	if (io->seq > r->seen_seq[idx])
		r->seen_seq[idx] = io->seq;
}

static int pick(struct run *r, uint64_t *lba)
{
	for (int tries = 0; tries < 16; tries++) {
		uint64_t i = rnd(r) % r->count;
		if (!r->busy[i]) {
			*lba = r->start + i;
			return 0;
		}
	}
	return -1;
}

enum mode { M_WRITE, M_READ, M_MIX, M_SEQ_WRITE, M_SEQ_READ };

/* Run MODE until SECONDS pass or MAX_OPS are done (sequential modes: one
 * pass over the range).  TIMED: record latencies. */
static int phase(struct run *r, enum mode m, double seconds, uint64_t max_ops, bool timed)
{
	struct bs_io *freeios[BS_MAX_QP_DEPTH * 64];
	unsigned nfree = 0, inflight = 0;
	unsigned nios = bs_client_nios(r->c);
	for (unsigned i = 0; i < nios && i < r->qd; i++)
		freeios[nfree++] = bs_client_io(r->c, i);
	uint64_t t0 = bs_client_now(), end = t0 + (uint64_t)(seconds * 1e9);
	bool seq = m == M_SEQ_WRITE || m == M_SEQ_READ;
	uint64_t next = 0, issued = 0, last_progress = t0;
	for (;;) {
		bool more = seq ? next < r->count
				: bs_client_now() < end && (!max_ops || issued < max_ops);
		while (more && nfree) {
			uint64_t lba;
			if (seq) {
				lba = r->start + next;
				if (r->busy[next])
					break;
				next++;
			} else if (pick(r, &lba)) {
				break;
			}
			struct bs_io *io = freeios[--nfree];
			bool w = m == M_WRITE || m == M_SEQ_WRITE || (m == M_MIX && rnd(r) & 1);
			io->op = w ? BS_OP_WRITE : BS_OP_READ;
			io->lba = lba;
			if (w) {
				r->io_version[io->index] = ++r->version;
				fill_block(io->buf, lba, r->version, r->writer);
			}
			r->busy[lba - r->start] = 1;
			if (bs_submit(r->c, io)) {
				r->busy[lba - r->start] = 0;
				freeios[nfree++] = io;
				r->errors++;
				break;
			}
			inflight++;
			issued++;
			more = seq ? next < r->count
				   : bs_client_now() < end && (!max_ops || issued < max_ops);
		}
		if (!more && !inflight)
			break;
		struct bs_io *done[64];
		int n = bs_reap(r->c, done, 64, 1000);
		for (int i = 0; i < n; i++) {
			finish(r, done[i], timed);
			freeios[nfree++] = done[i];
			inflight--;
		}
		uint64_t now = bs_client_now();
		if (n > 0)
			last_progress = now;
		else if (now - last_progress > 30000000000ull) {
			fprintf(stderr, "blockstore bench: no completion for 30 s, %u in flight\n",
				inflight);
			r->errors += inflight;
			return -ETIMEDOUT;
		}
	}
	return (int)((bs_client_now() - t0) / 1000); /* elapsed, us (fits: < 35 min) */
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: blockstore bench --addr IP [--port P] [--tcp] [--op write|read|mix]\n"
		"       [--qd N] [--conns N] [--seconds S] [--ops N] [--start LBA] [--count N]\n"
		"       [--writer ID] [--fill] [--verify-end] [--verify-all] [--poll-us US]\n"
		"       [--no-rdma-read] [--src IP] [--stale-rkey] [--shared]\n"
		"--shared: other clients write the same range (reads check order, not owner)\n"
		"--stale-rkey: a wrong client on purpose (keeps its first rkey across a\n"
		"cache move) for `softrnic explain` to diagnose\n");
}

/* What the command line asks of a bench beyond struct run. */
struct bench_args {
	const char *op;
	double seconds;
	uint64_t max_ops;
	bool fill, verify_end, verify_all;
};

/* The options into r and a: 0, or -1 after the usage. */
static int parse_bench_opts(int argc, char **argv, struct run *r, struct bench_args *a)
{
	static const struct option lo[] = {
		{ "addr", 1, 0, 'a' },	 { "port", 1, 0, 'p' },	      { "tcp", 0, 0, 't' },
		{ "op", 1, 0, 'o' },	 { "qd", 1, 0, 'q' },	      { "conns", 1, 0, 'c' },
		{ "seconds", 1, 0, 's' }, { "ops", 1, 0, 'n' },	      { "start", 1, 0, 'S' },
		{ "count", 1, 0, 'C' },	 { "writer", 1, 0, 'w' },     { "fill", 0, 0, 'f' },
		{ "verify-end", 0, 0, 'v' }, { "verify-all", 0, 0, 'V' }, { "poll-us", 1, 0, 'u' },
		{ "no-rdma-read", 0, 0, 'R' }, { "src", 1, 0, 'I' }, { "stale-rkey", 0, 0, 'K' },
		{ "shared", 0, 0, 'H' }, { 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'a': r->co.host = optarg; break;
		case 'p': r->co.port = atoi(optarg); break;
		case 't': r->co.tcp = true; break;
		case 'o': a->op = optarg; break;
		case 'q': r->qd = (unsigned)atoi(optarg); break;
		case 'c': r->co.nconn = (unsigned)atoi(optarg); break;
		case 's': a->seconds = atof(optarg); break;
		case 'n': a->max_ops = strtoull(optarg, NULL, 0); break;
		case 'S': r->start = strtoull(optarg, NULL, 0); break;
		case 'C': r->count = strtoull(optarg, NULL, 0); break;
		case 'w': r->writer = (unsigned)atoi(optarg); break;
		case 'f': a->fill = true; break;
		case 'v': a->verify_end = true; break;
		case 'V': a->verify_all = true; break;
		case 'u': r->co.poll_us = (unsigned)atoi(optarg); break;
		case 'R': r->co.no_rdma_read = true; break;
		case 'I': r->co.src = optarg; break;
		case 'K': r->co.stale_rkey = true; break;
		case 'H': r->shared = true; break;
		default: usage(); return -1;
		}
	}
	return 0;
}

/* The result line: the run's operations over elapsed microseconds, its
 * latency percentiles (sorts r->lat) and the client's counters. */
static void print_result(struct run *r, const struct bench_args *a, int elapsed)
{
	qsort(r->lat, r->nlat, sizeof(*r->lat), cmp_u32);
	double p50 = r->nlat ? r->lat[r->nlat / 2] / 1e3 : 0;
	double p99 = r->nlat ? r->lat[r->nlat * 99 / 100] / 1e3 : 0;
	const struct bs_client_counters *k = bs_client_counters(r->c);
	printf("result transport=%s op=%s qd=%u conns=%u ops=%llu secs=%.3f iops=%.0f "
	       "p50_us=%.1f p99_us=%.1f errors=%llu verify_fail=%llu retries=%llu "
	       "reconnects=%llu reconnect_max_ms=%.1f rdma_read_hits=%llu rdma_read_misses=%llu "
	       "crc_rejects=%llu remaps_seen=%llu access_errors=%llu stale_reads=%llu\n",
	       r->co.tcp ? "tcp" : "rdma", a->verify_all ? "verify-all" : a->op, r->qd, r->co.nconn,
	       (unsigned long long)r->ops, elapsed / 1e6,
	       elapsed > 0 ? r->ops / (elapsed / 1e6) : 0.0, p50, p99,
	       (unsigned long long)r->errors, (unsigned long long)r->verify_fail,
	       (unsigned long long)k->retries, (unsigned long long)k->reconnects,
	       k->reconnect_max_us / 1e3, (unsigned long long)k->rdma_read_hits,
	       (unsigned long long)k->rdma_read_misses, (unsigned long long)k->crc_rejects,
	       (unsigned long long)k->remaps_seen, (unsigned long long)k->access_errors,
	       (unsigned long long)r->stale_reads);
	fflush(stdout);
}

int bs_bench_main(int argc, char **argv)
{
	struct run r = { .qd = 1, .writer = 1 };
	r.co = (struct bs_client_opts){ .host = "127.0.0.1", .port = 7470, .nconn = 2,
					.poll_us = 1000 };
	struct bench_args a = { .op = "write", .seconds = 2 };
	if (parse_bench_opts(argc, argv, &r, &a))
		return 2;
	const char *op = a.op;
	enum mode m = !strcmp(op, "write") ? M_WRITE : !strcmp(op, "read") ? M_READ
			: !strcmp(op, "mix")	 ? M_MIX
						 : (enum mode)-1;
	if ((int)m < 0 || !r.qd || r.qd > 1024 || !r.co.nconn) {
		usage();
		return 2;
	}
	r.co.depth = (r.qd + r.co.nconn - 1) / r.co.nconn;
	if (r.co.depth > BS_MAX_QP_DEPTH) {
		fprintf(stderr, "blockstore bench: at most %u in flight per connection\n",
			BS_MAX_QP_DEPTH);
		return 2;
	}
	int ret = bs_client_open(&r.co, &r.c);
	if (ret) {
		fprintf(stderr, "blockstore bench: cannot connect to %s:%d: %s\n", r.co.host,
			r.co.port, strerror(-ret));
		return 1;
	}
	uint64_t nb = bs_client_nblocks(r.c);
	if (a.verify_all) { /* the whole device, every block checked on its own */
		r.start = 0;
		r.count = nb;
	}
	if (!r.count)
		r.count = nb - (r.start < nb ? r.start : nb);
	if (r.start >= nb || r.start + r.count > nb || r.count < 1) {
		fprintf(stderr, "blockstore bench: range outside the %llu-block device\n",
			(unsigned long long)nb);
		bs_client_close(r.c);
		return 2;
	}
	r.expect = calloc(r.count, sizeof(*r.expect));
	r.busy = calloc(r.count, 1);
	r.seen_seq = calloc(r.count, sizeof(*r.seen_seq));
	r.own_seq = calloc(r.count, sizeof(*r.own_seq));
	r.io_version = calloc(bs_client_nios(r.c), sizeof(*r.io_version));
	r.lat = malloc(MAX_LAT * sizeof(*r.lat));
	r.rng = 0x2545f4914f6cdd1dull ^ ((uint64_t)r.writer << 32) ^ bs_client_now();
	if (!r.expect || !r.busy || !r.io_version || !r.lat || !r.seen_seq || !r.own_seq) {
		bs_client_close(r.c);
		return 1;
	}
	int elapsed = 0;
	if (a.verify_all) {
		ret = phase(&r, M_SEQ_READ, 0, 0, false);
	} else {
		ret = a.fill ? phase(&r, M_SEQ_WRITE, 0, 0, false) : 0;
		uint64_t base_ops = r.ops;
		r.nlat = 0;
		if (ret >= 0)
			ret = elapsed = phase(&r, m, a.seconds, a.max_ops, true);
		r.ops -= base_ops;
		if (ret >= 0 && a.verify_end) {
			uint64_t ops = r.ops;
			ret = phase(&r, M_SEQ_READ, 0, 0, false);
			r.ops = ops;
		}
	}
	print_result(&r, &a, elapsed);
	bs_client_close(r.c);
	bool bad = ret < 0 || r.errors || r.verify_fail;
	free(r.expect);
	free(r.busy);
	free(r.seen_seq);
	free(r.own_seq);
	free(r.io_version);
	free(r.lat);
	return bad ? 1 : 0;
}
