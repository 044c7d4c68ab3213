/*
 * perf_plot.c - `softrnic perf --plot FILE.svg`: the session's results as a
 * hand-written SVG chart, no dependencies.
 *
 * x: message size on a log2 axis (one tick per power of two, labels
 * 2, 64, 1K, 1M).  Latency tests draw the median as the main line, the
 * min..p99 spread as a band and p99 dashed; the y axis turns logarithmic
 * when values span more than 20x, so small sizes stay readable next to
 * 1 MiB.  Bandwidth tests draw Gb/s against the left axis and millions of
 * messages per second against the right one.  The title names the
 * operation and transport, the subtitle the setup, and every axis its
 * unit.  All text from the report is XML-escaped.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "perf_report.h"

#define W 960
#define H 600
#define ML 84   /* margins: room for tick labels and axis titles */
#define MR 84
#define MT 104
#define MB 72
#define PW (W - ML - MR)
#define PH (H - MT - MB)

#define C_MAIN "#1f5fbf"
#define C_SECOND "#e07b00"
#define C_BAND "#1f5fbf"
#define C_GRID "#e3e6ea"
#define C_AXIS "#444a52"
#define C_TEXT "#1d2127"
#define C_MUTED "#6b737d"

struct axis {
	double lo, hi;  /* data range shown */
	bool log;       /* log10 scale */
};

/* The tool does not link libm; the chart needs only these, on positive
 * values of modest size. */
static double m_abs(double v)
{
	return v < 0 ? -v : v;
}

static double m_floor(double v)
{
	double t = (double)(long long)v;

	return t > v ? t - 1 : t;
}

static double m_ceil(double v)
{
	double t = (double)(long long)v;

	return t < v ? t + 1 : t;
}

static double m_min(double a, double b)
{
	return a < b ? a : b;
}

static double m_max(double a, double b)
{
	return a > b ? a : b;
}

/* log2 of v > 0: the exponent by halving, then the fraction bit by bit
 * (squaring a mantissa in [1, 2) doubles its logarithm). */
static double m_log2(double v)
{
	double r = 0, bit = 0.5;

	for (int i = 0; i < 2100 && v >= 2; i++, r++)
		v /= 2;
	for (int i = 0; i < 2100 && v < 1; i++, r--)
		v *= 2;
	for (int i = 0; i < 40; i++, bit /= 2) {
		v *= v;
		if (v >= 2) {
			v /= 2;
			r += bit;
		}
	}
	return r;
}

static double m_log10(double v)
{
	return m_log2(v) / 3.321928094887362; /* m_log2(10) */
}

static double m_pow10(double k)
{
	double r = 1;

	for (int i = 0; i < 400 && i < k; i++)
		r *= 10;
	for (int i = 0; i < 400 && -i > k; i++)
		r /= 10;
	return r;
}

static void esc(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		default:
			if ((unsigned char)*s >= 0x20)
				fputc(*s, f);
		}
	}
}

static void size_label(uint64_t v, char *buf, size_t len)
{
	if (v >= (1u << 20) && !(v % (1u << 20)))
		snprintf(buf, len, "%lluM", (unsigned long long)(v >> 20));
	else if (v >= 1024 && !(v % 1024))
		snprintf(buf, len, "%lluK", (unsigned long long)(v >> 10));
	else
		snprintf(buf, len, "%llu", (unsigned long long)v);
}

static void num_label(double v, char *buf, size_t len)
{
	if (v == 0)
		snprintf(buf, len, "0");
	else if (m_abs(v) >= 100 || m_abs(v - (double)(long long)v) < 1e-9)
		snprintf(buf, len, "%.0f", v);
	else if (m_abs(v) >= 1)
		snprintf(buf, len, "%.1f", v);
	else
		snprintf(buf, len, "%.2g", v);
}

/* A "nice" step (1, 2 or 5 times a power of ten) for about n ticks. */
static double nice_step(double range, int n)
{
	double raw = range / n, p = m_pow10(m_floor(m_log10(raw))), m = raw / p;

	return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

static struct axis y_axis(double lo, double hi, bool allow_log)
{
	struct axis a = { 0, hi, false };

	if (!(hi > 0))
		a.hi = 1;
	if (allow_log && lo > 0 && hi / lo > 20) {
		/* Bounds on the 1-2-5 grid that hugs the data. */
		static const double steps[] = { 1, 2, 5, 10 };
		double dlo = m_pow10(m_floor(m_log10(lo))), dhi = m_pow10(m_floor(m_log10(hi)));

		a.log = true;
		a.lo = dlo;
		for (int i = 3; i >= 0; i--)
			if (steps[i] * dlo <= lo) {
				a.lo = steps[i] * dlo;
				break;
			}
		a.hi = 10 * dhi;
		for (int i = 0; i < 4; i++)
			if (steps[i] * dhi >= hi) {
				a.hi = steps[i] * dhi;
				break;
			}
	} else {
		double step = nice_step(a.hi, 5);

		a.hi = m_ceil(a.hi * 1.05 / step) * step;
	}
	return a;
}

static double ymap(const struct axis *a, double v)
{
	double t = a->log ? (m_log10(v) - m_log10(a->lo)) / (m_log10(a->hi) - m_log10(a->lo)) :
			    (v - a->lo) / (a->hi - a->lo);

	return MT + PH - t * PH;
}

/* Tick marks, labels and grid of a y axis on the left or right side. */
static void draw_y_axis(FILE *f, const struct axis *a, bool right, const char *title,
			const char *color, bool grid)
{
	int x = right ? ML + PW : ML;
	char buf[32];

	fprintf(f, "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='%s'/>\n", x, MT, x, MT + PH,
		C_AXIS);
	if (a->log) {
		/* Label 1-2-5 over a few decades, only the decades beyond. */
		bool dense = a->hi / a->lo <= 2000;

		for (double d = m_pow10(m_floor(m_log10(a->lo) + 1e-9)); d <= a->hi * 1.0001; d *= 10)
			for (int m = 1; m <= 9; m++) {
				double v = d * m, y;

				if (v > a->hi * 1.0001)
					break;
				if (v < a->lo * 0.9999)
					continue;
				y = ymap(a, v);
				if (grid)
					fprintf(f, "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' "
						   "stroke='%s' stroke-width='%s'/>\n", ML, y,
						ML + PW, y, C_GRID, m == 1 ? "1" : "0.5");
				if (m == 1 || (dense && (m == 2 || m == 5))) {
					num_label(v, buf, sizeof(buf));
					fprintf(f, "<text x='%d' y='%.1f' text-anchor='%s' "
						   "dominant-baseline='middle' font-size='12' "
						   "fill='%s'>%s</text>\n", right ? x + 8 : x - 8, y,
						right ? "start" : "end", C_TEXT, buf);
				}
			}
	} else {
		double step = nice_step(a->hi - a->lo, 5);

		for (double v = a->lo; v <= a->hi + step / 2; v += step) {
			double y = ymap(a, v);

			if (grid)
				fprintf(f, "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='%s'/>\n",
					ML, y, ML + PW, y, C_GRID);
			num_label(v, buf, sizeof(buf));
			fprintf(f, "<text x='%d' y='%.1f' text-anchor='%s' dominant-baseline='middle' "
				   "font-size='12' fill='%s'>%s</text>\n", right ? x + 8 : x - 8, y,
				right ? "start" : "end", C_TEXT, buf);
		}
	}
	fprintf(f, "<text transform='translate(%d,%d) rotate(%d)' text-anchor='middle' "
		   "font-size='13' font-weight='600' fill='%s'>", right ? x + 62 : x - 62,
		MT + PH / 2, right ? 90 : -90, color);
	esc(f, title);
	fprintf(f, "</text>\n");
}

struct xaxis {
	double lo, hi; /* log2 of sizes */
};

static double xmap(const struct xaxis *a, uint32_t size)
{
	return ML + (m_log2((double)size) - a->lo) / (a->hi - a->lo) * PW;
}

static void draw_x_axis(FILE *f, const struct xaxis *a)
{
	int first = (int)m_ceil(a->lo - 1e-9), last = (int)m_floor(a->hi + 1e-9);
	int every = (last - first) > 12 ? 2 : 1;
	char buf[32];

	fprintf(f, "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='%s'/>\n", ML, MT + PH,
		ML + PW, MT + PH, C_AXIS);
	for (int k = first; k <= last; k++) {
		double x = xmap(a, 1u << k);

		fprintf(f, "<line x1='%.1f' y1='%d' x2='%.1f' y2='%d' stroke='%s'/>\n", x, MT, x,
			MT + PH, C_GRID);
		fprintf(f, "<line x1='%.1f' y1='%d' x2='%.1f' y2='%d' stroke='%s'/>\n", x, MT + PH,
			x, MT + PH + 5, C_AXIS);
		/* Counted from the largest size, which is always labeled. */
		if ((last - k) % every)
			continue;
		size_label(1ull << k, buf, sizeof(buf));
		fprintf(f, "<text x='%.1f' y='%d' text-anchor='middle' font-size='12' "
			   "fill='%s'>%s</text>\n", x, MT + PH + 20, C_TEXT, buf);
	}
	fprintf(f, "<text x='%d' y='%d' text-anchor='middle' font-size='13' font-weight='600' "
		   "fill='%s'>message size (bytes, log scale)</text>\n", ML + PW / 2, H - 22,
		C_TEXT);
}

/* A polyline through (size, value) with round markers. */
static void draw_series(FILE *f, const struct srn_perf_report *r, const struct xaxis *xa,
			const struct axis *ya, size_t off, const char *color, bool dashed,
			bool markers)
{
	fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='2.5' "
		   "stroke-linejoin='round'%s points='", color,
		dashed ? " stroke-dasharray='7 5'" : "");
	for (size_t i = 0; i < r->nrows; i++) {
		double v = *(const double *)((const char *)&r->rows[i] + off);

		fprintf(f, "%.1f,%.1f ", xmap(xa, r->rows[i].size), ymap(ya, v));
	}
	fprintf(f, "'/>\n");
	for (size_t i = 0; markers && i < r->nrows; i++) {
		double v = *(const double *)((const char *)&r->rows[i] + off);

		fprintf(f, "<circle cx='%.1f' cy='%.1f' r='3.5' fill='%s' stroke='white' "
			   "stroke-width='1.2'><title>%u B: %.3f</title></circle>\n",
			xmap(xa, r->rows[i].size), ymap(ya, v), color, r->rows[i].size, v);
	}
}

/* One row above the plot area, where it can never hide a data point. */
static void legend(FILE *f, int n, const char *const *names, const char *const *colors,
		   const bool *dashed)
{
	int x = ML, y = MT - 16;

	for (int i = 0; i < n; i++) {
		if (strcmp(colors[i], "band"))
			fprintf(f, "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='%s' "
				   "stroke-width='2.5'%s/>\n", x, y, x + 26, y, colors[i],
				dashed[i] ? " stroke-dasharray='7 5'" : "");
		else
			fprintf(f, "<rect x='%d' y='%d' width='26' height='12' fill='%s' "
				   "fill-opacity='0.18'/>\n", x, y - 6, C_BAND);
		fprintf(f, "<text x='%d' y='%d' dominant-baseline='middle' font-size='12' "
			   "fill='%s'>%s</text>\n", x + 32, y, C_TEXT, names[i]);
		/* About 7 px per character at 12 px, plus the swatch and a gap. */
		x += 32 + 7 * (int)strlen(names[i]) + 28;
	}
}

static void plot_lat(FILE *f, const struct srn_perf_report *r, const struct xaxis *xa)
{
	double lo = 1e300, hi = 0;
	static const char *const names[] = { "median", "p99", "min .. p99" };
	static const char *const colors[] = { C_MAIN, C_SECOND, "band" };
	static const bool dashed[] = { false, true, false };
	struct axis ya;

	for (size_t i = 0; i < r->nrows; i++) {
		lo = m_min(lo, r->rows[i].t_min);
		hi = m_max(hi, r->rows[i].t_p99);
	}
	ya = y_axis(lo, hi, true);
	draw_y_axis(f, &ya, false, r->half_rtt ? "latency, half round trip (µs)" :
						 "latency, round trip (µs)", C_TEXT, true);
	draw_x_axis(f, xa);
	/* The band: along the min values, back along the p99 values. */
	fprintf(f, "<polygon fill='%s' fill-opacity='0.15' points='", C_BAND);
	for (size_t i = 0; i < r->nrows; i++)
		fprintf(f, "%.1f,%.1f ", xmap(xa, r->rows[i].size), ymap(&ya, r->rows[i].t_min));
	for (size_t i = r->nrows; i-- > 0;)
		fprintf(f, "%.1f,%.1f ", xmap(xa, r->rows[i].size), ymap(&ya, r->rows[i].t_p99));
	fprintf(f, "'/>\n");
	draw_series(f, r, xa, &ya, offsetof(struct srn_perf_row, t_p99), C_SECOND, true, false);
	draw_series(f, r, xa, &ya, offsetof(struct srn_perf_row, t_med), C_MAIN, false, true);
	legend(f, 3, names, colors, dashed);
}

static void plot_bw(FILE *f, const struct srn_perf_report *r, const struct xaxis *xa)
{
	double gb = 0, mm = 0, best = -1;
	static const char *const names[] = { "bandwidth (Gb/s, left)",
					     "message rate (Mmsg/s, right)" };
	static const char *const colors[] = { C_MAIN, C_SECOND };
	static const bool dashed[] = { false, true };
	const struct srn_perf_row *peak = NULL;
	struct axis yl, yr;
	char buf[32];

	for (size_t i = 0; i < r->nrows; i++) {
		gb = m_max(gb, r->rows[i].gbps);
		mm = m_max(mm, r->rows[i].mmps);
		if (r->rows[i].gbps > best) {
			best = r->rows[i].gbps;
			peak = &r->rows[i];
		}
	}
	yl = y_axis(0, gb, false);
	yr = y_axis(0, mm, false);
	draw_y_axis(f, &yl, false, "bandwidth (Gb/s)", C_MAIN, true);
	draw_y_axis(f, &yr, true, "message rate (million msgs/s)", C_SECOND, false);
	draw_x_axis(f, xa);
	draw_series(f, r, xa, &yr, offsetof(struct srn_perf_row, mmps), C_SECOND, true, true);
	draw_series(f, r, xa, &yl, offsetof(struct srn_perf_row, gbps), C_MAIN, false, true);
	if (peak) {
		double x = xmap(xa, peak->size), y = ymap(&yl, peak->gbps);

		size_label(peak->size, buf, sizeof(buf));
		fprintf(f, "<text x='%.1f' y='%.1f' text-anchor='%s' font-size='12' "
			   "font-weight='600' fill='%s'>peak %.2f Gb/s (%.0f MB/s) at %s</text>\n",
			x, y - 12, x > ML + PW * 0.7 ? "end" : x < ML + PW * 0.3 ? "start" : "middle",
			C_MAIN, peak->gbps, peak->mbps, buf);
	}
	legend(f, 2, names, colors, dashed);
}

int srn_perf_plot_svg(const char *path, const struct srn_perf_report *r, char *err,
		      size_t errlen)
{
	struct xaxis xa;
	char title[160], when[32];
	time_t now = time(NULL);
	FILE *f;

	if (!r->nrows) {
		snprintf(err, errlen, "no results to plot");
		return -EINVAL;
	}
	xa.lo = xa.hi = m_log2((double)r->rows[0].size);
	for (size_t i = 1; i < r->nrows; i++) {
		xa.lo = m_min(xa.lo, m_log2((double)r->rows[i].size));
		xa.hi = m_max(xa.hi, m_log2((double)r->rows[i].size));
	}
	/* Half a power of two of air on each side; a lone size gets one. */
	xa.lo -= xa.hi > xa.lo ? 0.5 : 1;
	xa.hi += xa.hi > xa.lo + 1.5 ? 0.5 : 1;

	f = fopen(path, "w");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	srn_perf_describe(r, title, sizeof(title));
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M", localtime(&now));
	fprintf(f, "<?xml version='1.0' encoding='UTF-8'?>\n"
		   "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' "
		   "viewBox='0 0 %d %d' font-family='DejaVu Sans, Helvetica, Arial, sans-serif'>\n"
		   "<rect width='100%%' height='100%%' fill='white'/>\n", W, H, W, H);
	fprintf(f, "<text x='%d' y='34' font-size='20' font-weight='700' fill='%s'>softrnic perf: ",
		ML, C_TEXT);
	esc(f, title);
	fprintf(f, "</text>\n<text x='%d' y='56' font-size='13' fill='%s'>", ML, C_MUTED);
	fprintf(f, "%s, ", r->p.test == SRN_PERF_LAT ?
		(r->half_rtt ? "half round trip (ping-pong)" : "round trip") :
		"unidirectional");
	esc(f, r->device);
	fprintf(f, " ");
	esc(f, r->local);
	fprintf(f, " → ");
	esc(f, r->remote);
	fprintf(f, ", MTU %u", r->mtu);
	if (r->p.test == SRN_PERF_BW)
		fprintf(f, ", %u in flight/QP", r->p.tx_depth);
	if (r->duration_s > 0)
		fprintf(f, ", %.3g s per size", r->duration_s);
	else
		fprintf(f, ", %llu iterations per size", (unsigned long long)r->rows[0].iters);
	fprintf(f, "</text>\n");
	fprintf(f, "<rect x='%d' y='%d' width='%d' height='%d' fill='#fafbfc'/>\n", ML, MT, PW, PH);
	if (r->p.test == SRN_PERF_LAT)
		plot_lat(f, r, &xa);
	else
		plot_bw(f, r, &xa);
	fprintf(f, "<text x='%d' y='%d' text-anchor='end' font-size='11' fill='%s'>%s</text>\n",
		W - 12, H - 8, C_MUTED, when);
	fprintf(f, "</svg>\n");
	if (ferror(f) | fclose(f)) {
		snprintf(err, errlen, "%s: write error", path);
		return -EIO;
	}
	return 0;
}
