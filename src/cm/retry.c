/*
 * retry.c - an id's MADs out: each carries the id's transaction ID, and
 * the one that awaits an answer is kept (last_mad) for the retry timer
 * and for answering a repeated request.  The connection protocol (conn.c)
 * and SIDR (sidr.c) share this; what an expired timer means is theirs
 * (srn_cm_expire, run by the CM thread's timers).  Must hold srn_cm.lock.
 */
#include "cm/retry.h"
#include "cm/qp1.h"

#include <errno.h>
#include <string.h>

void srn_cm_timer_arm(struct srn_cm_id *id, uint32_t ms, int retries)
{
	id->timeout_ms = ms;
	id->retries_left = retries;
	id->deadline_ns = srn_now_ns() + (uint64_t)ms * 1000000;
	srn_cm_kick();
}

void srn_cm_timer_stop(struct srn_cm_id *id)
{
	id->deadline_ns = 0;
	id->last_valid = false;
}

int srn_cm_send_msg(struct srn_cm_id *id, struct srn_cm_msg *m, bool keep)
{
	uint8_t mad[SRN_MAD_LEN];
	m->tid = id->tid;
	if (srn_cm_mad_build(m, mad))
		return -EINVAL;
	if (keep) {
		memcpy(id->last_mad, mad, sizeof(mad));
		id->last_valid = true;
	}
	int ret = srn_cm_send(id->dev, id->peer_gid, mad);
	return ret == -EAGAIN && keep ? 0 : ret;   /* the timer sends it again */
}
