/*
 * caller_mem.h - reading and writing structs a verbs caller hands us.
 *
 * A caller may pack its structs: libiscsi posts struct ibv_sge arrays
 * that are not 8-byte aligned, and a packed caller may misalign a work
 * request, its chain or a bind info just as well.  Reading a field
 * through a misaligned struct pointer is undefined behaviour (C11
 * 6.3.2.3p7; the UBSan build aborts), so the verbs never read such a
 * struct in place: each is copied byte-wise into one of ours, which is
 * aligned, and read from there.  The copy takes its pointers as void *,
 * because a compiler may take a typed memcpy operand as aligned for its
 * type (clang marks memcpy(d, (struct ibv_sge *)p, 16) "align 8"); through
 * these helpers it is "align 1".  A 16-byte SGE is still two loads.
 *
 * Structs we allocate ourselves (the rings, a wr_* batch's staging) are
 * aligned and need none of this.
 */
#ifndef SRN_CORE_CALLER_MEM_H
#define SRN_CORE_CALLER_MEM_H

#include <stddef.h>
#include <string.h>

/* Copy n bytes the caller owns at src (any alignment; NULL when n is 0,
 * as an empty scatter list may be) into dst. */
static inline void srn_caller_read(void *dst, const void *src, size_t n)
{
	if (n)
		memcpy(dst, src, n);
}

/* Store n bytes from src into dst, which the caller owns (any alignment). */
static inline void srn_caller_write(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
}

#endif
