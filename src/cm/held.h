/*
 * held.h - REQs that found no listener wait a moment for one (held.c).
 * Must hold srn_cm.lock.
 */
#ifndef SRN_CM_HELD_H
#define SRN_CM_HELD_H

#include <stdint.h>

#include "cm/mad.h"

struct srn_cm_dev;

void srn_cm_held_add(struct srn_cm_dev *dev, const struct srn_cm_msg *m, const uint8_t gid[16]);
/* A listener appeared: held REQs it takes go to it. */
void srn_cm_held_replay(void);
/* REJ held REQs whose time is up; the next deadline (0 = none). */
uint64_t srn_cm_held_expire(uint64_t now);

#endif
