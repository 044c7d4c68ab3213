/*
 * cmd_stat.c - `softrnic stat`: the counters of every softrnic process on
 * this host, read from their diagnostic segments (src/diag/seg_layout.h)
 * without their cooperation: while they run, and after they died (last
 * values).
 *
 *   softrnic stat [--pid N] [--dev NAME] [--qp QPN|all] [--all]
 *                 [--json | --dump] [--watch [SECS] [--count N]]
 *   softrnic stat --cleanup
 *
 * Invariants: read-only except --cleanup, which removes only the caller's
 * own files whose process is gone.  --watch computes rates from two samples of the same
 * file, keyed by path, QP slot generation and counter, so a counter of a
 * process that restarted under another file is never differenced against
 * the old one.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "diag_opts.h"
#include "diag_read.h"
#include "proc_cpu.h"
#include "subcommands.h"

struct stat_opts {
	struct srn_diag_opts d;   /* --pid, --dev, --qp, --json, --dump */
	bool all, cleanup;
	long watch_ms;      /* 0: print once */
	long count;         /* --count: refreshes, 0 = until interrupted */
};

void srn_usage_stat(FILE *out)
{
	fprintf(out,
		"Usage: softrnic stat [options]\n"
		"\n"
		"Shows the counters of every softrnic device in every process on this\n"
		"host, read from outside the processes (their shared-memory diagnostic\n"
		"segments in $" SRN_DIAG_DIR_ENV " or " SRN_DIAG_DEFAULT_DIR "). Works while a\n"
		"program runs and after it crashed: a crashed or killed process is\n"
		"shown as \"dead\" with its last values. Counters are named as Linux\n"
		"rxe/mlx5 name them (rdma statistic) where such a name exists.\n"
		"\n"
		"Options:\n"
		"  --pid N          only process N\n"
		"  --dev NAME       only device NAME\n"
		"  --qp QPN|all     also the per-QP counters of QP QPN (or of all QPs)\n"
		"  --all            also counters that are zero (table output)\n"
		"  --watch [SECS]   redraw every SECS seconds (default 1) with rates per second\n"
		"  --count N        with --watch: stop after N redraws\n"
		"  --json           JSON (with --watch: one document per line)\n"
		"  --dump           tab-separated, one counter per line, for scripts:\n"
		"                   pid dev state scope counter value [rate]\n"
		"                   (scope is \"dev\" or \"qp:0x<qpn>\")\n"
		"  --cleanup        remove your files of processes that no longer exist\n"
		"  -h, --help       show this help\n"
		"\n"
		"States: running; closed (device closed cleanly); exited (process ended\n"
		"without closing the device); dead (process gone without exiting: crashed\n"
		"or killed). Files stay after a crash so the last values remain readable;\n"
		"`softrnic stat` says how many belong to processes that are gone.\n"
		"Each file is readable by its owner only: you see your own processes\n"
		"(root sees all), and how many files of other users were not shown.\n");
}

/* ---- previous samples for rates (open addressing, bounded) ------------- */

#define PREV_SLOTS 16384

struct prev_map {
	uint64_t key[PREV_SLOTS];
	uint64_t val[PREV_SLOTS];
	bool used[PREV_SLOTS];
};

static uint64_t key_of(const char *path, uint64_t scope, uint32_t idx)
{
	uint64_t h = 1469598103934665603ull;    /* FNV-1a */
	for (const unsigned char *p = (const unsigned char *)path; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	h = (h ^ scope) * 1099511628211ull;
	h = (h ^ idx) * 1099511628211ull;
	return h | 1;
}

/* Store v under key; returns the previous value in *old (false: none). */
static bool prev_swap(struct prev_map *m, uint64_t key, uint64_t v, uint64_t *old)
{
	if (!m)
		return false;
	for (uint32_t i = 0; i < PREV_SLOTS; i++) {
		uint32_t j = (uint32_t)(key + i) & (PREV_SLOTS - 1);
		if (!m->used[j]) {
			m->used[j] = true;
			m->key[j] = key;
			m->val[j] = v;
			return false;
		}
		if (m->key[j] == key) {
			*old = m->val[j];
			m->val[j] = v;
			return true;
		}
	}
	return false;   /* full: no rate for this one */
}

/* ---- printing ---------------------------------------------------------- */

struct sample {
	struct prev_map *prev;  /* NULL: no rates */
	double dt;              /* seconds since the previous sample */
	bool have_prev;
};

/* One set of counters (a device's, or a QP's): table and dump print a
 * line each, JSON an object "counters" and, when watching, "rates". */
static void print_set(struct srn_out *o, const struct stat_opts *op, const char *path,
		      uint64_t scope, const char (*names)[SRN_DIAG_NAME_LEN], const uint64_t *v,
		      uint32_t n, struct sample *smp, const char *dump_scope)
{
	double rate[SRN_DIAG_MAX_COUNTERS];
	bool has_rate[SRN_DIAG_MAX_COUNTERS], any_rate = false;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t old = 0;
		bool has_old = prev_swap(smp->prev, key_of(path, scope, i), v[i], &old);
		has_rate[i] = smp->prev && smp->have_prev && has_old && smp->dt > 0;
		rate[i] = has_rate[i] ? (double)(v[i] - old) / smp->dt : 0;
		any_rate |= has_rate[i];
	}
	for (uint32_t i = 0; i < n && o->mode != SRN_OUT_JSON; i++) {
		if (o->mode == SRN_OUT_TABLE) {
			if (!v[i] && !op->all)
				continue;
			fprintf(o->f, "    %-30s %16" PRIu64, names[i], v[i]);
			if (has_rate[i])
				fprintf(o->f, " %14.1f/s", rate[i]);
		} else {
			fprintf(o->f, "%s\t%s\t%s\t%" PRIu64, o->prefix, dump_scope, names[i], v[i]);
			if (has_rate[i])
				fprintf(o->f, "\t%.1f", rate[i]);
		}
		fputc('\n', o->f);
	}
	if (o->mode != SRN_OUT_JSON)
		return;
	srn_out_obj_begin(o, "counters");
	for (uint32_t i = 0; i < n; i++)
		srn_out_u64(o, names[i], v[i]);
	srn_out_obj_end(o);
	if (!any_rate)
		return;
	srn_out_obj_begin(o, "rates");
	for (uint32_t i = 0; i < n; i++)
		if (has_rate[i])
			srn_out_dbl(o, names[i], rate[i], 1);
	srn_out_obj_end(o);
}

static bool qp_wanted(const struct stat_opts *op, const struct srn_diag_slot *sl)
{
	return op->d.has_qp && sl->kind == SRN_DIAG_QP && (op->d.qp_all || sl->qp.qpn == op->d.qpn);
}

static void print_qps(struct srn_out *o, const struct stat_opts *op, const struct srn_seg *s,
		      struct sample *smp, unsigned *nqps)
{
	struct srn_diag_slot sl;
	srn_out_arr_begin(o, "qps");
	for (uint32_t i = 0; i < s->nslots; i++) {
		if (srn_seg_slot(s, i, &sl) == 0 || !qp_wanted(op, &sl))
			continue;
		(*nqps)++;
		char head[64], scope[32];
		snprintf(head, sizeof(head), "qp 0x%06x", sl.qp.qpn);
		snprintf(scope, sizeof(scope), "qp:0x%06x", sl.qp.qpn);
		srn_out_obj_begin(o, NULL);
		if (o->mode == SRN_OUT_TABLE)
			fprintf(o->f, "  %s  %s %s\n", head, srn_qp_type_str(sl.qp.type),
				srn_qp_state_name(sl.qp.state));
		srn_out_u64(o, "qpn", sl.qp.qpn);
		srn_out_str(o, "type", srn_qp_type_str(sl.qp.type));
		srn_out_str(o, "state", srn_qp_state_name(sl.qp.state));
		/* Keyed by slot and generation: a new QP in the slot starts afresh. */
		uint64_t key_scope = (uint64_t)(i + 1) << 32 | sl.gen;
		print_set(o, op, s->path, key_scope, s->qpcnames, sl.qp.cnt, s->nqp_counters, smp,
			  scope);
		srn_out_obj_end(o);
	}
	srn_out_arr_end(o);
}

static void print_seg(struct srn_out *o, const struct stat_opts *op, const struct srn_seg *s,
		      struct sample *smp, unsigned *nqps)
{
	const struct srn_diag_hdr *h = &s->hdr;   /* private copy */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t now_real = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	double up = now_real > s->start_realtime_ns ? (double)(now_real - s->start_realtime_ns) / 1e9
						    : 0;
	char started[32];
	srn_time_str(s->start_realtime_ns, started, sizeof(started));
	snprintf(o->prefix, sizeof(o->prefix), "%d\t%s\t%s", s->pid, s->dev,
		 srn_proc_state_name(s->state));

	/* What it costs, while it runs: its CPU and its progress threads'. */
	struct srn_proc_cpu cpu;
	bool have_cpu = s->state == SRN_PROC_RUNNING && srn_proc_cpu_read(s->pid, &cpu);
	srn_out_obj_begin(o, NULL);
	if (o->mode == SRN_OUT_TABLE) {
		fprintf(o->f, "%s  pid %d (%s)  %s  %s", s->dev, s->pid, s->comm, s->addr,
			srn_proc_state_name(s->state));
		if (s->state == SRN_PROC_RUNNING && have_cpu && cpu.progress_threads)
			fprintf(o->f, "  up %.1fs  cpu %.2fs, progress thread %.2fs\n", up,
				cpu.process_s, cpu.progress_s);
		else if (s->state == SRN_PROC_RUNNING)
			fprintf(o->f, "  up %.1fs\n", up);
		else
			fprintf(o->f, "  started %s, last values\n", started);
		uint64_t full = atomic_load_explicit(&h->table_full, memory_order_relaxed);
		if (full)
			fprintf(o->f, "  (%" PRIu64 " objects not tracked: table full)\n", full);
	}
	srn_out_u64(o, "pid", (uint64_t)s->pid);
	srn_out_str(o, "comm", s->comm);
	srn_out_str(o, "dev", s->dev);
	srn_out_str(o, "addr", s->addr);
	srn_out_str(o, "state", srn_proc_state_name(s->state));
	srn_out_dbl(o, "start_time", (double)s->start_realtime_ns / 1e9, 3);
	srn_out_u64(o, "objects", atomic_load_explicit(&h->slots_used, memory_order_relaxed));
	srn_out_u64(o, "objects_untracked", atomic_load_explicit(&h->table_full, memory_order_relaxed));
	srn_out_u64(o, "errors_logged", atomic_load_explicit(&h->errors_logged, memory_order_relaxed));
	if (have_cpu) {
		srn_out_dbl(o, "process_cpu_s", cpu.process_s, 2);
		srn_out_dbl(o, "progress_thread_cpu_s", cpu.progress_s, 2);
	}
	uint64_t v[SRN_DIAG_MAX_COUNTERS];
	for (uint32_t i = 0; i < s->ncounters; i++)
		v[i] = srn_seg_counter(s, i);
	print_set(o, op, s->path, 0, s->cnames, v, s->ncounters, smp, "dev");
	if (op->d.has_qp)
		print_qps(o, op, s, smp, nqps);
	srn_out_obj_end(o);
}

static int show(const struct stat_opts *op, struct sample *smp)
{
	struct srn_seg_set set;
	int r = srn_segs_load(&set, &op->d.filt, op->d.mode != SRN_OUT_TABLE);
	if (r) {
		fprintf(stderr, "softrnic stat: %s: %s\n", srn_diag_dir(), strerror(-r));
		return SRN_EXIT_FAIL;
	}
	struct srn_out o;
	srn_out_init(&o, stdout, op->d.mode);
	unsigned nqps = 0;

	srn_out_obj_begin(&o, NULL);
	srn_out_arr_begin(&o, "devices");
	for (size_t i = 0; i < set.n; i++) {
		print_seg(&o, op, &set.v[i], smp, &nqps);
		if (o.mode == SRN_OUT_TABLE && i + 1 < set.n)
			fputc('\n', stdout);
	}
	srn_out_arr_end(&o);
	srn_out_u64(&o, "stale_files", set.stale);
	srn_out_u64(&o, "unreadable_files", set.unreadable);
	srn_out_u64(&o, "other_users_files", set.others);
	srn_out_obj_end(&o);

	if (o.mode == SRN_OUT_TABLE) {
		if (!set.n)
			printf("no softrnic devices in use%s\n",
			       op->d.filt.pid || op->d.filt.dev ? " matching the filter" : "");
		if (op->d.has_qp && !nqps && set.n)
			printf("no such QP\n");
		if (set.stale)
			printf("\n%u file%s of processes that are gone; `softrnic stat --cleanup` "
			       "removes them\n",
			       set.stale, set.stale == 1 ? "" : "s");
		srn_segs_note_others(stdout, &set);
	}
	fflush(stdout);
	srn_segs_free(&set);
	return SRN_EXIT_OK;
}

static int watch(const struct stat_opts *op)
{
	struct prev_map *prev = calloc(1, sizeof(*prev));
	if (!prev) {
		fprintf(stderr, "softrnic stat: out of memory\n");
		return SRN_EXIT_FAIL;
	}
	bool clear = op->d.mode == SRN_OUT_TABLE && isatty(STDOUT_FILENO);
	uint64_t last = 0;
	int ret = SRN_EXIT_OK;
	for (long n = 0; !op->count || n < op->count; n++) {
		if (n) {
			struct timespec ts = { .tv_sec = op->watch_ms / 1000,
					       .tv_nsec = op->watch_ms % 1000 * 1000000 };
			while (nanosleep(&ts, &ts) && errno == EINTR)
				;
		}
		uint64_t now = srn_now_ns();
		struct sample smp = { .prev = prev, .dt = n ? (double)(now - last) / 1e9 : 0,
				      .have_prev = n > 0 };
		last = now;
		if (clear)
			fputs("\033[H\033[2J", stdout);
		else if (n && op->d.mode == SRN_OUT_TABLE)
			fputs("\n", stdout);
		ret = show(op, &smp);
		if (ret)
			break;
	}
	free(prev);
	return ret;
}

/* stat's own options: --all, --watch, --count, --cleanup. */
static int stat_opt(void *ctx, int c, int argc, char *argv[])
{
	struct stat_opts *op = ctx;
	switch (c) {
	case 'a':
		op->all = true;
		return 0;
	case 'w': {
		/* "--watch 2" as well as "--watch=2". */
		const char *arg = optarg;
		if (!arg && optind < argc && argv[optind][0] >= '0' && argv[optind][0] <= '9')
			arg = argv[optind++];
		double secs = arg ? strtod(arg, NULL) : 1.0;
		if (!(secs >= 0.05 && secs <= 3600))
			return -1;
		op->watch_ms = (long)(secs * 1000);
		return 0;
	}
	case 'n': {
		uint32_t v;
		if (srn_parse_u32(optarg, &v) || !v)
			return -1;
		op->count = (long)v;
		return 0;
	}
	default:   /* 'C' */
		op->cleanup = true;
		return 0;
	}
}

int srn_cmd_stat(int argc, char *argv[])
{
	static const struct option longopts[] = {
		SRN_DIAG_LONGOPTS,
		{ "all", no_argument, NULL, 'a' },         { "watch", optional_argument, NULL, 'w' },
		{ "count", required_argument, NULL, 'n' }, { "cleanup", no_argument, NULL, 'C' },
		{ NULL, 0, NULL, 0 },
	};
	struct stat_opts op = { 0 };
	const struct srn_diag_cmd cmd = { .name = "stat", .usage = srn_usage_stat, .qp_all_ok = true,
					  .longopts = longopts, .own_opt = stat_opt, .ctx = &op };
	int r = srn_diag_opts_parse(&cmd, argc, argv, &op.d);
	if (r != SRN_DIAG_OPTS_GO)
		return r;
	if (op.cleanup) {
		unsigned others;
		unsigned n = srn_segs_cleanup(&op.d.filt, true, &others);
		printf("removed %u file%s of processes that are gone\n", n, n == 1 ? "" : "s");
		if (others)
			printf("%u file%s of other users left alone\n", others, others == 1 ? "" : "s");
		return SRN_EXIT_OK;
	}
	if (op.count && !op.watch_ms)
		op.watch_ms = 1000;
	if (op.watch_ms)
		return watch(&op);
	struct sample smp = { 0 };
	return show(&op, &smp);
}
