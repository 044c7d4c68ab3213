/*
 * conn.c - the IBTA CM protocol for rdma_cm ids (RC/UC, IBTA 12.6-12.9):
 * REQ → REP → RTU to connect, REJ to refuse, MRA to ask for time, DREQ →
 * DREP to disconnect, then TIME_WAIT.  Which side sends what, the timeouts
 * and the QP attributes follow the kernel's ib_cm/rdma_cm and rdma-core's
 * librdmacm, so a kernel peer (rxe, RoCE NICs) can be on the other end.
 *
 * Timers: an id that waits for an answer keeps the MAD it sent; when its
 * deadline passes the MAD is sent again, up to max_cm_retries times, then
 * the connection fails (UNREACHABLE, or DISCONNECTED for a DREQ).
 * All functions here must hold srn_cm.lock.
 */
#include "cm/conn.h"
#include "cm/ids.h"
#include "cm/peer_watch.h"
#include "cm/ports.h"
#include "cm/qp1.h"
#include "cm/qp_attr.h"
#include "cm/retry.h"
#include "cm/sidr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "wire/roce_hdr.h"

/* 4.096 us × 2^t in milliseconds (at least 1). */
static uint32_t cm_ms(uint8_t t)
{
	uint64_t ms = (4096ull << (t > 31 ? 31 : t)) / 1000000;
	return ms ? (uint32_t)ms : 1;
}

static uint32_t rand24(void)
{
	uint32_t r = 0;
	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = (uint32_t)srn_now_ns();
	return r & 0xffffff;
}

/* A reply for a MAD that matches no id (a REJ to a REQ, a DREP to a DREQ):
 * to the sender's GID, its transaction ID, our comm ID 0. */
static void send_stateless(struct srn_cm_dev *dev, const uint8_t gid[16], struct srn_cm_msg *m)
{
	uint8_t mad[SRN_MAD_LEN];
	if (srn_cm_mad_build(m, mad) == 0)
		srn_cm_send(dev, gid, mad);
}

static struct srn_cm_id *by_local(uint32_t comm_id)
{
	for (struct srn_cm_id *id = srn_cm.ids; id; id = id->next)
		if (id->local_comm_id == comm_id && id->state >= SRN_CMS_REQ_SENT && !id->destroying)
			return id;
	return NULL;
}

/* A comm ID no id of ours uses, with the device's member number in its
 * top byte: MADs to it find this process behind a shared address. */
static uint32_t new_comm_id(const struct srn_cm_dev *dev)
{
	uint32_t c;
	do {
		srn_cm.next_comm_id += 2;
		c = srn_cm_comm_id(dev, srn_cm.next_comm_id);
	} while (c == 0 || by_local(c));
	return c;
}

static void set_conn_param(struct rdma_conn_param *c, uint8_t rr, uint8_t id, uint8_t fc,
			   uint8_t retry, uint8_t rnr, uint8_t srq, uint32_t qpn)
{
	c->responder_resources = rr;
	c->initiator_depth = id;
	c->flow_control = fc;
	c->retry_count = retry;
	c->rnr_retry_count = rnr;
	c->srq = srq;
	c->qp_num = qpn;
}

int srn_cm_connect(struct srn_cm_id *id, const struct rdma_conn_param *p)
{
	if (id->state != SRN_CMS_ROUTE_RESOLVED)
		return -EINVAL;
	if (id->id.qp_type == IBV_QPT_UD)
		return srn_cm_sidr_connect(id, p);
	enum ibv_qp_type t = id->id.qp_type;
	if (t != IBV_QPT_RC && t != IBV_QPT_UC && t != IBV_QPT_XRC_SEND)
		return -EOPNOTSUPP;
	if (p->private_data_len > SRN_CM_REQ_PDATA - SRN_CMA_HDR_LEN)
		return -EINVAL;
	struct srn_cm_msg m = { .attr = SRN_CM_ATTR_REQ };
	struct srn_cm_req *r = &m.req;
	id->local_comm_id = new_comm_id(id->dev);
	id->tid = (uint64_t)id->local_comm_id << 32 | rand24();
	id->recv_psn = rand24();
	id->retry_count = p->retry_count > 7 ? 7 : p->retry_count;
	if (!id->ack_timeout_set)
		id->ack_timeout = CMA_DEFAULT_ACK_TIMEOUT;
	id->mtu = id->dev->mtu;
	r->local_comm_id = id->local_comm_id;
	r->service_id = srn_cma_service_id((uint16_t)id->id.ps, ntohs(id->id.route.addr.dst_sin.sin_port));
	r->ca_guid = id->dev->guid;
	r->qpn = id->id.qp ? id->id.qp->qp_num : p->qp_num;
	/* An XRC send QP answers no requests: it offers no responder
	 * resources, and its target (not it) has the SRQs. */
	r->resp_res = t == IBV_QPT_XRC_SEND ? 0 : p->responder_resources;
	r->init_depth = p->initiator_depth;
	r->remote_cm_timeout = CMA_CM_RESPONSE_TIMEOUT;
	r->transport = t == IBV_QPT_UC ? SRN_CM_TRANSPORT_UC
		     : t == IBV_QPT_XRC_SEND ? SRN_CM_TRANSPORT_EXT : SRN_CM_TRANSPORT_RC;
	r->ext_transport = t == IBV_QPT_XRC_SEND ? SRN_CM_EXT_TRANSPORT_XRC : 0;
	r->flow_ctrl = p->flow_control ? 1 : 0;
	r->psn = id->recv_psn;
	r->local_cm_timeout = CMA_CM_RESPONSE_TIMEOUT;
	r->retry_count = id->retry_count;
	r->pkey = 0xffff;
	r->mtu = (uint8_t)id->mtu;
	r->rnr_retry = p->rnr_retry_count > SRN_RNR_RETRY_MAX ?
		SRN_RNR_RETRY_MAX : p->rnr_retry_count;
	r->max_cm_retries = CMA_MAX_CM_RETRIES;
	r->srq = t != IBV_QPT_XRC_SEND && (id->id.srq || (!id->id.qp && p->srq)) ? 1 : 0;
	r->local_lid = r->remote_lid = 0xffff;   /* permissive: RoCE is routed by GID */
	memcpy(r->local_gid, id->dev->gid, 16);
	memcpy(r->remote_gid, id->peer_gid, 16);
	r->traffic_class = id->tos;
	r->hop_limit = 64;
	r->ack_timeout = id->ack_timeout;
	if (srn_cma_hdr_build(r->pdata, &id->id.route.addr.src_addr, &id->id.route.addr.dst_addr))
		return -EINVAL;
	if (p->private_data_len)
		memcpy(r->pdata + SRN_CMA_HDR_LEN, p->private_data, p->private_data_len);
	id->state = SRN_CMS_REQ_SENT;
	int ret = srn_cm_send_msg(id, &m, true);
	if (ret) {
		id->state = SRN_CMS_ROUTE_RESOLVED;
		return ret;
	}
	srn_cm_timer_arm(id, 2 * cm_ms(CMA_PACKET_LIFETIME) + cm_ms(CMA_CM_RESPONSE_TIMEOUT),
			 CMA_MAX_CM_RETRIES);
	/* The peer is watched from its REP on: behind a shared address only
	 * its QPN says which process it is. */
	return 0;
}

int srn_cm_accept(struct srn_cm_id *id, const struct rdma_conn_param *p)
{
	if (id->id.qp_type == IBV_QPT_UD)
		return srn_cm_sidr_accept(id, p);
	if (id->state != SRN_CMS_REQ_RCVD)
		return -EINVAL;
	if (p->private_data_len > SRN_CM_REP_PDATA)
		return -EINVAL;
	id->resp_res = p->responder_resources == RDMA_MAX_RESP_RES ? id->resp_res : p->responder_resources;
	id->init_depth = p->initiator_depth == RDMA_MAX_INIT_DEPTH ? id->init_depth : p->initiator_depth;
	if (id->resp_res > id->dev->max_rd_atomic)
		id->resp_res = id->dev->max_rd_atomic;
	if (id->init_depth > id->dev->max_rd_atomic)
		id->init_depth = id->dev->max_rd_atomic;
	int ret = srn_cm_qp_to(id, IBV_QPS_RTR);
	if (!ret)
		ret = srn_cm_qp_to(id, IBV_QPS_RTS);
	if (ret)
		return ret;
	struct srn_cm_msg m = { .attr = SRN_CM_ATTR_REP };
	struct srn_cm_rep *r = &m.rep;
	r->local_comm_id = id->local_comm_id;
	r->remote_comm_id = id->remote_comm_id;
	uint32_t qpn = id->id.qp ? id->id.qp->qp_num : p->qp_num;
	/* An XRC target names its QP in the EECN field and always has SRQs
	 * (the kernel's cm_format_rep for XRC_TGT). */
	bool xrc = id->id.qp_type == IBV_QPT_XRC_RECV;
	r->qpn = xrc ? 0 : qpn;
	r->eecn = xrc ? qpn : 0;
	r->psn = id->recv_psn;
	r->resp_res = id->resp_res;
	r->init_depth = id->init_depth;
	r->target_ack_delay = 15;
	r->flow_ctrl = p->flow_control ? 1 : 0;
	r->rnr_retry = p->rnr_retry_count > SRN_RNR_RETRY_MAX ?
		SRN_RNR_RETRY_MAX : p->rnr_retry_count;
	r->srq = xrc || id->id.srq || (!id->id.qp && p->srq) ? 1 : 0;
	r->ca_guid = id->dev->guid;
	if (p->private_data_len)
		memcpy(r->pdata, p->private_data, p->private_data_len);
	id->listener = NULL;
	id->state = SRN_CMS_REP_SENT;
	ret = srn_cm_send_msg(id, &m, true);
	if (ret)
		return ret;
	srn_cm_timer_arm(id, 2 * cm_ms(CMA_PACKET_LIFETIME) + cm_ms(id->remote_cm_timeout),
			 id->max_cm_retries);
	return 0;
}

static void send_rej(struct srn_cm_id *id, uint8_t msg, uint16_t reason, const void *pd, uint8_t len)
{
	struct srn_cm_msg m = { .attr = SRN_CM_ATTR_REJ };
	m.rej.local_comm_id = id->local_comm_id;
	m.rej.remote_comm_id = id->remote_comm_id;
	m.rej.msg_rejected = msg;
	m.rej.reason = reason;
	if (len)
		memcpy(m.rej.pdata, pd, len);
	srn_cm_send_msg(id, &m, false);
}

int srn_cm_reject(struct srn_cm_id *id, const void *pdata, uint8_t len)
{
	if (id->id.qp_type == IBV_QPT_UD)
		return srn_cm_sidr_reject(id, pdata, len);
	if (len > SRN_CM_REJ_PDATA)
		return -EINVAL;
	if (id->state != SRN_CMS_REQ_RCVD && id->state != SRN_CMS_REP_RCVD)
		return -EINVAL;
	send_rej(id, id->state == SRN_CMS_REQ_RCVD ? SRN_CM_MSG_REQ : SRN_CM_MSG_REP,
		 SRN_CM_REJ_CONSUMER_DEFINED, pdata, len);
	id->listener = NULL;
	srn_cm_timer_stop(id);
	id->state = SRN_CMS_DISCONNECTED;
	return 0;
}

static int send_rtu(struct srn_cm_id *id)
{
	struct srn_cm_msg m = { .attr = SRN_CM_ATTR_RTU };
	m.ids.local_comm_id = id->local_comm_id;
	m.ids.remote_comm_id = id->remote_comm_id;
	return srn_cm_send_msg(id, &m, false);
}

int srn_cm_establish(struct srn_cm_id *id)
{
	if (id->state != SRN_CMS_REP_RCVD)
		return -EINVAL;
	int ret = srn_cm_qp_to(id, IBV_QPS_RTR);
	if (!ret && id->id.qp)
		ret = srn_cm_qp_to(id, IBV_QPS_RTS);
	if (ret)
		return ret;
	id->state = SRN_CMS_ESTABLISHED;
	return send_rtu(id);
}

static void enter_timewait(struct srn_cm_id *id)
{
	srn_cm_timer_stop(id);
	id->state = SRN_CMS_TIMEWAIT;
	srn_cm_timer_arm(id, cm_ms(id->ack_timeout ? id->ack_timeout : CMA_DEFAULT_ACK_TIMEOUT), 0);
}

static void send_drep(struct srn_cm_id *id)
{
	struct srn_cm_msg m = { .attr = SRN_CM_ATTR_DREP };
	m.ids.local_comm_id = id->local_comm_id;
	m.ids.remote_comm_id = id->remote_comm_id;
	srn_cm_send_msg(id, &m, false);
}

static int send_dreq(struct srn_cm_id *id)
{
	struct srn_cm_msg m = { .attr = SRN_CM_ATTR_DREQ };
	m.ids.local_comm_id = id->local_comm_id;
	m.ids.remote_comm_id = id->remote_comm_id;
	m.ids.qpn = id->remote_qpn;
	id->state = SRN_CMS_DREQ_SENT;
	int ret = srn_cm_send_msg(id, &m, true);
	srn_cm_timer_arm(id, 2 * cm_ms(CMA_PACKET_LIFETIME) + cm_ms(CMA_CM_RESPONSE_TIMEOUT),
			 CMA_MAX_CM_RETRIES);
	return ret;
}

int srn_cm_disconnect(struct srn_cm_id *id)
{
	if (id->id.qp_type == IBV_QPT_UD)
		return srn_cm_sidr_disconnect(id);
	srn_cm_qp_to(id, IBV_QPS_ERR);
	switch (id->state) {
	case SRN_CMS_ESTABLISHED:
	case SRN_CMS_REP_SENT:         /* RTU may be lost: the peer may be established */
		srn_cm_timer_stop(id);
		return send_dreq(id);
	case SRN_CMS_DREQ_RCVD:
		send_drep(id);
		enter_timewait(id);
		return 0;
	case SRN_CMS_DREQ_SENT:
	case SRN_CMS_TIMEWAIT:
	case SRN_CMS_DISCONNECTED:
		return 0;
	default:
		return -EINVAL;
	}
}

void srn_cm_abort(struct srn_cm_id *id)
{
	if (id->id.qp_type == IBV_QPT_UD) {
		srn_cm_sidr_abort(id);
		return;
	}
	switch (id->state) {
	case SRN_CMS_REQ_SENT:
		send_rej(id, SRN_CM_MSG_REQ, SRN_CM_REJ_TIMEOUT, NULL, 0);
		break;
	case SRN_CMS_REQ_RCVD:
		send_rej(id, SRN_CM_MSG_REQ, SRN_CM_REJ_CONSUMER_DEFINED, NULL, 0);
		break;
	case SRN_CMS_REP_RCVD:
		send_rej(id, SRN_CM_MSG_REP, SRN_CM_REJ_CONSUMER_DEFINED, NULL, 0);
		break;
	case SRN_CMS_REP_SENT:
	case SRN_CMS_ESTABLISHED: {
		struct srn_cm_msg m = { .attr = SRN_CM_ATTR_DREQ };
		m.ids.local_comm_id = id->local_comm_id;
		m.ids.remote_comm_id = id->remote_comm_id;
		m.ids.qpn = id->remote_qpn;
		srn_cm_send_msg(id, &m, false);
		break;
	}
	case SRN_CMS_DREQ_RCVD:
		send_drep(id);
		break;
	default:
		break;
	}
	id->listener = NULL;
	srn_cm_timer_stop(id);
	id->state = SRN_CMS_DISCONNECTED;
}

/* ---- receiving ---- */

/* The MAD srn_cm_conn_mad is handling, for the drop counters; dev is NULL
 * while a handler runs for something that did not arrive (a dead peer's
 * synthesized DREQ, a held REQ replayed). */
static struct { const struct srn_cm_dev *dev; uint16_t attr; } rx_cur;

static void rx_drop(enum srn_cm_cnt why)
{
	srn_cm.cnt[why]++;
	srn_cm_count_mad(rx_cur.dev, rx_cur.attr, SRN_CM_COUNT_DROPPED);
}

void srn_cm_rej_req(struct srn_cm_dev *dev, const uint8_t gid[16], const struct srn_cm_msg *in,
		    uint16_t reason)
{
	struct srn_cm_msg m = { .attr = SRN_CM_ATTR_REJ, .tid = in->tid };
	m.rej.remote_comm_id = in->req.local_comm_id;
	m.rej.msg_rejected = SRN_CM_MSG_REQ;
	m.rej.reason = reason;
	send_stateless(dev, gid, &m);
}

/* A REQ we know (retransmitted): say we are working on it (MRA), or send
 * our REP again.  True when it was one. */
static bool req_again(struct srn_cm_dev *dev, const struct srn_cm_req *r, const uint8_t gid[16])
{
	for (struct srn_cm_id *id = srn_cm.ids; id; id = id->next) {
		if (id->destroying || id->remote_comm_id != r->local_comm_id ||
		    memcmp(id->peer_gid, gid, 16) != 0 || id->state < SRN_CMS_REQ_RCVD)
			continue;
		if (id->state == SRN_CMS_REQ_RCVD) {
			struct srn_cm_msg a = { .attr = SRN_CM_ATTR_MRA };
			a.mra.local_comm_id = id->local_comm_id;
			a.mra.remote_comm_id = id->remote_comm_id;
			a.mra.msg_mraed = SRN_CM_MSG_REQ;
			a.mra.service_timeout = CMA_MRA_SERVICE_TIMEOUT;
			srn_cm_send_msg(id, &a, false);
		} else if (id->state == SRN_CMS_REP_SENT && id->last_valid) {
			srn_cm_send(dev, gid, id->last_mad);
		}
		return true;
	}
	return false;
}

/* What the passive side's new id takes from the REQ. */
static void child_from_req(struct srn_cm_id *id, const struct srn_cm_dev *dev,
			   const struct srn_cm_msg *m, enum ibv_qp_type qpt)
{
	const struct srn_cm_req *r = &m->req;
	id->local_comm_id = new_comm_id(dev);
	id->remote_comm_id = r->local_comm_id;
	id->tid = m->tid;
	id->remote_qpn = r->qpn;
	id->send_psn = r->psn;
	/* Drawn now, not at accept: a program may move its QP to RTR with
	 * rdma_init_qp_attr before it accepts. */
	id->recv_psn = rand24();
	id->resp_res = r->init_depth;
	id->init_depth = qpt == IBV_QPT_XRC_RECV ? 0 : r->resp_res;   /* a target sends no reads */
	id->retry_count = r->retry_count;
	id->rnr_retry = r->rnr_retry;
	id->ack_timeout = r->ack_timeout ? r->ack_timeout : CMA_DEFAULT_ACK_TIMEOUT;
	id->mtu = r->mtu < dev->mtu ? (enum ibv_mtu)r->mtu : dev->mtu;
	id->remote_cm_timeout = r->local_cm_timeout;
	id->max_cm_retries = r->max_cm_retries;
	id->tos = r->traffic_class;
}

int srn_cm_req_in(struct srn_cm_dev *dev, const struct srn_cm_msg *m, const uint8_t gid[16])
{
	const struct srn_cm_req *r = &m->req;
	if (req_again(dev, r, gid))
		return 0;
	struct srn_cma_hdr h;
	struct srn_cm_id *l;
	int why = srn_cm_listener_take(dev, r->service_id, r->pdata, sizeof(r->pdata), &h, &l);
	if (why == -ENOENT && (r->service_id & SRN_CMA_SID_PREFIX_MASK) == SRN_CMA_SID_PREFIX)
		return -ENOENT;        /* nobody listens yet: held (held.c) */
	if (why == -ENOBUFS) {
		/* As the kernel: ucma refuses the CONNECT_REQUEST (-ENOMEM) and
		 * ib_cm drops the REQ unanswered "to allow future retries"; the
		 * requester sends it again after its CM response timeout. */
		srn_cm.cnt[SRN_CM_CNT_REQ_BACKLOG_DROP]++;
		srn_cm_count_mad(dev, SRN_CM_ATTR_REQ, SRN_CM_COUNT_DROPPED);
		return 0;
	}
	if (why) {
		srn_cm_rej_req(dev, gid, m, why == -ENOENT ? SRN_CM_REJ_INVALID_SERVICE_ID
							   : SRN_CM_REJ_CONSUMER_DEFINED);
		return 0;
	}
	/* The REQ's transport names the passive QP's type (the kernel's
	 * cm_req_get_qp_type): an XRC initiator is answered by an XRC target. */
	enum ibv_qp_type qpt = r->transport == SRN_CM_TRANSPORT_UC ? IBV_QPT_UC
			     : r->transport == SRN_CM_TRANSPORT_EXT ? IBV_QPT_XRC_RECV : IBV_QPT_RC;
	struct srn_cm_id *id = srn_cm_child_new(l, dev, &h, gid, qpt);
	if (!id) {
		srn_cm_rej_req(dev, gid, m, SRN_CM_REJ_CONSUMER_DEFINED);
		return 0;
	}
	child_from_req(id, dev, m, qpt);
	id->state = SRN_CMS_REQ_RCVD;
	id->listener = l;
	srn_cm_fill_path(id, id->mtu);
	struct srn_cm_event *e = srn_cm_event_queue(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0,
						    r->pdata + SRN_CMA_HDR_LEN,
						    SRN_CM_REQ_PDATA - SRN_CMA_HDR_LEN);
	if (!e) {
		srn_cm_abort(id);
		srn_cm_id_free(id);
		return 0;
	}
	l->pending++;                  /* until the event is fetched (ids.c) */
	srn_cm_watch_peer(id);
	e->ev.listen_id = &l->id;
	set_conn_param(&e->ev.param.conn, r->init_depth, r->resp_res, r->flow_ctrl, r->retry_count,
		       r->rnr_retry, r->srq, r->qpn);
	return 0;
}

static void on_rep(const struct srn_cm_msg *m)
{
	const struct srn_cm_rep *r = &m->rep;
	struct srn_cm_id *id = by_local(r->remote_comm_id);
	if (!id) {
		rx_drop(SRN_CM_CNT_RX_NO_CONN);
		return;
	}
	if (id->state == SRN_CMS_ESTABLISHED && id->remote_comm_id == r->local_comm_id) {
		send_rtu(id);          /* our RTU was lost: the peer sends REP again */
		return;
	}
	if (id->state != SRN_CMS_REQ_SENT) {
		rx_drop(SRN_CM_CNT_RX_WRONG_STATE);
		return;
	}
	srn_cm_timer_stop(id);
	id->remote_comm_id = r->local_comm_id;
	/* An XRC target's QPN comes in the EECN field (cm_rep_get_qpn). */
	id->remote_qpn = id->id.qp_type == IBV_QPT_XRC_SEND ? r->eecn : r->qpn;
	id->send_psn = r->psn;
	id->resp_res = r->init_depth;
	id->init_depth = r->resp_res;
	id->rnr_retry = r->rnr_retry;
	srn_cm_watch_peer(id);
	struct rdma_conn_param cp = { 0 };
	set_conn_param(&cp, r->init_depth, r->resp_res, r->flow_ctrl, 0, r->rnr_retry, r->srq, id->remote_qpn);
	if (!id->id.qp) {
		id->state = SRN_CMS_REP_RCVD;
		struct srn_cm_event *e = srn_cm_event_queue(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0,
							    r->pdata, SRN_CM_REP_PDATA);
		if (e)
			e->ev.param.conn = (struct rdma_conn_param){ .private_data = e->ev.param.conn.private_data,
				.private_data_len = e->ev.param.conn.private_data_len,
				.responder_resources = cp.responder_resources, .initiator_depth = cp.initiator_depth,
				.flow_control = cp.flow_control, .rnr_retry_count = cp.rnr_retry_count,
				.srq = cp.srq, .qp_num = cp.qp_num };
		return;
	}
	int ret = srn_cm_qp_to(id, IBV_QPS_RTR);
	if (!ret)
		ret = srn_cm_qp_to(id, IBV_QPS_RTS);
	if (ret) {
		send_rej(id, SRN_CM_MSG_REP, SRN_CM_REJ_CONSUMER_DEFINED, NULL, 0);
		id->state = SRN_CMS_DISCONNECTED;
		srn_cm_event_queue(id, RDMA_CM_EVENT_CONNECT_ERROR, ret, NULL, 0);
		return;
	}
	id->state = SRN_CMS_ESTABLISHED;
	send_rtu(id);
	struct srn_cm_event *e = srn_cm_event_queue(id, RDMA_CM_EVENT_ESTABLISHED, 0, r->pdata,
						    SRN_CM_REP_PDATA);
	if (e) {
		const void *pd = e->ev.param.conn.private_data;
		uint8_t pl = e->ev.param.conn.private_data_len;
		e->ev.param.conn = cp;
		e->ev.param.conn.private_data = pd;
		e->ev.param.conn.private_data_len = pl;
	}
}

static void on_rtu(const struct srn_cm_msg *m)
{
	struct srn_cm_id *id = by_local(m->ids.remote_comm_id);
	if (!id || id->remote_comm_id != m->ids.local_comm_id) {
		rx_drop(SRN_CM_CNT_RX_NO_CONN);
		return;
	}
	if (id->state != SRN_CMS_REP_SENT) {
		rx_drop(SRN_CM_CNT_RX_WRONG_STATE);
		return;
	}
	srn_cm_timer_stop(id);
	id->state = SRN_CMS_ESTABLISHED;
	srn_cm_event_queue(id, RDMA_CM_EVENT_ESTABLISHED, 0, m->ids.pdata, SRN_CM_RTU_PDATA);
}

static void on_rej(const struct srn_cm_msg *m)
{
	const struct srn_cm_rej *r = &m->rej;
	struct srn_cm_id *id = by_local(r->remote_comm_id);
	if (!id) {
		rx_drop(SRN_CM_CNT_RX_NO_CONN);
		return;
	}
	/* Before the REP the REJ cannot name the peer's comm ID; after it,
	 * it must (12.6.7). */
	if (id->state != SRN_CMS_REQ_SENT && id->remote_comm_id != r->local_comm_id) {
		rx_drop(SRN_CM_CNT_RX_NO_CONN);
		return;
	}
	switch (id->state) {
	case SRN_CMS_REQ_SENT:
	case SRN_CMS_REP_RCVD:
	case SRN_CMS_REP_SENT:
	case SRN_CMS_ESTABLISHED:
		break;
	default:
		rx_drop(SRN_CM_CNT_RX_WRONG_STATE);
		return;
	}
	srn_cm_timer_stop(id);
	srn_cm_qp_to(id, IBV_QPS_ERR);
	id->state = SRN_CMS_DISCONNECTED;
	srn_cm_event_queue(id, RDMA_CM_EVENT_REJECTED, r->reason, r->pdata, SRN_CM_REJ_PDATA);
}

static void on_mra(const struct srn_cm_msg *m)
{
	struct srn_cm_id *id = by_local(m->mra.remote_comm_id);
	if (!id) {
		rx_drop(SRN_CM_CNT_RX_NO_CONN);
		return;
	}
	bool ok = (id->state == SRN_CMS_REQ_SENT && m->mra.msg_mraed == SRN_CM_MSG_REQ) ||
		  (id->state == SRN_CMS_REP_SENT && m->mra.msg_mraed == SRN_CM_MSG_REP);
	if (!ok) {
		rx_drop(SRN_CM_CNT_RX_WRONG_STATE);
		return;
	}
	/* 12.6.6: the peer needs its service timeout; wait that long before
	 * sending again, with the retries left. */
	id->deadline_ns = srn_now_ns() +
		(uint64_t)(2 * cm_ms(CMA_PACKET_LIFETIME) + cm_ms(m->mra.service_timeout)) * 1000000;
}

static void on_dreq(struct srn_cm_dev *dev, const struct srn_cm_msg *m, const uint8_t gid[16])
{
	struct srn_cm_id *id = by_local(m->ids.remote_comm_id);
	if (!id || id->remote_comm_id != m->ids.local_comm_id) {
		/* 12.9.8.3: a DREQ for a connection we do not have gets its DREP. */
		struct srn_cm_msg d = { .attr = SRN_CM_ATTR_DREP, .tid = m->tid };
		d.ids.local_comm_id = m->ids.remote_comm_id;
		d.ids.remote_comm_id = m->ids.local_comm_id;
		send_stateless(dev, gid, &d);
		srn_cm.cnt[SRN_CM_CNT_RX_NO_CONN]++;   /* answered, not dropped */
		return;
	}
	switch (id->state) {
	case SRN_CMS_REP_SENT:
	case SRN_CMS_ESTABLISHED:
		srn_cm_timer_stop(id);
		id->state = SRN_CMS_DREQ_RCVD;
		srn_cm_event_queue(id, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
		return;
	case SRN_CMS_DREQ_SENT:        /* both ends disconnect at once */
		send_drep(id);
		enter_timewait(id);
		srn_cm_event_queue(id, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
		return;
	case SRN_CMS_TIMEWAIT:
	case SRN_CMS_DISCONNECTED:
		send_drep(id);         /* our DREP was lost */
		return;
	default:
		rx_drop(SRN_CM_CNT_RX_WRONG_STATE);
	}
}

static void on_drep(const struct srn_cm_msg *m)
{
	struct srn_cm_id *id = by_local(m->ids.remote_comm_id);
	if (!id || id->remote_comm_id != m->ids.local_comm_id) {
		rx_drop(SRN_CM_CNT_RX_NO_CONN);
		return;
	}
	if (id->state != SRN_CMS_DREQ_SENT) {
		rx_drop(SRN_CM_CNT_RX_WRONG_STATE);
		return;
	}
	enter_timewait(id);
	srn_cm_event_queue(id, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
}

int srn_cm_conn_mad(struct srn_cm_dev *dev, const struct srn_cm_msg *m, const uint8_t gid[16])
{
	int ret = 0;
	rx_cur.dev = dev;
	rx_cur.attr = m->attr;
	switch (m->attr) {
	case SRN_CM_ATTR_REQ: ret = srn_cm_req_in(dev, m, gid); break;
	case SRN_CM_ATTR_REP: on_rep(m); break;
	case SRN_CM_ATTR_RTU: on_rtu(m); break;
	case SRN_CM_ATTR_REJ: on_rej(m); break;
	case SRN_CM_ATTR_MRA: on_mra(m); break;
	case SRN_CM_ATTR_DREQ: on_dreq(dev, m, gid); break;
	case SRN_CM_ATTR_DREP: on_drep(m); break;
	case SRN_CM_ATTR_SIDR_REQ:
	case SRN_CM_ATTR_SIDR_REP: srn_cm_sidr_recv(dev, m, gid); break;
	}
	rx_cur.dev = NULL;
	return ret;
}

/* The peer's process died (peer_watch.c): what its kernel would have sent
 * when it closed its ids arrives now, as if from the peer.  An established
 * connection gets a DREQ (DISCONNECTED), one we wait on a REP or an RTU
 * for gets a REJ (REJECTED).  A CONNECT_REQUEST not yet answered is left
 * to the timer: accepting it finds no peer (UNREACHABLE). */
void srn_cm_peer_died(struct srn_cm_id *id)
{
	struct srn_cm_msg m = { 0 };
	if (id->id.qp_type == IBV_QPT_UD)
		return;                /* SIDR holds no connection to end */
	switch (id->state) {
	case SRN_CMS_ESTABLISHED:
	case SRN_CMS_DREQ_SENT:
		m.attr = SRN_CM_ATTR_DREQ;
		m.ids.local_comm_id = id->remote_comm_id;
		m.ids.remote_comm_id = id->local_comm_id;
		on_dreq(id->dev, &m, id->peer_gid);
		return;
	case SRN_CMS_REQ_SENT:
	case SRN_CMS_REP_SENT:
	case SRN_CMS_REP_RCVD:
		m.attr = SRN_CM_ATTR_REJ;
		m.rej.local_comm_id = id->remote_comm_id;
		m.rej.remote_comm_id = id->local_comm_id;
		m.rej.msg_rejected = id->state == SRN_CMS_REQ_SENT ? SRN_CM_MSG_REQ : SRN_CM_MSG_REP;
		m.rej.reason = SRN_CM_REJ_CONSUMER_DEFINED;
		on_rej(&m);
		return;
	default:
		return;
	}
}

/* The process exits: as the kernel does when it closes a process's
 * rdma_cm file, every connection is ended on the wire (DREQ, REJ), so
 * peers see DISCONNECTED or REJECTED now, not after their timeouts. */
void srn_cm_exit_abort(void)
{
	for (struct srn_cm_id *id = srn_cm.ids; id; id = id->next)
		if (!id->destroying)
			srn_cm_abort(id);
}

void srn_cm_expire(struct srn_cm_id *id)
{
	if (id->state == SRN_CMS_TIMEWAIT) {
		id->deadline_ns = 0;
		id->state = SRN_CMS_DISCONNECTED;
		srn_cm_event_queue(id, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0, NULL, 0);
		return;
	}
	if (id->retries_left > 0 && id->last_valid) {
		id->retries_left--;
		srn_cm.cnt[SRN_CM_CNT_RETRIES]++;
		srn_cm_send(id->dev, id->peer_gid, id->last_mad);
		id->deadline_ns = srn_now_ns() + (uint64_t)id->timeout_ms * 1000000;
		return;
	}
	if (id->id.qp_type == IBV_QPT_UD) {
		srn_cm_sidr_expire(id);
		return;
	}
	enum srn_cm_state s = id->state;
	srn_cm_timer_stop(id);
	if (s == SRN_CMS_DREQ_SENT) {
		enter_timewait(id);
		srn_cm_event_queue(id, RDMA_CM_EVENT_DISCONNECTED, -ETIMEDOUT, NULL, 0);
		return;
	}
	send_rej(id, s == SRN_CMS_REQ_SENT ? SRN_CM_MSG_REQ : SRN_CM_MSG_REP, SRN_CM_REJ_TIMEOUT, NULL, 0);
	srn_cm_qp_to(id, IBV_QPS_ERR);
	id->state = SRN_CMS_DISCONNECTED;
	srn_cm_event_queue(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL, 0);
}
