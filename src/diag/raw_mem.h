/*
 * raw_mem.h - the library's own mappings, made by system call.
 *
 * libibverbs.so.1 defines mmap and munmap for the program
 * (verbs/verbs_unmap.c: they revoke the regions a call takes pages
 * from).  The library's own rings, tables and segments are not the
 * program's memory: mapped through those definitions they would run
 * through the verbs layer from diag/ and link/, an arrow back up, and
 * take the region map's lock from inside the NIC.  So every mapping of
 * ours goes straight to the kernel.  Same results as libc's: MAP_FAILED
 * or -1 with errno.
 */
#ifndef SRN_DIAG_RAW_MEM_H
#define SRN_DIAG_RAW_MEM_H

#include <stddef.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static inline void *srn_raw_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

static inline int srn_raw_munmap(void *addr, size_t len)
{
	return (int)syscall(SYS_munmap, addr, len);
}

#endif
