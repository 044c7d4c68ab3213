/*
 * nic.h - the engine of a device: it creates the nic on the first open of
 * the device, runs it (progress.c: who drives progress, the progress
 * thread) and destroys it on the last close.  Everything the engine does
 * to the transport happens here or in progress.c; core/nic.h holds the
 * state it works on.
 */
#ifndef SRN_ENGINE_NIC_H
#define SRN_ENGINE_NIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/nic.h"

struct srn_device;

/* Attach/detach a context to the device's nic (creating/destroying it). */
int srn_device_nic_get(struct srn_device *dev, struct srn_nic **nic);
void srn_device_nic_put(struct srn_device *dev);

int srn_nic_create(struct srn_device *dev, struct srn_nic **out, char *err, size_t errlen);
void srn_nic_destroy(struct srn_nic *nic);
/* The process is exiting with the nic open: send the ACKs it holds
 * (progress.c) if no thread cut off by the exit holds its lock, and print
 * the counters if SOFTRNIC_STATS asks for them. */
void srn_nic_exit_flush(struct srn_nic *nic);

/* Send what the transport queued, then release nic->lock: every path that
 * may have queued packets leaves the lock through here (transport/txq.h). */
void srn_nic_unlock(struct srn_nic *nic);

/* Progress (progress.c). */
int srn_progress_start(struct srn_nic *nic);
void srn_progress_stop(struct srn_nic *nic);
/* Who runs a progress pass: the progress thread; an application thread
 * polling its CQ (plain ACKs may wait for its next post or poll, and the
 * socket is asked only now and then while the rings carry the traffic);
 * or an application thread blocked for an event and woken by the socket
 * (wait.c: the socket is asked when it was readable, _RINGS when only
 * the rings' bell rang; ACKs may wait for its post). */
enum srn_poll_by { SRN_POLL_BG, SRN_POLL_APP, SRN_POLL_WAITER, SRN_POLL_WAITER_RINGS };
/* Receive and process what is waiting, then flush ACKs and deferred sends
 * and the transmit queue.  Must hold nic->lock.  Returns packets processed. */
int srn_progress_poll(struct srn_nic *nic, enum srn_poll_by by);
/* The same with the time the caller read under nic->lock (srn_now_ns):
 * an application's poll reads the clock once for its stamp and this. */
int srn_progress_poll_at(struct srn_nic *nic, enum srn_poll_by by, uint64_t now);
/* An application thread is about to block (e.g. in ibv_get_cq_event): let
 * the progress thread take over at once. */
void srn_progress_app_sleeps(struct srn_nic *nic);
/* SOFTRNIC_SPIN_US: how long the progress thread keeps polling after
 * socket traffic woke it (default 50 us, 0 = sleep at once, at most 0.1 s;
 * anything else gives the default). */
uint64_t srn_progress_spin_ns(const char *env);
/* Stamps and returns the time (srn_now_ns).  Called under nic->lock by
 * the polls, so the time also serves srn_progress_poll_at. */
uint64_t srn_progress_app_active(struct srn_nic *nic);
/* A poll that found its completions without receiving: held ACKs older
 * than SRN_ACK_HOLD_MAX_NS, or held across more than SRN_ACK_HOLD_LOOKS
 * such polls, leave now, so a CQ that keeps the application
 * busy cannot hold them for long.  Must hold nic->lock. */
void srn_progress_held_acks_due(struct srn_nic *nic, uint64_t now);
/* A poll() on the device socket just found it empty: count it as asked,
 * so application polls within the pacing gap do not ask again.  Must
 * hold nic->lock. */
void srn_progress_socket_seen_empty(struct srn_nic *nic);
/* Copy the fault injector's tallies into the device counters. */
void srn_nic_mirror_faults(struct srn_nic *nic);

#endif
