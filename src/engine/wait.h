/*
 * wait.h - a thread blocked for a completion event serves the NIC itself
 * (wait.c), so one wake-up carries each hop.
 */
#ifndef SRN_ENGINE_WAIT_H
#define SRN_ENGINE_WAIT_H

#include "core/nic.h"

struct srn_channel;
struct srn_cq;

/* Block until ch holds an event and take it (0), serving the socket and
 * the rings in this thread meanwhile.  -EINTR: a signal handler without
 * SA_RESTART ran.  -EOPNOTSUPP: this thread cannot serve the device now
 * (another thread does, or the device has sockets this wait does not
 * watch): wait the old way. */
int srn_wait_event(struct srn_nic *nic, struct srn_channel *ch, struct srn_cq **cq);

#endif
