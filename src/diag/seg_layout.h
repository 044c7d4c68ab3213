/*
 * seg_layout.h - the diagnostic segment as it lies in the file: what
 * the writer (the library, diag/shm.h) and the readers (tools/diag_seg.c,
 * in other processes) agree on.  One shared-memory file per open device
 * per process, /dev/shm/softrnic.<pid>.<devname>, that `softrnic stat`,
 * `res` and `explain` read from outside the process without its help.
 * The file is its owner's alone (0600; who may create, replace and remove
 * what: seg_file.h); readers pread it, never map it (tools/diag_seg.h).
 *
 * Layout (struct srn_diag_seg, one fixed-size struct, so every offset is
 * an offsetof and the file size is its sizeof):
 *
 *   hdr            who wrote it (pid, comm, device, GID), when, whether
 *                  it was closed cleanly; magic stored last
 *   counters       the device's struct srn_counters (room for
 *                  SRN_DIAG_MAX_COUNTERS); the data path's srn_count()
 *                  writes here directly, nothing is copied
 *   counter names  the names of both counter sets, so a reader does not
 *                  depend on the writer's enum
 *   dev_log        the device's last SRN_DIAG_DEV_LOG_ENTRIES errors
 *                  (every QP's error lines, kept after the QP is gone)
 *   slots[]        one per live PD/MR/CQ/QP/SRQ/AH, fixed capacity
 *   logs[]         one event ring per slot (used by QPs)
 *
 * Writers: everything in a segment is written by the one process that
 * created it, under its nic->lock (so one writer per slot and per ring).
 * Readers are other processes, lock-free.  Ordering:
 *
 *   slot seqlock   writer: seq+1 (odd, relaxed); fields (release stores,
 *                  SRN_DIAG_SET); seq+1 (even, release store).
 *                  reader: seq (acquire load) -- pairs with the even
 *                  release store, so the fields of that write are visible;
 *                  copy (acquire loads) -- each pairs with the release
 *                  store of the field it reads, so if the copy saw any
 *                  field of a later write, that write's odd seq store
 *                  happened before, and the re-read of seq, which cannot
 *                  move above the acquire loads, sees it; seq again
 *                  (relaxed); equal and even = consistent.
 *                  (Per-access release/acquire instead of fences: plain
 *                  moves on x86 all the same, and ThreadSanitizer, which
 *                  does not model fences, understands it.)
 *   log entries    the same seqlock per entry; ring head stored with
 *                  release after the entry is complete, loaded with
 *                  acquire by readers.
 *   hdr.magic      stored with release after the header is filled;
 *                  readers load it with acquire and skip a file whose
 *                  magic is not there yet.
 *   counters       independent relaxed atomics; no ordering between them.
 *
 * Field stores are release atomics (SRN_DIAG_SET in diag/shm.h): plain
 * moves on x86, and ThreadSanitizer-clean when a test reads a slot from
 * another thread.
 * Per-QP counters are written by the one writer with a relaxed load +
 * store (no locked RMW) outside the seqlock: each is one atomic word.
 *
 * Everything here is header-only and depends on no other header of the
 * library: the tools, which link only the library's public symbols,
 * include this file and nothing else of src/.  Bump SRN_DIAG_LAYOUT on
 * any change to a struct below.
 */
#ifndef SRN_DIAG_SEG_LAYOUT_H
#define SRN_DIAG_SEG_LAYOUT_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SRN_DIAG_MAGIC        0x31474149444e5253ull /* "SRNDIAG1", little-endian */
#define SRN_DIAG_LAYOUT       3                     /* bump on any layout change */
#define SRN_DIAG_SLOTS        4096
#define SRN_DIAG_MAX_COUNTERS 128
#define SRN_DIAG_MAX_QP_COUNTERS 32
#define SRN_DIAG_NAME_LEN     32
#define SRN_DIAG_LOG_ENTRIES  16                    /* per QP; a power of two */
#define SRN_DIAG_DEV_LOG_ENTRIES 64                 /* per device; a power of two */
#define SRN_DIAG_LOG_MSG      200                   /* bytes per line, NUL included */
#define SRN_DIAG_FILE_PREFIX  "softrnic."
#define SRN_DIAG_DEFAULT_DIR  "/dev/shm"
/* The directory is SOFTRNIC_DIAG_DIR when set (tests use their own), else
 * SRN_DIAG_DEFAULT_DIR; the library and the tools read the same variable. */
#define SRN_DIAG_DIR_ENV      "SOFTRNIC_DIAG_DIR"

enum srn_diag_kind {
	SRN_DIAG_FREE,
	SRN_DIAG_PD,
	SRN_DIAG_MR,
	SRN_DIAG_CQ,
	SRN_DIAG_QP,
	SRN_DIAG_SRQ,
	SRN_DIAG_AH,
	SRN_DIAG__KINDS
};

enum srn_log_level {
	SRN_LOG_OFF,           /* only as a SOFTRNIC_LOG threshold */
	SRN_LOG_ERROR,         /* error completions, QP to ERR: also in the device log */
	SRN_LOG_WARN,          /* NAKs with reason, retransmission bursts, rkey failures */
	SRN_LOG_INFO,          /* state changes, RNR waits */
	SRN_LOG_DEBUG,
};

/* ---- the segment -------------------------------------------------------- */

/* What the library is doing in its process right now, for a post-mortem:
 * a process that dies inside softrnic (a crash in srn-progress, say)
 * leaves its segment behind, and this names the thread, the QP and the
 * operation it was in.  Written by whoever holds the device's lock, at
 * the start of each operation (stage and its facts) and at the lock's
 * release (SRN_DIAG_STAGE_NONE); plain relaxed stores, no seqlock: a
 * reader of a live process may see a mix of two operations, a reader of
 * a dead one sees the last. */
enum srn_diag_stage {
	SRN_DIAG_STAGE_NONE,           /* not inside an operation */
	SRN_DIAG_STAGE_RESPONDER,      /* a peer's request: places Writes/Sends, reads for Reads, atomics */
	SRN_DIAG_STAGE_COMPLETER,      /* a peer's response: places Read responses, completes */
	SRN_DIAG_STAGE_REQUESTER,      /* a work request: packets built from local memory */
	SRN_DIAG_STAGE_DIRECT,         /* placing into (or reading from) a same-host target's memory */
	SRN_DIAG__STAGES
};

struct srn_diag_busy {
	_Atomic uint32_t stage;        /* enum srn_diag_stage */
	_Atomic uint32_t tid;          /* the thread running it */
	_Atomic uint32_t qpn;
	_Atomic uint32_t psn;
	_Atomic uint32_t opcode;       /* BTH opcode (responder, completer), else enum ibv_wr_opcode */
	_Atomic uint32_t len;          /* bytes it moves */
	_Atomic uint64_t va;           /* address it moves them to or from, 0 if none */
	_Atomic uint32_t progress_tid; /* the device's srn-progress thread */
	uint32_t reserved;
};

struct srn_diag_hdr {
	_Atomic uint64_t magic;        /* SRN_DIAG_MAGIC, stored last */
	uint32_t layout;               /* SRN_DIAG_LAYOUT */
	uint32_t hdr_size;             /* sizeof(struct srn_diag_hdr) */
	uint64_t seg_size;             /* sizeof(struct srn_diag_seg) */
	uint32_t nslots, slot_size;
	uint32_t log_entries, dev_log_entries;
	uint32_t entry_size, log_msg_len;
	uint32_t ncounters, nqp_counters;
	int32_t pid;
	_Atomic uint32_t slots_hwm;    /* slots [slots_hwm, nslots) were never used */
	uint64_t proc_start_ticks;     /* /proc/<pid>/stat field 22: tells a reused pid apart */
	uint64_t start_realtime_ns;    /* CLOCK_REALTIME at creation */
	uint64_t start_mono_ns;        /* CLOCK_MONOTONIC at creation; all other times are monotonic */
	char comm[16];
	char devname[32];
	uint8_t gid[16];
	char addr[48];                 /* the GID as an IP address */
	_Atomic uint32_t closed;       /* 1: srn_diag_close ran (clean exit) */
	_Atomic uint32_t slots_used;
	_Atomic uint64_t table_full;   /* objects not shown: the slot table was full */
	_Atomic uint64_t log_lines;    /* srn_diag_log calls */
	_Atomic uint64_t errors_logged;
	struct srn_diag_busy busy;     /* the operation in progress */
	uint64_t reserved[3];
} __attribute__((aligned(64)));

struct srn_diag_log_entry {
	_Atomic uint32_t seq;          /* entry seqlock */
	uint8_t level;                 /* enum srn_log_level */
	uint8_t kind;                  /* kind of the object that logged */
	uint8_t reserved[2];
	uint32_t qpn;                  /* QP that logged, 0 if none */
	uint32_t gen;                  /* generation of the slot that logged */
	uint64_t n;                    /* ring position (head value) it was written at */
	uint64_t ts_ns;                /* CLOCK_MONOTONIC */
	char msg[SRN_DIAG_LOG_MSG];    /* NUL-terminated (readers force it) */
};

struct srn_diag_qp_log {
	_Atomic uint64_t head;         /* entries ever written; free-running */
	uint64_t reserved;
	struct srn_diag_log_entry e[SRN_DIAG_LOG_ENTRIES];
} __attribute__((aligned(64)));

struct srn_diag_dev_log {
	_Atomic uint64_t head;
	uint64_t reserved;
	struct srn_diag_log_entry e[SRN_DIAG_DEV_LOG_ENTRIES];
} __attribute__((aligned(64)));

/* Object records.  Handles are the owners' addresses scrambled with a
 * per-segment secret: equal handles name the same object (an MR's pd is
 * the handle of a PD slot) without publishing heap addresses. */
struct srn_diag_pd {
	uint32_t users;                /* MRs, QPs, SRQs, AHs using it */
};

struct srn_diag_mr {
	uint64_t pd;                   /* handle */
	uint64_t addr;                 /* iova */
	uint64_t length;
	uint32_t lkey, rkey;
	uint32_t access;               /* IBV_ACCESS_* */
};

struct srn_diag_cq {
	uint32_t cqe;                  /* depth asked for */
	uint32_t size;                 /* ring slots */
	uint32_t fill;                 /* completions waiting to be polled */
	uint32_t nqps;
	uint8_t overflowed, arm, has_channel;
};

enum srn_diag_qp_flag {
	SRN_DIAG_QPF_RNR_WAIT = 1u << 0,      /* stalled until the RNR timer */
	SRN_DIAG_QPF_REWOUND = 1u << 1,       /* retransmitting, no progress since */
	SRN_DIAG_QPF_TX_BLOCKED = 1u << 2,    /* waits for room (a full same-host ring) */
	SRN_DIAG_QPF_ACK_TIMER = 1u << 3,     /* local ACK timer armed */
	SRN_DIAG_QPF_IN_MSG = 1u << 4,        /* responder inside a multi-packet message */
	SRN_DIAG_QPF_SQ_DRAINING = 1u << 5,
	SRN_DIAG_QPF_SHM = 1u << 6,           /* its peer is reached through a same-host ring */
	SRN_DIAG_QPF_DIRECT = 1u << 7,        /* it placed Writes/Reads directly in its same-host peer */
};

struct srn_diag_qp {
	uint32_t qpn, type, state;     /* enum ibv_qp_type, enum ibv_qp_state */
	uint32_t flags;                /* enum srn_diag_qp_flag */
	uint32_t sq_psn;               /* next PSN to send */
	uint32_t una_psn;              /* oldest unacknowledged PSN */
	uint32_t rq_psn;               /* next PSN expected as responder */
	uint32_t msn;
	uint32_t sq_size, rq_size;     /* WQEs granted */
	uint32_t sq_outstanding;       /* posted send WQEs not yet completed */
	uint32_t sq_unsent;            /* ... of which not yet (fully) transmitted */
	uint32_t rq_posted;            /* receive WQEs posted (own RQ or the SRQ) */
	uint32_t rd_atomic_inflight;
	uint32_t peer_qpn;
	uint8_t peer_gid[16];
	uint32_t mtu;                  /* path MTU, bytes */
	uint32_t retry_left, rnr_left;
	uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
	uint8_t max_rd_atomic, max_dest_rd_atomic, port, reserved0;
	uint32_t rate_mbps;            /* paced at (DCQCN or a rate limit), 0 = not paced */
	uint64_t pd, scq, rcq, srq;    /* handles */
	uint64_t ack_deadline_ns, rnr_deadline_ns;
	/* What the peer said last (srn_diag_qp_peer_said): AETH syndrome or
	 * SRN_DIAG_PEER_NONE, its PSN and when. */
	uint32_t last_peer_syndrome, last_peer_psn;
	uint64_t last_peer_ns;
	uint64_t cnt[SRN_DIAG_MAX_QP_COUNTERS];  /* enum srn_qp_counter */
};
#define SRN_DIAG_PEER_NONE 0xffffffffu

struct srn_diag_srq {
	uint64_t pd;
	uint32_t max_wr, posted, limit, nqps;
};

struct srn_diag_ah {
	uint64_t pd;
	uint8_t dgid[16];
	uint8_t is_global, sgid_index, hop_limit, traffic_class;
	uint32_t flow_label;
	uint8_t port, sl, reserved[2];
};

struct srn_diag_slot {
	_Atomic uint32_t seq;          /* seqlock: odd while the writer is inside */
	uint32_t kind;                 /* enum srn_diag_kind; SRN_DIAG_FREE = unused */
	uint32_t gen;                  /* bumped at every reuse; tags log entries */
	uint32_t last_kind;            /* kind of the latest occupant, kept when freed */
	uint64_t handle;
	uint64_t created_ns;           /* CLOCK_MONOTONIC */
	union {
		struct srn_diag_pd pd;
		struct srn_diag_mr mr;
		struct srn_diag_cq cq;
		struct srn_diag_qp qp;
		struct srn_diag_srq srq;
		struct srn_diag_ah ah;
	};
} __attribute__((aligned(64)));

struct srn_diag_seg {
	struct srn_diag_hdr hdr;
	/* The device's struct srn_counters (diag/counters.h) in its first
	 * ncounters words; names below, so readers need not know the enum. */
	union {
		_Atomic uint64_t v[SRN_DIAG_MAX_COUNTERS];
	} counters __attribute__((aligned(64)));
	char counter_names[SRN_DIAG_MAX_COUNTERS][SRN_DIAG_NAME_LEN];
	char qp_counter_names[SRN_DIAG_MAX_QP_COUNTERS][SRN_DIAG_NAME_LEN];
	struct srn_diag_dev_log dev_log;
	struct srn_diag_slot slots[SRN_DIAG_SLOTS];
	struct srn_diag_qp_log logs[SRN_DIAG_SLOTS];
};

_Static_assert(sizeof(struct srn_diag_slot) % 8 == 0, "slots are copied in 8-byte words");
_Static_assert(sizeof(struct srn_diag_log_entry) % 8 == 0, "entries are copied in 8-byte words");
_Static_assert(offsetof(struct srn_diag_log_entry, msg) % 8 == 0, "messages are stored in 8-byte words");
_Static_assert(SRN_DIAG_LOG_MSG % 8 == 0, "messages are stored in 8-byte words");
_Static_assert(sizeof(struct srn_diag_slot) <= 512, "keep slots small: the table is touched per object");
_Static_assert((SRN_DIAG_LOG_ENTRIES & (SRN_DIAG_LOG_ENTRIES - 1)) == 0, "ring size a power of two");
_Static_assert((SRN_DIAG_DEV_LOG_ENTRIES & (SRN_DIAG_DEV_LOG_ENTRIES - 1)) == 0,
	       "ring size a power of two");

/* The header fields that describe the layout, as this build writes them
 * (shm.c) and as readers require them (tools/diag_seg.c): every offset a
 * reader computes assumes these. */
static inline void srn_diag_hdr_layout(struct srn_diag_hdr *h)
{
	h->layout = SRN_DIAG_LAYOUT;
	h->hdr_size = sizeof(*h);
	h->seg_size = sizeof(struct srn_diag_seg);
	h->nslots = SRN_DIAG_SLOTS;
	h->slot_size = sizeof(struct srn_diag_slot);
	h->log_entries = SRN_DIAG_LOG_ENTRIES;
	h->dev_log_entries = SRN_DIAG_DEV_LOG_ENTRIES;
	h->entry_size = sizeof(struct srn_diag_log_entry);
	h->log_msg_len = SRN_DIAG_LOG_MSG;
}

static inline bool srn_diag_hdr_layout_ok(const struct srn_diag_hdr *h)
{
	return h->layout == SRN_DIAG_LAYOUT && h->hdr_size == sizeof(*h) &&
	       h->seg_size == sizeof(struct srn_diag_seg) && h->nslots == SRN_DIAG_SLOTS &&
	       h->slot_size == sizeof(struct srn_diag_slot) &&
	       h->log_entries == SRN_DIAG_LOG_ENTRIES &&
	       h->dev_log_entries == SRN_DIAG_DEV_LOG_ENTRIES &&
	       h->entry_size == sizeof(struct srn_diag_log_entry) &&
	       h->log_msg_len == SRN_DIAG_LOG_MSG;
}

/* ---- reader side (header-only: also used by the tools) ----------------- */

/* Fields 3 and 22 of /proc/<pid>/stat: the state letter (into *state
 * when not NULL; 'Z' = zombie) and the start time in clock ticks after
 * boot, which with the pid names a process even after the pid is reused.
 * Returns the start time, 0 when unknown. */
static inline uint64_t srn_diag_proc_stat(int pid, char *state)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* comm (field 2) may hold spaces and parentheses: skip past the last ')'. */
	char *p = strrchr(buf, ')');
	if (p && state)
		*state = p[1] == ' ' ? p[2] : '?';
	for (int field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

static inline uint64_t srn_diag_proc_start_ticks(int pid)
{
	return srn_diag_proc_stat(pid, NULL);
}

/* "softrnic.<pid>.<rest>": the pid, or -1 when the name is not a segment's. */
static inline int srn_diag_name_pid(const char *name)
{
	size_t plen = strlen(SRN_DIAG_FILE_PREFIX);
	if (strncmp(name, SRN_DIAG_FILE_PREFIX, plen))
		return -1;
	char *end;
	errno = 0;
	long pid = strtol(name + plen, &end, 10);
	if (errno || end == name + plen || *end != '.' || !end[1] || pid <= 0 || pid > INT32_MAX)
		return -1;
	return (int)pid;
}

/* Is the process that wrote a segment (pid, started at start_ticks; 0 =
 * unknown) still alive?  A zombie has died and only waits for its parent;
 * a live process with that pid but another start time is a newer one. */
static inline bool srn_diag_proc_alive(int pid, uint64_t start_ticks)
{
	if (pid <= 0)
		return false;
	char state = '?';
	uint64_t t = srn_diag_proc_stat(pid, &state);
	if (!t)   /* /proc hides it, or no such process: ask the kernel */
		return !(kill(pid, 0) && errno == ESRCH);
	if (state == 'Z' || state == 'X')
		return false;
	return !(start_ticks && t != start_ticks);
}

/* Copy n bytes (a multiple of 8, 8-aligned) with acquire loads (each
 * pairs with the release store of the field it reads). */
static inline void srn_diag_copy_words(void *dst, const void *src, size_t n)
{
	const uint64_t *s = src;
	uint64_t *d = dst;
	for (size_t i = 0; i < n / 8; i++)
		d[i] = __atomic_load_n(&s[i], __ATOMIC_ACQUIRE);
}

/* Consistent copy of a seqlocked object of size n whose first word holds
 * the seq.  Returns 0, or -1 when every try collided with a writer (or the
 * writer died inside a write section): out then holds the last try. */
static inline int srn_diag_seq_read(const void *src, _Atomic const uint32_t *seq, void *out,
				    size_t n, int tries)
{
	for (int t = 0; t < tries; t++) {
		uint32_t s1 = atomic_load_explicit(seq, memory_order_acquire);
		srn_diag_copy_words(out, src, n);
		uint32_t s2 = atomic_load_explicit(seq, memory_order_relaxed);
		if (s1 == s2 && !(s1 & 1))
			return 0;
	}
	return -1;
}

#define SRN_DIAG_READ_TRIES 1000

static inline int srn_diag_slot_read(const struct srn_diag_slot *s, struct srn_diag_slot *out)
{
	return srn_diag_seq_read(s, &s->seq, out, sizeof(*s), SRN_DIAG_READ_TRIES);
}

/* Read ring entry position n (head - k); 0 when it is still that entry
 * (and, for QP rings, of slot generation gen), -1 when overwritten or
 * torn.  The message is NUL-terminated in out. */
static inline int srn_diag_entry_read(const struct srn_diag_log_entry *ring, uint32_t nent,
				      uint64_t n, struct srn_diag_log_entry *out)
{
	const struct srn_diag_log_entry *e = &ring[n & (nent - 1)];
	if (srn_diag_seq_read(e, &e->seq, out, sizeof(*e), SRN_DIAG_READ_TRIES))
		return -1;
	out->msg[SRN_DIAG_LOG_MSG - 1] = '\0';
	return out->n == n ? 0 : -1;
}


#endif /* SRN_DIAG_SEG_LAYOUT_H */
