/*
 * cmev.c - rdma_cm events drive an rsocket's state.  Every rsocket has its
 * own event channel, non-blocking, so events are taken when the socket is
 * used (any r* call, rpoll) and never block:
 *
 *   active:   rconnect → ADDR_RESOLVED → resolve route → ROUTE_RESOLVED →
 *             QP + buffers, REQ with our connect data → ESTABLISHED with
 *             the peer's (in the REP) → connected
 *   listener: CONNECT_REQUEST → a new rsocket on a channel of its own
 *             (rdma_migrate_id), QP + buffers, REP with our connect data;
 *             connected at once (the QP is ready to send), queued for raccept
 *   any:      DISCONNECTED (the peer's DREQ) closes both halves; REJECTED,
 *             UNREACHABLE, errors end in SRN_RS_ERROR with an errno.
 * Each event is acked before the next is taken: rdma_destroy_id waits for
 * unacked events, and rclose must not.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "rsocket/rs.h"

static void fail(struct srn_rs *rs, int err)
{
	rs->state = SRN_RS_ERROR;
	rs->readable = rs->writable = false;
	rs->err = err;
}

void srn_rs_conn_ours(struct srn_rs *rs, uint8_t out[SRN_RS_CONN_LEN])
{
	struct srn_rs_conn c = {
		.version = SRN_RS_VERSION,
		.flags = SRN_RS_CONN_FLAG_IOMAP | (srn_rs_host_is_be() ? SRN_RS_CONN_FLAG_NET : 0),
		.credits = rs->rq_size,
		.iomap_scaled = srn_rs_scale_to_u8(rs->iomap_size),
		.target_sgl = { .addr = (uintptr_t)rs->tslots, .key = rs->tmr->rkey,
				.length = SRN_RS_SGL_SLOTS },
		.data_buf = { .addr = (uintptr_t)rs->rbuf, .key = rs->rmr->rkey,
			      .length = rs->rbuf_size / 2 },
	};
	srn_rs_conn_pack(&c, out);
}

int srn_rs_conn_theirs(struct srn_rs *rs, const void *pdata, size_t len)
{
	struct srn_rs_conn c;
	int ret = srn_rs_conn_parse(pdata, len, &c);
	if (ret)
		return ret;
	rs->swap = !!(c.flags & SRN_RS_CONN_FLAG_NET) != srn_rs_host_is_be();
	rs->peer_slots = c.target_sgl;
	rs->peer_slot = 1;           /* slot 0 is data_buf, granted in the connect data */
	if (c.flags & SRN_RS_CONN_FLAG_IOMAP) {
		rs->peer_iomap.addr = c.target_sgl.addr + (uint64_t)c.target_sgl.length * SRN_RS_SGE_LEN;
		rs->peer_iomap.key = c.target_sgl.key;
		rs->peer_iomap.length = srn_rs_scale_from_u8(c.iomap_scaled);
	}
	rs->tslots[0] = c.data_buf;  /* our own copy: the peer writes slot 1 first */
	rs->tslot = 0;
	rs->sseq_comp = c.credits;
	return 0;
}

struct rdma_event_channel *srn_rs_new_channel(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	if (!ch)
		return NULL;
	int fl = fcntl(ch->fd, F_GETFL);
	if (fl < 0 || fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK)) {
		rdma_destroy_event_channel(ch);
		return NULL;
	}
	return ch;
}

static void conn_param(struct rdma_conn_param *p, const uint8_t *pdata)
{
	/* rdma-core's rsockets: no RDMA Reads, hardware flow control, and
	 * retries without end for RNR (a receive is always reposted soon). */
	memset(p, 0, sizeof(*p));
	p->private_data = pdata;
	p->private_data_len = SRN_RS_CONN_LEN;
	p->flow_control = 1;
	p->retry_count = 7;
	p->rnr_retry_count = 7;
}

/* A CONNECT_REQUEST on a listener: build the connection and queue it. */
static void on_request(struct srn_rs *ls, struct rdma_cm_id *cid, const uint8_t *pdata, size_t plen)
{
	struct srn_rs *rs = NULL;
	uint8_t ours[SRN_RS_CONN_LEN];
	struct rdma_conn_param p;
	int ret = -ENOMEM;
	if (ls->nqueued >= ls->backlog) {
		ret = -ECONNREFUSED;
		goto reject;
	}
	rs = srn_rs_alloc(ls);
	if (!rs || !(rs->ch = srn_rs_new_channel()))
		goto reject;
	if (rdma_migrate_id(cid, rs->ch)) {
		ret = -errno;
		goto reject;
	}
	rs->id = cid;
	cid->context = rs;
	rs->fd = rs->ch->fd;
	rs->passive = true;
	rs->fd_flags = 0;
	ret = srn_rs_res_create(rs);
	if (!ret)
		ret = srn_rs_conn_theirs(rs, pdata, plen);
	if (ret)
		goto reject;
	srn_rs_conn_ours(rs, ours);
	conn_param(&p, ours);
	if (rdma_accept(cid, &p)) {
		ret = -errno;
		goto reject;
	}
	/* The QP is at RTS once the REP is out: the peer may send as soon as
	 * it has it, so we are connected now; ESTABLISHED (the RTU) changes
	 * nothing, UNREACHABLE (no RTU) ends the connection. */
	rs->state = SRN_RS_CONNECTED;
	rs->readable = rs->writable = true;
	if (srn_rs_table_add(rs)) {
		rdma_disconnect(cid);
		goto reject_done;
	}
	if (ls->accept_tail)
		ls->accept_tail->accept_next = rs;
	else
		ls->accept_head = rs;
	ls->accept_tail = rs;
	ls->nqueued++;
	return;
reject:
	rdma_reject(cid, NULL, 0);
reject_done:
	if (rs) {
		if (!rs->id)
			rdma_destroy_id(cid);
		srn_rs_free(rs);
	} else {
		rdma_destroy_id(cid);
	}
}

static int event_errno(const struct rdma_cm_event *e)
{
	switch (e->event) {
	case RDMA_CM_EVENT_REJECTED: return ECONNREFUSED;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR: return EHOSTUNREACH;
	case RDMA_CM_EVENT_UNREACHABLE: return ETIMEDOUT;
	case RDMA_CM_EVENT_DEVICE_REMOVAL: return ENODEV;
	default: return ECONNABORTED;
	}
}

static void on_event(struct srn_rs *rs, struct rdma_cm_event *e)
{
	uint8_t ours[SRN_RS_CONN_LEN];
	struct rdma_conn_param p;
	int ret;
	switch (e->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rs->state == SRN_RS_RESOLVING && rdma_resolve_route(rs->id, SRN_RS_RESOLVE_MS))
			fail(rs, errno);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (rs->state != SRN_RS_RESOLVING)
			break;
		ret = srn_rs_res_create(rs);
		if (ret) {
			fail(rs, -ret);
			break;
		}
		srn_rs_conn_ours(rs, ours);
		conn_param(&p, ours);
		if (rdma_connect(rs->id, &p))
			fail(rs, errno);
		else
			rs->state = SRN_RS_CONNECTING;
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (rs->state != SRN_RS_CONNECTING)
			break;     /* passive: connected since the REP */
		ret = srn_rs_conn_theirs(rs, e->param.conn.private_data, e->param.conn.private_data_len);
		if (ret) {
			/* The peer is no rsocket (or lies): hang up. */
			rdma_disconnect(rs->id);
			fail(rs, EPROTO);
			break;
		}
		rs->state = SRN_RS_CONNECTED;
		rs->readable = rs->writable = true;
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		/* The peer's DREQ (or our DREQ's answer): nothing more comes or
		 * goes.  Data already received stays readable. */
		rdma_disconnect(rs->id);
		if (rs->state == SRN_RS_CONNECTED) {
			rs->state = SRN_RS_DISCONNECTED;
			rs->readable = rs->writable = false;
		}
		break;
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		if (rs->state != SRN_RS_DISCONNECTED && rs->state != SRN_RS_ERROR)
			fail(rs, event_errno(e));
		break;
	default:
		break;   /* TIMEWAIT_EXIT, ADDR_CHANGE: nothing to do */
	}
}

void srn_rs_cm_progress(struct srn_rs *rs)
{
	struct rdma_cm_event *e;
	if (!rs->ch)
		return;
	while (!rdma_get_cm_event(rs->ch, &e)) {
		if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST && rs->state == SRN_RS_LISTENING) {
			uint8_t pdata[256];
			size_t plen = e->param.conn.private_data_len;
			if (plen > sizeof(pdata))
				plen = sizeof(pdata);
			if (e->param.conn.private_data)
				memcpy(pdata, e->param.conn.private_data, plen);
			else
				plen = 0;
			struct rdma_cm_id *cid = e->id;
			/* Acked first: the id moves to a channel of its own. */
			rdma_ack_cm_event(e);
			on_request(rs, cid, pdata, plen);
			continue;
		}
		if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			struct rdma_cm_id *cid = e->id;
			rdma_ack_cm_event(e);
			rdma_reject(cid, NULL, 0);
			rdma_destroy_id(cid);
			continue;
		}
		on_event(rs, e);
		rdma_ack_cm_event(e);
	}
}
