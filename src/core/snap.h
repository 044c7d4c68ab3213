/*
 * snap.h - filling diagnostic slots from the live objects.
 *
 * This is the one place that knows both the core objects (srn_qp, srn_mr,
 * ...) and the slot layout (diag/seg_layout.h), so the data path never copies
 * fields itself: verbs call srn_diag_snap at the events that matter
 * (create, modify), the transport at an error (transport/explain.c), and
 * the engine refreshes every object at most every SRN_DIAG_TICK_NS
 * (engine/diag_tick.h).  Nothing here runs per packet.  Everything must
 * hold the device's nic->lock.
 */
#ifndef SRN_CORE_SNAP_H
#define SRN_CORE_SNAP_H

#include "diag/shm.h"

/* Copy the owner's current state into its slot (by o->kind; owner as
 * given to srn_diag_obj_add).  Sink objects and owner-less ones: nothing. */
void srn_diag_snap(struct srn_diag_obj *o);
/* Refresh every object now (before the application sleeps). */
void srn_diag_refresh(struct srn_diag *d);

#endif
