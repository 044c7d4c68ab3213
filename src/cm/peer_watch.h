/*
 * peer_watch.h - watch the process behind a same-host peer's device
 * (peer_watch.c).  Must hold srn_cm.lock.
 */
#ifndef SRN_CM_PEER_WATCH_H
#define SRN_CM_PEER_WATCH_H

#include <stdbool.h>
#include <sys/types.h>

#include "cm/cm_id.h"

void srn_cm_watch_peer(struct srn_cm_id *id);
/* An epoll event's pointer: if it is a watch, close it and return true;
 * *dead is the process that died, whose connections end now, or 0 (the
 * watch was closed after epoll_wait returned it). */
bool srn_cm_watch_fired(void *ptr, pid_t *dead);

#endif
