/*
 * cnp_np.c - the notification point's CNP moderation (cnp_np.h).
 */
#include "transport/cnp_np.h"

bool srn_cnp_np_marked(struct srn_cnp_np *np, const struct srn_dcqcn_cfg *cfg, uint64_t now_ns)
{
	uint64_t gap = (uint64_t)cfg->min_time_between_cnps * 1000u;

	np->ecn_marked++;
	if (!cfg->np_enable)
		return false;
	/* The interval runs from the last CNP sent, not from the last mark:
	 * a steady stream of marks gets one CNP per interval, not none. */
	if (np->sent_any && now_ns - np->last_cnp_ns < gap)
		return false;
	np->sent_any = true;
	np->last_cnp_ns = now_ns;
	np->cnp_sent++;
	return true;
}
