/*
 * thread.h - the top of the CM (thread.c): it opens the devices, and its
 * thread receives MADs, dispatches them and runs the timers.
 */
#ifndef SRN_CM_THREAD_H
#define SRN_CM_THREAD_H

/* Open every device and its QP1, start the CM thread (once).  Must hold
 * srn_cm.lock.  0 or -errno (the same at every later call). */
int srn_cm_init(void);

#endif
