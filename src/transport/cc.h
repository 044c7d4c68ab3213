/*
 * cc.h - DCQCN wired into the transport (cc.c): the notification point
 * that answers CE-marked packets with CNPs, the reaction point that turns
 * CNPs into a QP's rate, the token bucket that holds the requester to it,
 * and QP rate limits (ibv_modify_qp_rate_limit).  The machines are the
 * pure ones (dcqcn.h, pacer.h, cnp_np.h); here they meet the clock, the
 * packets and the timer list.  docs/congestion.md has the rules.
 *
 * Cost when nothing is congested: a QP's state (qp->cc) is allocated the
 * first time the QP meets congestion control (a CE mark, a CNP, a rate
 * limit, or the first packet with pace_line_rate on); until then the
 * requester pays a NULL test and a call that reads one flag per packet,
 * and no clock read.  A QP whose rate recovered to the ceiling with no limit is
 * unpaced again (one more flag test).
 *
 * All functions must be called with nic->lock held.
 */
#ifndef SRN_TRANSPORT_CC_H
#define SRN_TRANSPORT_CC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core/qp.h"
#include "transport/cnp_np.h"
#include "transport/dcqcn.h"
#include "transport/pacer.h"

struct srn_nic;
struct srn_qp;

/* Eth + IPv4 + UDP + BTH + ICRC: what a packet costs the wire beyond its
 * payload, as the pacer counts it (extended headers are left out). */
#define SRN_CC_PKT_OVERHEAD (14 + 20 + 8 + 12 + 4)
/* Pacer bucket when the rate limit names none: what the rate allows in
 * SRN_CC_BURST_NS, so a wake-up that late (a busy 2-CPU machine) loses no
 * rate, and at least a few MTU packets, so a paced QP sends short
 * bursts, not one packet per timer tick. */
#define SRN_CC_BURST_NS 4000000ull
#define SRN_CC_BURST_BYTES (16u << 10)
/* While a QP is cut, how often the timer list revisits it so its rate
 * recovers even when it sends nothing (the machine itself is exact
 * however late it is advanced). */
#define SRN_CC_REFRESH_NS 1000000ull

struct srn_cc_dev {
	struct srn_dcqcn_cfg cfg; /* SOFTRNIC_DCQCN_* over mlx5's defaults */
};

struct srn_qp_cc {
	struct srn_dcqcn rp;    /* reaction point */
	struct srn_pacer pacer; /* rate_bps 0: not paced */
	struct srn_cnp_np np;   /* notification point */
	uint64_t limit_bps;     /* ibv_modify_qp_rate_limit, 0 = none */
	uint32_t burst_bytes;   /* the application's bucket, 0 = automatic */
	bool paced;             /* the pacer has a rate: check it per packet */
	uint64_t wake_ns;       /* the requester waits for credit until then, 0 = not */
	uint64_t refresh_ns;    /* next visit while the RP is cut, 0 = none */
};

/* Read SOFTRNIC_DCQCN_* for a new device (nic->cc).  0, or -EINVAL /
 * -ENOMEM with one line in err. */
int srn_cc_dev_open(struct srn_nic *nic, char *err, size_t errlen);
void srn_cc_dev_close(struct srn_nic *nic);
/* The QP goes away (or back to RESET): its state is freed. */
void srn_cc_qp_free(struct srn_qp *qp);

/* Receive side (rx.c).  A packet for qp came CE-marked: count it and,
 * moderated, send a CNP to the peer's QP. */
void srn_cc_rx_ce(struct srn_qp *qp);
/* A CNP arrived (parsed, its ICRC checked) for qp (NULL: no such QP);
 * from_its_peer: it came from the address the QP is connected to. */
void srn_cc_rx_cnp(struct srn_nic *nic, struct srn_qp *qp, bool from_its_peer);

/* Requester (requester.c): may the next packet leave now?  When not, the
 * QP is on the timer list and srn_cc_expire pushes it again. */
bool srn_cc_gate(struct srn_qp *qp);
bool srn_cc_first_send(struct srn_qp *qp);
static inline bool srn_cc_may_send(struct srn_qp *qp)
{
	if (!qp->cc)
		return srn_cc_first_send(qp);
	return !qp->cc->paced || srn_cc_gate(qp);
}
/* A packet of paylen payload bytes left. */
void srn_cc_sent(struct srn_qp *qp, uint32_t paylen);

/* Timers (timers.c): the QP's congestion-control deadline, 0 = none, and
 * what its expiry does. */
uint64_t srn_cc_deadline(const struct srn_qp *qp);
void srn_cc_expire(struct srn_qp *qp, uint64_t now);

/* ibv_modify_qp_rate_limit / IBV_QP_RATE_LIMIT: a ceiling in kb/s (0 =
 * none) and a bucket (0 = automatic, SRN_CC_BURST_NS).  0 or -ENOMEM. */
int srn_cc_set_rate_limit(struct srn_qp *qp, uint32_t kbps, uint32_t burst_bytes);

#endif /* SRN_TRANSPORT_CC_H */
