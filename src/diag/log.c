/*
 * log.c - the event log: per-QP rings and the device ring in the
 * diagnostic segment, and the rate-limited echo on stderr that
 * SOFTRNIC_LOG=error|warn|info|debug turns on.
 *
 * Invariants:
 * - One writer per ring (nic->lock); entries use the per-entry seqlock of
 *   seg_layout.h and the head is published with release after the entry.
 * - ERROR lines of a QP go to its ring and to the device ring, so they
 *   outlive the QP; lines of other objects and of the device go to the
 *   device ring only (only QP slots have rings backed by pages).
 * - stderr gets at most LOG_BURST lines at once and LOG_PER_SEC after,
 *   process-wide, with a count of what was dropped: an error storm must
 *   not become an I/O storm.  This is not per packet either way.
 */
#include "diag/shm.h"
#include "diag/clock.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define LOG_BURST 20
#define LOG_PER_SEC 10

static const char *const level_names[] = {
	[SRN_LOG_OFF] = "off",
	[SRN_LOG_ERROR] = "error",
	[SRN_LOG_WARN] = "warn",
	[SRN_LOG_INFO] = "info",
	[SRN_LOG_DEBUG] = "debug",
};

const char *srn_log_level_name(enum srn_log_level lvl)
{
	return (unsigned)lvl < sizeof(level_names) / sizeof(level_names[0]) ? level_names[lvl] : "?";
}

static enum srn_log_level parse_level(const char *v)
{
	if (!v || !*v)
		return SRN_LOG_OFF;
	for (int l = SRN_LOG_OFF; l <= SRN_LOG_DEBUG; l++)
		if (!strcasecmp(v, level_names[l]))
			return (enum srn_log_level)l;
	if (!strcasecmp(v, "warning"))
		return SRN_LOG_WARN;
	if (!strcasecmp(v, "none") || !strcmp(v, "0"))
		return SRN_LOG_OFF;
	if (v[0] >= '1' && v[0] <= '4' && !v[1])
		return (enum srn_log_level)(v[0] - '0');
	return SRN_LOG_WARN;   /* set to something unknown: the user wants to see problems */
}

enum srn_log_level srn_log_threshold(void)
{
	static _Atomic int cached = -1;
	int v = atomic_load_explicit(&cached, memory_order_relaxed);
	if (v < 0) {
		v = (int)parse_level(getenv("SOFTRNIC_LOG"));
		atomic_store_explicit(&cached, v, memory_order_relaxed);
	}
	return (enum srn_log_level)v;
}

/* Append one entry.  The message buffer is SRN_DIAG_LOG_MSG bytes, zero
 * padded, stored in 8-byte release words inside the entry's seqlock. */
static void ring_put(struct srn_diag_log_entry *ring, _Atomic uint64_t *head, uint32_t nent,
		     enum srn_log_level lvl, uint32_t kind, uint32_t qpn, uint32_t gen, uint64_t ts,
		     const char msg[SRN_DIAG_LOG_MSG])
{
	uint64_t n = atomic_load_explicit(head, memory_order_relaxed);
	struct srn_diag_log_entry *e = &ring[n & (nent - 1)];
	uint32_t s = atomic_load_explicit(&e->seq, memory_order_relaxed);
	/* Ordered before the fields by their release stores (seg_layout.h). */
	atomic_store_explicit(&e->seq, s + 1, memory_order_relaxed);
	SRN_DIAG_SET(e->level, (uint8_t)lvl);
	SRN_DIAG_SET(e->kind, (uint8_t)kind);
	SRN_DIAG_SET(e->qpn, qpn);
	SRN_DIAG_SET(e->gen, gen);
	SRN_DIAG_SET(e->n, n);
	SRN_DIAG_SET(e->ts_ns, ts);
	uint64_t *dst = (uint64_t *)e->msg;
	for (size_t i = 0; i < SRN_DIAG_LOG_MSG / 8; i++) {
		uint64_t w;
		memcpy(&w, msg + i * 8, 8);
		__atomic_store_n(&dst[i], w, __ATOMIC_RELEASE);
	}
	/* Pairs with the reader's acquire load of seq. */
	atomic_store_explicit(&e->seq, s + 2, memory_order_release);
	/* Pairs with the reader's acquire load of head: entries below it are
	 * complete (the entry seqlock checks it again anyway). */
	atomic_store_explicit(head, n + 1, memory_order_release);
}

static const char *const kind_names[SRN_DIAG__KINDS] = {
	[SRN_DIAG_FREE] = "dev", [SRN_DIAG_PD] = "pd", [SRN_DIAG_MR] = "mr", [SRN_DIAG_CQ] = "cq",
	[SRN_DIAG_QP] = "qp",    [SRN_DIAG_SRQ] = "srq", [SRN_DIAG_AH] = "ah",
};

/* stderr echo, rate limited process-wide (token bucket). */
static void echo(const struct srn_diag_seg *seg, enum srn_log_level lvl, uint32_t kind,
		 uint32_t qpn, uint64_t now, const char *msg)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static uint64_t tokens_at;     /* time the bucket was last refilled */
	static unsigned tokens = LOG_BURST;
	static unsigned long dropped;
	char who[48];

	if (lvl > srn_log_threshold())
		return;
	pthread_mutex_lock(&lock);
	if (tokens_at && now > tokens_at) {
		uint64_t add = (now - tokens_at) * LOG_PER_SEC / 1000000000ull;
		if (add) {
			tokens = add + tokens > LOG_BURST ? LOG_BURST : tokens + (unsigned)add;
			tokens_at = now;
		}
	} else if (!tokens_at) {
		tokens_at = now;
	}
	if (!tokens) {
		dropped++;
		pthread_mutex_unlock(&lock);
		return;
	}
	tokens--;
	unsigned long was_dropped = dropped;
	dropped = 0;
	pthread_mutex_unlock(&lock);

	if (kind == SRN_DIAG_QP)
		snprintf(who, sizeof(who), " qp 0x%06x", qpn);
	else
		snprintf(who, sizeof(who), "%s%s", kind ? " " : "", kind ? kind_names[kind] : "");
	if (was_dropped)
		dprintf(STDERR_FILENO, "softrnic: (%lu log lines suppressed)\n", was_dropped);
	dprintf(STDERR_FILENO, "softrnic: %.32s%s: %s: %s\n", seg->hdr.devname, who,
		srn_log_level_name(lvl), msg);
}

static void log_line(struct srn_diag_obj *o, struct srn_diag *d, enum srn_log_level lvl,
		     const char *fmt, va_list ap)
{
	struct srn_diag_seg *seg = srn_diag_seg(d);
	char msg[SRN_DIAG_LOG_MSG];
	memset(msg, 0, sizeof(msg));
	vsnprintf(msg, sizeof(msg), fmt, ap);
	uint64_t now = srn_now_ns();
	uint32_t kind = o ? (uint32_t)o->kind : SRN_DIAG_FREE;
	uint32_t qpn = kind == SRN_DIAG_QP ? SRN_DIAG_GET(o->s->qp.qpn) : 0;
	uint32_t gen = o ? SRN_DIAG_GET(o->s->gen) : 0;

	if (kind == SRN_DIAG_QP)
		ring_put(o->log->e, &o->log->head, SRN_DIAG_LOG_ENTRIES, lvl, kind, qpn, gen, now,
			 msg);
	if (kind != SRN_DIAG_QP || lvl == SRN_LOG_ERROR)
		ring_put(seg->dev_log.e, &seg->dev_log.head, SRN_DIAG_DEV_LOG_ENTRIES, lvl, kind, qpn,
			 gen, now, msg);
	atomic_fetch_add_explicit(&seg->hdr.log_lines, 1, memory_order_relaxed);
	if (lvl == SRN_LOG_ERROR)
		atomic_fetch_add_explicit(&seg->hdr.errors_logged, 1, memory_order_relaxed);
	echo(seg, lvl, kind, qpn, now, msg);
}

void srn_diag_log(struct srn_diag_obj *o, enum srn_log_level lvl, const char *fmt, ...)
{
	if (!o || lvl == SRN_LOG_OFF)
		return;
	va_list ap;
	va_start(ap, fmt);
	log_line(o, o->d, lvl, fmt, ap);
	va_end(ap);
}

void srn_diag_dev_log(struct srn_diag *d, enum srn_log_level lvl, const char *fmt, ...)
{
	if (!d || lvl == SRN_LOG_OFF)
		return;
	va_list ap;
	va_start(ap, fmt);
	log_line(NULL, d, lvl, fmt, ap);
	va_end(ap);
}
