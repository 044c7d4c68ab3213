/*
 * cc.c - DCQCN in the data path (cc.h).
 *
 * Notification point: a CE-marked packet for an RC/UC/XRC QP is counted
 * (np_ecn_marked_roce_packets) and, at most once per
 * min_time_between_cnps per QP (cnp_np.c), answered with a CNP to the
 * QP's peer QP (np_cnp_sent), built by wire/cnp.c and sent through the
 * same transmit queue as the QP's other packets.  UD QPs are counted but
 * get no CNP: their peers' reaction points could not pace a datagram QP
 * per destination.
 *
 * Reaction point: a CNP for one of our RC/UC/XRC QPs from that QP's peer
 * feeds its dcqcn machine (rp_cnp_handled); with the RP off, or for a QP
 * it does not pace, the CNP is counted as rp_cnp_ignored (mlx5: a CNP the
 * RP did not act on).  The machine's rate becomes the pacer's; the
 * requester asks the pacer before each packet (srn_cc_gate) and, told
 * to wait, parks the QP on the timer list until the credit is there.
 *
 * Invariants: qp->cc->paced iff the pacer has a rate (a limit, or the RP
 * below its ceiling); qp->cc_rate_mbps mirrors it for the diagnostic
 * slot; a QP with wake_ns or refresh_ns set is on the timer list.
 */
#include "transport/cc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/nic.h"
#include "core/qp.h"
#include "diag/clock.h"
#include "diag/shm.h"
#include "transport/dcqcn_env.h"
#include "transport/qp_count.h"
#include "transport/requester.h"
#include "transport/timers.h"
#include "transport/txq.h"
#include "wire/cnp.h"
#include "wire/opcode.h"
#include "wire/roce_hdr.h"

extern char **environ;

int srn_cc_dev_open(struct srn_nic *nic, char *err, size_t errlen)
{
	struct srn_cc_dev *d = calloc(1, sizeof(*d));
	if (!d) {
		snprintf(err, errlen, "%s: out of memory", nic->cfg.name);
		return -ENOMEM;
	}
	srn_dcqcn_cfg_default(&d->cfg);
	char msg[200];
	int rc = srn_dcqcn_cfg_env(&d->cfg, environ, msg, sizeof(msg));
	if (rc) {
		snprintf(err, errlen, "%s: %s", nic->cfg.name, msg);
		free(d);
		return rc;
	}
	nic->cc = d;
	return 0;
}

void srn_cc_dev_close(struct srn_nic *nic)
{
	free(nic->cc);
	nic->cc = NULL;
}

void srn_cc_qp_free(struct srn_qp *qp)
{
	free(qp->cc);
	qp->cc = NULL;
	qp->cc_rate_mbps = 0;
}

static struct srn_qp_cc *qp_cc(struct srn_qp *qp, uint64_t now)
{
	if (qp->cc)
		return qp->cc;
	struct srn_qp_cc *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL; /* congestion control is best effort: run unpaced */
	srn_dcqcn_init(&c->rp, &qp->nic->cc->cfg);
	srn_pacer_init(&c->pacer, 0, SRN_CC_BURST_BYTES, now);
	srn_cnp_np_init(&c->np);
	qp->cc = c;
	return c;
}

/* QPs whose requester the RP paces, and QPs whose peer has one. */
static bool paces(const struct srn_qp *qp)
{
	return qp->type == IBV_QPT_RC || qp->type == IBV_QPT_UC || qp->type == IBV_QPT_XRC_SEND;
}

static bool answers_ce(const struct srn_qp *qp)
{
	return paces(qp) || qp->type == IBV_QPT_XRC_RECV;
}

/* The pacer at a new rate.  Its bucket: the application's burst size,
 * else what SRN_CC_BURST_NS at the rate allows (at least
 * SRN_CC_BURST_BYTES), so a wake-up that comes late by that much (a
 * busy machine) loses no rate.  Credit earned is kept, up to the bucket. */
static void pace_at(struct srn_qp_cc *c, uint64_t rate, uint64_t now)
{
	uint64_t b = c->burst_bytes;
	if (!b) {
		b = rate / 8 * SRN_CC_BURST_NS / 1000000000ull;
		if (b < SRN_CC_BURST_BYTES)
			b = SRN_CC_BURST_BYTES;
	}
	bool starting = !c->pacer.rate_bps; /* starting: a full bucket from now */
	if (!starting)
		srn_pacer_set_rate(&c->pacer, rate, now);
	int64_t credit = c->pacer.credit;
	srn_pacer_init(&c->pacer, rate, b > UINT32_MAX ? UINT32_MAX : (uint32_t)b, now);
	if (!starting && credit < c->pacer.credit)
		c->pacer.credit = credit;
}

/* The pacer follows the machine: paced at its rate while it is cut or a
 * limit holds, unpaced otherwise.  Keeps the refresh visit. */
static void follow(struct srn_qp *qp, struct srn_qp_cc *c, uint64_t now)
{
	uint64_t rate = (c->rp.limited || c->limit_bps) ? srn_dcqcn_rate(&c->rp) : 0;
	if (rate != c->pacer.rate_bps) {
		if (rate)
			pace_at(c, rate, now);
		else
			c->pacer.rate_bps = 0;
		qp->cc_rate_mbps = (uint32_t)((rate + SRN_MBPS - 1) / SRN_MBPS);
	}
	c->paced = rate != 0;
	if (c->rp.limited) {
		if (!c->refresh_ns || c->refresh_ns <= now)
			c->refresh_ns = now + SRN_CC_REFRESH_NS;
	} else {
		c->refresh_ns = 0;
	}
	if (!c->paced)
		c->wake_ns = 0;
}

void srn_cc_rx_ce(struct srn_qp *qp)
{
	struct srn_nic *nic = qp->nic;
	srn_qp_count(qp, SRN_CNT_NP_ECN_MARKED, SRN_QPC_ECN_MARKED, 1);
	if (!nic->cc->cfg.np_enable || !answers_ce(qp))
		return;
	uint64_t now = srn_now_ns();
	struct srn_qp_cc *c = qp_cc(qp, now);
	if (!c || !srn_cnp_np_marked(&c->np, &nic->cc->cfg, now))
		return;
	uint8_t cnp[SRN_CNP_LEN];
	srn_cnp_build(cnp, qp->attr.dest_qp_num, SRN_DEFAULT_PKEY, &qp->path.tx_meta);
	/* The link seals its own ICRC: hand it the CNP without one.  A full
	 * same-host ring loses the CNP, as a congested wire may. */
	if (srn_txq_add(nic, (const struct sockaddr *)&qp->path.peer, qp->path.peer_len,
			&qp->path.tx_meta, cnp, SRN_CNP_LEN - SRN_ICRC_LEN, NULL, 0, 0) == 0)
		srn_qp_count(qp, SRN_CNT_NP_CNP_SENT, SRN_QPC_CNP_SENT, 1);
}

void srn_cc_rx_cnp(struct srn_nic *nic, struct srn_qp *qp, bool from_its_peer)
{
	/* A CNP for no QP of ours, one that is not sending, or not from its
	 * peer (a forged CNP must not slow a QP down): nothing to pace. */
	bool live = qp && (qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_SQD);
	if (!live || !paces(qp) || !from_its_peer || !nic->cc->cfg.rp_enable) {
		srn_count(nic->diag.cnt, SRN_CNT_RP_CNP_IGNORED, 1);
		return;
	}
	uint64_t now = srn_now_ns();
	struct srn_qp_cc *c = qp_cc(qp, now);
	if (!c) {
		srn_count(nic->diag.cnt, SRN_CNT_RP_CNP_IGNORED, 1);
		return;
	}
	srn_dcqcn_advance(&c->rp, &nic->cc->cfg, now);
	srn_dcqcn_cnp(&c->rp, &nic->cc->cfg, now);
	srn_qp_count(qp, SRN_CNT_RP_CNP_HANDLED, SRN_QPC_CNP_HANDLED, 1);
	follow(qp, c, now);
	srn_timer_cc(qp);
}

/* A QP without congestion-control state: free to go, unless the device
 * paces every QP at its line rate; then the QP gets its state, with the
 * line rate as its limit (the RP's ceiling already), and the gate. */
bool srn_cc_first_send(struct srn_qp *qp)
{
	const struct srn_dcqcn_cfg *cfg = &qp->nic->cc->cfg;
	if (!cfg->pace_line_rate || !paces(qp))
		return true;
	uint64_t now = srn_now_ns();
	struct srn_qp_cc *c = qp_cc(qp, now);
	if (!c)
		return true;
	uint64_t ceil = (cfg->rpg_max_rate ? cfg->rpg_max_rate : cfg->line_rate) * SRN_MBPS;
	c->limit_bps = ceil;
	srn_dcqcn_set_ceiling(&c->rp, cfg, ceil);
	follow(qp, c, now);
	/* A wire has saved nothing up when a QP starts: an empty bucket (one
	 * nanobit, so the first packet goes), else every QP of an incast
	 * opens with a bucketful at once. */
	if (c->paced)
		c->pacer.credit = 1;
	return !c->paced || srn_cc_gate(qp);
}

bool srn_cc_gate(struct srn_qp *qp)
{
	struct srn_qp_cc *c = qp->cc;
	if (c->wake_ns)
		return false; /* already waiting: the timer pushes it */
	uint64_t now = srn_now_ns();
	srn_dcqcn_advance(&c->rp, &qp->nic->cc->cfg, now);
	follow(qp, c, now);
	uint64_t wait = c->paced ? srn_pacer_wait_ns(&c->pacer, now) : 0;
	if (!wait)
		return true;
	c->wake_ns = now + wait;
	srn_timer_cc(qp);
	return false;
}

void srn_cc_sent(struct srn_qp *qp, uint32_t paylen)
{
	struct srn_qp_cc *c = qp->cc;
	if (!c->paced && !c->rp.limited)
		return;
	uint64_t now = srn_now_ns();
	uint32_t bytes = paylen + SRN_CC_PKT_OVERHEAD;
	srn_pacer_consume(&c->pacer, bytes, now);
	srn_dcqcn_sent(&c->rp, &qp->nic->cc->cfg, now, bytes);
}

uint64_t srn_cc_deadline(const struct srn_qp *qp)
{
	const struct srn_qp_cc *c = qp->cc;
	if (!c)
		return 0;
	if (c->wake_ns && c->refresh_ns)
		return c->wake_ns < c->refresh_ns ? c->wake_ns : c->refresh_ns;
	return c->wake_ns ? c->wake_ns : c->refresh_ns;
}

void srn_cc_expire(struct srn_qp *qp, uint64_t now)
{
	struct srn_qp_cc *c = qp->cc;
	if (!c)
		return;
	bool push = c->wake_ns && now >= c->wake_ns;
	if (push)
		c->wake_ns = 0;
	if (c->refresh_ns && now >= c->refresh_ns) {
		srn_dcqcn_advance(&c->rp, &qp->nic->cc->cfg, now);
		c->refresh_ns = 0;
		follow(qp, c, now);
	}
	if (push)
		srn_req_push(qp);
}

int srn_cc_set_rate_limit(struct srn_qp *qp, uint32_t kbps, uint32_t burst_bytes)
{
	uint64_t now = srn_now_ns();
	if (!kbps && !qp->cc)
		return 0; /* no limit, and never had one */
	struct srn_qp_cc *c = qp_cc(qp, now);
	if (!c)
		return -ENOMEM;
	c->limit_bps = (uint64_t)kbps * 1000;
	c->burst_bytes = burst_bytes;
	srn_dcqcn_set_ceiling(&c->rp, &qp->nic->cc->cfg, c->limit_bps);
	c->pacer.rate_bps = 0; /* restart the bucket at the new size */
	follow(qp, c, now);
	srn_timer_cc(qp);
	return 0;
}
