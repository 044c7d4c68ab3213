/*
 * stubs.c - the parts of librdmacm not built yet.  They exist so every
 * binary linked against Debian's librdmacm loads; each fails the way its
 * man page says a failure looks (-1, NULL or (off_t)-1) with errno
 * EOPNOTSUPP, and never pretends to work:
 *   rsockets (rsocket ... riomap): not implemented; librspreload not built;
 *   ECE (rdma_set_local_ece, rdma_get_remote_ece).
 */
#include <errno.h>
#include <poll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include "rdmacm/export.h"

#define FAIL(v) do { errno = EOPNOTSUPP; return (v); } while (0)

SRN_RDMACM_EXPORT int rsocket(int domain, int type, int protocol)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT int rlisten(int socket, int backlog)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT int rshutdown(int socket, int how)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT int rclose(int socket)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, struct timeval *timeout)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT int rsetsockopt(int socket, int level, int optname, const void *optval, socklen_t optlen)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT int rfcntl(int socket, int cmd, ... /* arg */)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT int riounmap(int socket, void *buf, size_t len)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags, struct sockaddr *src_addr, socklen_t *addrlen)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags, const struct sockaddr *dest_addr, socklen_t addrlen)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT ssize_t rread(int socket, void *buf, size_t count)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
	FAIL((off_t)-1);
}

SRN_RDMACM_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	FAIL(-1);
}
