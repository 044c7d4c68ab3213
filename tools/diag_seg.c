/*
 * diag_seg.c - validating and reading one diagnostic segment without
 * mapping it (see diag_seg.h).
 *
 * Invariants: nothing read from the segment is trusted.  The header must
 * carry the magic, layout and sizes this tool was built with, the file
 * must have exactly the segment's size, counts are at most the compiled
 * maxima and the slot high-water mark at most the slot count; every string
 * is copied and NUL-terminated; every ring index is masked; every read is
 * at an offset computed from the compiled layout and a checked index, and
 * a short read (the file shrank) makes that piece unreadable, nothing
 * more.  Every loop is bounded by the compiled table sizes and tries.
 */
#include "diag_seg.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Seqlock tries per piece.  Each try is three system calls; a writer is
 * inside its write section for a few stores, so more than a few tries
 * means it died there: give up then (torn). */
#define PREAD_TRIES 20

static void copy_str(char *dst, size_t dlen, const char *src, size_t slen)
{
	size_t n = strnlen(src, slen < dlen ? slen : dlen - 1);
	memcpy(dst, src, n);
	dst[n] = '\0';
}

ssize_t srn_seg_pread(void *ctx, void *buf, size_t len, uint64_t off)
{
	int fd = (int)(intptr_t)ctx;
	size_t done = 0;
	while (done < len) {
		ssize_t r = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
		if (r < 0)
			return -1;
		if (r == 0)
			break;   /* end of file: the file is shorter (or shrank) */
		done += (size_t)r;
	}
	return (ssize_t)done;
}

/* All of [off, off+len) inside the segment, or false. */
static bool read_full(const struct srn_seg *s, void *buf, size_t len, uint64_t off)
{
	if (off > sizeof(struct srn_diag_seg) || len > sizeof(struct srn_diag_seg) - off)
		return false;   /* not reached: offsets come from the layout */
	return s->read_at(s->ctx, buf, len, off) == (ssize_t)len;
}

/* The checked header h and the counters and names of buf into s. */
static void seg_take(struct srn_seg *s, const struct srn_diag_hdr *h, const void *buf,
		     uint64_t file_size, uint32_t hwm)
{
	/* By offset, not through a struct pointer: buf need not be aligned
	 * like a segment, and holds only its first SRN_SEG_PREFIX bytes. */
	const char *b = buf;
	s->hdr = *h;
	s->nslots = hwm;
	s->pid = h->pid;
	copy_str(s->comm, sizeof(s->comm), h->comm, sizeof(h->comm));
	copy_str(s->dev, sizeof(s->dev), h->devname, sizeof(h->devname));
	copy_str(s->addr, sizeof(s->addr), h->addr, sizeof(h->addr));
	memcpy(s->gid, h->gid, sizeof(s->gid));
	s->start_realtime_ns = h->start_realtime_ns;
	s->start_mono_ns = h->start_mono_ns;
	s->ncounters = h->ncounters;
	s->nqp_counters = h->nqp_counters;
	s->size = file_size;
	for (uint32_t i = 0; i < s->ncounters; i++) {
		memcpy(&s->counters[i], b + offsetof(struct srn_diag_seg, counters) + i * sizeof(uint64_t),
		       sizeof(uint64_t));
		copy_str(s->cnames[i], SRN_DIAG_NAME_LEN,
			 b + offsetof(struct srn_diag_seg, counter_names) + i * SRN_DIAG_NAME_LEN,
			 SRN_DIAG_NAME_LEN);
	}
	for (uint32_t i = 0; i < s->nqp_counters; i++)
		copy_str(s->qpcnames[i], SRN_DIAG_NAME_LEN,
			 b + offsetof(struct srn_diag_seg, qp_counter_names) + i * SRN_DIAG_NAME_LEN,
			 SRN_DIAG_NAME_LEN);
	uint32_t closed = atomic_load_explicit(&h->closed, memory_order_relaxed);
	s->gone = false;
	s->state = closed == 1 ? SRN_PROC_CLOSED : closed == 2 ? SRN_PROC_EXITED : SRN_PROC_RUNNING;
}

int srn_seg_parse(struct srn_seg *s, const void *buf, size_t len, uint64_t file_size, char *why,
		  size_t whylen)
{
	struct srn_diag_hdr h;
	why[0] = '\0';
	if (len < sizeof(h)) {
		snprintf(why, whylen, "%zu bytes, shorter than a segment header", len);
		return len == 0 ? 1 : -1;
	}
	memcpy(&h, buf, sizeof(h));
	uint64_t magic = atomic_load_explicit(&h.magic, memory_order_relaxed);
	if (magic == 0)
		return 1;   /* created, header not written yet */
	if (magic != SRN_DIAG_MAGIC) {
		snprintf(why, whylen, "bad magic");
		return -1;
	}
	if (h.layout != SRN_DIAG_LAYOUT) {
		snprintf(why, whylen, "written by a softrnic with segment layout %u, this is %u",
			 h.layout, SRN_DIAG_LAYOUT);
		return -1;
	}
	/* The writer's layout, field by field: every offset this tool
	 * computes assumes these. */
	if (!srn_diag_hdr_layout_ok(&h)) {
		snprintf(why, whylen, "sizes do not match this tool's layout");
		return -1;
	}
	/* The writer sizes the file before it writes the magic: a file of
	 * another size was cut (or grown) by someone else. */
	if (file_size != h.seg_size) {
		snprintf(why, whylen, "%llu bytes, a segment has %llu", (unsigned long long)file_size,
			 (unsigned long long)h.seg_size);
		return -1;
	}
	if (len < SRN_SEG_PREFIX) {
		snprintf(why, whylen, "could read only %zu of its first %zu bytes", len,
			 (size_t)SRN_SEG_PREFIX);
		return -1;
	}
	if (h.ncounters > SRN_DIAG_MAX_COUNTERS || h.nqp_counters > SRN_DIAG_MAX_QP_COUNTERS) {
		snprintf(why, whylen, "%u counters / %u QP counters, at most %u / %u", h.ncounters,
			 h.nqp_counters, SRN_DIAG_MAX_COUNTERS, SRN_DIAG_MAX_QP_COUNTERS);
		return -1;
	}
	uint32_t hwm = atomic_load_explicit(&h.slots_hwm, memory_order_relaxed);
	if (hwm > h.nslots) {
		snprintf(why, whylen, "%u slots in use of %u", hwm, h.nslots);
		return -1;
	}
	if (h.pid <= 0) {
		snprintf(why, whylen, "pid %d", h.pid);
		return -1;
	}

	seg_take(s, &h, buf, file_size, hwm);
	return 0;
}

int srn_seg_load(struct srn_seg *s, srn_seg_read_fn *read_at, void *ctx, uint64_t file_size,
		 char *why, size_t whylen)
{
	s->read_at = read_at;
	s->ctx = ctx;
	void *buf = malloc(SRN_SEG_PREFIX);
	if (!buf) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	ssize_t n = read_at(ctx, buf, SRN_SEG_PREFIX, 0);
	int r;
	if (n < 0) {
		snprintf(why, whylen, "cannot read it");
		r = -1;
	} else {
		r = srn_seg_parse(s, buf, (size_t)n, file_size, why, whylen);
	}
	free(buf);
	return r;
}

uint64_t srn_seg_counter(const struct srn_seg *s, uint32_t i)
{
	return i < s->ncounters ? s->counters[i] : 0;
}

/* Consistent copy of the seqlocked object of n bytes at off, whose first
 * word is its seq: the seq, the object, the seq again, each its own
 * read.  0; -1 torn (out holds the last try); -2 unreadable (the file is
 * shorter now). */
static int seq_pread(const struct srn_seg *s, uint64_t off, void *out, size_t n)
{
	for (int t = 0; t < PREAD_TRIES; t++) {
		uint32_t s1, s2;
		if (!read_full(s, &s1, sizeof(s1), off) || !read_full(s, out, n, off) ||
		    !read_full(s, &s2, sizeof(s2), off))
			return -2;
		uint32_t in_copy;
		memcpy(&in_copy, out, sizeof(in_copy));
		if (s1 == s2 && in_copy == s1 && !(s1 & 1))
			return 0;
	}
	return -1;
}

int srn_seg_slot_any(const struct srn_seg *s, uint32_t i, struct srn_diag_slot *out)
{
	if (i >= s->nslots)
		return 0;
	uint64_t off = offsetof(struct srn_diag_seg, slots) + (uint64_t)i * sizeof(*out);
	/* Cheap pre-check of the words before handle: a slot that never
	 * had an occupant is skipped with one read. */
	uint32_t head[4];   /* seq, kind, gen, last_kind */
	_Static_assert(offsetof(struct srn_diag_slot, last_kind) == 3 * sizeof(uint32_t),
		       "slot head layout");
	if (!read_full(s, head, sizeof(head), off))
		return 0;
	if (head[1] == SRN_DIAG_FREE && head[3] == SRN_DIAG_FREE)
		return 0;
	int r = seq_pread(s, off, out, sizeof(*out));
	if (r == -2)
		return 0;
	/* Garbage (or a torn copy) naming no kind we know: nothing to show. */
	if (out->kind >= SRN_DIAG__KINDS || out->last_kind >= SRN_DIAG__KINDS ||
	    (out->kind == SRN_DIAG_FREE && out->last_kind == SRN_DIAG_FREE))
		return 0;
	return r ? -1 : 1;
}

int srn_seg_slot(const struct srn_seg *s, uint32_t i, struct srn_diag_slot *out)
{
	int r = srn_seg_slot_any(s, i, out);
	return r && out->kind != SRN_DIAG_FREE ? r : 0;
}

/* Read the entries [head - nent, head) of the ring at off, oldest first. */
static size_t ring_read(const struct srn_seg *s, uint64_t off, uint32_t nent, bool check_gen,
			uint32_t gen, struct srn_diag_log_entry *out, size_t max)
{
	_Static_assert(offsetof(struct srn_diag_qp_log, head) == 0 &&
			       offsetof(struct srn_diag_dev_log, head) == 0 &&
			       offsetof(struct srn_diag_qp_log, e) == offsetof(struct srn_diag_dev_log, e),
		       "both rings: head, then entries at the same offset");
	uint64_t head;
	if (!read_full(s, &head, sizeof(head), off))
		return 0;
	uint64_t first = head > nent ? head - nent : 0;
	size_t k = 0;
	for (uint64_t n = first; n < head && k < max; n++) {
		uint64_t eoff = off + offsetof(struct srn_diag_qp_log, e) +
				(n & (nent - 1)) * sizeof(struct srn_diag_log_entry);
		if (seq_pread(s, eoff, &out[k], sizeof(out[k])))
			continue;   /* torn, or the file shrank */
		out[k].msg[SRN_DIAG_LOG_MSG - 1] = '\0';
		if (out[k].n != n)
			continue;   /* overwritten since we read head */
		if (check_gen && out[k].gen != gen)
			continue;   /* a previous occupant's line */
		k++;
	}
	return k;
}

size_t srn_seg_dev_log(const struct srn_seg *s, struct srn_diag_log_entry *out, size_t max)
{
	return ring_read(s, offsetof(struct srn_diag_seg, dev_log), SRN_DIAG_DEV_LOG_ENTRIES, false,
			 0, out, max);
}

size_t srn_seg_qp_log(const struct srn_seg *s, uint32_t idx, uint32_t gen,
		      struct srn_diag_log_entry *out, size_t max)
{
	if (idx >= s->nslots)
		return 0;
	uint64_t off = offsetof(struct srn_diag_seg, logs) + (uint64_t)idx * sizeof(struct srn_diag_qp_log);
	return ring_read(s, off, SRN_DIAG_LOG_ENTRIES, true, gen, out, max);
}

uint64_t srn_seg_realtime(const struct srn_seg *s, uint64_t mono_ns)
{
	return s->start_realtime_ns + (mono_ns - s->start_mono_ns);
}
