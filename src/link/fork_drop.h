/*
 * fork_drop.h - sockets and locks a forked child must not keep.
 *
 * fork() copies every descriptor, close-on-exec or not, so a child that
 * does not exec holds the device's UDP socket, forwarding socket and
 * member slot lock as long as it lives.  The parent's close then closes
 * nothing: a socket of a shared address stays in the kernel's
 * SO_REUSEPORT group at its index while the members' order file says it
 * left, the steering program sends the next member's packets into it,
 * and nobody reads them (a black hole for that process until the child
 * exits); a socket of its own keeps the address bound; the slot stays
 * locked.  A kernel NIC has none of this: a child's copy of the uverbs
 * fd steers nothing.
 *
 * So the child's copies are replaced, in a pthread_atfork child handler,
 * by /dev/null at the same numbers: the kernel objects are the parent's
 * alone, and the child's copy of our state still names descriptors that
 * are ours (a later close of the inherited device closes those).  The
 * child cannot use the parent's device anyway: it has no progress thread.
 *
 * Invariants: at most SRN_FORK_DROP_MAX descriptors at once (beyond that
 * add returns false and the descriptor is kept by children, as before);
 * the child handler uses async-signal-safe calls only and forgets every
 * entry (the numbers are the child's to reuse from then on).
 */
#ifndef SRN_LINK_FORK_DROP_H
#define SRN_LINK_FORK_DROP_H

#include <stdbool.h>

#define SRN_FORK_DROP_MAX 256

/* fd must not outlive the parent's use of it in a forked child. */
bool srn_fork_drop_add(int fd);
/* Before the parent closes fd (or gives up on it). */
void srn_fork_drop_del(int fd);

#endif
