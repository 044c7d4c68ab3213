/*
 * direct.h - same-host direct placement: the table a device publishes so
 * that same-user peers can act as its NIC for RDMA Write and Read.
 *
 * One-sided operations should not need the target's CPU.  Between two
 * softrnic processes on one host the requester can place a Write (or
 * fetch a Read) in the target's registered memory itself, with
 * cross-memory attach (process_vm_writev/readv), if it can make every
 * check the target's responder would make.  So each device publishes, in
 * a sealed memfd of its own (the "direct table"), what those checks need:
 *
 *  - per QP (indexed by the QPN's 12-bit slot): the full QPN, state,
 *    remote access flags, the QPN it is connected to, protection domain
 *    and whether it accepts direct placement;
 *  - per memory region (indexed by the key's slot): the key, PD, iova,
 *    length, access rights, where the region lies in the target's address
 *    space, and whether it was revoked.  Memory windows are not published:
 *    their keys take the rings.
 *
 * Entries have one writer (the target, under its nic->lock) and are read
 * by peers with a per-entry sequence counter (odd while written), so a
 * reader never acts on a torn entry.
 *
 * Fencing.  After ibv_dereg_mr (or a revocation, a rereg, a QP leaving
 * RTR/RTS) returns, no placement may reach the region.  Each requester
 * device claims one of SRN_DIRECT_SLOTS slots in the target's table and
 * makes its sequence odd (sequentially consistent) before it reads any
 * entry, even again when its placement is done.  The target changes the
 * entry first, then (after a full fence) waits for every slot that was
 * odd to move on: either the requester saw the old entry and its
 * placement finishes before the target goes on, or it sees the new one.
 * A slot whose owner died is not waited for (its placement cannot go on),
 * and the wait is bounded (SRN_DIRECT_FENCE_MAX_NS) so a stopped peer
 * cannot hang the target: that is counted and logged.
 *
 * Shared regions.  A Compare-and-Swap or Fetch-and-Add cannot be done by
 * copying: it needs the CPU's atomic instruction on the target's page.
 * So a region registered with remote atomics (and a large one with remote
 * write or read, where copying through a mapping is twice as fast as
 * cross-memory attach) is re-backed by a memfd at registration
 * (core/mr_share.h) and its entry names that memfd; the requester opens
 * it through /proc/PID/fd (same user only, checked as the table is, plus
 * the published inode), maps it once and keeps the mapping
 * (srn_direct_shared_ptr), and executes the atomic or the copy there
 * between enter and leave, so the fence covers it as any placement.  The
 * target's responder executes ring and UDP atomics with the same
 * instructions on the same physical page, so all are atomic together.
 *
 * Liveness.  A mapping keeps a dead target's memfd alive, so a copy
 * through it "succeeds" whatever became of the target, and a pid names
 * another process once the dead one is reaped.  So the target's progress
 * thread holds, for the device's life, a robust process-shared mutex in
 * a page of its own (a second memfd, sealed F_SEAL_FUTURE_WRITE after
 * the owner mapped it: peers can only map it read-only).  When the
 * process dies, however it dies, the kernel walks each exiting thread's
 * robust list and marks that mutex's futex word FUTEX_OWNER_DIED (the
 * robust-futex ABI, Documentation/locking/robust-futex-ABI.rst), before
 * the process is reported dead: a requester reads one word, no system
 * call, before and after each placement (srn_direct_peer_life), and
 * treats anything but "held by a live thread" as "not now".
 *
 * Trust: the table is found as the inbox is (link/shm_file.h: the
 * locator names pid and descriptor, /proc/PID/fd/N opens only for the
 * same user, the file must be ours, 0600, sealed, of the exact size, with
 * the inbox's cookie).  A peer's table is untrusted input: every index is
 * masked, every entry copied once and checked; what a lying table can do
 * is make us write into its owner's memory, which its owner's user could
 * do anyway.  Our own memory is only ever reached through our own lkeys.
 */
#ifndef SRN_LINK_DIRECT_H
#define SRN_LINK_DIRECT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#define SRN_DIRECT_QPS 4096u          /* one entry per QPN slot (core/nic.h SRN_QP_TABLE_SIZE) */
#define SRN_DIRECT_MRS 16384u         /* key slots published; higher slots take the rings */
#define SRN_DIRECT_SLOTS 32u          /* requester devices per target */
#define SRN_DIRECT_PEERS 16u          /* targets a requester device remembers */
#define SRN_DIRECT_FENCE_MAX_NS 2000000000ull  /* a fence waits at most 2 s for a peer */
#define SRN_DIRECT_MAPS 32u           /* a target's shared regions a requester keeps mapped */

/* QP entry flags. */
#define SRN_DIRECT_QP_OK 1u           /* accepts direct placement */
/* Region entry flags. */
#define SRN_DIRECT_MR_REVOKED 1u      /* its pages went under the registration */

struct srn_direct_qp_ent {
	uint32_t qpn;                 /* 0: no QP in this slot */
	uint32_t state;               /* enum ibv_qp_state */
	uint32_t access;              /* qp_access_flags */
	uint32_t flags;
	uint32_t dest_qpn;            /* the QP it is connected to (RC is one to one) */
	uint32_t max_dest_rd_atomic;  /* 0: the responder refuses Reads and atomics */
	uint64_t pd;                  /* the PD's identity in the target */
};

struct srn_direct_mr_ent {
	uint32_t key;                 /* 0: no region in this slot */
	uint32_t access;
	uint32_t flags;
	uint32_t pad;
	uint64_t pd;
	uint64_t iova;
	uint64_t length;
	uint64_t base;                /* where iova lies in the target's address space */
	/* A region with remote atomics whose pages the target re-backed by
	 * a memfd (core/mr_share.h): the memfd's descriptor in the target
	 * (+1, 0 = none), its inode (the descriptor number may be reused),
	 * and the span of the target's address space it backs. */
	int32_t share_fd;
	uint32_t pad2;
	uint64_t share_ino;
	uint64_t share_base;
	uint64_t share_len;
};

struct srn_direct_tab;

/* A device's own table: created at device open, published once its
 * inbox exists (the locator carries the descriptor). */
struct srn_direct_own {
	struct srn_direct_tab *tab;   /* NULL: no table (direct placement off) */
	int fd;
	int pid;
	void *alive;                  /* the liveness page (a robust mutex), mapped here */
	int alive_fd;
	uint64_t fence_waits;         /* fences that found a placement in flight */
	uint64_t fence_timeouts;      /* fences that gave up on a stopped peer */
};

/* A target's shared region mapped here for atomics: which published
 * region it was (slot, key, memfd inode, span) and where it lies here. */
struct srn_direct_map {
	uint8_t *at;                  /* NULL: unused */
	uint32_t slot, key;
	uint64_t ino, base, len;
	uint64_t used;                /* for eviction: the last use's tick */
};

/* A target as a requester device sees it. */
struct srn_direct_peer {
	uint32_t gen;                 /* turns whenever the entry is emptied: a pointer
				       * kept with its gen names this target while equal */
	int32_t pid;                  /* 0: unused entry */
	int32_t fd;
	uint64_t cookie;
	struct srn_direct_tab *tab;   /* NULL: none usable (until retry_ns) */
	const void *alive;            /* its liveness page, mapped read-only */
	uint32_t alive_off;           /* where in it the futex word lies */
	_Atomic uint64_t life_checks; /* srn_direct_peer_alive_after's barrier */
	uint32_t slot;
	uint64_t retry_ns;
	struct srn_direct_map map[SRN_DIRECT_MAPS];
	uint64_t map_tick;
	uint32_t map_last;            /* the map entry used last (tried first) */
};

struct srn_direct_req {
	struct srn_direct_peer peer[SRN_DIRECT_PEERS];
	int pid;
};

/* Create the table (all entries empty, not yet published).  0 or -errno;
 * on failure o->tab stays NULL. */
int srn_direct_own_open(struct srn_direct_own *o);
/* Let peers in: stamp the inbox's cookie and the magic (release). */
void srn_direct_own_publish(struct srn_direct_own *o, uint64_t cookie);
/* Mark closed (peers stop at once), fence, unmap. */
void srn_direct_own_close(struct srn_direct_own *o);
/* The program exits with the device open: mark closed, so peers stop
 * placing at once, as srn_shm_exit stops their rings (a requester keeps
 * its route across posts and looks at the table, not the inbox).  No
 * fence and nothing unmapped: the process is on its way out. */
void srn_direct_own_exit(struct srn_direct_own *o);
/* The progress thread, as it starts: hold the liveness mutex for the
 * device's life (peers place directly only while it is held). */
void srn_direct_own_hold(struct srn_direct_own *o);
/* The same thread, as it stops (after srn_direct_own_retire). */
void srn_direct_own_unhold(struct srn_direct_own *o);
/* Mark the table closed and fence, before the progress thread stops, so
 * no peer reads a released mutex as a death while we still answer. */
void srn_direct_own_retire(struct srn_direct_own *o);
/* Write an entry (seqlock; its one writer is the owner under nic->lock).
 * A slot out of range is ignored (never published: the rings serve it). */
void srn_direct_own_set_qp(struct srn_direct_own *o, uint32_t slot,
			   const struct srn_direct_qp_ent *e);
void srn_direct_own_set_mr(struct srn_direct_own *o, uint32_t slot,
			   const struct srn_direct_mr_ent *e);
/* Wait until no placement that may have seen an entry before the last
 * set is still running (see the top of this file).  Returns true when it
 * had to wait for one. */
bool srn_direct_own_fence(struct srn_direct_own *o);

/* The table of the target with this pid, descriptor and cookie (from its
 * locator), opened and a slot claimed on first use; NULL: none usable.
 * now_ns: the time, or 0: read the clock only if a retry needs it (the
 * common call finds the peer open and reads none). */
struct srn_direct_peer *srn_direct_peer_get(struct srn_direct_req *r, int32_t pid, int32_t fd,
					    uint64_t cookie, uint64_t now_ns);
/* Has the target closed its table (its device closed, its process may
 * live on)? */
bool srn_direct_peer_closed(const struct srn_direct_peer *p);
/* Forget a target (its process died): release the slot, unmap its table,
 * its liveness page and its regions' memfds. */
void srn_direct_peer_drop(struct srn_direct_peer *p);
/* Release every claimed slot and unmap (device close). */
void srn_direct_req_close(struct srn_direct_req *r);

/* Is the target's process alive?  One load of the word its progress
 * thread holds (see "Liveness" above).  UNSURE: not held (the thread not
 * started yet, or stopped at close): place nothing, take the rings.
 * DEAD: the kernel marked the holder dead, the process is gone or going. */
enum srn_direct_life { SRN_DIRECT_ALIVE, SRN_DIRECT_UNSURE, SRN_DIRECT_DEAD };
enum srn_direct_life srn_direct_peer_life(const struct srn_direct_peer *p);
/* After a copy or an atomic into the target: was it alive once every
 * store this thread made before the call was visible?  (A full barrier,
 * then the word.)  True only for ALIVE. */
bool srn_direct_peer_alive_after(struct srn_direct_peer *p);

/* A placement: enter (slot odd), read entries, move bytes, leave.  The
 * reads return false when the entry could not be read consistently or
 * the table was closed; the caller then takes the rings. */
void srn_direct_enter(struct srn_direct_peer *p);
void srn_direct_leave(struct srn_direct_peer *p);
bool srn_direct_read_qp(const struct srn_direct_peer *p, uint32_t qpn,
			struct srn_direct_qp_ent *out);
/* slot: the key's slot as core/mr.h srn_mr_key_slot() gives it. */
bool srn_direct_read_mr(const struct srn_direct_peer *p, uint32_t slot, uint32_t key,
			struct srn_direct_mr_ent *out);
/* The same reads, also giving the record's change number the copy was
 * taken at.  The owner makes the number odd, changes the words and makes
 * it even again, so while srn_direct_*_unchanged finds the number a copy
 * was taken at, the copy is the record: a requester keeps the copy
 * across placements and looks at one word instead of the whole entry.
 * Call both inside a placement (after enter), as the reads. */
bool srn_direct_read_qp_seq(const struct srn_direct_peer *p, uint32_t qpn,
			    struct srn_direct_qp_ent *out, uint64_t *seq);
bool srn_direct_read_mr_seq(const struct srn_direct_peer *p, uint32_t slot, uint32_t key,
			    struct srn_direct_mr_ent *out, uint64_t *seq);
bool srn_direct_qp_unchanged(const struct srn_direct_peer *p, uint32_t qpn, uint64_t seq);
bool srn_direct_mr_unchanged(const struct srn_direct_peer *p, uint32_t slot, uint64_t seq);
/* Copy len bytes between our iovecs and the target's [remote, +len):
 * write true = into the target.  0, or -errno (nothing or part of it
 * moved: the caller resends over the rings, Write and Read are
 * idempotent). */
int srn_direct_copy(const struct srn_direct_peer *p, bool write, const struct iovec *local,
		    int nlocal, uint64_t remote, uint64_t len);
/* Where the len bytes at the target's address `remote` lie in our mapping
 * of the region's shared memfd (m, as srn_direct_read_mr gave it), mapped
 * on first use and kept (SRN_DIRECT_MAPS per target, the least recently
 * used dropped unless it served one of the last 4096 operations: then
 * NULL; a mapping of an older region in the same slot is dropped when
 * seen).  Call between enter and leave, after the checks: the
 * pointer may be used until leave.  NULL: not shared, outside the span,
 * or the memfd cannot be opened or is not the one published (then copy
 * with srn_direct_copy, or for an atomic take the rings). */
void *srn_direct_shared_ptr(struct srn_direct_peer *p, uint32_t slot,
			    const struct srn_direct_mr_ent *m, uint64_t remote, uint64_t len);

#endif
