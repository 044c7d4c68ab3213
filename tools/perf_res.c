/*
 * perf_res.c - the verbs resources of one side of `softrnic perf`: device,
 * PD, one registered buffer, one CQ shared by every QP (sends and
 * receives), and the QPs, connected RESET -> RTS through perf_conn.c.
 *
 * The buffer layout (tx, rx, slots per QP, each page-aligned) is described
 * in perf_run.h; both sides compute it from the same parameters and tell
 * each other the resulting addresses in HELLO.  The MR grants remote
 * atomic access only in atomics sessions, and the QPs grant the peer what
 * the test needs (write; read and atomics on RC).  UD QPs grant nothing
 * but take datagrams with the shared Q_Key, and each sends through one
 * address handle, made from the GID its peer QP announced in HELLO.
 *
 * Opening is two steps so that a client can learn the path MTU before it
 * settles its sizes (a UD message must fit in one packet): the device and
 * its port first, then the buffers and everything on them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "perf_run.h"

#define PAGE 4096u

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

static enum ibv_mtu mtu_enum(uint32_t bytes)
{
	switch (bytes) {
	case 256: return IBV_MTU_256;
	case 512: return IBV_MTU_512;
	case 1024: return IBV_MTU_1024;
	case 2048: return IBV_MTU_2048;
	case 4096: return IBV_MTU_4096;
	default: return 0;
	}
}

static int open_device(struct srn_perf_ctx *c, const char *dev_name)
{
	struct ibv_device **list;
	struct ibv_device *dev = NULL;
	int n = 0;

	list = ibv_get_device_list(&n);
	if (!list)
		return srn_perf_fail(c, -errno, "ibv_get_device_list: %s", strerror(errno));
	for (int i = 0; i < n && !dev; i++)
		if (!dev_name || !strcmp(ibv_get_device_name(list[i]), dev_name))
			dev = list[i];
	if (!dev) {
		ibv_free_device_list(list);
		return srn_perf_fail(c, -ENODEV, dev_name ? "no RDMA device named '%s'" :
				     "no RDMA device found%s", dev_name ? dev_name : "");
	}
	snprintf(c->dev_name, sizeof(c->dev_name), "%s", ibv_get_device_name(dev));
	c->ctx = ibv_open_device(dev);
	ibv_free_device_list(list);
	if (!c->ctx)
		return srn_perf_fail(c, -errno, "ibv_open_device(%s): %s", c->dev_name,
				     strerror(errno));
	return 0;
}

static int create_qp(struct srn_perf_ctx *c, uint32_t q)
{
	const struct srn_perf_params *p = &c->p;
	struct srn_perf_qp *x = &c->qps[q];
	struct ibv_qp_init_attr ia = {
		.send_cq = c->cq,
		.recv_cq = c->cq,
		.qp_type = p->qp_type,
		.cap = {
			.max_send_wr = p->tx_depth,
			.max_recv_wr = p->op == SRN_PERF_SEND ? p->rx_depth : 1,
			.max_send_sge = 1,
			.max_recv_sge = 1,
			.max_inline_data = p->inline_size,
		},
	};
	int ret;

	x->qp = ibv_create_qp(c->pd, &ia);
	if (!x->qp)
		return srn_perf_fail(c, -errno, "ibv_create_qp (%s, send %u, recv %u, inline %u): %s",
				     srn_perf_qp_type_title(p->qp_type), ia.cap.max_send_wr,
				     ia.cap.max_recv_wr, p->inline_size, strerror(errno));
	x->tx = c->buf + (size_t)q * c->stride;
	x->rx = x->tx + c->rx_off;
	x->slots = (uint64_t *)(void *)(x->tx + c->slots_off);
	ret = srn_conn_local_qp(x->qp, c->ib_port, c->gid_index, srn_conn_random_psn(),
				&x->local);
	if (ret)
		return srn_perf_fail(c, ret, "port %u GID %d: %s", c->ib_port, c->gid_index,
				     strerror(-ret));
	return 0;
}

int srn_perf_open_device(struct srn_perf_ctx *c, const struct srn_perf_params *p,
			 const char *dev_name, uint8_t ib_port, int gid_index)
{
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	int ret;

	memset(c, 0, sizeof(*c));
	c->p = *p;
	c->ib_port = ib_port;
	c->gid_index = gid_index;
	ret = open_device(c, dev_name);
	if (ret)
		return ret;
	ret = ibv_query_device(c->ctx, &da);
	if (ret)
		return srn_perf_fail(c, -ret, "ibv_query_device: %s", strerror(ret));
	ret = ibv_query_port(c->ctx, ib_port, &pa);
	if (ret)
		return srn_perf_fail(c, -ret, "ibv_query_port(%u): %s", ib_port, strerror(ret));
	if (pa.state != IBV_PORT_ACTIVE)
		return srn_perf_fail(c, -ENETDOWN, "%s port %u is not active", c->dev_name, ib_port);
	c->mtu = p->mtu ? mtu_enum(p->mtu) : pa.active_mtu;
	if (!c->mtu || c->mtu > pa.active_mtu)
		return srn_perf_fail(c, -EINVAL, "MTU %u is not possible on %s port %u (active MTU %d)",
				     p->mtu, c->dev_name, ib_port, 128 << pa.active_mtu);
	if (srn_perf_op_atomic(p->op) && da.atomic_cap == IBV_ATOMIC_NONE)
		return srn_perf_fail(c, -EOPNOTSUPP, "%s does not support atomics (atomic_cap NONE)",
				     c->dev_name);
	return 0;
}

uint32_t srn_perf_mtu_bytes(const struct srn_perf_ctx *c)
{
	return 128u << c->mtu;
}

int srn_perf_create(struct srn_perf_ctx *c, const struct srn_perf_params *p)
{
	struct ibv_device_attr da;
	unsigned access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			  IBV_ACCESS_REMOTE_READ;
	size_t part;
	int ret, cqe;

	c->p = *p;
	ret = ibv_query_device(c->ctx, &da);
	if (ret)
		return srn_perf_fail(c, -ret, "ibv_query_device: %s", strerror(ret));
	/* A datagram is one packet: the send would fail at post time. */
	if (p->qp_type == IBV_QPT_UD && p->max_size > srn_perf_mtu_bytes(c))
		return srn_perf_fail(c, -EMSGSIZE, "UD: a %u-byte message does not fit in one "
				     "packet (path MTU %u)", p->max_size, srn_perf_mtu_bytes(c));
	if (srn_perf_op_atomic(p->op))
		access |= IBV_ACCESS_REMOTE_ATOMIC;

	/* rx starts grh bytes into its part: the GRH lands just before it. */
	c->grh = p->qp_type == IBV_QPT_UD ? SRN_PERF_UD_GRH : 0;
	part = round_up(p->max_size, PAGE);
	c->rx_off = part + c->grh;
	c->slots_off = part + round_up(c->grh + p->max_size, PAGE);
	c->stride = c->slots_off + round_up((size_t)(p->tx_depth + 1) * 8, PAGE);
	c->buf_len = c->stride * p->qps;
	c->buf = mmap(NULL, c->buf_len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c->buf == MAP_FAILED) {
		c->buf = NULL;
		return srn_perf_fail(c, -errno, "cannot map %zu bytes of buffers: %s", c->buf_len,
				     strerror(errno));
	}
	c->pd = ibv_alloc_pd(c->ctx);
	if (!c->pd)
		return srn_perf_fail(c, -errno, "ibv_alloc_pd: %s", strerror(errno));
	c->mr = ibv_reg_mr(c->pd, c->buf, c->buf_len, (int)access);
	if (!c->mr)
		return srn_perf_fail(c, -errno, "ibv_reg_mr(%zu bytes): %s", c->buf_len, strerror(errno));
	cqe = (int)(p->qps * (p->tx_depth + (p->op == SRN_PERF_SEND ? p->rx_depth : 1)) + 16);
	if (cqe > da.max_cqe)
		cqe = da.max_cqe;
	c->cq = ibv_create_cq(c->ctx, cqe, NULL, NULL, 0);
	if (!c->cq)
		return srn_perf_fail(c, -errno, "ibv_create_cq(%d): %s", cqe, strerror(errno));
	c->qps = calloc(p->qps, sizeof(*c->qps));
	if (!c->qps)
		return srn_perf_fail(c, -ENOMEM, "out of memory");
	for (uint32_t q = 0; q < p->qps; q++) {
		ret = create_qp(c, q);
		if (ret)
			return ret;
	}
	return 0;
}

int srn_perf_open(struct srn_perf_ctx *c, const struct srn_perf_params *p,
		  const char *dev_name, uint8_t ib_port, int gid_index)
{
	return srn_perf_open_device(c, p, dev_name, ib_port, gid_index) ?:
	       srn_perf_create(c, p);
}

/* UD: QP x reaches its peer QP through an address handle of its own. */
static int ud_ah(struct srn_perf_ctx *c, const struct srn_conn_qp_attr *a,
		 struct srn_perf_qp *x)
{
	char gid[64];
	int err;

	x->ah = srn_conn_ud_ah(c->pd, a, &x->remote.addr);
	if (x->ah)
		return 0;
	err = errno ? errno : EINVAL;
	return srn_perf_fail(c, -err, "ibv_create_ah(GID %s, QP 0x%x): %s",
			     srn_conn_gid_str(&x->remote.addr.gid, gid, sizeof(gid)),
			     x->remote.addr.qpn, strerror(err));
}

int srn_perf_connect(struct srn_perf_ctx *c, const struct srn_perf_peer_qp *peer,
		     uint32_t peer_rkey)
{
	struct ibv_device_attr da;
	struct srn_conn_qp_attr a = {
		.port = c->ib_port,
		.gid_index = c->gid_index,
		.mtu = c->mtu,
		.access = IBV_ACCESS_REMOTE_WRITE,
	};
	int ret = ibv_query_device(c->ctx, &da);

	if (ret)
		return srn_perf_fail(c, -ret, "ibv_query_device: %s", strerror(ret));
	if (c->p.qp_type == IBV_QPT_RC) {
		int rd = da.max_qp_rd_atom < da.max_qp_init_rd_atom ? da.max_qp_rd_atom :
								      da.max_qp_init_rd_atom;
		a.max_rd_atomic = (uint8_t)(rd > 255 ? 255 : rd < 1 ? 1 : rd);
		a.access |= IBV_ACCESS_REMOTE_READ;
		if (srn_perf_op_atomic(c->p.op))
			a.access |= IBV_ACCESS_REMOTE_ATOMIC;
	}
	c->remote_rkey = peer_rkey;
	for (uint32_t q = 0; q < c->p.qps; q++) {
		struct srn_perf_qp *x = &c->qps[q];
		const char *step;

		x->remote = peer[q];
		ret = srn_conn_qp_up(x->qp, &a, &x->local, &x->remote.addr, &step);
		if (ret)
			return srn_perf_fail(c, ret, "ibv_modify_qp(QP 0x%x to %s): %s", x->qp->qp_num,
					     step, strerror(-ret));
		if (c->p.qp_type == IBV_QPT_UD) {
			ret = ud_ah(c, &a, x);
			if (ret)
				return ret;
		}
	}
	return 0;
}

void srn_perf_close(struct srn_perf_ctx *c)
{
	/* Handles and QPs go before the PD they were made in. */
	for (uint32_t q = 0; c->qps && q < c->p.qps; q++) {
		if (c->qps[q].ah)
			ibv_destroy_ah(c->qps[q].ah);
		if (c->qps[q].qp)
			ibv_destroy_qp(c->qps[q].qp);
	}
	free(c->qps);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->mr)
		ibv_dereg_mr(c->mr);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->ctx)
		ibv_close_device(c->ctx);
	if (c->buf)
		munmap(c->buf, c->buf_len);
	free(c->samples);
	c->qps = NULL;
	c->samples = NULL;
	c->buf = NULL;
}
