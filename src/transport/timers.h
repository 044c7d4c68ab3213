/*
 * timers.h - the requester's two timers and their policy, in one place:
 * the local ACK timeout (4.096 us * 2^timeout, 0 = never; IBTA C9-140)
 * and the RNR wait.  The data path reports events; this file decides
 * when timers start, stop and what expiry does.  Must hold nic->lock.
 */
#ifndef SRN_TRANSPORT_TIMERS_H
#define SRN_TRANSPORT_TIMERS_H

#include <stdint.h>

struct srn_nic;
struct srn_qp;

/* A request packet left: start the ACK timer if it is not running (and
 * timeout is not 0).  It expires into go-back-N, except while the QP
 * waits for room in a same-host ring: then it waits on, unpaid. */
void srn_timer_sent(struct srn_qp *qp);
/* An ACK or response acknowledged something: the retry and RNR counts
 * are restored and the rewound mark cleared; the ACK timer restarts, or
 * stops when nothing is outstanding. */
void srn_timer_progress(struct srn_qp *qp);
/* Wait out an RNR NAK's timer, then resume at psn. */
void srn_timer_rnr(struct srn_qp *qp, uint32_t psn, uint8_t timer_code);
/* Stop both timers and the RNR wait (the QP leaves RTS/SQD, or its
 * retries are spent).  It may stay on the timer list: the next run
 * finds nothing armed and drops it. */
void srn_timer_stop(struct srn_qp *qp);
/* The QP's congestion-control deadline changed (transport/cc.h): put it
 * on the list if it has one. */
void srn_timer_cc(struct srn_qp *qp);
/* Fire what has expired. */
void srn_timers_run(struct srn_nic *nic, uint64_t now);

#endif
