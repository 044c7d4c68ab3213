/*
 * count.c - the CM's MADs in the device counters that `softrnic stat`
 * shows: by type (REQ .. SIDR_REP), sent, received, and received but
 * dropped; and MADs the parser refused.  The counters live in the nic's
 * diagnostic segment (diag/counters.h), reached through libibverbs.so.1's
 * private softrnic_cm_count.  srn_cm.cnt keeps the CM's own finer reasons.
 */
#include "cm/cm.h"

#include "diag/counters.h"

/* libibverbs.so.1's private entry point (src/verbs/verbs_gsi.c). */
void softrnic_cm_count(struct ibv_context *ctx, unsigned counter);

_Static_assert(SRN_CNT_CM_MALFORMED - SRN_CNT_CM_FIRST ==
	       (SRN_CM_ATTR_SIDR_REP - SRN_CM_ATTR_REQ + 1) * SRN_CM_COUNT_DIRS,
	       "three counters per MAD type from REQ to SIDR_REP, then malformed");

void srn_cm_count_mad(const struct srn_cm_dev *dev, uint16_t attr, enum srn_cm_count_dir dir)
{
	if (!dev || attr < SRN_CM_ATTR_REQ || attr > SRN_CM_ATTR_SIDR_REP)
		return;                /* LAP/APR and the rest: not counted by type */
	softrnic_cm_count(dev->ctx, SRN_CNT_CM_FIRST + (unsigned)(attr - SRN_CM_ATTR_REQ) * SRN_CM_COUNT_DIRS + dir);
}

void srn_cm_count_malformed(const struct srn_cm_dev *dev)
{
	softrnic_cm_count(dev->ctx, SRN_CNT_CM_MALFORMED);
}
