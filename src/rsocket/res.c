/*
 * res.c - what a connected rsocket owns in verbs: one CQ (sends and
 * receives) on its own completion channel, the RC QP, and three
 * registered areas:
 *   sbuf    data copied for sending (a ring), then SRN_RS_CTRL_SLOTS
 *           records for control Writes that cannot go inline;
 *   rbuf    the receive buffer the peer writes data into, granted half
 *           by half (the first half in the connect data);
 *   tslots  SRN_RS_SGL_SLOTS SGEs the peer writes buffer grants into,
 *           then our iomap table of iomap_size entries (riowrite targets).
 * Created before the REQ or REP is sent (the connect data names them).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "rsocket/rs.h"

static uint16_t clamp_q(unsigned v, unsigned max)
{
	if (v > max)
		v = max;
	if (v < SRN_RS_QP_MIN)
		v = SRN_RS_QP_MIN;
	return (uint16_t)v;
}

static void *page_alloc(size_t len)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, len ? len : 1))
		return NULL;
	memset(p, 0, len);
	return p;
}

static int reg(struct srn_rs *rs, void *buf, size_t len, int access, struct ibv_mr **out)
{
	*out = ibv_reg_mr(rs->id->pd, buf, len, access);
	return *out ? 0 : -(errno ? errno : ENOMEM);
}

static size_t tslots_len(const struct srn_rs *rs)
{
	return SRN_RS_SGL_SLOTS * sizeof(struct srn_rs_sge) +
	       (size_t)rs->iomap_size * sizeof(struct srn_rs_iomap);
}

int srn_rs_res_create(struct srn_rs *rs)
{
	struct ibv_device_attr da;
	unsigned max = SRN_RS_QP_MAX;
	if (!ibv_query_device(rs->id->verbs, &da) && (unsigned)da.max_qp_wr < max)
		max = (unsigned)da.max_qp_wr;
	rs->sq_size = clamp_q(rs->sq_size, max);
	rs->rq_size = clamp_q(rs->rq_size, max);

	rs->cq_ch = ibv_create_comp_channel(rs->id->verbs);
	if (!rs->cq_ch)
		return -(errno ? errno : ENOMEM);
	/* Never block in ibv_get_cq_event: wait.c sleeps in poll() and
	 * another thread may have taken the event meanwhile. */
	int fl = fcntl(rs->cq_ch->fd, F_GETFL);
	if (fl < 0 || fcntl(rs->cq_ch->fd, F_SETFL, fl | O_NONBLOCK))
		return -errno;
	rs->cq = ibv_create_cq(rs->id->verbs, rs->sq_size + rs->rq_size, rs, rs->cq_ch, 0);
	if (!rs->cq)
		return -(errno ? errno : ENOMEM);

	struct ibv_qp_init_attr qa = {
		.qp_context = rs,
		.send_cq = rs->cq,
		.recv_cq = rs->cq,
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
		.cap = { .max_send_wr = rs->sq_size, .max_recv_wr = rs->rq_size,
			 .max_send_sge = 2, .max_recv_sge = 1,
			 .max_inline_data = rs->sq_inline },
	};
	if (rdma_create_qp(rs->id, NULL, &qa))
		return -(errno ? errno : EINVAL);
	rs->sq_inline = (uint16_t)(qa.cap.max_inline_data > SRN_RS_QP_MAX ? SRN_RS_QP_MAX
						: qa.cap.max_inline_data);

	size_t sl = (size_t)rs->sbuf_size + SRN_RS_CTRL_SLOTS * sizeof(struct srn_rs_iomap);
	rs->sbuf = page_alloc(sl);
	rs->rbuf = page_alloc(rs->rbuf_size);
	rs->tslots = page_alloc(tslots_len(rs));
	rs->rmsg_size = rs->rq_size + 1u;
	rs->rmsg = calloc(rs->rmsg_size, sizeof(*rs->rmsg));
	if (!rs->sbuf || !rs->rbuf || !rs->tslots || !rs->rmsg)
		return -ENOMEM;
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	int ret = reg(rs, rs->sbuf, sl, IBV_ACCESS_LOCAL_WRITE, &rs->smr);
	if (!ret)
		ret = reg(rs, rs->rbuf, rs->rbuf_size, rw, &rs->rmr);
	if (!ret)
		ret = reg(rs, rs->tslots, tslots_len(rs), rw, &rs->tmr);
	if (ret)
		return ret;

	/* Half the receive buffer goes out in the connect data; the other
	 * half is free and granted by the first credit update. */
	rs->rbuf_grant_off = rs->rbuf_size / 2;
	rs->rbuf_free = rs->rbuf_size / 2;
	rs->sbuf_avail = rs->sbuf_size;
	rs->sqe_avail = rs->sq_size - SRN_RS_CTRL_SLOTS;
	rs->ctrl_max = SRN_RS_CTRL_SLOTS;
	rs->rseq_comp = rs->rq_size / 2;

	/* Receives carry no buffer: every message is a Write with immediate. */
	for (unsigned i = 0; i < rs->rq_size; i++) {
		struct ibv_recv_wr wr = { .wr_id = SRN_RS_WR_RECV }, *bad;
		if (ibv_post_recv(rs->id->qp, &wr, &bad))
			return -EIO;
	}
	return 0;
}

void srn_rs_res_destroy(struct srn_rs *rs)
{
	if (rs->id && rs->id->qp)
		rdma_destroy_qp(rs->id);
	if (rs->smr)
		ibv_dereg_mr(rs->smr);
	if (rs->rmr)
		ibv_dereg_mr(rs->rmr);
	if (rs->tmr)
		ibv_dereg_mr(rs->tmr);
	rs->smr = rs->rmr = rs->tmr = NULL;
	if (rs->cq)
		ibv_destroy_cq(rs->cq);
	rs->cq = NULL;
	if (rs->cq_ch)
		ibv_destroy_comp_channel(rs->cq_ch);
	rs->cq_ch = NULL;
	free(rs->sbuf);
	free(rs->rbuf);
	free(rs->tslots);
	free(rs->rmsg);
	rs->sbuf = rs->rbuf = NULL;
	rs->tslots = NULL;
	rs->rmsg = NULL;
}
