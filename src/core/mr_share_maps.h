/*
 * mr_share_maps.h - where a moved span's pages are now, and a forked
 * child's private copy of them (core/mr_share.c).
 *
 * A span's memfd stays mapped wherever the program takes its pages:
 * realloc and mremap grow or move the mapping without asking us (libc's
 * realloc uses its internal mremap), so the addresses the span was moved
 * to say little.  /proc/self/maps says where the memfd is mapped now.
 * Read with open/read and a stack buffer: no allocation, so it may run
 * under the mr_map list lock (an allocator's munmap would take it) and in
 * a forked child's atfork handler (AddressSanitizer's allocator is still
 * locked there).
 */
#ifndef SRN_CORE_MR_SHARE_MAPS_H
#define SRN_CORE_MR_SHARE_MAPS_H

#include <stdint.h>

/* The memfd name every span gets; requesters' mappings of other
 * processes' spans carry it too, but those are MADV_DONTFORK. */
#define SRN_MR_SHARE_NAME "softrnic-mr"

/* One mapping of a span's memfd. */
struct srn_span_map {
	uintptr_t start, end;
	uint64_t off;                  /* the file offset start maps */
	int prot;
};

/* Up to max shared mappings of the memfd with inode ino (ino 0: of any
 * memfd named SRN_MR_SHARE_NAME), in out.  The count, or -errno. */
int srn_span_maps_find(uint64_t ino, struct srn_span_map *out, int max);

/* Register, once, the fork child handler that gives a child a private
 * copy of every span mapping it inherited. */
void srn_span_maps_fork_once(void);

#endif
