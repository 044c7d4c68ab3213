/*
 * memcheck.h - telling valgrind's memcheck about memory written behind
 * its back, as rdma-core's providers annotate what the kernel or the
 * hardware writes.
 *
 * memcheck tracks which bytes are defined by watching this process's
 * instructions and the system calls it knows.  Two writers it cannot see:
 *
 *  - the kernel, through an ioctl valgrind does not know (PROCMAP_QUERY
 *    fills a name buffer named by a pointer inside its argument);
 *  - a same-host peer placing an RDMA Write or an atomic straight into
 *    our registered memory (process_vm_writev from its side, or its
 *    mapping of our shared pages), as a NIC's DMA would.
 *
 * And one reader it should not judge: a NIC reads the payload of a
 * packet from the program's registered memory by DMA, unseen, so a
 * program that sends bytes it never wrote gets no report on hardware,
 * nor here on the same-host rings (a memcpy).  On the UDP link, in
 * direct placement and into a packet trace the payload goes through a
 * system call (sendmmsg, process_vm_writev, write), which memcheck
 * checks as if the program had made it, with a stack in our code.
 * Those calls run between SRN_DMA_READ_BEGIN and _END, and what is ours
 * in them (packet and trace headers, addresses, control messages, the
 * CM's MADs) is checked before with SRN_MEM_CHECK_DEFINED, which
 * reports any undefined byte as an error in our code.
 *
 * With <valgrind/memcheck.h> (Debian package `valgrind`; CMake defines
 * SRN_HAVE_VALGRIND when it finds it) these are memcheck's client
 * requests: a few instructions that do nothing outside valgrind.
 * Without the header they are no-ops.  Header only: diag/ is included by
 * both libraries and every layer above it.
 */
#ifndef SRN_DIAG_MEMCHECK_H
#define SRN_DIAG_MEMCHECK_H

#include <stddef.h>

#ifdef SRN_HAVE_VALGRIND
#include <valgrind/memcheck.h>
/* [p, p+n) now holds what the kernel or a peer wrote. */
#define SRN_MEM_DEFINED(p, n) ((void)VALGRIND_MAKE_MEM_DEFINED((p), (n)))
/* The same for the bytes of [p, p+n) the program may address; the rest
 * (heap redzones, freed blocks) stays unaddressable, so memcheck still
 * reports the program's own overruns there. */
#define SRN_MEM_DEFINED_IF_ADDRESSABLE(p, n) \
	((void)VALGRIND_MAKE_MEM_DEFINED_IF_ADDRESSABLE((p), (n)))
/* Bytes softrnic built itself must all be defined: else an error here. */
#define SRN_MEM_CHECK_DEFINED(p, n) ((void)VALGRIND_CHECK_MEM_IS_DEFINED((p), (n)))
/* memcheck reports nothing from this thread in between: put around one
 * system call that reads packets as a NIC's DMA would, nothing else. */
#define SRN_DMA_READ_BEGIN() VALGRIND_DISABLE_ERROR_REPORTING
#define SRN_DMA_READ_END() VALGRIND_ENABLE_ERROR_REPORTING
#else
#define SRN_MEM_DEFINED(p, n) ((void)(p), (void)(n))
#define SRN_MEM_DEFINED_IF_ADDRESSABLE(p, n) ((void)(p), (void)(n))
#define SRN_MEM_CHECK_DEFINED(p, n) ((void)(p), (void)(n))
#define SRN_DMA_READ_BEGIN() ((void)0)
#define SRN_DMA_READ_END() ((void)0)
#endif

#endif
