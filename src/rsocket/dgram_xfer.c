/*
 * dgram_xfer.c - a datagram rsocket's data path (dgram.h).
 *
 * Sending: to a peer with an address handle, one UD Send of our source
 * header and the payload, copied into a send slot (the slot returns when
 * the Send completes); to one without, a datagram on the UDP socket with
 * the UDP header, which makes the peer reply with its QPN.
 * Receiving: UD messages land in the QP's receive buffers (a GRH, then
 * header and payload); UDP datagrams are read whenever we make progress,
 * answered, and their payload queued as a copy with a source header made
 * from the UDP source address, so both kinds read the same.  Either kind
 * is dropped when the ring of received messages is full (datagram
 * semantics), and dropped and counted when its header is wrong.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>

#include "rsocket/rs.h"

void srn_ds_repost(struct srn_rs *rs, struct srn_ds_qp *qp, uint32_t off)
{
	/* The GRH of every receive goes to one scratch area after the
	 * buffers: nobody reads it, the header names the source. */
	struct ibv_sge sg[2] = {
		{ (uintptr_t)(qp->rbuf + (size_t)rs->rq_size * SRN_DS_MSG_MAX), SRN_DS_GRH_LEN, qp->rmr->lkey },
		{ (uintptr_t)(qp->rbuf + off), SRN_DS_MSG_MAX, qp->rmr->lkey },
	};
	struct ibv_recv_wr wr = { .wr_id = SRN_RS_WR_RECV | off, .sg_list = sg, .num_sge = 2 }, *bad;
	ibv_post_recv(qp->id->qp, &wr, &bad);
}

static void queue(struct srn_ds *ds, struct srn_ds_qp *qp, uint32_t off, uint32_t len, uint8_t *copy)
{
	ds->rmsg[ds->tail] = (struct srn_ds_msg){ qp, off, len, copy };
	ds->tail = (ds->tail + 1) % ds->size;
	ds->rqe_avail--;
}

static void on_recv(struct srn_rs *rs, struct srn_ds_qp *qp, const struct ibv_wc *wc)
{
	uint32_t off = (uint32_t)wc->wr_id;
	if (wc->status != IBV_WC_SUCCESS)
		return;              /* flushed at close: not reposted */
	struct sockaddr_storage src;
	socklen_t sl;
	uint32_t len = wc->byte_len >= SRN_DS_GRH_LEN ? wc->byte_len - SRN_DS_GRH_LEN : 0;
	if (len > SRN_DS_MSG_MAX || srn_ds_hdr_parse(qp->rbuf + off, len, &src, &sl) < 0) {
		srn_ds_count_malformed(rs, qp);
		srn_ds_repost(rs, qp, off);
		return;
	}
	if (!rs->ds->rqe_avail) {
		srn_ds_repost(rs, qp, off);   /* no room: dropped, as UDP drops */
		return;
	}
	queue(rs->ds, qp, off, len, NULL);
}

static void poll_qp(struct srn_rs *rs, struct srn_ds_qp *qp)
{
	struct ibv_wc wc[16];
	int n;
	while ((n = ibv_poll_cq(qp->cq, 16, wc)) > 0)
		for (int i = 0; i < n; i++) {
			if (wc[i].wr_id & SRN_RS_WR_RECV)
				on_recv(rs, qp, &wc[i]);
			else if (rs->ds->nsfree < rs->sq_size)
				rs->ds->sfree[rs->ds->nsfree++] = (uint16_t)wc[i].wr_id;
		}
}

/* A datagram on the UDP socket to dest: the UDP header, then iov.  A
 * socket bound to the any address names its source (the QP's address)
 * with IP_PKTINFO / IPV6_PKTINFO so the peer sees one address for us. */
static ssize_t udp_out(struct srn_rs *rs, struct srn_ds_dest *dest, enum srn_ds_udp_op op,
		       const struct iovec *iov, int iovcnt)
{
	struct srn_ds_qp *qp = dest->qp;
	uint8_t hdr[SRN_DS_UDP_MAX];
	struct iovec v[9];
	if (iovcnt > 8)
		return -EMSGSIZE;
	v[0] = (struct iovec){ hdr, srn_ds_udp_pack(op, qp->id->qp->qp_num,
						    (struct sockaddr *)&qp->addr, hdr) };
	for (int i = 0; i < iovcnt; i++)
		v[i + 1] = iov[i];
	union {
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
		struct cmsghdr align;
	} c;
	memset(&c, 0, sizeof(c));
	struct msghdr m = { .msg_name = &dest->addr,
			    .msg_namelen = srn_ds_addrlen((struct sockaddr *)&dest->addr),
			    .msg_iov = v, .msg_iovlen = (size_t)iovcnt + 1 };
	if (rs->ds->wildcard) {
		m.msg_control = c.buf;
		struct cmsghdr *h = (struct cmsghdr *)c.buf;
		if (qp->addr.ss_family == AF_INET) {
			struct in_pktinfo pi = { .ipi_spec_dst = ((struct sockaddr_in *)&qp->addr)->sin_addr };
			*h = (struct cmsghdr){ .cmsg_len = CMSG_LEN(sizeof(pi)), .cmsg_level = IPPROTO_IP,
					       .cmsg_type = IP_PKTINFO };
			memcpy(CMSG_DATA(h), &pi, sizeof(pi));
			m.msg_controllen = CMSG_SPACE(sizeof(pi));
		} else {
			struct in6_pktinfo pi = { .ipi6_addr = ((struct sockaddr_in6 *)&qp->addr)->sin6_addr };
			*h = (struct cmsghdr){ .cmsg_len = CMSG_LEN(sizeof(pi)), .cmsg_level = IPPROTO_IPV6,
					       .cmsg_type = IPV6_PKTINFO };
			memcpy(CMSG_DATA(h), &pi, sizeof(pi));
			m.msg_controllen = CMSG_SPACE(sizeof(pi));
		}
	}
	ssize_t n = sendmsg(rs->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0)
		return -errno;
	return n >= (ssize_t)v[0].iov_len ? n - (ssize_t)v[0].iov_len : 0;
}

/* One datagram from the UDP socket: the handshake of a peer without our
 * QPN, perhaps with a payload.  false: nothing (more) to read. */
static bool udp_in_one(struct srn_rs *rs)
{
	struct srn_ds *ds = rs->ds;
	uint8_t buf[SRN_DS_UDP_MAX + SRN_DS_MSG_MAX];
	struct sockaddr_storage from;
	socklen_t fl = sizeof(from);
	ssize_t n = recvfrom(rs->fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC,
			     (struct sockaddr *)&from, &fl);
	if (n < 0)
		return false;
	struct srn_ds_udp h;
	if (n > (ssize_t)sizeof(buf) || srn_ds_udp_parse(buf, (size_t)n, from.ss_family, &h) < 0) {
		srn_ds_count_malformed(rs, NULL);
		return true;
	}
	struct srn_ds_dest *dest;
	if (srn_ds_get_dest(rs, (struct sockaddr *)&from, fl, &dest))
		return true;         /* no QP reaches the sender: it gets no answer */
	uint32_t plen = (uint32_t)n - h.len;
	if (h.op == SRN_DS_UDP_DATA)
		udp_out(rs, dest, SRN_DS_UDP_CTRL, NULL, 0);
	if (!dest->ah || dest->qpn != h.qpn)
		srn_ds_make_ah(dest, h.qpn);
	if (h.op != SRN_DS_UDP_DATA)
		return true;
	uint8_t sh[SRN_DS_HDR_MAX];
	size_t shl = srn_ds_hdr_pack((struct sockaddr *)&from, sh);
	if (shl + plen > SRN_DS_MSG_MAX) {
		srn_ds_count_malformed(rs, dest->qp);
		return true;
	}
	if (!ds->rqe_avail)
		return true;
	uint8_t *copy = malloc(shl + plen);
	if (!copy)
		return true;
	memcpy(copy, sh, shl);
	memcpy(copy + shl, buf + h.len, plen);
	queue(ds, NULL, 0, (uint32_t)(shl + plen), copy);
	return true;
}

void srn_ds_progress(struct srn_rs *rs)
{
	struct srn_ds *ds = rs->ds;
	if (!ds->ep)
		return;
	for (int i = 0; i < SRN_DS_UDP_BATCH && udp_in_one(rs); i++)
		;
	for (struct srn_ds_qp *qp = ds->qps; qp; qp = qp->next)
		poll_qp(rs, qp);
}

bool srn_ds_arm(struct srn_rs *rs)
{
	bool now = false;
	for (struct srn_ds_qp *qp = rs->ds->qps; qp; qp = qp->next)
		if (!qp->armed && !ibv_req_notify_cq(qp->cq, 0))
			now = qp->armed = true;
	return now;
}

void srn_ds_take_events(struct srn_rs *rs)
{
	for (struct srn_ds_qp *qp = rs->ds->qps; qp; qp = qp->next) {
		struct ibv_cq *cq;
		void *ctx;
		/* Ack at once: ibv_destroy_cq waits for unacked events. */
		for (int i = 0; i < 4 && !ibv_get_cq_event(qp->ch, &cq, &ctx); i++) {
			ibv_ack_cq_events(cq, 1);
			qp->armed = false;
		}
	}
}

static bool have_data(const struct srn_rs *rs)
{
	return rs->ds->head != rs->ds->tail || !rs->readable;
}

static bool can_send(const struct srn_rs *rs)
{
	return rs->ds->nsfree > 0 || !rs->writable;
}

short srn_ds_revents(const struct srn_rs *rs, short events)
{
	const struct srn_ds *ds = rs->ds;
	short r = 0;
	if (ds->head != ds->tail)
		r |= POLLIN;
	if (!ds->ep || ds->nsfree > 0)
		r |= POLLOUT;
	return (short)(r & events);
}

bool srn_ds_all_sent(const struct srn_rs *rs)
{
	return !rs->ds->ep || rs->ds->nsfree == rs->sq_size;
}

static bool nonblocking(const struct srn_rs *rs, int flags)
{
	return (rs->fd_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT);
}

static size_t iov_total(const struct iovec *iov, int iovcnt)
{
	size_t t = 0;
	for (int i = 0; i < iovcnt; i++)
		t += iov[i].iov_len;
	return t;
}

ssize_t srn_ds_send(struct srn_rs *rs, const struct iovec *iov, int iovcnt, int flags,
		    const struct sockaddr *to, socklen_t tolen)
{
	struct srn_ds *ds = rs->ds;
	int ret = srn_ds_init_ep(rs);
	if (ret)
		return ret;
	if (!rs->writable)
		return -EPIPE;
	struct srn_ds_dest *dest = ds->conn;
	if (to) {
		if (!dest || !srn_ds_same_addr(to, (struct sockaddr *)&dest->addr))
			ret = srn_ds_get_dest(rs, to, tolen, &dest);
		if (ret)
			return ret;
	} else if (!dest) {
		return -EDESTADDRREQ;
	}
	size_t len = iov_total(iov, iovcnt);
	if (len + dest->qp->hdr_len > SRN_DS_MSG_MAX)
		return -EMSGSIZE;
	if (!dest->ah) {
		/* The peer's CTRL reply may be waiting: take it first. */
		srn_ds_progress(rs);
		if (!dest->ah)
			return udp_out(rs, dest, SRN_DS_UDP_DATA, iov, iovcnt);
	}
	if (len + dest->qp->hdr_len > dest->qp->mtu)
		return -EMSGSIZE;    /* a UD message is one packet */
	if (!ds->nsfree) {
		ret = srn_rs_wait(rs, nonblocking(rs, flags), -1, can_send);
		if (ret)
			return ret;
		if (!rs->writable)
			return -EPIPE;
	}
	uint16_t slot = ds->sfree[--ds->nsfree];
	uint8_t *p = ds->sbuf + (size_t)slot * SRN_DS_MSG_MAX;
	struct srn_ds_qp *qp = dest->qp;
	memcpy(p, qp->hdr, qp->hdr_len);
	size_t off = qp->hdr_len;
	for (int i = 0; i < iovcnt; i++) {
		memcpy(p + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	struct ibv_sge sg = { (uintptr_t)p, (uint32_t)off, qp->smr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = slot, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED | (off <= rs->sq_inline ? IBV_SEND_INLINE : 0),
		.wr.ud = { .ah = dest->ah, .remote_qpn = dest->qpn, .remote_qkey = RDMA_UDP_QKEY },
	}, *bad;
	ret = ibv_post_send(qp->id->qp, &wr, &bad);
	if (ret) {
		ds->sfree[ds->nsfree++] = slot;
		return -ret;
	}
	return (ssize_t)len;
}

ssize_t srn_ds_recv(struct srn_rs *rs, const struct iovec *iov, int iovcnt, int flags,
		    struct sockaddr *from, socklen_t *fromlen)
{
	struct srn_ds *ds = rs->ds;
	int ret = srn_ds_init_ep(rs);
	if (ret)
		return ret;
	if (ds->head == ds->tail) {
		ret = srn_rs_wait(rs, nonblocking(rs, flags), -1, have_data);
		if (ret)
			return ret;
		if (ds->head == ds->tail)
			return 0;    /* rshutdown(SHUT_RD): no more datagrams */
	}
	struct srn_ds_msg *m = &ds->rmsg[ds->head];
	const uint8_t *base = m->copy ? m->copy : m->qp->rbuf + m->off;
	struct sockaddr_storage src;
	socklen_t sl;
	int hl = srn_ds_hdr_parse(base, m->len, &src, &sl);   /* checked when queued */
	size_t plen = m->len - (uint32_t)(hl > 0 ? hl : 0), done = 0;
	for (int i = 0; i < iovcnt && done < plen; i++) {
		size_t n = plen - done < iov[i].iov_len ? plen - done : iov[i].iov_len;
		memcpy(iov[i].iov_base, base + hl + done, n);
		done += n;
	}
	if (from && fromlen) {
		memcpy(from, &src, *fromlen < sl ? *fromlen : sl);
		*fromlen = sl;
	}
	if (!(flags & MSG_PEEK)) {
		if (m->copy)
			free(m->copy);
		else
			srn_ds_repost(rs, m->qp, m->off);
		ds->head = (ds->head + 1) % ds->size;
		ds->rqe_avail++;
	}
	return (ssize_t)(flags & MSG_TRUNC ? plen : done);
}
