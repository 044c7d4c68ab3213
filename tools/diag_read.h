/*
 * diag_read.h - the read side of softrnic's diagnostic segments, shared
 * by `softrnic stat`, `res` and `explain`.
 *
 * Each softrnic process maps one segment per open device at
 * <dir>/softrnic.<pid>.<dev> (src/diag/shm.h: layout and memory ordering).
 * This module finds them, maps them read-only, validates what it relies
 * on (magic, layout version, sizes: a segment is input from another
 * process) and reads slots and log rings lock-free.  It also holds the
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

#include "diag/shm.h"

enum srn_proc_state {
	SRN_PROC_RUNNING,  /* process alive, device open */
	SRN_PROC_CLOSED,   /* device closed cleanly */
	SRN_PROC_EXITED,   /* process exited without closing the device */
	SRN_PROC_DEAD,     /* process gone without either: crashed or killed */
};

struct srn_seg {
	char path[PATH_MAX];
	const struct srn_diag_seg *seg;     /* read-only shared mapping */
	int pid;
	char comm[17];
	char dev[SRN_DIAG_NAME_LEN + 1];
	char addr[49];
	uint8_t gid[16];
	enum srn_proc_state state;
	bool gone;                          /* the process no longer exists */
	uint64_t start_realtime_ns, start_mono_ns;
	uint32_t ncounters, nqp_counters;   /* bounded by the compiled maxima */
	char cnames[SRN_DIAG_MAX_COUNTERS][SRN_DIAG_NAME_LEN];
	char qpcnames[SRN_DIAG_MAX_QP_COUNTERS][SRN_DIAG_NAME_LEN];
};

struct srn_seg_filter {
	int pid;                            /* 0: any */
	const char *dev;                    /* NULL: any */
};

struct srn_seg_set {
	struct srn_seg *v;
	size_t n;
	unsigned stale;                     /* files whose process is gone */
	unsigned unreadable;                /* not a segment this tool understands */
};

/* The directory segments live in: $SOFTRNIC_DIAG_DIR or /dev/shm. */
const char *srn_diag_dir(void);
/* Map every segment that passes the filter, sorted by pid then device.
 * Problems with single files are reported on stderr (unless quiet) and
 * counted, never fatal.  Returns 0 or -errno (directory unreadable). */
int srn_segs_load(struct srn_seg_set *set, const struct srn_seg_filter *f, bool quiet);
void srn_segs_free(struct srn_seg_set *set);
/* Remove the files of processes that are gone; returns how many. */
unsigned srn_segs_cleanup(const struct srn_seg_filter *f, bool verbose);

const char *srn_proc_state_name(enum srn_proc_state s);
uint64_t srn_seg_counter(const struct srn_seg *s, uint32_t i);
/* Consistent copy of slot i: 1 live, 0 free, -1 torn (writer died while
 * writing it: out holds the last try and is used anyway). */
int srn_seg_slot(const struct srn_seg *s, uint32_t i, struct srn_diag_slot *out);
/* Log entries, oldest first: the device ring, or the ring of slot idx
 * whose slot generation is gen.  Returns how many were stored in out. */
size_t srn_seg_dev_log(const struct srn_seg *s, struct srn_diag_log_entry *out, size_t max);
size_t srn_seg_qp_log(const struct srn_seg *s, uint32_t idx, uint32_t gen,
		      struct srn_diag_log_entry *out, size_t max);
/* CLOCK_REALTIME of a monotonic timestamp taken by the segment's writer. */
uint64_t srn_seg_realtime(const struct srn_seg *s, uint64_t mono_ns);

uint64_t srn_mono_now(void);
const char *srn_kind_name(uint32_t kind);
const char *srn_level_str(uint32_t level);    /* enum srn_log_level */
const char *srn_qp_state_str(uint32_t state);
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
