/*
 * perf_report.h - what `softrnic perf` shows: the results of a session
 * (one row per message size), as a table for people, JSON or CSV for
 * scripts, an SVG chart (perf_plot.c), and the live progress line.
 *
 * Latencies are in microseconds; for ping-pong tests (write, send) they
 * are half round trips, like perftest's, and for one-sided round trips
 * (read, atomics) the full round trip; `half_rtt` says which, and every
 * output states it.  Bandwidth is MB/s (10^6 bytes), Gb/s (10^9 bits) and
 * millions of messages per second, of what the client sent; for send
 * bandwidth JSON also gives how many messages arrived (UC and UD may lose
 * some: a loss is reported, not a failure).
 */
#ifndef SRN_TOOLS_PERF_REPORT_H
#define SRN_TOOLS_PERF_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "perf_run.h"

#define SRN_PERF_MAX_ROWS 64

struct srn_perf_row {
	uint32_t size;
	uint64_t iters;
	double elapsed_s;
	double t_min, t_med, t_p99, t_max, t_avg; /* lat, us */
	double mbps, gbps, mmps;                  /* bw, of the messages sent */
	uint64_t received;                        /* send bw: of iters, arrived */
};

struct srn_perf_report {
	struct srn_perf_params p;
	char device[64], local[64], remote[64];
	unsigned mtu;            /* bytes, as used */
	bool half_rtt;           /* lat: values are half round trips */
	double duration_s;       /* 0: fixed iteration counts */
	struct srn_perf_row rows[SRN_PERF_MAX_ROWS];
	size_t nrows;
};

/* Fill in the session's description (everything but rows). */
void srn_perf_report_init(struct srn_perf_report *r, const struct srn_perf_params *p,
			  const char *device, const char *local, const char *remote,
			  unsigned mtu, double duration_s);
/* Add one size's row; lat sorts `samples` (round trips, ns) in place. */
struct srn_perf_row *srn_perf_report_add(struct srn_perf_report *r, uint32_t size,
					 const struct srn_perf_result *res);

/* The table, printed as rows arrive: header, rows, footer. */
void srn_perf_table_header(FILE *f, const struct srn_perf_report *r);
void srn_perf_table_row(FILE *f, const struct srn_perf_report *r,
			const struct srn_perf_row *row);
void srn_perf_table_footer(FILE *f);
void srn_perf_json(FILE *f, const struct srn_perf_report *r);
void srn_perf_csv(FILE *f, const struct srn_perf_report *r);
/* perf_plot.c: latency or bandwidth against size; -errno, message in err. */
int srn_perf_plot_svg(const char *path, const struct srn_perf_report *r, char *err,
		      size_t errlen);

/* "RDMA Write latency, RC, 2 QPs" and friends, for titles. */
void srn_perf_describe(const struct srn_perf_report *r, char *buf, size_t len);

/* A one-line progress display on a terminal, redrawn in place. */
struct srn_perf_progress {
	FILE *f;                 /* NULL: disabled */
	char label[96];
	uint32_t size;
	double duration_s;
	bool shown;
};

void srn_perf_progress_init(struct srn_perf_progress *pg, FILE *f, const char *label,
			    double duration_s);
void srn_perf_progress_show(struct srn_perf_progress *pg, uint64_t done, uint64_t total,
			    uint64_t elapsed_ns);
void srn_perf_progress_clear(struct srn_perf_progress *pg);

#endif /* SRN_TOOLS_PERF_REPORT_H */
