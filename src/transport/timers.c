/*
 * timers.c - retransmission and RNR timers (policy lives here only).
 *
 * Armed QPs sit on nic->lists.timer; nic->lists.next_deadline caches the
 * earliest deadline so the progress loop's check is one comparison, and
 * the progress thread sleeps exactly until it.
 */
#include "transport/timers.h"

#include "core/nic.h"
#include "core/qp.h"
#include "link/shm.h"
#include "link/udp_group.h"
#include "transport/cc.h"
#include "transport/complete.h"
#include "transport/qp_count.h"
#include "transport/requester.h"
#include "wire/roce_hdr.h"

static uint64_t ack_timeout_ns(const struct srn_qp *qp)
{
	/* 4.096 us * 2^timeout; the 5-bit attribute is checked <= 31 at
	 * modify time.  Large values are kept: 2^31 * 4096 ns fits. */
	return 4096ull << qp->attr.timeout;
}

static void link_qp(struct srn_qp *qp)
{
	struct srn_nic *nic = qp->nic;
	if (!qp->comp.on_timer_list) {
		qp->comp.on_timer_list = true;
		qp->comp.timer_next = nic->lists.timer;
		nic->lists.timer = qp;
	}
	uint64_t d = qp->comp.ack_deadline;
	if (qp->comp.rnr_deadline && (!d || qp->comp.rnr_deadline < d))
		d = qp->comp.rnr_deadline;
	uint64_t cc = srn_cc_deadline(qp);
	if (cc && (!d || cc < d))
		d = cc;
	uint64_t cur = atomic_load_explicit(&nic->lists.next_deadline, memory_order_relaxed);
	if (d && (!cur || d < cur)) {
		atomic_store_explicit(&nic->lists.next_deadline, d, memory_order_relaxed);
		/* An application thread arming a timer while the progress
		 * thread sleeps with a later deadline, or none: without this
		 * a lost tail of a burst waited for the next packet to come. */
		srn_nic_deadline_set(nic, d);
	}
}

void srn_timer_sent(struct srn_qp *qp)
{
	if (qp->attr.timeout == 0 || qp->comp.ack_deadline)
		return;
	qp->comp.ack_deadline = srn_now_ns() + ack_timeout_ns(qp);
	link_qp(qp);
}

void srn_timer_progress(struct srn_qp *qp)
{
	qp->comp.retry_left = qp->attr.retry_cnt;
	qp->comp.rnr_left = qp->attr.rnr_retry;
	qp->comp.rewound = false;
	if (qp->comp.una == qp->req.psn_max || qp->attr.timeout == 0) {
		qp->comp.ack_deadline = 0;     /* nothing outstanding */
		return;
	}
	qp->comp.ack_deadline = srn_now_ns() + ack_timeout_ns(qp);
	link_qp(qp);
}

void srn_timer_rnr(struct srn_qp *qp, uint32_t psn, uint8_t timer_code)
{
	qp->comp.rnr_wait = true;
	qp->comp.rnr_psn = psn;
	qp->comp.ack_deadline = 0;
	qp->comp.rnr_deadline = srn_now_ns() + (uint64_t)srn_rnr_timer_usec(timer_code) * 1000;
	link_qp(qp);
}

void srn_timer_cc(struct srn_qp *qp)
{
	if (srn_cc_deadline(qp))
		link_qp(qp);
}

void srn_timer_stop(struct srn_qp *qp)
{
	qp->comp.ack_deadline = 0;
	qp->comp.rnr_deadline = 0;
	qp->comp.rnr_wait = false;
	if (qp->cc)
		qp->cc->wake_ns = qp->cc->refresh_ns = 0;
}

static void expire(struct srn_qp *qp, uint64_t now)
{
	if (qp->comp.rnr_deadline && now >= qp->comp.rnr_deadline) {
		qp->comp.rnr_deadline = 0;
		qp->comp.rnr_wait = false;
		srn_req_rewind(qp, qp->comp.rnr_psn);
		return;
	}
	if (qp->comp.ack_deadline && now >= qp->comp.ack_deadline && qp->req.blocked) {
		/* Transmission waits for room in a same-host ring whose owner
		 * is alive (link/shm.h: a dead one is detected and dropped):
		 * the peer is slow, not gone, and nothing was lost.  Wait on,
		 * as a NIC paused by PFC does, without spending a retry. */
		qp->comp.ack_deadline = now + ack_timeout_ns(qp);
		link_qp(qp);
		return;
	}
	if (qp->comp.ack_deadline && now >= qp->comp.ack_deadline &&
	    srn_shm_unread(&qp->nic->link.shm, (const struct sockaddr *)&qp->path.peer,
			   qp->path.peer_len, srn_qpn_member(qp->attr.dest_qp_num))) {
		/* What we sent still sits in a live same-host receiver's ring:
		 * it has not been scheduled yet (a busy 2-CPU host), and
		 * nothing was lost.  Resending would only add duplicates
		 * behind the originals, and ibv_rc_pingpong's 7 retries of
		 * 67 ms ran out this way at load 20.  Wait on, as for a full
		 * ring; a receiver that dies is seen by the route's owner
		 * check and its ring forgotten. */
		srn_count(qp->nic->diag.cnt, SRN_CNT_SHM_SLOW_PEER_WAITS, 1);
		qp->comp.ack_deadline = now + ack_timeout_ns(qp);
		link_qp(qp);
		return;
	}
	if (qp->comp.ack_deadline && now >= qp->comp.ack_deadline) {
		qp->comp.ack_deadline = 0;
		srn_qp_count(qp, SRN_CNT_LOCAL_ACK_TIMEOUT, SRN_QPC_LOCAL_ACK_TIMEOUT, 1);
		srn_req_retry(qp, qp->comp.una, "ACK timeout");
	}
}

void srn_timers_run(struct srn_nic *nic, uint64_t now)
{
	uint64_t next = atomic_load_explicit(&nic->lists.next_deadline, memory_order_relaxed);
	if (!next || now < next)
		return;
	/* Detach the list first: expiry may re-arm (and re-link) a QP. */
	struct srn_qp *list = nic->lists.timer;
	nic->lists.timer = NULL;
	atomic_store_explicit(&nic->lists.next_deadline, 0, memory_order_relaxed);
	while (list) {
		struct srn_qp *qp = list;
		list = qp->comp.timer_next;
		qp->comp.on_timer_list = false;
		bool live = qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_SQD;
		if (!live) {
			srn_timer_stop(qp);
			continue;
		}
		expire(qp, now);
		/* The pacer's wait and the rate machine's refresh. */
		srn_cc_expire(qp, now);
		if (qp->comp.ack_deadline || qp->comp.rnr_deadline || srn_cc_deadline(qp))
			link_qp(qp);
	}
}
