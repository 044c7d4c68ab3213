/*
 * mr.h - protection domains and memory regions.
 *
 * A region is a range of the process's own memory with access rights and a
 * key; nothing is copied at registration.  Every access through a key goes
 * through srn_mr_resolve(), which validates key (incl. the key byte that
 * detects stale keys), PD, range and rights before any byte moves.  Pages
 * are not pinned: a region's pages moved onto a memfd are reached through
 * the library's own mapping of it, whatever the program does to its own
 * (core/mr_share.h); core/mr_map.h says what stands in for the pin of the
 * others.
 */
#ifndef SRN_CORE_MR_H
#define SRN_CORE_MR_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

struct srn_nic;

struct srn_pd {
	struct ibv_pd ibpd;
	struct srn_nic *nic;
	_Atomic int refs;              /* MRs, QPs, AHs, SRQs using it */
	struct srn_diag_obj *diag;
};

/* A memory region, or a memory window (is_mw): a window has its own rkey
 * and a range/rights inside the region it is bound to; unbound or
 * invalidated it resolves nothing.  Both live in the one key table. */
struct srn_mr {
	struct ibv_mr ibmr;
	struct ibv_mw ibmw;            /* the handle of a window */
	struct srn_pd *pd;
	uint64_t iova;                 /* address the peer/lkey users name */
	uint8_t *base;                 /* where iova maps in the program */
	/* Where every access through its keys goes: base, or the same bytes
	 * in the library's own mapping of its span's memfd (share->alias),
	 * which keeps them whatever the program does to base.  Written
	 * before its key is inserted or under nic->lock. */
	uint8_t *at;
	uint64_t length;
	unsigned access;
	uint32_t key;
	struct srn_diag_obj *diag;
	bool is_mw;
	struct srn_mr *bound;          /* window: the region it is bound to, NULL = none */
	uint32_t mw_qpn;               /* type-2 window: the only QP that may use it */
	int mw_binds;                  /* region: windows bound to it (dereg waits for 0) */
	/* Its pages were unmapped, moved or lost a right under the
	 * registration (core/mr_map.c): no key of it resolves any more.
	 * Written and read under nic->lock. */
	bool revoked;
	/* The process-wide list the unmap hooks search, and the range and
	 * writability they see (all under that list's lock). */
	struct srn_mr *map_prev, *map_next;
	uintptr_t map_base;
	uint64_t map_len;
	bool map_writable;
	bool map_tracked;
	bool map_collected;            /* a hook is revoking it */
	int map_users;                 /* hooks holding it outside the list lock */
	/* Its pages are on a memfd same-host peers map for atomics
	 * (core/mr_share.h), NULL: not.  Set before its key is inserted
	 * or under nic->lock. */
	struct srn_mr_share *share;
};

static inline struct srn_pd *srn_pd(struct ibv_pd *p) { return (struct srn_pd *)p; }
static inline struct srn_mr *srn_mr(struct ibv_mr *m) { return (struct srn_mr *)m; }

/* Validate access flags as rdma-core/the kernel do: remote write or atomic
 * needs local write; unknown bits are rejected; optional bits accepted. */
int srn_mr_check_access(unsigned access);

/* Key table (must hold nic->lock). */
int srn_mr_insert(struct srn_nic *nic, struct srn_mr *mr);
void srn_mr_remove(struct srn_nic *nic, struct srn_mr *mr);
/* Give a region in the table a new key in the same slot (ibv_rereg_mr of
 * its translation: keys handed out for the old memory stop working). */
void srn_mr_rekey(struct srn_nic *nic, struct srn_mr *mr);

/* Resolve [va, va+len) through key for the given access (IBV_ACCESS_* bits,
 * 0 = local read).  qpn is the QP using the key (type-2 windows are bound
 * to one QP).  Returns the local pointer or NULL with *why set to a short
 * reason.  Must hold nic->lock. */
void *srn_mr_resolve(struct srn_nic *nic, struct srn_pd *pd, uint32_t qpn, uint32_t key,
		     uint64_t va, uint64_t len, unsigned need, const char **why);
/* Copy len bytes to offset off of a scatter list, each piece resolved
 * through its lkey with local write.  0, -EMSGSIZE (does not fit) or
 * -EACCES (an lkey does not resolve; bytes before it may have landed).
 * Must hold nic->lock. */
int srn_sge_copy_in(struct srn_nic *nic, struct srn_pd *pd, uint32_t qpn,
		    const struct ibv_sge *sge, uint32_t nsge, uint32_t off,
		    const uint8_t *src, uint32_t len);
/* The slot a key names in the key table (and in the direct-placement
 * table, link/direct.h). */
uint32_t srn_mr_key_slot(uint32_t key);
/* The rights and range part of srn_mr_resolve, for a region described by
 * its access flags, iova and length (the same-host direct path checks a
 * peer's published region with it).  True if [va, va+len) lies inside and
 * the rights cover need; else false and *why. */
bool srn_mr_rights_range_ok(unsigned access, uint64_t iova, uint64_t length, unsigned need,
			    uint64_t va, uint64_t len, const char **why);
/* The key table entry of key (region or window), or NULL. */
struct srn_mr *srn_key_lookup(struct srn_nic *nic, uint32_t key);

#endif
