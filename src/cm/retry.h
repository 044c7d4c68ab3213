/*
 * retry.h - an id's MADs out, and the timer that sends the one awaiting
 * an answer again (retry.c).  Must hold srn_cm.lock.
 */
#ifndef SRN_CM_RETRY_H
#define SRN_CM_RETRY_H

#include <stdbool.h>
#include <stdint.h>

#include "cm/cm_id.h"
#include "cm/mad.h"

/* Send m for id (tid set here); keep: remember it for the retry timer
 * and for answering a repeated request.  0 or -errno. */
int srn_cm_send_msg(struct srn_cm_id *id, struct srn_cm_msg *m, bool keep);
/* Send id's kept MAD again every ms, retries times, then expire it. */
void srn_cm_timer_arm(struct srn_cm_id *id, uint32_t ms, int retries);
void srn_cm_timer_stop(struct srn_cm_id *id);

#endif
