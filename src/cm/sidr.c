/*
 * sidr.c - UD ids through rdma_cm: Service ID Resolution (IBTA 12.11).
 *
 * A UD id does not connect: rdma_connect asks the peer's CM which QP and
 * Q_Key serve a service ID (SIDR_REQ), and the answer (SIDR_REP) is the
 * whole exchange.  What travels is what the kernel's rdma_cm sends on
 * RoCE: the service ID of the port space and port, the RDMA IP CM header
 * at the start of the SIDR_REQ's private data, the request ID of the
 * asker, the tid of the request echoed in the reply.
 *
 * Events, as the kernel gives them to librdmacm:
 *   active:  ROUTE_RESOLVED → rdma_connect → ESTABLISHED (param.ud: the
 *            peer's QPN and Q_Key, an ah_attr that reaches it, the reply's
 *            136 bytes of private data), or UNREACHABLE with the SIDR
 *            status (1: no listener, 2: rejected) or -ETIMEDOUT after
 *            15 retries 4096 ms apart;
 *   passive: CONNECT_REQUEST on the listener's channel (param.ud: the
 *            private data after the CM header, 180 bytes; a SIDR_REQ
 *            carries no QPN, so qp_num and qkey are 0 as with the
 *            kernel; ah_attr reaches the asker); rdma_accept sends the
 *            reply and gives no event.
 * A repeated SIDR_REQ gets the reply we sent again (the kernel drops it,
 * leaving the asker to time out if the reply was lost).
 *
 * Ids stay in the same states as connected ids: REQ_SENT while the
 * request waits, REQ_RCVD until the application answers, ESTABLISHED
 * after a successful exchange, DISCONNECTED after a failed one.  All
 * functions must hold srn_cm.lock.
 */
#include "cm/sidr.h"
#include "cm/ids.h"
#include "cm/ports.h"
#include "cm/qp1.h"
#include "cm/qp_attr.h"
#include "cm/retry.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/random.h>

/* The kernel's SIDR timing for rdma_cm: 1 << (CMA_CM_RESPONSE_TIMEOUT - 8)
 * ms between tries, CMA_MAX_CM_RETRIES tries more. */
#define SIDR_TIMEOUT_MS (1u << (20 - 8))
#define SIDR_RETRIES 15
#define SIDR_HOP_LIMIT 64
#define SIDR_UD_PDATA (SRN_CM_SIDR_REQ_PDATA - SRN_CMA_HDR_LEN)

void srn_cm_ud_ah_attr(const struct srn_cm_id *id, const uint8_t gid[16], struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->is_global = 1;
	ah->port_num = 1;
	memcpy(ah->grh.dgid.raw, gid, 16);
	ah->grh.sgid_index = 0;
	ah->grh.hop_limit = SIDR_HOP_LIMIT;
	ah->grh.traffic_class = id->tos;
}

static uint32_t new_request_id(const struct srn_cm_dev *dev)
{
	for (;;) {
		srn_cm.next_comm_id += 2;
		uint32_t c = srn_cm_comm_id(dev, srn_cm.next_comm_id);
		bool used = c == 0;
		for (struct srn_cm_id *id = srn_cm.ids; id && !used; id = id->next)
			used = id->local_comm_id == c;
		if (!used)
			return c;
	}
}

int srn_cm_sidr_connect(struct srn_cm_id *id, const struct rdma_conn_param *p)
{
	if (id->state != SRN_CMS_ROUTE_RESOLVED)
		return -EINVAL;
	if (p->private_data_len > SIDR_UD_PDATA)
		return -EINVAL;
	struct srn_cm_msg m = { .attr = SRN_CM_ATTR_SIDR_REQ };
	struct srn_cm_sidr_req *r = &m.sidr_req;
	uint32_t rnd = 0;
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		rnd = (uint32_t)srn_now_ns();
	id->local_comm_id = new_request_id(id->dev);
	id->remote_comm_id = 0;
	id->tid = (uint64_t)id->local_comm_id << 32 | rnd;
	r->request_id = id->local_comm_id;
	r->pkey = 0xffff;
	r->service_id = srn_cma_service_id((uint16_t)id->id.ps, ntohs(id->id.route.addr.dst_sin.sin_port));
	if (srn_cma_hdr_build(r->pdata, &id->id.route.addr.src_addr, &id->id.route.addr.dst_addr))
		return -EINVAL;
	if (p->private_data_len)
		memcpy(r->pdata + SRN_CMA_HDR_LEN, p->private_data, p->private_data_len);
	id->state = SRN_CMS_REQ_SENT;
	int ret = srn_cm_send_msg(id, &m, true);
	if (ret) {
		id->last_valid = false;
		id->state = SRN_CMS_ROUTE_RESOLVED;
		return ret;
	}
	srn_cm_timer_arm(id, SIDR_TIMEOUT_MS, SIDR_RETRIES);
	return 0;
}

/* The passive id answers: status, and on success our QP and Q_Key. */
static int send_rep(struct srn_cm_id *id, uint8_t status, uint32_t qpn, const void *pdata, uint8_t len)
{
	struct srn_cm_msg m = { .attr = SRN_CM_ATTR_SIDR_REP };
	struct srn_cm_sidr_rep *r = &m.sidr_rep;
	r->request_id = id->remote_comm_id;
	r->status = status;
	r->service_id = srn_cma_service_id((uint16_t)id->id.ps, srn_cm_id_port(id));
	if (status == SRN_SIDR_SUCCESS) {
		r->qpn = qpn & 0xffffff;
		r->qkey = srn_cm_ud_qkey(id);
	}
	if (len)
		memcpy(r->pdata, pdata, len);
	return srn_cm_send_msg(id, &m, true);
}

static void answered(struct srn_cm_id *id, enum srn_cm_state s)
{
	/* The listener's backlog was given back when the request was
	 * fetched (ids.c, as ucma counts it). */
	id->listener = NULL;
	id->state = s;
}

int srn_cm_sidr_accept(struct srn_cm_id *id, const struct rdma_conn_param *p)
{
	if (id->state != SRN_CMS_REQ_RCVD)
		return -EINVAL;
	if (p->private_data_len > SRN_CM_SIDR_REP_PDATA)
		return -EINVAL;
	/* The user-space rdma_conn_param has no Q_Key: the id's (the port
	 * space's RDMA_UDP_QKEY) is the one the reply gives. */
	uint32_t qpn = id->id.qp ? id->id.qp->qp_num : p->qp_num;
	int ret = send_rep(id, SRN_SIDR_SUCCESS, qpn, p->private_data, p->private_data_len);
	answered(id, SRN_CMS_ESTABLISHED);
	return ret;
}

int srn_cm_sidr_reject(struct srn_cm_id *id, const void *pdata, uint8_t len)
{
	if (id->state != SRN_CMS_REQ_RCVD)
		return -EINVAL;
	if (len > SRN_CM_SIDR_REP_PDATA)
		return -EINVAL;
	send_rep(id, SRN_SIDR_REJECT, 0, pdata, len);
	answered(id, SRN_CMS_DISCONNECTED);
	return 0;
}

int srn_cm_sidr_disconnect(struct srn_cm_id *id)
{
	if (!id->dev)
		return -EINVAL;
	return srn_cm_qp_to(id, IBV_QPS_ERR);
}

void srn_cm_sidr_abort(struct srn_cm_id *id)
{
	/* An unanswered request is refused, as ib_destroy_cm_id does. */
	if (id->state == SRN_CMS_REQ_RCVD)
		send_rep(id, SRN_SIDR_REJECT, 0, NULL, 0);
	srn_cm_timer_stop(id);
	answered(id, SRN_CMS_DISCONNECTED);
}

void srn_cm_sidr_expire(struct srn_cm_id *id)
{
	bool asked = id->state == SRN_CMS_REQ_SENT;
	srn_cm_timer_stop(id);
	if (!asked)
		return;
	id->state = SRN_CMS_DISCONNECTED;
	srn_cm_event_queue(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL, 0);
}

/* A reply for a request that matches no id, from its MAD alone. */
static void rep_stateless(struct srn_cm_dev *dev, const uint8_t gid[16], const struct srn_cm_msg *in,
			  uint8_t status)
{
	struct srn_cm_msg m = { .attr = SRN_CM_ATTR_SIDR_REP, .tid = in->tid };
	m.sidr_rep.request_id = in->sidr_req.request_id;
	m.sidr_rep.status = status;
	m.sidr_rep.service_id = in->sidr_req.service_id;
	uint8_t mad[SRN_MAD_LEN];
	if (srn_cm_mad_build(&m, mad) == 0)
		srn_cm_send(dev, gid, mad);
}

static void on_sidr_req(struct srn_cm_dev *dev, const struct srn_cm_msg *m, const uint8_t gid[16])
{
	const struct srn_cm_sidr_req *r = &m->sidr_req;
	/* The same request again (the asker's retry): the same answer, or
	 * nothing while the application has not answered yet. */
	for (struct srn_cm_id *id = srn_cm.ids; id && r->request_id; id = id->next) {
		if (id->destroying || id->id.qp_type != IBV_QPT_UD || id->remote_comm_id != r->request_id ||
		    memcmp(id->peer_gid, gid, 16) != 0 || id->state < SRN_CMS_REQ_RCVD)
			continue;
		if (id->state != SRN_CMS_REQ_RCVD && id->last_valid)
			srn_cm_send(dev, gid, id->last_mad);
		return;
	}
	struct srn_cma_hdr h;
	struct srn_cm_id *l;
	int why = srn_cm_listener_take(dev, r->service_id, r->pdata, sizeof(r->pdata), &h, &l);
	if (why) {
		/* No such service: "unsupported" (IB_SIDR_UNSUPPORTED, what the
		 * kernel answers without a listener); refused: "rejected". */
		rep_stateless(dev, gid, m, why == -ENOENT ? SRN_SIDR_UNSUPPORTED : SRN_SIDR_REJECT);
		return;
	}
	struct srn_cm_id *id = srn_cm_child_new(l, dev, &h, gid, IBV_QPT_UD);
	if (!id) {
		rep_stateless(dev, gid, m, SRN_SIDR_REJECT);
		return;
	}
	id->remote_comm_id = r->request_id;
	id->tid = m->tid;
	id->tos = l->tos;
	id->state = SRN_CMS_REQ_RCVD;
	id->listener = l;
	srn_cm_fill_path(id, dev->mtu);
	l->pending++;
	struct srn_cm_event *e = srn_cm_event_queue(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0,
						    r->pdata + SRN_CMA_HDR_LEN, SIDR_UD_PDATA);
	if (!e) {
		srn_cm_sidr_abort(id);
		srn_cm_id_free(id);
		return;
	}
	e->ev.listen_id = &l->id;
	srn_cm_ud_ah_attr(id, gid, &e->ev.param.ud.ah_attr);
}

static void on_sidr_rep(const struct srn_cm_msg *m, const uint8_t gid[16])
{
	const struct srn_cm_sidr_rep *r = &m->sidr_rep;
	struct srn_cm_id *id = srn_cm.ids;
	for (; id; id = id->next)
		if (!id->destroying && id->id.qp_type == IBV_QPT_UD && id->state == SRN_CMS_REQ_SENT &&
		    id->local_comm_id == r->request_id)
			break;
	/* A reply from someone we did not ask, or about another service:
	 * not ours (a late duplicate after the answer lands here too). */
	if (!id || memcmp(id->peer_gid, gid, 16) != 0 ||
	    r->service_id != srn_cma_service_id((uint16_t)id->id.ps, ntohs(id->id.route.addr.dst_sin.sin_port))) {
		srn_cm.cnt[SRN_CM_CNT_RX_NO_CONN]++;
		return;
	}
	srn_cm_timer_stop(id);
	if (r->status != SRN_SIDR_SUCCESS) {
		id->state = SRN_CMS_DISCONNECTED;
		srn_cm_event_queue(id, RDMA_CM_EVENT_UNREACHABLE, r->status, r->pdata, SRN_CM_SIDR_REP_PDATA);
		return;
	}
	if (id->qkey && r->qkey != id->qkey) {
		/* cma_set_qkey refuses a Q_Key other than the one the id has. */
		id->state = SRN_CMS_DISCONNECTED;
		srn_cm_event_queue(id, RDMA_CM_EVENT_ADDR_ERROR, -EINVAL, NULL, 0);
		return;
	}
	id->qkey = r->qkey;
	id->remote_qpn = r->qpn;
	id->state = SRN_CMS_ESTABLISHED;
	struct srn_cm_event *e = srn_cm_event_queue(id, RDMA_CM_EVENT_ESTABLISHED, 0, r->pdata,
						    SRN_CM_SIDR_REP_PDATA);
	if (!e)
		return;
	srn_cm_ud_ah_attr(id, id->peer_gid, &e->ev.param.ud.ah_attr);
	e->ev.param.ud.qp_num = r->qpn;
	e->ev.param.ud.qkey = r->qkey;
}

void srn_cm_sidr_recv(struct srn_cm_dev *dev, const struct srn_cm_msg *m, const uint8_t gid[16])
{
	if (m->attr == SRN_CM_ATTR_SIDR_REQ)
		on_sidr_req(dev, m, gid);
	else
		on_sidr_rep(m, gid);
}
