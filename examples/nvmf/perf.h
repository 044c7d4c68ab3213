/*
 * perf.h - the host-side subcommands: perf (workload), probe (bad input
 * and the statuses it must get), discover (the discovery log); and
 * local-perf (local.c), the backing store's own latency, no fabric.
 */
#ifndef NVMF_PERF_H
#define NVMF_PERF_H

#include "host.h"

enum perf_op { OP_READ, OP_WRITE, OP_RW };

struct perf_opts {
	struct host_opts host;
	enum perf_op op;
	bool seq;
	uint32_t bs;
	unsigned qd, queues;
	double seconds;
	uint64_t size;     /* bytes of the namespace to use, 0 = all */
	int spin_us;       /* sleep after this long idle; -1: spin always */
};

/* Latency histograms: 100 ns buckets, up to 100 ms. */
#define HIST_NS 100
#define HIST_N 1000000
double perf_pct(const uint32_t *hist, uint64_t n, double q);

int nvmf_perf(const struct perf_opts *o);
int nvmf_local_perf(const struct perf_opts *o, const char *spec);
int nvmf_probe(const struct host_opts *o);
int nvmf_discover(const struct host_opts *o);

#endif
