/*
 * dgram.c - a datagram rsocket's kernel UDP socket, its UD QPs (one per
 * local address it sends from), its destinations and their address
 * handles (dgram.h; docs/rsocket.md, "Datagrams").
 *
 * Addresses: the address a peer sees in our UD header, the one our UDP
 * datagrams come from and the one our QP is bound to must be the same, or
 * the peer's replies go astray.  On loopback the kernel would pick
 * 127.0.0.1 for an unbound socket while our device may sit on 127.0.0.2,
 * so an unbound socket is first bound to the address of the device that
 * reaches the peer (rdma_resolve_addr); a socket bound to the any address
 * sends its UDP datagrams with IP_PKTINFO naming the QP's address.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/epoll.h>

#include "diag/counters.h"
#include "rsocket/rs.h"

#define SRN_DS_RESOLVE_MS 2000

/* libibverbs.so.1's private export (verbs/verbs_gsi.c): bump a counter
 * of the device's diagnostic segment, which `softrnic stat` shows. */
void softrnic_cm_count(struct ibv_context *ctx, unsigned counter);

socklen_t srn_ds_addrlen(const struct sockaddr *a)
{
	return a->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static uint16_t port_of(const struct sockaddr *a)
{
	return a->sa_family == AF_INET6 ? ((const struct sockaddr_in6 *)a)->sin6_port
					: ((const struct sockaddr_in *)a)->sin_port;
}

static void set_port(struct sockaddr *a, uint16_t port)
{
	if (a->sa_family == AF_INET6)
		((struct sockaddr_in6 *)a)->sin6_port = port;
	else
		((struct sockaddr_in *)a)->sin_port = port;
}

static bool is_any(const struct sockaddr *a)
{
	if (a->sa_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &in6addr_any, 16);
	return ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_ANY);
}

bool srn_ds_same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	if (a->sa_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
		return x->sin6_port == y->sin6_port && !memcmp(&x->sin6_addr, &y->sin6_addr, 16);
	}
	return false;
}

void srn_ds_count_malformed(struct srn_rs *rs, struct srn_ds_qp *qp)
{
	rs->ds->malformed++;
	if (!qp)
		qp = rs->ds->qps;    /* a UDP datagram: the device of our first QP, if any */
	if (qp && qp->id->verbs)
		softrnic_cm_count(qp->id->verbs, SRN_CNT_RS_DGRAM_MALFORMED);
}

int srn_ds_socket(struct srn_rs *rs, int domain, int type_flags)
{
	struct srn_ds *ds = calloc(1, sizeof(*ds));
	if (!ds)
		return -ENOMEM;
	rs->ds = ds;
	ds->epfd = -1;
	/* Always non-blocking underneath: blocking is ours (wait.c). */
	int fd = socket(domain, SOCK_DGRAM | SOCK_NONBLOCK | (type_flags & SOCK_CLOEXEC), 0);
	if (fd < 0)
		return -errno;
	rs->fd = fd;
	ds->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (ds->epfd < 0)
		return -errno;
	/* Open the devices now, inside rsocket(): librspreload calls us with
	 * its socket() hook turned off only here, and a device opened later
	 * (at the first send) would get an rsocket for its own UDP socket.
	 * A stream rsocket opens them in rdma_create_id the same way. */
	int n = 0;
	struct ibv_context **devs = rdma_get_devices(&n);
	if (devs)
		rdma_free_devices(devs);
	return n > 0 ? 0 : -ENODEV;
}

/* The sizes as rdma-core's ds_set_qp_size: one SRN_DS_MSG_MAX buffer per
 * queue entry, the queue or the buffer option whichever is smaller. */
static void set_sizes(struct srn_rs *rs)
{
	uint32_t rq = rs->rbuf_size / SRN_DS_MSG_MAX, sq = rs->sbuf_size / SRN_DS_MSG_MAX;
	if (rs->rq_size > rq)
		rs->rq_size = (uint16_t)rq;
	if (rs->sq_size > sq)
		rs->sq_size = (uint16_t)sq;
	if (rs->rq_size < 2)
		rs->rq_size = 2;
	if (rs->sq_size < 2)
		rs->sq_size = 2;
	rs->rbuf_size = rs->rq_size * SRN_DS_MSG_MAX;
	rs->sbuf_size = rs->sq_size * SRN_DS_MSG_MAX;
}

int srn_ds_init_ep(struct srn_rs *rs)
{
	struct srn_ds *ds = rs->ds;
	if (ds->ep)
		return 0;
	set_sizes(rs);
	ds->sbuf = calloc(rs->sq_size, SRN_DS_MSG_MAX);
	ds->sfree = calloc(rs->sq_size, sizeof(*ds->sfree));
	ds->size = rs->rq_size + 1u;
	ds->rmsg = calloc(ds->size, sizeof(*ds->rmsg));
	if (!ds->sbuf || !ds->sfree || !ds->rmsg) {
		free(ds->sbuf);      /* a later call tries again from nothing */
		free(ds->sfree);
		free(ds->rmsg);
		ds->sbuf = NULL;
		ds->sfree = NULL;
		ds->rmsg = NULL;
		return -ENOMEM;
	}
	for (int i = 0; i < rs->sq_size; i++)
		ds->sfree[ds->nsfree++] = (uint16_t)(rs->sq_size - 1 - i);
	ds->rqe_avail = rs->rq_size;
	ds->ep = true;
	rs->readable = rs->writable = true;
	return 0;
}

/* The address of the device that reaches dst (port 0). */
static int device_addr(const struct sockaddr *dst, struct sockaddr_storage *out)
{
	struct rdma_cm_id *id;
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_UDP))
		return -errno;
	int ret = 0;
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)dst, SRN_DS_RESOLVE_MS)) {
		ret = -(errno ? errno : EHOSTUNREACH);
	} else {
		const struct sockaddr *l = rdma_get_local_addr(id);
		memset(out, 0, sizeof(*out));
		memcpy(out, l, srn_ds_addrlen(l));
		set_port((struct sockaddr *)out, 0);
	}
	rdma_destroy_id(id);
	return ret;
}

/* An unbound UDP socket is bound to the device address that reaches dst
 * before the kernel binds it to an address of its choosing. */
static int bind_for(struct srn_rs *rs, const struct sockaddr *dst)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof(ss);
	if (getsockname(rs->fd, (struct sockaddr *)&ss, &l))
		return -errno;
	if (port_of((struct sockaddr *)&ss) != 0)
		return 0;
	int ret = device_addr(dst, &ss);
	if (ret)
		return ret;
	if (ss.ss_family != dst->sa_family)
		return -EAFNOSUPPORT;
	return bind(rs->fd, (struct sockaddr *)&ss, srn_ds_addrlen((struct sockaddr *)&ss)) ? -errno : 0;
}

int srn_ds_bind(struct srn_rs *rs, const struct sockaddr *addr, socklen_t len)
{
	int ret = srn_ds_init_ep(rs);
	if (ret)
		return ret;
	if (bind(rs->fd, addr, len))
		return -errno;
	rs->ds->wildcard = is_any(addr);
	return 0;
}

int srn_ds_connect(struct srn_rs *rs, const struct sockaddr *addr, socklen_t len)
{
	int ret = srn_ds_init_ep(rs);
	if (!ret)
		ret = bind_for(rs, addr);
	if (!ret && connect(rs->fd, addr, len))
		ret = -errno;
	if (!ret)
		ret = srn_ds_get_dest(rs, addr, len, &rs->ds->conn);
	return ret;
}

static void qp_free(struct srn_rs *rs, struct srn_ds_qp *qp)
{
	if (qp->ch && rs->ds->epfd >= 0)
		epoll_ctl(rs->ds->epfd, EPOLL_CTL_DEL, qp->ch->fd, NULL);
	if (qp->id && qp->id->qp)
		rdma_destroy_qp(qp->id);
	if (qp->rmr)
		ibv_dereg_mr(qp->rmr);
	if (qp->smr)
		ibv_dereg_mr(qp->smr);
	if (qp->cq)
		ibv_destroy_cq(qp->cq);
	if (qp->ch)
		ibv_destroy_comp_channel(qp->ch);
	if (qp->id)
		rdma_destroy_id(qp->id);
	free(qp->rbuf);
	free(qp);
}

static int qp_create(struct srn_rs *rs, const struct sockaddr_storage *src, struct srn_ds_qp **out)
{
	struct srn_ds *ds = rs->ds;
	struct srn_ds_qp *qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	int ret = -EADDRNOTAVAIL;
	memcpy(&qp->addr, src, sizeof(*src));
	qp->hdr_len = (uint8_t)srn_ds_hdr_pack((const struct sockaddr *)src, qp->hdr);
	if (rdma_create_id(NULL, &qp->id, qp, RDMA_PS_UDP)) {
		ret = -errno;
		goto err;
	}
	if (rdma_bind_addr(qp->id, (struct sockaddr *)src)) {
		ret = -errno;
		goto err;
	}
	if (!qp->id->verbs || !qp->hdr_len)
		goto err;            /* no device owns the address: no QP can send from it */
	struct ibv_port_attr pa;
	qp->mtu = ibv_query_port(qp->id->verbs, qp->id->port_num ? qp->id->port_num : 1, &pa)
		  ? 1024 : 128u << pa.active_mtu;
	ret = -ENOMEM;
	qp->ch = ibv_create_comp_channel(qp->id->verbs);
	if (!qp->ch)
		goto err;
	fcntl(qp->ch->fd, F_SETFL, fcntl(qp->ch->fd, F_GETFL) | O_NONBLOCK);
	qp->cq = ibv_create_cq(qp->id->verbs, rs->sq_size + rs->rq_size, qp, qp->ch, 0);
	if (!qp->cq)
		goto err;
	struct ibv_qp_init_attr a = {
		.qp_context = qp, .send_cq = qp->cq, .recv_cq = qp->cq, .qp_type = IBV_QPT_UD,
		.sq_sig_all = 1,
		.cap = { .max_send_wr = rs->sq_size, .max_recv_wr = rs->rq_size,
			 .max_send_sge = 1, .max_recv_sge = 2, .max_inline_data = rs->sq_inline },
	};
	if (rdma_create_qp(qp->id, NULL, &a)) {
		ret = -errno;
		goto err;
	}
	if (a.cap.max_inline_data < rs->sq_inline)
		rs->sq_inline = (uint16_t)a.cap.max_inline_data;
	size_t rlen = (size_t)rs->rq_size * SRN_DS_MSG_MAX + SRN_DS_GRH_LEN;
	qp->rbuf = calloc(1, rlen);
	if (!qp->rbuf)
		goto err;
	qp->rmr = ibv_reg_mr(qp->id->pd, qp->rbuf, rlen, IBV_ACCESS_LOCAL_WRITE);
	qp->smr = ibv_reg_mr(qp->id->pd, ds->sbuf, (size_t)rs->sq_size * SRN_DS_MSG_MAX,
			     IBV_ACCESS_LOCAL_WRITE);
	if (!qp->rmr || !qp->smr)
		goto err;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = qp };
	if (epoll_ctl(ds->epfd, EPOLL_CTL_ADD, qp->ch->fd, &ev)) {
		ret = -errno;
		goto err;
	}
	qp->next = ds->qps;
	ds->qps = qp;
	for (uint32_t i = 0; i < rs->rq_size; i++)
		srn_ds_repost(rs, qp, i * SRN_DS_MSG_MAX);
	*out = qp;
	return 0;
err:
	qp_free(rs, qp);
	return ret;
}

/* Our address toward dst: the socket's own, or for a socket bound to the
 * any address the one of the device that reaches dst, with the port. */
static int src_for(struct srn_rs *rs, const struct sockaddr *dst, struct sockaddr_storage *src)
{
	socklen_t l = sizeof(*src);
	memset(src, 0, sizeof(*src));
	if (getsockname(rs->fd, (struct sockaddr *)src, &l))
		return -errno;
	if (!is_any((struct sockaddr *)src))
		return 0;
	uint16_t port = port_of((struct sockaddr *)src);
	int ret = device_addr(dst, src);
	if (!ret)
		set_port((struct sockaddr *)src, port);
	return ret;
}

int srn_ds_get_dest(struct srn_rs *rs, const struct sockaddr *addr, socklen_t len,
		    struct srn_ds_dest **out)
{
	struct srn_ds *ds = rs->ds;
	if (len < srn_ds_addrlen(addr) || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
		return -EINVAL;
	for (struct srn_ds_dest *d = ds->dests; d; d = d->next)
		if (srn_ds_same_addr((struct sockaddr *)&d->addr, addr)) {
			*out = d;
			return 0;
		}
	if (ds->ndests >= SRN_DS_MAX_DESTS)
		return -ENOBUFS;
	int ret = bind_for(rs, addr);
	struct sockaddr_storage src;
	if (!ret)
		ret = src_for(rs, addr, &src);
	if (ret)
		return ret;
	struct srn_ds_qp *qp = NULL;
	for (struct srn_ds_qp *q = ds->qps; q && !qp; q = q->next)
		if (srn_ds_same_addr((struct sockaddr *)&q->addr, (struct sockaddr *)&src))
			qp = q;
	if (!qp && (ret = qp_create(rs, &src, &qp)))
		return ret;
	struct srn_ds_dest *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	memcpy(&d->addr, addr, srn_ds_addrlen(addr));
	d->qp = qp;
	d->next = ds->dests;
	ds->dests = d;
	ds->ndests++;
	*out = d;
	return 0;
}

static uint8_t sgid_index(struct ibv_context *ctx, uint8_t port, const union ibv_gid *sgid)
{
	union ibv_gid g;
	for (int i = 0; i < 16; i++)
		if (!ibv_query_gid(ctx, port, i, &g) && !memcmp(&g, sgid, sizeof(g)))
			return (uint8_t)i;
	return 0;
}

int srn_ds_make_ah(struct srn_ds_dest *dest, uint32_t qpn)
{
	struct rdma_cm_id *id;
	struct srn_ds_qp *qp = dest->qp;
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_UDP))
		return -errno;
	struct sockaddr_storage src = qp->addr;
	set_port((struct sockaddr *)&src, 0);
	int ret = 0;
	if (rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)&dest->addr,
			      SRN_DS_RESOLVE_MS) ||
	    rdma_resolve_route(id, SRN_DS_RESOLVE_MS) || !id->route.path_rec) {
		ret = -(errno ? errno : EHOSTUNREACH);
		goto out;
	}
	/* As rdma-core's rsockets build it from the route's path record. */
	const struct ibv_sa_path_rec *p = id->route.path_rec;
	uint8_t port = qp->id->port_num ? qp->id->port_num : 1;
	struct ibv_ah_attr a = {
		.dlid = be16toh(p->dlid), .sl = p->sl, .static_rate = p->rate, .port_num = port,
	};
	if (p->hop_limit > 1) {
		a.is_global = 1;
		a.grh.dgid = p->dgid;
		a.grh.flow_label = be32toh(p->flow_label);
		a.grh.sgid_index = sgid_index(qp->id->verbs, port, &p->sgid);
		a.grh.hop_limit = p->hop_limit;
		a.grh.traffic_class = p->traffic_class;
	}
	struct ibv_ah *ah = ibv_create_ah(qp->id->pd, &a);
	if (!ah) {
		ret = -(errno ? errno : ENOMEM);
		goto out;
	}
	if (dest->ah)
		ibv_destroy_ah(dest->ah);
	dest->ah = ah;
	dest->qpn = qpn;
out:
	rdma_destroy_id(id);
	return ret;
}

void srn_ds_free(struct srn_rs *rs)
{
	struct srn_ds *ds = rs->ds;
	if (!ds)
		return;
	while (ds->dests) {
		struct srn_ds_dest *d = ds->dests;
		ds->dests = d->next;
		if (d->ah)
			ibv_destroy_ah(d->ah);
		free(d);
	}
	if (ds->rmsg)
		for (unsigned i = ds->head; i != ds->tail; i = (i + 1) % ds->size)
			free(ds->rmsg[i].copy);
	while (ds->qps) {
		struct srn_ds_qp *qp = ds->qps;
		ds->qps = qp->next;
		qp_free(rs, qp);
	}
	if (ds->epfd >= 0)
		close(ds->epfd);
	if (rs->fd >= 0)
		close(rs->fd);
	free(ds->sbuf);
	free(ds->sfree);
	free(ds->rmsg);
	free(ds);
	rs->ds = NULL;
}
