/*
 * diag_seg.h - one diagnostic segment as the tools read it (layout and
 * writer-side ordering: src/diag/seg_layout.h).
 *
 * A segment is input from another process, possibly hostile, and its file
 * may shrink under us.  So it is never mapped: everything is read with
 * pread (through a read function, so the fuzz harness can feed memory)
 * into private copies.  A file that shrinks gives short reads, never a
 * SIGBUS; reading a hole of a sparse tmpfs file allocates nothing (a
 * mapping would allocate every page a reader touches).
 *
 *   srn_seg_parse   validates the fixed part (header, counters, their
 *                   names, device log: SRN_SEG_PREFIX bytes from offset 0)
 *                   from a buffer and keeps private copies; every count,
 *                   size and index in the header is checked before use
 *   srn_seg_load    reads that part through the read function and parses
 *   slot/log reads  one pread per piece, consistent by the writer's
 *                   seqlocks: seq, copy, seq again in separate reads
 *                   (ordered by the system calls), equal and even
 */
#ifndef SRN_TOOLS_DIAG_SEG_H
#define SRN_TOOLS_DIAG_SEG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "diag/seg_layout.h"

/* Bytes of the segment read and validated at once. */
#define SRN_SEG_PREFIX offsetof(struct srn_diag_seg, slots)

/* Read len bytes at off into buf: bytes read (short at the end), or -1. */
typedef ssize_t srn_seg_read_fn(void *ctx, void *buf, size_t len, uint64_t off);

enum srn_proc_state {
	SRN_PROC_RUNNING,  /* process alive, device open */
	SRN_PROC_CLOSED,   /* device closed cleanly */
	SRN_PROC_EXITED,   /* process exited without closing the device */
	SRN_PROC_DEAD,     /* process gone without either: crashed or killed */
};

struct srn_seg {
	char path[PATH_MAX];
	char name[NAME_MAX + 1];            /* file name in the directory */
	srn_seg_read_fn *read_at;
	void *ctx;
	int fd;                             /* -1: not a file of ours to close */
	uid_t uid;                          /* the file's owner */
	dev_t st_dev;
	ino_t st_ino;
	uint64_t size;                      /* file size when loaded */
	struct srn_diag_hdr hdr;            /* private copy, validated */
	uint32_t nslots;                    /* slots_hwm: slots at and above were never used */
	int pid;
	char comm[17];
	char dev[SRN_DIAG_NAME_LEN + 1];
	char addr[49];
	uint8_t gid[16];
	enum srn_proc_state state;
	bool gone;                          /* the process no longer exists */
	uint64_t start_realtime_ns, start_mono_ns;
	uint32_t ncounters, nqp_counters;   /* at most the compiled maxima */
	uint64_t counters[SRN_DIAG_MAX_COUNTERS];   /* values when loaded */
	char cnames[SRN_DIAG_MAX_COUNTERS][SRN_DIAG_NAME_LEN];
	char qpcnames[SRN_DIAG_MAX_QP_COUNTERS][SRN_DIAG_NAME_LEN];
};

/* Validate and copy the fixed part of a segment from buf (len bytes read
 * from offset 0 of a file of file_size bytes).  0: valid; 1: not written
 * yet (magic still 0), skip quietly; -1: not a segment this tool reads,
 * why says what is wrong.  s->read_at/ctx are left as they were. */
int srn_seg_parse(struct srn_seg *s, const void *buf, size_t len, uint64_t file_size, char *why,
		  size_t whylen);
/* Read the fixed part through read_at(ctx) and parse it (same returns).
 * The process state is set from the header alone (closed/exited, else
 * running): the caller knows whether the process is gone. */
int srn_seg_load(struct srn_seg *s, srn_seg_read_fn *read_at, void *ctx, uint64_t file_size,
		 char *why, size_t whylen);
/* pread on the fd in ctx, for srn_seg_load. */
ssize_t srn_seg_pread(void *ctx, void *buf, size_t len, uint64_t off);

uint64_t srn_seg_counter(const struct srn_seg *s, uint32_t i);
/* Consistent copy of slot i: 1 live, 0 free or unreadable, -1 torn
 * (writer died while writing it: out holds the last try and is used
 * anyway).  _any also returns freed slots (1) that had an occupant, whose
 * body is kept (`explain --qp-log` finds destroyed QPs by it); out->kind
 * is always a known kind when it returns non-zero. */
int srn_seg_slot(const struct srn_seg *s, uint32_t i, struct srn_diag_slot *out);
int srn_seg_slot_any(const struct srn_seg *s, uint32_t i, struct srn_diag_slot *out);
/* Log entries, oldest first: the device ring, or the ring of slot idx
 * whose slot generation is gen.  Returns how many were stored in out. */
size_t srn_seg_dev_log(const struct srn_seg *s, struct srn_diag_log_entry *out, size_t max);
size_t srn_seg_qp_log(const struct srn_seg *s, uint32_t idx, uint32_t gen,
		      struct srn_diag_log_entry *out, size_t max);
/* CLOCK_REALTIME of a monotonic timestamp taken by the segment's writer. */
uint64_t srn_seg_realtime(const struct srn_seg *s, uint64_t mono_ns);

#endif
