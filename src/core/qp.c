/*
 * qp.c - QP lifetime and state transitions.
 *
 * The verbs layer has already checked the transition and the attribute
 * values (core/qp_rules.c); this file applies them: what each state change
 * does to the queues and the QP's fields.  What it sets off in the
 * transport (flushing, events, timers, transmission) is
 * transport/qp_effects.c, which calls srn_qp_apply.  Must hold nic->lock.
 */
#include "core/direct_pub.h"
#include "core/qp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>

#include "core/cq.h"
#include "core/nic.h"
#include "core/srq.h"
#include "link/udp.h"
#include "link/udp_ports.h"
#include "wire/roce_hdr.h"

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 1;
	while (p < n)
		p <<= 1;
	return p;
}

int srn_qp_alloc_queues(struct srn_qp *qp)
{
	qp->sq.size = pow2_at_least(qp->cap.max_send_wr ? qp->cap.max_send_wr : 1);
	if (srn_rq_init(&qp->rq, qp->cap.max_recv_wr, qp->cap.max_recv_sge))
		return -ENOMEM;
	qp->sq.wqe = calloc(qp->sq.size, sizeof(*qp->sq.wqe));
	qp->sq.sge = calloc((size_t)qp->sq.size * (qp->cap.max_send_sge ? qp->cap.max_send_sge : 1),
			    sizeof(struct ibv_sge));
	qp->sq.inline_buf = calloc((size_t)qp->sq.size *
				   (qp->cap.max_inline_data ? qp->cap.max_inline_data : 1), 1);
	if (!qp->sq.wqe || !qp->sq.sge || !qp->sq.inline_buf)
		return -ENOMEM;
	return 0;
}

void srn_qp_free_queues(struct srn_qp *qp)
{
	free(qp->resp.res);
	free(qp->sq.wr_stage);
	free(qp->sq.wqe);
	free(qp->sq.sge);
	free(qp->sq.inline_buf);
	srn_rq_fini(&qp->rq);
}

void srn_qp_bind_xrc_srq(struct srn_qp *qp, struct srn_srq *srq)
{
	if (qp->srq == srq)
		return;
	if (qp->srq)
		qp->srq->nqps--;
	if (srq)
		srq->nqps++;
	qp->srq = srq;
	qp->pd = srq ? srq->pd : NULL;
	qp->rcq = srq ? srq->cq : NULL;
}

/* Back to RESET: queues emptied without completions, transport state
 * forgotten (IBTA: a QP in RESET has no work requests). */
static void reset(struct srn_qp *qp)
{
	if (qp->type == IBV_QPT_XRC_RECV)
		srn_qp_bind_xrc_srq(qp, NULL);   /* no message in progress holds it */
	qp->sq.head = qp->req.cur = qp->sq.tail = 0;
	qp->sq.reset_gen++;
	qp->req.cur_off = 0;
	qp->req.cur_started = false;
	qp->rq.head = qp->rq.tail = 0;
	qp->resp.recv_valid = false;
	qp->req.psn = qp->comp.una = qp->req.psn_max = qp->req.next_psn = 0;
	qp->req.sent_end = 0;
	qp->req.pkts_since_ackreq = 0;
	qp->resp.epsn = qp->resp.msn = 0;
	qp->resp.in_msg = qp->resp.in_write = false;
	qp->resp.nak_sent = qp->resp.comm_est = false;
	qp->sq.drained_pending = false;
	qp->req.rd_atomic_inflight = 0;
	qp->comp.rewound = false;
	qp->comp.msn_from_peer = 0;     /* the peer's responder starts over too */
	qp->resp.tx_pending = false;
	if (qp->resp.res)
		memset(qp->resp.res, 0, qp->resp.res_size * sizeof(*qp->resp.res));
	memset(&qp->attr, 0, sizeof(qp->attr));
}

void srn_ip_meta_for(const struct srn_nic *nic, const struct sockaddr *dst, struct srn_ip_meta *m)
{
	memset(m, 0, sizeof(*m));
	m->family = nic->link.udp.family;
	m->sport = nic->link.udp.port;
	m->dport = nic->link.udp.port;
	if (m->family == AF_INET) {
		memcpy(m->src, &((const struct sockaddr_in *)&nic->link.udp.local)->sin_addr, 4);
		memcpy(m->dst, &((const struct sockaddr_in *)dst)->sin_addr, 4);
		m->ipv4_id = 0;         /* what Linux sends on this socket: link/udp.h */
		m->ipv4_frag = 0x4000;  /* DF */
	} else {
		memcpy(m->src, &((const struct sockaddr_in6 *)&nic->link.udp.local)->sin6_addr, 16);
		memcpy(m->dst, &((const struct sockaddr_in6 *)dst)->sin6_addr, 16);
	}
}

static int set_peer(struct srn_qp *qp, const struct ibv_ah_attr *ah)
{
	struct srn_nic *nic = qp->nic;
	int ret = srn_gid_to_sockaddr(ah->grh.dgid.raw, nic->link.udp.port, nic->link.udp.family,
				      &qp->path.peer, &qp->path.peer_len);
	if (ret)
		return -EINVAL;
	srn_ip_meta_for(nic, (const struct sockaddr *)&qp->path.peer, &qp->path.tx_meta);
	/* Its own UDP source port, for a fabric's ECMP (link/udp_ports.h);
	 * the destination stays the peer's device port. */
	qp->path.tx_meta.sport = srn_udp_port_for_qp(&nic->link.udp, qp->qpn);
	return 0;
}

/* Responder resources: at least max_dest_rd_atomic of them (the peer's
 * outstanding READs/atomics), doubled and rounded up to a power of two so
 * that re-executed duplicate READs (responder.c) do not push out an
 * atomic's saved result while its requester may still ask again. */
static int size_resources(struct srn_qp *qp, uint8_t n)
{
	uint32_t size = pow2_at_least(2u * (n ? n : 1));
	if (size == qp->resp.res_size)
		return 0;
	struct srn_resp_res *r = calloc(size, sizeof(*r));
	if (!r)
		return -ENOMEM;
	free(qp->resp.res);
	qp->resp.res = r;
	qp->resp.res_size = size;
	qp->resp.res_head = 0;
	return 0;
}

int srn_qp_apply(struct srn_qp *qp, const struct ibv_qp_attr *attr, int mask)
{
	enum ibv_qp_state cur = qp->state;
	enum ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;

	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && size_resources(qp, attr->max_dest_rd_atomic))
		return -ENOMEM;

	/* Resolve the address first: the only step that can fail, and
	 * nothing may change if it does. */
	if (mask & IBV_QP_AV) {
		struct sockaddr_storage save = qp->path.peer;
		socklen_t save_len = qp->path.peer_len;
		struct srn_ip_meta save_meta = qp->path.tx_meta;
		if (set_peer(qp, &attr->ah_attr)) {
			qp->path.peer = save;
			qp->path.peer_len = save_len;
			qp->path.tx_meta = save_meta;
			return -EINVAL;
		}
		qp->attr.ah_attr = attr->ah_attr;
		qp->path.peer_sport = 0;   /* a new peer: its port is learned anew */
	}
	if (next == IBV_QPS_RESET) {
		reset(qp);
		goto done;
	}
	if (mask & IBV_QP_PKEY_INDEX)
		qp->attr.pkey_index = attr->pkey_index;
	if (mask & IBV_QP_PORT)
		qp->attr.port_num = attr->port_num;
	if (mask & IBV_QP_QKEY)
		qp->attr.qkey = attr->qkey;
	if (mask & IBV_QP_ACCESS_FLAGS)
		qp->attr.qp_access_flags = attr->qp_access_flags;
	if ((mask & IBV_QP_PATH_MTU) && qp->type != IBV_QPT_UD) {
		qp->attr.path_mtu = attr->path_mtu;
		qp->path.mtu = srn_link_ib_mtu_bytes(attr->path_mtu);
	}
	if (mask & IBV_QP_TIMEOUT)
		qp->attr.timeout = attr->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		qp->comp.retry_left = qp->attr.retry_cnt = attr->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		qp->comp.rnr_left = qp->attr.rnr_retry = attr->rnr_retry;
	if (mask & IBV_QP_RQ_PSN) {
		qp->attr.rq_psn = attr->rq_psn & SRN_PSN_MASK;
		qp->resp.epsn = qp->attr.rq_psn;
	}
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		qp->attr.max_rd_atomic = attr->max_rd_atomic;
	if (mask & IBV_QP_ALT_PATH) {
		qp->attr.alt_ah_attr = attr->alt_ah_attr;
		qp->attr.alt_pkey_index = attr->alt_pkey_index;
		qp->attr.alt_port_num = attr->alt_port_num;
		qp->attr.alt_timeout = attr->alt_timeout;
	}
	if (mask & IBV_QP_MIN_RNR_TIMER)
		qp->attr.min_rnr_timer = attr->min_rnr_timer;
	if (mask & IBV_QP_SQ_PSN) {
		qp->attr.sq_psn = attr->sq_psn & SRN_PSN_MASK;
		qp->req.psn = qp->comp.una = qp->req.psn_max = qp->req.next_psn = qp->attr.sq_psn;
	}
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		qp->attr.max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IBV_QP_PATH_MIG_STATE)
		qp->attr.path_mig_state = attr->path_mig_state;
	if (mask & IBV_QP_DEST_QPN)
		qp->attr.dest_qp_num = attr->dest_qp_num & SRN_QPN_MASK;
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		qp->attr.en_sqd_async_notify = attr->en_sqd_async_notify;

done:
	memset(&qp->req.direct, 0, sizeof(qp->req.direct));   /* re-learnt (core/qp.h) */
	qp->state = next;
	qp->attr.qp_state = next;
	qp->ibqp_ex.qp_base.state = next;
	srn_direct_pub_qp(qp);
	return 0;
}
