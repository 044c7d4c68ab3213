/*
 * wait.h - a thread blocked for a completion event serves the NIC itself
 * (wait.c), so one wake-up carries each hop.
 */
#ifndef SRN_ENGINE_WAIT_H
#define SRN_ENGINE_WAIT_H

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <time.h>

#include "core/nic.h"

struct srn_channel;
struct srn_cq;

/* Block until ch holds an event and take it (0), serving the socket and
 * the rings in this thread meanwhile.  -EINTR: a signal handler without
 * SA_RESTART ran.  -EOPNOTSUPP: this thread cannot serve the device now
 * (another thread does, or the device has sockets this wait does not
 * watch): wait the old way. */
int srn_wait_event(struct srn_nic *nic, struct srn_channel *ch, struct srn_cq **cq);

/* The same for a program that sleeps in its own poll or epoll on a set
 * holding a channel's fd (verbs/verbs_fdwait.c): poll app[0..napp) (at
 * most SRN_WAIT_FDS_MAX; an epoll fd is one) with the device's fds
 * beside them, serving the device in this thread when those wake it,
 * until one of the program's fds is ready (their count, revents set),
 * the timeout passes (0; < 0: none) or a signal comes (-EINTR: poll and
 * epoll_wait never restart).  real_ppoll is libc's ppoll, not an
 * interposed one; mask as ppoll's.  ready(arg), when not NULL, is asked
 * after each pass: true says the program's fd is ready now (app[0] gets
 * POLLIN) without another poll to learn it.  -EOPNOTSUPP: as above. */
#define SRN_WAIT_FDS_MAX 64
typedef int srn_ppoll_fn(struct pollfd *fds, nfds_t n, const struct timespec *tmo,
			 const sigset_t *mask);
typedef bool srn_wait_ready_fn(void *arg);
int srn_wait_fds(struct srn_nic *nic, struct pollfd *app, nfds_t napp, int timeout_ms,
		 const sigset_t *mask, srn_ppoll_fn *real_ppoll, srn_wait_ready_fn *ready, void *arg);

#endif
