/*
 * opts.c - rsetsockopt, rgetsockopt, rfcntl, rgetpeername, rgetsockname.
 *
 * Options that shape the connection (buffer sizes, queue depths, inline
 * size, iomap table size) count only before the QP exists; after that
 * they are accepted and have no effect, as in rdma-core.  Options with no
 * meaning on RDMA (TCP_NODELAY, SO_LINGER, keepalive timings) are kept so
 * rgetsockopt returns what was set.  SO_KEEPALIVE is recorded but sends
 * no keepalive messages.  RDMA_ROUTE is accepted and ignored: routes come
 * from rdma_resolve_route.  A datagram socket passes socket-level
 * options to its kernel UDP socket, as rdma-core's does.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rdma/rsocket.h>

#include "rdmacm/export.h"
#include "rsocket/rs.h"

static int int_arg(const void *optval, socklen_t optlen, int *out)
{
	if (!optval || optlen < sizeof(int))
		return -EINVAL;
	memcpy(out, optval, sizeof(int));
	return 0;
}

static void set_bit(uint64_t *opts, int optname, bool on)
{
	if (optname < 0 || optname >= 64)
		return;
	if (on)
		*opts |= 1ull << optname;
	else
		*opts &= ~(1ull << optname);
}

static bool get_bit(uint64_t opts, int optname)
{
	return optname >= 0 && optname < 64 && (opts & (1ull << optname));
}

static uint32_t buf_size(int v)
{
	/* Linux doubles SO_RCVBUF/SO_SNDBUF values; so does rsockets. */
	uint64_t s = v > 0 ? (uint64_t)v * 2 : 0;
	if (s < 4 * SRN_RS_SNDLOWAT)
		s = 4 * SRN_RS_SNDLOWAT;
	if (s > SRN_RS_MAX_MEM)
		s = SRN_RS_MAX_MEM;
	return (uint32_t)s;
}

/* A datagram socket: socket-level options are its UDP socket's (as in
 * rdma-core); the buffer and queue sizes count until its buffers exist. */
static int ds_set(struct srn_rs *rs, int level, int optname, const void *optval, socklen_t optlen)
{
	int v;
	if (level != SOL_RDMA) {
		if (setsockopt(rs->fd, level, optname, optval, optlen))
			return -errno;
		if (level == SOL_SOCKET && (optname == SO_RCVBUF || optname == SO_SNDBUF) &&
		    !rs->ds->ep && !int_arg(optval, optlen, &v))
			*(optname == SO_RCVBUF ? &rs->rbuf_size : &rs->sbuf_size) = buf_size(v);
		return 0;
	}
	if (int_arg(optval, optlen, &v))
		return -EINVAL;
	if (optname == RDMA_ROUTE)
		return 0;
	if (optname != RDMA_SQSIZE && optname != RDMA_RQSIZE && optname != RDMA_INLINE)
		return -ENOPROTOOPT;
	if (rs->ds->ep)
		return -EINVAL;
	uint16_t n = (uint16_t)(v > SRN_RS_QP_MAX || v < 0 ? SRN_RS_QP_MAX : v);
	*(optname == RDMA_SQSIZE ? &rs->sq_size : optname == RDMA_RQSIZE ? &rs->rq_size : &rs->sq_inline) = n;
	return 0;
}

static int ds_get(struct srn_rs *rs, int level, int optname, void *optval, socklen_t *optlen)
{
	int v;
	if (level == SOL_SOCKET && optname == SO_RCVBUF)
		v = (int)rs->rbuf_size;
	else if (level == SOL_SOCKET && optname == SO_SNDBUF)
		v = (int)rs->sbuf_size;
	else if (level != SOL_RDMA)
		return getsockopt(rs->fd, level, optname, optval, optlen) ? -errno : 0;
	else if (optname == RDMA_SQSIZE)
		v = rs->sq_size;
	else if (optname == RDMA_RQSIZE)
		v = rs->rq_size;
	else if (optname == RDMA_INLINE)
		v = rs->sq_inline;
	else
		return -ENOPROTOOPT;
	if (*optlen < sizeof(int))
		return -EINVAL;
	memcpy(optval, &v, sizeof(v));
	*optlen = sizeof(int);
	return 0;
}

/* SOL_SOCKET options.  early: the QP and buffers do not exist yet. */
static int set_socket_opt(struct srn_rs *rs, int optname, int v, bool early)
{
	switch (optname) {
	case SO_REUSEADDR:
		if (rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &v,
				    sizeof(v)) && rs->state == SRN_RS_INIT)
			return -errno;
		break;
	case SO_RCVBUF:
		if (early)
			rs->rbuf_size = buf_size(v);
		return 0;
	case SO_SNDBUF:
		if (early)
			rs->sbuf_size = buf_size(v);
		return 0;
	case SO_KEEPALIVE:
	case SO_OOBINLINE:
		break;
	default:
		return -ENOPROTOOPT;
	}
	set_bit(&rs->so_opts, optname, v != 0);
	return 0;
}

static int set_tcp_opt(struct srn_rs *rs, int optname, int v)
{
	switch (optname) {
	case TCP_NODELAY:
		set_bit(&rs->tcp_opts, optname, v != 0);
		return 0;
	case TCP_KEEPIDLE:
		if (v <= 0)
			return -EINVAL;
		rs->keepalive_time = v;
		return 0;
	case TCP_KEEPCNT:
	case TCP_KEEPINTVL:
	case TCP_MAXSEG:
		return 0;    /* a reliable connection has no use for them */
	default:
		return -ENOPROTOOPT;
	}
}

/* SOL_RDMA options: sizes, settable only before the QP exists. */
static int set_rdma_opt(struct srn_rs *rs, int optname, int v, bool early)
{
	if (!early || (rs->state != SRN_RS_INIT && rs->state != SRN_RS_BOUND &&
		       rs->state != SRN_RS_LISTENING))
		return -EINVAL;
	switch (optname) {
	case RDMA_SQSIZE:
		rs->sq_size = (uint16_t)(v > SRN_RS_QP_MAX || v < 0 ? SRN_RS_QP_MAX : v);
		return 0;
	case RDMA_RQSIZE:
		rs->rq_size = (uint16_t)(v > SRN_RS_QP_MAX || v < 0 ? SRN_RS_QP_MAX : v);
		return 0;
	case RDMA_INLINE:
		rs->sq_inline = (uint16_t)(v > SRN_RS_QP_MAX || v < 0 ? SRN_RS_QP_MAX : v);
		return 0;
	case RDMA_IOMAPSIZE:
		/* Only sizes the 8-bit scale carries (proto.h). */
		rs->iomap_size = (uint16_t)srn_rs_scale_from_u8(
			srn_rs_scale_to_u8(v < 0 ? 0 : (unsigned)v));
		return 0;
	case RDMA_ROUTE:
		return 0;
	default:
		return -ENOPROTOOPT;
	}
}

static int set_locked(struct srn_rs *rs, int level, int optname, const void *optval, socklen_t optlen)
{
	int v, ret;
	if (rs->ds)
		return ds_set(rs, level, optname, optval, optlen);
	if (level == SOL_SOCKET && optname == SO_LINGER) {
		if (!optval || optlen < sizeof(struct linger))
			return -EINVAL;
		set_bit(&rs->so_opts, optname, ((const struct linger *)optval)->l_onoff);
		return 0;
	}
	ret = int_arg(optval, optlen, &v);
	if (ret)
		return ret;
	bool early = rs->cq == NULL;    /* the QP and buffers do not exist yet */
	switch (level) {
	case SOL_SOCKET:
		return set_socket_opt(rs, optname, v, early);
	case IPPROTO_TCP:
		return set_tcp_opt(rs, optname, v);
	case IPPROTO_IPV6:
		if (optname != IPV6_V6ONLY)
			return -ENOPROTOOPT;
		if (rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &v, sizeof(v)))
			return -errno;
		set_bit(&rs->ipv6_opts, optname, v != 0);
		return 0;
	case SOL_RDMA:
		return set_rdma_opt(rs, optname, v, early);
	default:
		return -ENOPROTOOPT;
	}
}

SRN_RDMACM_EXPORT int rsetsockopt(int socket, int level, int optname, const void *optval,
				  socklen_t optlen)
{
	struct srn_rs *rs = srn_rs_get(socket);
	if (!rs)
		return -1;
	int ret = set_locked(rs, level, optname, optval, optlen);
	srn_rs_put(rs);
	return srn_rs_seterr(ret);
}

static int get_locked(struct srn_rs *rs, int level, int optname, void *optval, socklen_t *optlen)
{
	int v;
	if (rs->ds)
		return ds_get(rs, level, optname, optval, optlen);
	if (level == SOL_SOCKET && optname == SO_LINGER) {
		if (*optlen < sizeof(struct linger))
			return -EINVAL;
		struct linger l = { .l_onoff = get_bit(rs->so_opts, SO_LINGER), .l_linger = 0 };
		memcpy(optval, &l, sizeof(l));
		*optlen = sizeof(l);
		return 0;
	}
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_REUSEADDR:
		case SO_KEEPALIVE:
		case SO_OOBINLINE:
			v = get_bit(rs->so_opts, optname);
			break;
		case SO_RCVBUF: v = (int)rs->rbuf_size; break;
		case SO_SNDBUF: v = (int)rs->sbuf_size; break;
		case SO_TYPE: v = SOCK_STREAM; break;
		case SO_ERROR:
			/* Progress first: a non-blocking rconnect may have ended. */
			srn_rs_progress(rs);
			v = rs->err;
			rs->err = 0;
			break;
		default:
			return -ENOPROTOOPT;
		}
		break;
	case IPPROTO_TCP:
		switch (optname) {
		case TCP_NODELAY: v = get_bit(rs->tcp_opts, optname); break;
		case TCP_KEEPIDLE: v = rs->keepalive_time; break;
		case TCP_KEEPCNT:
		case TCP_KEEPINTVL: v = 1; break;
		case TCP_MAXSEG:
			v = rs->id && rs->id->route.num_paths ? 128 << rs->id->route.path_rec->mtu : 2048;
			break;
		default:
			return -ENOPROTOOPT;
		}
		break;
	case IPPROTO_IPV6:
		if (optname != IPV6_V6ONLY)
			return -ENOPROTOOPT;
		v = get_bit(rs->ipv6_opts, optname);
		break;
	case SOL_RDMA:
		switch (optname) {
		case RDMA_SQSIZE: v = rs->sq_size; break;
		case RDMA_RQSIZE: v = rs->rq_size; break;
		case RDMA_INLINE: v = rs->sq_inline; break;
		case RDMA_IOMAPSIZE: v = rs->iomap_size; break;
		default: return -ENOPROTOOPT;
		}
		break;
	default:
		return -ENOPROTOOPT;
	}
	if (*optlen < sizeof(int))
		return -EINVAL;
	memcpy(optval, &v, sizeof(v));
	*optlen = sizeof(int);
	return 0;
}

SRN_RDMACM_EXPORT int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{
	if (!optval || !optlen)
		return srn_rs_seterr(-EFAULT);
	struct srn_rs *rs = srn_rs_get(socket);
	if (!rs)
		return -1;
	int ret = get_locked(rs, level, optname, optval, optlen);
	srn_rs_put(rs);
	return srn_rs_seterr(ret);
}

SRN_RDMACM_EXPORT int rfcntl(int socket, int cmd, ... /* arg */)
{
	va_list ap;
	va_start(ap, cmd);
	int arg = cmd == F_SETFL || cmd == F_SETFD ? va_arg(ap, int) : 0;
	va_end(ap);
	struct srn_rs *rs = srn_rs_get(socket);
	if (!rs)
		return -1;
	int ret;
	switch (cmd) {
	case F_GETFL:
		ret = rs->fd_flags | O_RDWR;
		break;
	case F_SETFL:
		/* Only O_NONBLOCK means anything; the descriptors under the
		 * socket stay non-blocking whatever the caller asks. */
		rs->fd_flags = arg & O_NONBLOCK;
		ret = 0;
		break;
	case F_GETFD:
		ret = fcntl(rs->fd, F_GETFD);
		ret = ret < 0 ? -errno : ret;
		break;
	case F_SETFD:
		ret = fcntl(rs->fd, F_SETFD, arg) ? -errno : 0;
		break;
	default:
		ret = -EOPNOTSUPP;
	}
	srn_rs_put(rs);
	return srn_rs_seterr(ret);
}

static int name(int socket, struct sockaddr *addr, socklen_t *addrlen, bool peer)
{
	if (!addr || !addrlen)
		return srn_rs_seterr(-EFAULT);
	struct srn_rs *rs = srn_rs_get(socket);
	if (!rs)
		return -1;
	int ret = 0;
	if (rs->ds) {
		/* A datagram socket's names are its UDP socket's. */
		ret = (peer ? getpeername : getsockname)(rs->fd, addr, addrlen) ? -errno : 0;
		srn_rs_put(rs);
		return srn_rs_seterr(ret);
	}
	const struct sockaddr *a = peer ? rdma_get_peer_addr(rs->id) : rdma_get_local_addr(rs->id);
	if (peer && rs->state != SRN_RS_CONNECTED && rs->state != SRN_RS_DISCONNECTED) {
		ret = -ENOTCONN;
	} else {
		struct sockaddr_storage ss = { .ss_family = (sa_family_t)rs->domain };
		if (a->sa_family == AF_INET || a->sa_family == AF_INET6)
			memcpy(&ss, a, a->sa_family == AF_INET ? sizeof(struct sockaddr_in)
							       : sizeof(struct sockaddr_in6));
		socklen_t have = ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
							  : sizeof(struct sockaddr_in);
		memcpy(addr, &ss, *addrlen < have ? *addrlen : have);
		*addrlen = have;
	}
	srn_rs_put(rs);
	return srn_rs_seterr(ret);
}

SRN_RDMACM_EXPORT int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return name(socket, addr, addrlen, true);
}

SRN_RDMACM_EXPORT int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return name(socket, addr, addrlen, false);
}
