/*
 * perf_report.c - statistics, table, JSON, CSV and the progress line of
 * `softrnic perf` (see perf_report.h for units and conventions).
 *
 * Machine output never contains NaN or infinity: a row with no time
 * measured reports 0, which a consumer can reject, rather than invalid
 * JSON.  Strings that reach JSON (device names) are escaped.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "perf_report.h"

#define RULE "------------------------------------------------------------------------------\n"

static const char *test_name(enum srn_perf_test t)
{
	return t == SRN_PERF_LAT ? "lat" : "bw";
}

void srn_perf_report_init(struct srn_perf_report *r, const struct srn_perf_params *p,
			  const char *device, const char *local, const char *remote,
			  unsigned mtu, double duration_s)
{
	memset(r, 0, sizeof(*r));
	r->p = *p;
	snprintf(r->device, sizeof(r->device), "%s", device);
	snprintf(r->local, sizeof(r->local), "%s", local);
	snprintf(r->remote, sizeof(r->remote), "%s", remote);
	r->mtu = mtu;
	r->half_rtt = p->test == SRN_PERF_LAT && !srn_perf_op_one_sided_lat(p->op);
	r->duration_s = duration_s;
}

void srn_perf_describe(const struct srn_perf_report *r, char *buf, size_t len)
{
	snprintf(buf, len, "%s %s, %s, %u QP%s", srn_perf_op_title(r->p.op),
		 r->p.test == SRN_PERF_LAT ? "latency" : "bandwidth",
		 srn_perf_qp_type_title(r->p.qp_type), r->p.qps, r->p.qps == 1 ? "" : "s");
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double num(double v)
{
	return isfinite(v) ? v : 0;
}

struct srn_perf_row *srn_perf_report_add(struct srn_perf_report *r, uint32_t size,
					 const struct srn_perf_result *res)
{
	struct srn_perf_row *row;
	double secs = (double)res->elapsed_ns / 1e9;

	if (r->nrows >= SRN_PERF_MAX_ROWS)
		return NULL;
	row = &r->rows[r->nrows++];
	memset(row, 0, sizeof(*row));
	row->size = size;
	row->iters = res->iters;
	row->received = res->received;
	row->elapsed_s = secs;
	if (r->p.test == SRN_PERF_LAT && res->samples && res->iters) {
		uint64_t *s = res->samples, n = res->iters, sum = 0;
		double div = (r->half_rtt ? 2.0 : 1.0) * 1000.0; /* ns -> us */
		uint64_t p99 = (n * 99 + 99) / 100;              /* ceil(0.99 n) */

		qsort(s, n, sizeof(*s), cmp_u64);
		for (uint64_t i = 0; i < n; i++)
			sum += s[i];
		row->t_min = (double)s[0] / div;
		row->t_max = (double)s[n - 1] / div;
		row->t_med = (n % 2 ? (double)s[n / 2] :
				      ((double)s[n / 2 - 1] + (double)s[n / 2]) / 2) / div;
		row->t_p99 = (double)s[p99 - 1] / div;
		row->t_avg = (double)sum / (double)n / div;
	} else if (secs > 0) {
		double bytes = (double)size * (double)res->iters;

		row->mbps = num(bytes / secs / 1e6);
		row->gbps = num(bytes * 8 / secs / 1e9);
		row->mmps = num((double)res->iters / secs / 1e6);
	}
	return row;
}

/* ---- table ---- */

void srn_perf_table_header(FILE *f, const struct srn_perf_report *r)
{
	const struct srn_perf_params *p = &r->p;
	char what[128];

	srn_perf_describe(r, what, sizeof(what));
	fprintf(f, RULE);
	fprintf(f, " softrnic perf: %s\n", what);
	fprintf(f, " device %s: %s -> %s, MTU %u", r->device, r->local, r->remote, r->mtu);
	if (p->op == SRN_PERF_WRITE || p->op == SRN_PERF_SEND)
		fprintf(f, ", inline up to %u B", p->inline_size);
	fprintf(f, "\n");
	if (r->duration_s > 0)
		fprintf(f, " each size runs for %.3g s\n", r->duration_s);
	if (p->test == SRN_PERF_LAT) {
		fprintf(f, " latency in usec: %s\n", r->half_rtt ?
			"half of the round trip (ping-pong), as perftest's t_typical" :
			"full round trip of one operation at a time");
		fprintf(f, RULE);
		fprintf(f, " %9s %10s %9s %9s %9s %9s %9s\n", "#bytes", "#iters", "t_min",
			"t_median", "t_p99", "t_max", "t_avg");
	} else {
		fprintf(f, " %u WRs in flight per QP, one signaled in %u, %u per post call\n",
			p->tx_depth, p->cq_mod, p->post_list);
		fprintf(f, RULE);
		fprintf(f, " %9s %10s %12s %10s %14s\n", "#bytes", "#iters", "BW[MB/s]",
			"BW[Gb/s]", "MsgRate[Mpps]");
	}
	fflush(f);
}

void srn_perf_table_row(FILE *f, const struct srn_perf_report *r,
			const struct srn_perf_row *row)
{
	if (r->p.test == SRN_PERF_LAT)
		fprintf(f, " %9u %10" PRIu64 " %9.2f %9.2f %9.2f %9.2f %9.2f\n", row->size,
			row->iters, row->t_min, row->t_med, row->t_p99, row->t_max, row->t_avg);
	else
		fprintf(f, " %9u %10" PRIu64 " %12.2f %10.3f %14.4f\n", row->size, row->iters,
			row->mbps, row->gbps, row->mmps);
	fflush(f);
}

void srn_perf_table_footer(FILE *f)
{
	fprintf(f, RULE);
	fflush(f);
}

/* ---- JSON and CSV ---- */

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

void srn_perf_json(FILE *f, const struct srn_perf_report *r)
{
	const struct srn_perf_params *p = &r->p;

	fprintf(f, "{\n  \"tool\": \"softrnic perf\",\n  \"op\": \"%s\",\n  \"qp_type\": \"%s\",\n"
		   "  \"test\": \"%s\",\n  \"device\": ", srn_perf_op_name(p->op),
		srn_perf_qp_type_name(p->qp_type), test_name(p->test));
	json_str(f, r->device);
	fprintf(f, ",\n  \"local\": ");
	json_str(f, r->local);
	fprintf(f, ",\n  \"remote\": ");
	json_str(f, r->remote);
	fprintf(f, ",\n  \"qps\": %u,\n  \"mtu\": %u,\n  \"inline\": %u,\n  \"tx_depth\": %u,\n"
		   "  \"cq_mod\": %u,\n  \"post_list\": %u,\n  \"duration_s\": %.3f,\n",
		p->qps, r->mtu, p->inline_size, p->tx_depth, p->cq_mod, p->post_list,
		r->duration_s);
	if (p->test == SRN_PERF_LAT)
		fprintf(f, "  \"latency_unit\": \"usec\",\n  \"latency_kind\": \"%s\",\n",
			r->half_rtt ? "half_round_trip" : "round_trip");
	fprintf(f, "  \"results\": [");
	for (size_t i = 0; i < r->nrows; i++) {
		const struct srn_perf_row *w = &r->rows[i];

		fprintf(f, "%s\n    {\"bytes\": %u, \"iters\": %" PRIu64 ", \"elapsed_s\": %.6f, ",
			i ? "," : "", w->size, w->iters, num(w->elapsed_s));
		if (p->test == SRN_PERF_LAT)
			fprintf(f, "\"t_min_us\": %.3f, \"t_median_us\": %.3f, \"t_p99_us\": %.3f, "
				   "\"t_max_us\": %.3f, \"t_avg_us\": %.3f}",
				num(w->t_min), num(w->t_med), num(w->t_p99),
				num(w->t_max), num(w->t_avg));
		else if (p->op == SRN_PERF_SEND)
			fprintf(f, "\"bw_MBps\": %.3f, \"bw_Gbps\": %.4f, \"msg_rate_Mpps\": %.5f, "
				   "\"received\": %" PRIu64 "}", w->mbps, w->gbps, w->mmps, w->received);
		else
			fprintf(f, "\"bw_MBps\": %.3f, \"bw_Gbps\": %.4f, \"msg_rate_Mpps\": %.5f}",
				w->mbps, w->gbps, w->mmps);
	}
	fprintf(f, "\n  ]\n}\n");
	fflush(f);
}

void srn_perf_csv(FILE *f, const struct srn_perf_report *r)
{
	const struct srn_perf_params *p = &r->p;
	bool lat = p->test == SRN_PERF_LAT;

	fprintf(f, "op,qp_type,test,qps,mtu,bytes,iters,elapsed_s,%s\n",
		lat ? "t_min_us,t_median_us,t_p99_us,t_max_us,t_avg_us,latency_kind" :
		      "bw_MBps,bw_Gbps,msg_rate_Mpps");
	for (size_t i = 0; i < r->nrows; i++) {
		const struct srn_perf_row *w = &r->rows[i];

		fprintf(f, "%s,%s,%s,%u,%u,%u,%" PRIu64 ",%.6f,", srn_perf_op_name(p->op),
			srn_perf_qp_type_name(p->qp_type), test_name(p->test), p->qps, r->mtu, w->size,
			w->iters, num(w->elapsed_s));
		if (lat)
			fprintf(f, "%.3f,%.3f,%.3f,%.3f,%.3f,%s\n", num(w->t_min),
				num(w->t_med), num(w->t_p99), num(w->t_max),
				num(w->t_avg), r->half_rtt ? "half_round_trip" : "round_trip");
		else
			fprintf(f, "%.3f,%.4f,%.5f\n", w->mbps, w->gbps, w->mmps);
	}
	fflush(f);
}

/* ---- progress line ---- */

void srn_perf_progress_init(struct srn_perf_progress *pg, FILE *f, const char *label,
			    double duration_s)
{
	memset(pg, 0, sizeof(*pg));
	pg->f = f;
	pg->duration_s = duration_s;
	snprintf(pg->label, sizeof(pg->label), "%s", label);
}

void srn_perf_progress_show(struct srn_perf_progress *pg, uint64_t done, uint64_t total,
			    uint64_t elapsed_ns)
{
	enum { BAR = 24 };
	double secs = (double)elapsed_ns / 1e9, frac;
	char bar[BAR + 1];
	int full;

	if (!pg->f)
		return;
	if (total)
		frac = (double)done / (double)total;
	else
		frac = pg->duration_s > 0 ? secs / pg->duration_s : 0;
	frac = frac < 0 ? 0 : frac > 1 ? 1 : frac;
	full = (int)(frac * BAR + 0.5);
	memset(bar, '#', (size_t)full);
	memset(bar + full, '.', (size_t)(BAR - full));
	bar[BAR] = '\0';
	/* \r + erase-to-end redraws in place; nothing else writes stderr
	 * while a run is in progress. */
	fprintf(pg->f, "\r\033[K %s %8u B [%s] %" PRIu64, pg->label, pg->size, bar, done);
	if (total)
		fprintf(pg->f, "/%" PRIu64, total);
	fprintf(pg->f, " msgs  %.1f s", secs);
	fflush(pg->f);
	pg->shown = true;
}

void srn_perf_progress_clear(struct srn_perf_progress *pg)
{
	if (pg->f && pg->shown) {
		fprintf(pg->f, "\r\033[K");
		fflush(pg->f);
	}
	pg->shown = false;
}
