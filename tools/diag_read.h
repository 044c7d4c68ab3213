/*
 * diag_read.h - the read side of softrnic's diagnostic segments, shared
 * by `softrnic stat`, `res` and `explain`.
 *
 * Each softrnic process maps one segment per open device at
 * <dir>/softrnic.<pid>.<dev> (src/diag/seg_layout.h: layout and memory
 * ordering), readable by its owner only.  This module finds the caller's own (root:
 * all), opens only regular files without following links or blocking,
 * and hands each to diag_seg.h, which validates and reads it.  Other
 * users' files are counted, never opened.  It also holds the
 * small output layer the three tools share: one call per field, printed
 * as a table, JSON or tab-separated dump.
 */
#ifndef SRN_TOOLS_DIAG_READ_H
#define SRN_TOOLS_DIAG_READ_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "diag/clock.h"         /* srn_now_ns: the segment's time base */
#include "diag/qp_state.h"     /* srn_qp_state_name: the library's table */
#include "diag_seg.h"

struct srn_seg_filter {
	int pid;                            /* 0: any */
	const char *dev;                    /* NULL: any */
};

struct srn_seg_set {
	struct srn_seg *v;
	size_t n;
	int dirfd;                          /* the directory they were found in */
	unsigned stale;                     /* files whose process is gone */
	unsigned unreadable;                /* ours, but not a segment this tool reads */
	unsigned others;                    /* other users' files: not opened, not shown */
};

/* The directory segments live in: $SOFTRNIC_DIAG_DIR or /dev/shm. */
const char *srn_diag_dir(void);
/* Load every segment that passes the filter, sorted by pid then device:
 * the caller's own files (root: everybody's), regular files only, never
 * through a link, never blocking on a FIFO.  Other users' files are only
 * counted (set->others).  Problems with single files are reported on
 * stderr (unless quiet) and counted, never fatal.  Returns 0 or -errno
 * (directory unreadable). */
int srn_segs_load(struct srn_seg_set *set, const struct srn_seg_filter *f, bool quiet);
void srn_segs_free(struct srn_seg_set *set);
/* Remove the caller's own files of processes that are gone (pid and
 * start time); returns how many.  *others (may be NULL) gets the number
 * of other users' files seen and left alone. */
unsigned srn_segs_cleanup(const struct srn_seg_filter *f, bool verbose, unsigned *others);
/* "N segments of other users not shown" on f, when there are any. */
void srn_segs_note_others(FILE *f, const struct srn_seg_set *set);

const char *srn_proc_state_name(enum srn_proc_state s);

const char *srn_kind_name(uint32_t kind);
const char *srn_level_str(uint32_t level);    /* enum srn_log_level */
const char *srn_qp_type_str(uint32_t type);
void srn_access_str(uint32_t access, char *buf, size_t len);
void srn_gid_addr_str(const uint8_t gid[16], char *buf, size_t len);
void srn_time_str(uint64_t realtime_ns, char *buf, size_t len);   /* "12:34:56.789" */
/* Parse a QPN / pid / count: decimal or 0x-hex, whole string.  0 or -1. */
int srn_parse_u32(const char *s, uint32_t *out);
/* A process ID for --pid: 1 .. INT32_MAX.  0 on success, -1 otherwise. */
int srn_parse_pid(const char *s, int *out);

/* ---- output: one call per field, three formats ------------------------- */

enum srn_out_mode { SRN_OUT_TABLE, SRN_OUT_JSON, SRN_OUT_DUMP };

struct srn_out {
	FILE *f;
	enum srn_out_mode mode;
	int depth;                 /* JSON nesting */
	bool first[16];            /* JSON: no comma before the first member */
	bool line_open;            /* table/dump: a record line is being written */
	char prefix[128];          /* dump: columns that start every record line */
};

void srn_out_init(struct srn_out *o, FILE *f, enum srn_out_mode mode);
/* JSON containers (table/dump: nothing). */
void srn_out_obj_begin(struct srn_out *o, const char *key);   /* key NULL in arrays */
void srn_out_obj_end(struct srn_out *o);
void srn_out_arr_begin(struct srn_out *o, const char *key);
void srn_out_arr_end(struct srn_out *o);
/* A record: table prints "<indent>head", dump starts "prefix\thead". */
void srn_out_rec_begin(struct srn_out *o, int indent, const char *head);
void srn_out_rec_end(struct srn_out *o);
/* Fields of the current record (table, dump: ignored outside one) or
 * of the current JSON object. */
void srn_out_u64(struct srn_out *o, const char *key, uint64_t v);
void srn_out_hex(struct srn_out *o, const char *key, uint64_t v, int width);  /* JSON: number */
void srn_out_str(struct srn_out *o, const char *key, const char *v);
void srn_out_dbl(struct srn_out *o, const char *key, double v, int prec);
/* Seconds: "key 1.5s" in a table, a plain number otherwise. */
void srn_out_secs(struct srn_out *o, const char *key, double secs);
void srn_json_string(FILE *f, const char *s);

#endif
