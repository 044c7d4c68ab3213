/*
 * mr_share.h - regions re-backed by a memfd: the library keeps its own
 * mapping of it, which stands in for a NIC's pin, and same-host peers
 * can execute atomics on the very page and copy Writes and Reads through
 * a mapping (link/direct.h).
 *
 * The pin: a kernel NIC's region keeps its pages whatever the program
 * does to its mapping; after free() (libc's own munmap, which no hook
 * sees), realloc or mmap over it a peer's Read returns the registered
 * bytes and its Write lands in pages the program no longer sees.  So
 * every region of SRN_MR_PIN_MIN (64 KiB) or more of private anonymous
 * memory (SOFTRNIC_MR_PIN_MAX, none by default; SOFTRNIC_MR_PIN=0: none)
 * moves as below, and every access through its keys (responder,
 * system-call copy, local SGEs) goes through the library's mapping of
 * the memfd (the alias, mr->at), never through the program's addresses.
 * The program's mapping is a second view of the same pages while it
 * lasts.  Smaller regions keep their pages (below 64 KiB glibc's blocks
 * come from its heap, whose pages free() leaves mapped, and each span
 * costs a descriptor and two mappings).
 *
 * A Compare-and-Swap or Fetch-and-Add from a peer process must be a CPU
 * atomic on the target's memory; cross-memory attach only copies, and
 * copies at about half the speed of memcpy through a mapping (1 MiB:
 * 9-11 GB/s against 18-20 here).  So at ibv_reg_mr with
 * IBV_ACCESS_REMOTE_ATOMIC, or with remote write or read for a span of
 * up to SOFTRNIC_DIRECT_MAP_MAX (default 16 MiB; spans under 64 KiB while
 * fewer than 128 such are moved, see mr_share.c), the region's whole
 * pages (the "span") are moved onto a sealed memfd: contents copied, then the memfd
 * mapped MAP_SHARED over the same addresses with one mremap, so the
 * program keeps its pointers and sees the same bytes.  The memfd's
 * descriptor is published in the direct table for same-user peers only.
 *
 * Only plain private anonymous memory is moved (heap, mmap'd anonymous,
 * BSS), never file-backed, huge-page (hugetlbfs), already shared memory,
 * the main thread's stack or the registering thread's own (the move
 * write-protects the span while that thread runs on it); and only a span
 * no other registered region overlaps (a region
 * inside a span already moved shares it).  Anything else keeps its pages
 * and its atomics take the rings, which are atomic with the direct ones
 * because the responder uses the same instructions on the same page.
 *
 * Hazards, and what is done:
 *  - other threads writing the span's pages during the move (between the
 *    copy and the mremap, microseconds): their writes would be lost.  The
 *    device's own threads are held off (the move runs under its nic
 *    lock) and no registered region overlaps the span (so no peer's Write
 *    lands there); the program's own threads, and other devices' on edge
 *    pages, are not: registering memory that another thread is writing
 *    is the program's race, as with any memory a NIC re-maps.
 *  - edge pages shared with other data: moved whole, contents copied.
 *  - growth: realloc and mremap grow a span's mapping in place or move
 *    it larger, libc's realloc through its own mremap, which no hook
 *    sees; a shared mapping grown past its file's end faults (SIGBUS) at
 *    the first store there.  So the memfd is 1 TiB long (RLIMIT_FSIZE
 *    permitting), sparse: the grown tail takes pages as it is touched.
 *    Sealed against shrinking and growing as before; peers map only the
 *    span and accept a file at least that long.
 *  - fork: a child gets a private copy of every span mapping it
 *    inherited, made by an atfork child handler (mr_share_maps.c), so it
 *    can use all its memory, as with a kernel NIC on Linux 5.13+; no
 *    MADV_DONTFORK (that hid heap objects sharing the span's edge pages
 *    from the child).  When the span's last region is deregistered every
 *    mapping of its memfd, wherever the program moved or grew it, goes
 *    back to private anonymous memory (copied, one mremap each), so
 *    afterwards fork and MADV_DONTNEED behave as on any memory; where
 *    that cannot be done (no userfaultfd write-protection of shared
 *    memory before Linux 5.19) they stay on the memfd, still growable and
 *    still copied into a child.
 *  - unmap, mremap, mmap over the span (verbs_unmap.c hooks): the regions
 *    are revoked as any region is, and the span is marked dead: a later
 *    registration there never reuses it.
 *  - rereg that moves the region or changes its rights: it stops sharing
 *    (its atomics take the rings); a rereg never moves pages.
 * Peers map a span (peers_map) only where the switches allow: atomic
 * regions up to SOFTRNIC_DIRECT_ATOMIC_MAX (default 4 MiB, =0 none) of
 * any size, Write/Read regions up to SOFTRNIC_DIRECT_MAP_MAX (default
 * 16 MiB, SOFTRNIC_DIRECT_MAP=0 none), those under 64 KiB while fewer
 * than 128 are moved (a store through the mapping replaces a system call
 * per operation); other spans of 64 KiB and more are pins only (peers
 * copy into the alias by system call, atomics take the rings).
 */
#ifndef SRN_CORE_MR_SHARE_H
#define SRN_CORE_MR_SHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct srn_mr;

/* A span of pages on a memfd (immutable but for refs and dead). */
struct srn_mr_share {
	struct srn_mr_share *next;
	uintptr_t base;
	size_t len;
	int fd;                        /* the memfd, open while refs > 0 */
	uint64_t ino;
	uint8_t *alias;                /* our own mapping of its first len bytes */
	int pid;                       /* the process alias is mapped in */
	bool peers_map;                /* same-host peers may map it */
	int refs;                      /* regions using it (under the mr_map list lock) */
	bool dead;                     /* pages unmapped or replaced (under the list lock) */
	bool small;                    /* counts against the small spans' limit (mr_share.c) */
};

/* At registration of a tracked region (after its mapping check, before
 * its key is inserted): move its pages onto a memfd, or share the span
 * already moved, when it may (see above); mr->share and mr->at are then
 * set.  Takes
 * the region's nic lock and the list lock; must hold neither. */
void srn_mr_share_attach(struct srn_mr *mr);
/* The region stops using its span (rereg; a failed registration).
 * Takes the list lock; may hold nic->lock. */
void srn_mr_share_detach(struct srn_mr *mr);
/* The same at ibv_dereg_mr, after its key is removed and fenced: the
 * span's last region also puts the pages back on private anonymous
 * memory.  Takes the list lock; must not hold nic->lock (reads
 * /proc/self/maps). */
void srn_mr_share_release(struct srn_mr *mr);
/* [start, start+len) is being unmapped or replaced: spans in it are
 * dead.  Must hold the list lock (core/mr_map.c). */
void srn_mr_share_unmapping_locked(uintptr_t start, uintptr_t end);

#endif
