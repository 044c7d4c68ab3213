/*
 * mr_map.h - registered regions against the process's own mappings.
 *
 * A NIC pins a region's pages at registration; we cannot, so we do the two
 * things that keep a key from reaching memory the program did not
 * register: registration checks the range is mapped with the rights the
 * region needs (-EFAULT otherwise, as the kernel's page pinning answers),
 * and a region whose pages the program unmaps, moves or maps over while it
 * is registered is revoked before the pages go: every later access through
 * its keys fails as a bad key does (remote access error).  A region moved
 * onto a memfd (core/mr_share.h) is reached through the library's own
 * mapping of it, which keeps its pages where no hook sees them go (libc's
 * own munmap in free and realloc).  The program's
 * munmap/mremap/mmap(MAP_FIXED)/mprotect/shmdt calls reach us through
 * verbs/verbs_unmap.c.
 */
#ifndef SRN_CORE_MR_MAP_H
#define SRN_CORE_MR_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct srn_mr;

/* Would the kernel pin [addr, addr+len)?  Every byte mapped, writable if
 * write (FOLL_WRITE) else readable, and no special mapping ([vvar],
 * [vsyscall]).  0, -EFAULT, or -errno if /proc/self/maps cannot be read. */
int srn_mr_map_check(const void *addr, size_t len, bool write);

/* Does a region with these access flags need its pages writable (the
 * kernel's ib_access_writable: local/remote write, atomics, MW bind)? */
bool srn_mr_access_writable(unsigned access);

/* Add a region to / remove it from the process-wide list the unmap hooks
 * search.  Track before checking the mapping (an unmap in between then
 * revokes it); untrack returns once no hook uses the region any more.
 * Neither may be called with nic->lock held. */
void srn_mr_track(struct srn_mr *mr);
void srn_mr_untrack(struct srn_mr *mr);
/* Change the range and writability the hooks watch for a tracked region
 * (ibv_rereg_mr). */
void srn_mr_map_set(struct srn_mr *mr, uintptr_t base, uint64_t len, bool writable);
/* Has a hook ever taken the region to revoke it?  Revocation is for good:
 * such a region can only be deregistered.  May be called with nic->lock
 * held (the list lock nests inside it, never the other way round). */
bool srn_mr_map_collected(struct srn_mr *mr);

/* The program is about to unmap or replace [start, start+len) (prot < 0),
 * or to change its protection to prot: revoke every region that
 * overlaps it and would lose a right it needs.  Takes the regions' nic
 * locks, so no access is in flight when it returns.  Must not be called
 * with a nic->lock held. */
void srn_mr_unmapping(uintptr_t start, size_t len, int prot);

/* The list lock, for core/mr_share.c, which keeps its spans under it.
 * May be taken with a nic->lock held, never the other way round. */
void srn_mr_map_lock(void);
void srn_mr_map_unlock(void);
/* Does a tracked region other than self overlap [start, start+len)?
 * Must hold the list lock. */
bool srn_mr_map_overlap_locked(const struct srn_mr *self, uintptr_t start, uint64_t len);

/* How many regions are tracked (a hint: 0 lets the hooks skip the list). */
extern _Atomic unsigned srn_mr_tracked;

#endif
