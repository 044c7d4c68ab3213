/*
 * shm.h - the diagnostic segment, writer side: the library's functions
 * that create a device's segment, keep one slot per live object, count
 * per QP and log.  The file layout, the seqlock protocol and the
 * reader-side helpers are in diag/seg_layout.h, which the tools include
 * instead of this file.
 *
 * Writers: everything in a segment is written by the one process that
 * created it, under its nic->lock (so one writer per slot and per ring).
 */
#ifndef SRN_DIAG_SHM_H
#define SRN_DIAG_SHM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag/counters.h"
#include "diag/seg_layout.h"

_Static_assert(SRN_CNT__MAX <= SRN_DIAG_MAX_COUNTERS, "grow SRN_DIAG_MAX_COUNTERS");
_Static_assert(sizeof(struct srn_counters) <= sizeof(((struct srn_diag_seg *)0)->counters),
	       "the device counters live in the segment's counters words");

/* Per-QP counters; names in srn_diag_qp_counter_names (shm.c), copied into
 * the segment.  Named like the device counters they refine. */
enum srn_qp_counter {
	SRN_QPC_SENT_PKTS,
	SRN_QPC_RCVD_PKTS,
	SRN_QPC_SENT_BYTES,
	SRN_QPC_RCVD_BYTES,
	SRN_QPC_RETRANSMITS,        /* go-back-N rewinds */
	SRN_QPC_LOCAL_ACK_TIMEOUT,  /* local_ack_timeout_err */
	SRN_QPC_RCVD_RNR_ERR,       /* RNR NAKs received */
	SRN_QPC_SEND_RNR_ERR,       /* RNR NAKs sent */
	SRN_QPC_RCVD_SEQ_ERR,       /* NAK-sequence received (packet_seq_err) */
	SRN_QPC_SEQ_NAK_SENT,
	SRN_QPC_DUPLICATE_REQUEST,
	SRN_QPC_OUT_OF_SEQUENCE,
	SRN_QPC_REMOTE_NAKS,        /* NAK invalid request / access / operational received */
	SRN_QPC_ERR_COMPLETIONS,    /* completions with an error status other than flush */
	SRN_QPC_ECN_MARKED,         /* CE-marked packets received (np_ecn_marked_roce_packets) */
	SRN_QPC_CNP_SENT,           /* np_cnp_sent */
	SRN_QPC_CNP_HANDLED,        /* rp_cnp_handled */
	SRN_QPC__MAX
};
_Static_assert(SRN_QPC__MAX <= SRN_DIAG_MAX_QP_COUNTERS, "grow SRN_DIAG_MAX_QP_COUNTERS");

extern const char *const srn_diag_qp_counter_names[SRN_QPC__MAX];

/* ---- writer API (library; must hold the nic->lock of the device) ------- */

struct srn_diag;

/* The process-side handle of one slot.  o->s is the slot in the segment:
 * fill its fields with SRN_DIAG_SET between srn_diag_obj_begin/_end. */
struct srn_diag_obj {
	struct srn_diag_slot *s;
	struct srn_diag_qp_log *log;
	struct srn_diag *d;
	const void *owner;
	uint32_t idx;                  /* SRN_DIAG_SLOTS: the private overflow sink */
	enum srn_diag_kind kind;
};

/* Create the segment of device devname (GID index 0 = gid).  Returns NULL
 * only when memory is exhausted (err says so).  When the file cannot be
 * made, or SOFTRNIC_DIAG=0, the segment is a private anonymous mapping:
 * everything works, nobody outside sees it (err explains, and a warning is
 * logged).  No lock needed. */
struct srn_diag *srn_diag_create(const char *devname, const uint8_t gid[16], char *err,
				 size_t errlen);
/* Mark the segment closed cleanly and unmap it; nothing may use its
 * counters or objects afterwards.  The file stays when an error was logged
 * or SOFTRNIC_DIAG_KEEP=1 (so `softrnic explain` can tell why a finished
 * run failed) and is removed otherwise.  A process that exits without
 * closing is marked "exited" by an exit hook (same keep rule); a crashed
 * one leaves its file as it was; `softrnic stat --cleanup` removes files
 * of processes that are gone.  Call after the last srn_count (e.g. after
 * stopping the progress thread and the SOFTRNIC_STATS dump). */
void srn_diag_close(struct srn_diag *d);
/* The device counters, inside the segment: srn_count(srn_diag_counters(d), ...). */
struct srn_counters *srn_diag_counters(struct srn_diag *d);
/* True when the segment is a real shared file (false: private mapping). */
bool srn_diag_is_shared(const struct srn_diag *d);
const char *srn_diag_path(const struct srn_diag *d);

/* Take a slot for an object; owner is the srn_pd/srn_mr/srn_cq/srn_qp/
 * srn_srq/srn_ah it describes (its address becomes the handle and
 * srn_diag_snap/srn_diag_tick read it).  Never NULL: when the table is
 * full the object gets a private sink slot nobody reads (counted in
 * hdr.table_full).  Must hold nic->lock. */
struct srn_diag_obj *srn_diag_obj_add(struct srn_diag *d, enum srn_diag_kind kind,
				      const void *owner);
/* Free the slot; o is invalid afterwards.  NULL is ignored.  Must hold
 * nic->lock, and must run before the owner is freed. */
void srn_diag_obj_del(struct srn_diag_obj *o);
/* Next live object after prev (NULL: first), for periodic refreshes. */
struct srn_diag_obj *srn_diag_obj_next(struct srn_diag *d, struct srn_diag_obj *prev);
/* The handle readers see for an owner address (e.g. a QP's PD). */
uint64_t srn_diag_handle(const struct srn_diag *d, const void *owner);

#define SRN_DIAG_SET(lval, v) __atomic_store_n(&(lval), (v), __ATOMIC_RELEASE)
#define SRN_DIAG_GET(lval) __atomic_load_n(&(lval), __ATOMIC_RELAXED)

/* Seqlock write section (see the file comment for the pairing).  Not
 * nestable.  Must hold nic->lock. */
static inline void srn_diag_obj_begin(struct srn_diag_obj *o)
{
	uint32_t s = atomic_load_explicit(&o->s->seq, memory_order_relaxed);
	/* Ordered before the fields by their release stores (SRN_DIAG_SET). */
	atomic_store_explicit(&o->s->seq, s + 1, memory_order_relaxed);
}

static inline void srn_diag_obj_end(struct srn_diag_obj *o)
{
	uint32_t s = atomic_load_explicit(&o->s->seq, memory_order_relaxed);
	/* Pairs with the reader's acquire load of seq before its copy. */
	atomic_store_explicit(&o->s->seq, s + 1, memory_order_release);
}

/* Add n to a per-QP counter.  One writer (nic->lock), so a load + store
 * suffices: no locked instruction.  Needs no begin/end. */
static inline void srn_diag_qp_count(struct srn_diag_obj *o, enum srn_qp_counter c, uint64_t n)
{
#ifdef SRN_NO_COUNTERS
	(void)o, (void)c, (void)n;
	return;
#endif
	uint64_t *p = &o->s->qp.cnt[c];
	__atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

/* Remember what the peer said last (AETH syndrome, PSN, CLOCK_MONOTONIC
 * time: pass the srn_now_ns() you already have, 0 = read the clock) for
 * explanations of later errors; once per ACK/NAK processed (ACKs are
 * coalesced), not per data packet: one seqlocked write of three fields. */
void srn_diag_qp_peer_said(struct srn_diag_obj *o, uint8_t syndrome, uint32_t psn,
			   uint64_t mono_ns);

/* log.c: append a line to o's event ring (NULL o: ignored).  ERROR lines
 * are also copied into the device log, which outlives the QP.  Printed to
 * stderr when SOFTRNIC_LOG (off|error|warn|info|debug) allows, rate
 * limited.  Must hold nic->lock.  Not per packet. */
void srn_diag_log(struct srn_diag_obj *o, enum srn_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A device-level line (no object): straight into the device log. */
void srn_diag_dev_log(struct srn_diag *d, enum srn_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The SOFTRNIC_LOG threshold (parsed once). */
enum srn_log_level srn_log_threshold(void);
const char *srn_log_level_name(enum srn_log_level lvl);

/* For the snapshot writer (core/snap.c) and the tick (engine/diag_tick.c):
 * the segment and the refresh clock.
 * Written under nic->lock; due_ns is also read without it by
 * srn_diag_deadline (relaxed: a stale value only moves a wakeup). */
struct srn_diag_clock {
	_Atomic uint64_t last_ns;      /* last full refresh */
	_Atomic uint64_t due_ns;       /* a skipped tick wants a refresh by then; 0 = none */
};
struct srn_diag_seg *srn_diag_seg(struct srn_diag *d);

/* The calling thread's id, kept per thread (a system call once). */
uint32_t srn_diag_tid(void);

/* The operation now in progress (seg_layout.h, struct srn_diag_busy):
 * a few stores into a line only this process writes.  Must hold the
 * device's lock. */
static inline void srn_diag_busy(struct srn_diag_busy *b, enum srn_diag_stage stage,
				 uint32_t qpn, uint32_t opcode, uint32_t psn, uint64_t va,
				 uint32_t len)
{
	atomic_store_explicit(&b->tid, srn_diag_tid(), memory_order_relaxed);
	atomic_store_explicit(&b->qpn, qpn, memory_order_relaxed);
	atomic_store_explicit(&b->opcode, opcode, memory_order_relaxed);
	atomic_store_explicit(&b->psn, psn, memory_order_relaxed);
	atomic_store_explicit(&b->va, va, memory_order_relaxed);
	atomic_store_explicit(&b->len, len, memory_order_relaxed);
	atomic_store_explicit(&b->stage, stage, memory_order_relaxed);
}

static inline void srn_diag_idle(struct srn_diag_busy *b)
{
	atomic_store_explicit(&b->stage, SRN_DIAG_STAGE_NONE, memory_order_relaxed);
}
struct srn_diag_clock *srn_diag_clock(struct srn_diag *d);

#endif
