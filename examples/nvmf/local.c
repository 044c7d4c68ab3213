/*
 * local.c - `softrnic-nvmf local-perf --ns FILE|ram:SIZE`: the backing
 * store's own latency, the baseline bench.sh sets NVMe-oF against.
 *
 * Queue depth 1, random blocks of --bs (4 KiB), read or write, for
 * --seconds, through the very call the target makes for a Read or Write
 * (io.c, nvmf_ns_rw: pread/pwrite on a file or block device, memcpy on
 * RAM), with no fabric and no NVMe in between.  What NVMe-oF adds is
 * perf's QD-1 p50 against the same namespace minus this one.  A write
 * puts back what the block held (read first, not timed), so the
 * namespace keeps its data and a later perf still verifies.  Prints one
 * `result` line as perf does (transport=local).
 */
#include "perf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

struct local {
	struct nvmf_ns ns;
	uint64_t nblk, rng, ios, reads, writes, errors;
	uint64_t busy_ns;  /* the timed I/Os alone: IOPS leaves the untimed reads out */
	uint32_t *hist;
	uint8_t *buf;
};

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* One I/O on a random block; its latency into the histogram. */
static void one(struct local *l, const struct perf_opts *o)
{
	uint64_t off = xorshift(&l->rng) % l->nblk * o->bs;
	bool write = o->op == OP_WRITE || (o->op == OP_RW && (xorshift(&l->rng) & 1));
	if (write && nvmf_ns_rw(&l->ns, false, l->buf, off, o->bs)) {
		l->errors++;
		return;
	}
	uint64_t t0 = host_now_ns();
	int ret = nvmf_ns_rw(&l->ns, write, l->buf, off, o->bs);
	uint64_t ns = host_now_ns() - t0, lat = ns / HIST_NS;
	l->busy_ns += ns;
	l->hist[lat < HIST_N ? lat : HIST_N - 1]++;
	l->ios++;
	l->errors += ret != 0;
	write ? l->writes++ : l->reads++;
}

static void report(const struct local *l, const struct perf_opts *o, double secs)
{
	const char *opn = o->op == OP_READ ? "read" : o->op == OP_WRITE ? "write" : "rw";
	double busy = l->busy_ns ? (double)l->busy_ns / 1e9 : secs;
	printf("result transport=local op=rand%s bs=%u qd=1 queues=1 seconds=%.2f ios=%llu "
	       "iops=%.0f MBps=%.1f p50_us=%.1f p99_us=%.1f p999_us=%.1f reads=%llu writes=%llu "
	       "errors=%llu verify_fail=0\n",
	       opn, o->bs, secs, (unsigned long long)l->ios, (double)l->ios / busy,
	       (double)l->ios * o->bs / busy / 1e6, perf_pct(l->hist, l->ios, 0.5),
	       perf_pct(l->hist, l->ios, 0.99), perf_pct(l->hist, l->ios, 0.999),
	       (unsigned long long)l->reads, (unsigned long long)l->writes,
	       (unsigned long long)l->errors);
}

int nvmf_local_perf(const struct perf_opts *o, const char *spec)
{
	if (!spec || o->bs % NVMF_LBA_SIZE || !o->bs || o->bs > NVMF_MAX_DATA) {
		fprintf(stderr, "local-perf: --ns FILE|ram:SIZE, and --bs a multiple of %d up to %d\n",
			NVMF_LBA_SIZE, NVMF_MAX_DATA);
		return 2;
	}
	struct local l = { .ns.nsid = 1 };
	int ret = nvmf_ns_open(&l.ns, spec);
	if (ret) {
		fprintf(stderr, "local-perf: %s: %s\n", spec, strerror(-ret));
		return 1;
	}
	uint64_t bytes = l.ns.nlb * NVMF_LBA_SIZE;
	if (o->size && o->size < bytes)
		bytes = o->size;
	l.nblk = bytes / o->bs;
	l.rng = host_now_ns() | 1;
	l.hist = calloc(HIST_N, sizeof(*l.hist));
	l.buf = malloc(o->bs);
	if (l.nblk && l.hist && l.buf) {
		uint64_t t0 = host_now_ns(), end = t0 + (uint64_t)(o->seconds * 1e9), now = t0;
		/* The clock is read around every I/O anyway; end checked per 64. */
		while (now < end) {
			for (int i = 0; i < 64; i++)
				one(&l, o);
			now = host_now_ns();
		}
		report(&l, o, (double)(now - t0) / 1e9);
	} else {
		fprintf(stderr, "local-perf: %s\n", l.nblk ? strerror(ENOMEM) : "namespace too small");
	}
	int rc = !l.ios || l.errors ? 1 : 0;
	free(l.hist);
	free(l.buf);
	nvmf_ns_close(&l.ns);
	return rc;
}
