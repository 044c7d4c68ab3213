/*
 * setup.c - rsocket, rbind, rlisten, raccept, rconnect: an rsocket is an
 * rdma_cm id (RDMA_PS_TCP, so the service IDs and the IP CM header are
 * those of any rdma_cm TCP port) on an event channel of its own; cmev.c
 * turns its events into states.  A SOCK_DGRAM rsocket is a kernel UDP
 * socket and UD QPs (dgram.c); these calls hand it over.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <netinet/in.h>

#include "rdmacm/export.h"
#include "rsocket/rs.h"

SRN_RDMACM_EXPORT int rsocket(int domain, int type, int protocol)
{
	int flags = type & (SOCK_NONBLOCK | SOCK_CLOEXEC);
	type &= ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (domain != AF_INET && domain != AF_INET6)
		return srn_rs_seterr(-EAFNOSUPPORT);
	bool dgram = type == SOCK_DGRAM && (!protocol || protocol == IPPROTO_UDP);
	if (!dgram && (type != SOCK_STREAM || (protocol && protocol != IPPROTO_TCP)))
		return srn_rs_seterr(-EOPNOTSUPP);
	struct srn_rs *rs = srn_rs_alloc(NULL);
	if (!rs)
		return srn_rs_seterr(-ENOMEM);
	int ret = -ENOMEM;
	rs->domain = domain;
	rs->fd_flags = flags & SOCK_NONBLOCK ? O_NONBLOCK : 0;
	if (dgram) {
		ret = srn_ds_socket(rs, domain, flags);
		if (!ret)
			ret = srn_rs_table_add(rs);
		if (ret)
			goto err;
		return rs->fd;
	}
	rs->ch = srn_rs_new_channel();
	if (!rs->ch) {
		ret = -(errno ? errno : ENODEV);
		goto err;
	}
	if (flags & SOCK_CLOEXEC)
		fcntl(rs->ch->fd, F_SETFD, FD_CLOEXEC);
	if (rdma_create_id(rs->ch, &rs->id, rs, RDMA_PS_TCP)) {
		ret = -errno;
		goto err;
	}
	rs->fd = rs->ch->fd;
	ret = srn_rs_table_add(rs);
	if (ret)
		goto err;
	return rs->fd;
err:
	srn_rs_free(rs);
	return srn_rs_seterr(ret);
}

static int addr_ok(const struct sockaddr *addr, socklen_t len)
{
	if (!addr)
		return -EFAULT;
	if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in))
		return 0;
	if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6))
		return 0;
	return addr->sa_family == AF_INET || addr->sa_family == AF_INET6 ? -EINVAL : -EAFNOSUPPORT;
}

SRN_RDMACM_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	int ret = addr_ok(addr, addrlen);
	if (ret)
		return srn_rs_seterr(ret);
	struct srn_rs *rs = srn_rs_get(socket);
	if (!rs)
		return -1;
	if (rs->ds)
		ret = srn_ds_bind(rs, addr, addrlen);
	else if (rs->state != SRN_RS_INIT)
		ret = -EINVAL;
	else if (rdma_bind_addr(rs->id, (struct sockaddr *)addr))
		ret = -errno;
	else
		rs->state = SRN_RS_BOUND;
	srn_rs_put(rs);
	return srn_rs_seterr(ret);
}

SRN_RDMACM_EXPORT int rlisten(int socket, int backlog)
{
	struct srn_rs *rs = srn_rs_get(socket);
	if (!rs)
		return -1;
	int ret = 0;
	if (rs->ds) {
		ret = -EOPNOTSUPP;   /* as listen(2) on a UDP socket */
		goto out;
	}
	if (rs->state == SRN_RS_LISTENING)
		goto out;
	if (rs->state != SRN_RS_INIT && rs->state != SRN_RS_BOUND) {
		ret = -EINVAL;
		goto out;
	}
	if (rdma_listen(rs->id, backlog)) {
		ret = -errno;
		goto out;
	}
	rs->backlog = backlog > 0 && backlog < 1024 ? backlog : 1024;
	rs->state = SRN_RS_LISTENING;
out:
	srn_rs_put(rs);
	return srn_rs_seterr(ret);
}

static bool have_request(const struct srn_rs *rs)
{
	return rs->accept_head != NULL || rs->state != SRN_RS_LISTENING;
}

static void copy_addr(struct sockaddr *dst, socklen_t *len, const struct sockaddr *src)
{
	socklen_t have = src->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
						    : sizeof(struct sockaddr_in);
	memcpy(dst, src, *len < have ? *len : have);
	*len = have;
}

SRN_RDMACM_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct srn_rs *ls = srn_rs_get(socket);
	if (!ls)
		return -1;
	int ret = ls->ds ? -EOPNOTSUPP : -EINVAL;
	if (ls->state == SRN_RS_LISTENING && !ls->ds)
		ret = srn_rs_wait(ls, ls->fd_flags & O_NONBLOCK, -1, have_request);
	if (!ret && !ls->accept_head)
		ret = -EINVAL;     /* closed while we waited */
	if (ret) {
		srn_rs_put(ls);
		return srn_rs_seterr(ret);
	}
	struct srn_rs *rs = ls->accept_head;
	ls->accept_head = rs->accept_next;
	if (!ls->accept_head)
		ls->accept_tail = NULL;
	rs->accept_next = NULL;
	ls->nqueued--;
	int fd = rs->fd;
	if (addr && addrlen)
		copy_addr(addr, addrlen, rdma_get_peer_addr(rs->id));
	srn_rs_put(ls);
	return fd;
}

static bool open_done(const struct srn_rs *rs)
{
	return rs->state != SRN_RS_RESOLVING && rs->state != SRN_RS_CONNECTING;
}

SRN_RDMACM_EXPORT int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	int ret = addr_ok(addr, addrlen);
	if (ret)
		return srn_rs_seterr(ret);
	struct srn_rs *rs = srn_rs_get(socket);
	if (!rs)
		return -1;
	bool nb = rs->fd_flags & O_NONBLOCK;
	if (rs->ds) {
		ret = srn_ds_connect(rs, addr, addrlen);
		goto out;
	}
	switch (rs->state) {
	case SRN_RS_INIT:
	case SRN_RS_BOUND:
		rs->state = SRN_RS_RESOLVING;
		if (rdma_resolve_addr(rs->id, NULL, (struct sockaddr *)addr, SRN_RS_RESOLVE_MS)) {
			rs->state = SRN_RS_ERROR;
			ret = -errno;
			goto out;
		}
		break;
	case SRN_RS_RESOLVING:
	case SRN_RS_CONNECTING:
		break;       /* a second rconnect of a non-blocking socket */
	case SRN_RS_CONNECTED:
		ret = -EISCONN;
		goto out;
	default:
		ret = -EINVAL;
		goto out;
	}
	ret = srn_rs_wait(rs, nb, -1, open_done);
	if (ret == -EAGAIN) {
		ret = -EINPROGRESS;
	} else if (!ret && rs->state == SRN_RS_ERROR) {
		ret = -(rs->err ? rs->err : ECONNREFUSED);
		rs->err = 0;   /* reported here, not again by SO_ERROR */
	}
out:
	srn_rs_put(rs);
	return srn_rs_seterr(ret);
}
