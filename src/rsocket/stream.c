/*
 * stream.c - the byte-stream calls of <rdma/rsocket.h>: rrecv, rrecvfrom,
 * rrecvmsg, rread, rreadv, rsend, rsendto, rsendmsg, rwrite, rwritev.
 *
 * Semantics follow TCP where rdma-core's rsockets do: a call returns what
 * it moved so far rather than an error; reading returns queued data even
 * after the peer closed, then 0 (end of stream); a connection that failed
 * (the peer vanished, a protocol lie) reads ECONNRESET once the queue is
 * empty; writing to a closed or failed connection is ECONNRESET.
 * MSG_DONTWAIT or O_NONBLOCK turn every wait into EAGAIN.  A datagram
 * socket's calls go to dgram_xfer.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "rdmacm/export.h"
#include "rsocket/rs.h"

static bool nonblocking(const struct srn_rs *rs, int flags)
{
	return (rs->fd_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT);
}

static bool opening(const struct srn_rs *rs)
{
	return rs->state == SRN_RS_RESOLVING || rs->state == SRN_RS_CONNECTING;
}

static bool open_done(const struct srn_rs *rs)
{
	return !opening(rs);
}

/* A call on a socket whose rconnect has not finished waits for it (or is
 * EAGAIN); one never connected is ENOTCONN.  0: go on. */
static int ready_for_data(struct srn_rs *rs, bool nonblock)
{
	if (opening(rs)) {
		int ret = srn_rs_wait(rs, nonblock, -1, open_done);
		if (ret)
			return ret;
	}
	if (rs->state == SRN_RS_INIT || rs->state == SRN_RS_BOUND || rs->state == SRN_RS_LISTENING)
		return -ENOTCONN;
	return 0;
}

static bool can_read(const struct srn_rs *rs)
{
	return srn_rs_have_data(rs) || !rs->readable || !srn_rs_connected(rs);
}

static bool can_write(const struct srn_rs *rs)
{
	return srn_rs_can_send(rs) || !rs->writable || !srn_rs_connected(rs);
}

/* Copy up to len queued bytes out; consume them unless peek. */
static size_t take(struct srn_rs *rs, uint8_t *dst, size_t len, bool peek)
{
	size_t done = 0;
	unsigned head = rs->rmsg_head;
	uint32_t rd = rs->rbuf_read;
	uint32_t partial = 0;     /* bytes taken from a message left in the queue */
	while (done < len && head != rs->rmsg_tail) {
		uint32_t m = rs->rmsg[head];
		uint32_t n = len - done < m ? (uint32_t)(len - done) : m;
		uint32_t first = rs->rbuf_size - rd < n ? rs->rbuf_size - rd : n;
		memcpy(dst + done, rs->rbuf + rd, first);
		memcpy(dst + done + first, rs->rbuf, n - first);
		rd = (rd + n) % rs->rbuf_size;
		done += n;
		if (n < m) {
			partial = n;
			break;
		}
		head = (head + 1) % rs->rmsg_size;
		if (!peek)
			rs->rseq_no++;
	}
	if (!peek) {
		if (partial)
			rs->rmsg[head] -= partial;
		rs->rmsg_head = head;
		rs->rbuf_read = rd;
		rs->rbuf_free += (uint32_t)done;
		rs->rbuf_queued -= (uint32_t)done;
	}
	return done;
}

static ssize_t recv_locked(struct srn_rs *rs, const struct iovec *iov, int iovcnt, int flags)
{
	bool nb = nonblocking(rs, flags);
	int ret = ready_for_data(rs, nb);
	if (ret)
		return ret;
	size_t total = 0, want = 0;
	for (int i = 0; i < iovcnt; i++)
		want += iov[i].iov_len;
	int i = 0;
	size_t off = 0;
	do {
		if (!srn_rs_have_data(rs)) {
			ret = srn_rs_wait(rs, nb, -1, can_read);
			if (ret || !srn_rs_have_data(rs))
				break;
		}
		if (flags & MSG_PEEK) {
			total = take(rs, iov[0].iov_base, iov[0].iov_len, true);
			break;
		}
		while (i < iovcnt && srn_rs_have_data(rs)) {
			size_t n = take(rs, (uint8_t *)iov[i].iov_base + off, iov[i].iov_len - off, false);
			total += n;
			off += n;
			if (off == iov[i].iov_len) {
				i++;
				off = 0;
			}
		}
	} while (total < want && (flags & MSG_WAITALL) && rs->readable && srn_rs_connected(rs));
	/* Freed buffer goes back to the peer now, not at our next call. */
	srn_rs_credits(rs);
	if (total || want == 0)
		return (ssize_t)total;
	if (ret)
		return ret;
	if (rs->state == SRN_RS_ERROR)
		return -(rs->err ? rs->err : ECONNRESET);
	return 0;    /* end of stream */
}

/* rrecvfrom on a stream: the peer's address, as rgetpeername gives it. */
static ssize_t rs_peer_name(struct srn_rs *rs, struct sockaddr *from, socklen_t *fromlen, ssize_t n)
{
	const struct sockaddr *a = rdma_get_peer_addr(rs->id);
	socklen_t have = a->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	memcpy(from, a, *fromlen < have ? *fromlen : have);
	*fromlen = have;
	return n;
}

static ssize_t recv_iov_from(int fd, const struct iovec *iov, int iovcnt, int flags,
			     struct sockaddr *from, socklen_t *fromlen)
{
	if (iovcnt < 0 || (iovcnt > 0 && !iov))
		return srn_rs_seterr(-EINVAL);
	struct srn_rs *rs = srn_rs_get(fd);
	if (!rs)
		return -1;
	ssize_t ret;
	if (rs->ds) {
		ret = srn_ds_recv(rs, iov, iovcnt, flags, from, fromlen);
	} else {
		ret = recv_locked(rs, iov, iovcnt, flags);
		if (ret >= 0 && from && fromlen)
			ret = rs_peer_name(rs, from, fromlen, ret);
	}
	srn_rs_put(rs);
	return ret < 0 ? srn_rs_seterr((int)ret) : ret;
}

static ssize_t recv_iov(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	return recv_iov_from(fd, iov, iovcnt, flags, NULL, NULL);
}

struct iov_cursor {
	const struct iovec *iov;
	int cnt;
	size_t off;
};

/* Move the cursor over n bytes, copying them into dst unless it is NULL;
 * it never rests on an exhausted or empty iovec. */
static void gather(struct iov_cursor *c, uint8_t *dst, size_t n)
{
	for (;;) {
		while (c->cnt > 0 && c->off == c->iov->iov_len) {
			c->iov++;
			c->cnt--;
			c->off = 0;
		}
		if (!n || c->cnt == 0)
			return;
		size_t a = c->iov->iov_len - c->off;
		if (a > n)
			a = n;
		if (dst) {
			memcpy(dst, (const uint8_t *)c->iov->iov_base + c->off, a);
			dst += a;
		}
		n -= a;
		c->off += a;
	}
}

/* One data message of up to len bytes from the cursor: small ones are
 * gathered (and go inline), larger ones end where the current iovec does,
 * so the source is contiguous for the copy into sbuf.  Returns the bytes
 * sent or -errno. */
static int send_one(struct srn_rs *rs, struct iov_cursor *c, uint32_t len)
{
	struct srn_rs_sge *t = &rs->tslots[rs->tslot];
	uint8_t tmp[SRN_RS_GATHER_MAX];
	const void *src;
	if (len <= rs->sq_inline && len <= sizeof(tmp)) {
		gather(c, tmp, len);
		src = tmp;
	} else {
		size_t here = c->iov->iov_len - c->off;
		if (len > here)
			len = (uint32_t)here;
		src = (const uint8_t *)c->iov->iov_base + c->off;
		gather(c, NULL, len);
	}
	/* Move the slot on before the Write goes out: the moment it does,
	 * the peer may read it, free the buffer and write the slot anew (a
	 * grant we must not then overwrite with our old arithmetic). */
	uint64_t raddr = t->addr;
	uint32_t rkey = t->key;
	int slot = rs->tslot;
	t->addr += len;
	t->length -= len;
	if (t->length == 0)
		rs->tslot = (rs->tslot + 1) % SRN_RS_SGL_SLOTS;
	int ret = srn_rs_post_write(rs, srn_rs_imm(SRN_RS_OP_DATA, len), true, src, len, raddr,
				    rkey, true);
	if (ret) {
		/* Not sent, so the peer saw nothing: the slot is still ours. */
		t->addr = raddr;
		t->length += len;
		rs->tslot = slot;
		return ret;
	}
	rs->sseq_no++;
	return (int)len;
}

static ssize_t send_locked(struct srn_rs *rs, const struct iovec *iov, int iovcnt, int flags)
{
	bool nb = nonblocking(rs, flags);
	int ret = ready_for_data(rs, nb);
	if (ret)
		return ret;
	if (rs->iomap_pending) {
		ret = srn_rs_send_iomaps(rs, nb);
		if (ret)
			return ret;
	}
	size_t left = 0, sent = 0;
	for (int i = 0; i < iovcnt; i++)
		left += iov[i].iov_len;
	struct iov_cursor c = { iov, iovcnt, 0 };
	gather(&c, NULL, 0);
	while (left) {
		if (!srn_rs_can_send(rs)) {
			ret = srn_rs_wait(rs, nb, -1, can_write);
			if (ret)
				break;
			if (!rs->writable || !srn_rs_connected(rs)) {
				ret = -(rs->state == SRN_RS_ERROR && rs->err ? rs->err : ECONNRESET);
				if (rs->state != SRN_RS_ERROR && !rs->writable)
					ret = -EPIPE;
				break;
			}
		}
		uint32_t n = left < SRN_RS_MAX_XFER ? (uint32_t)left : SRN_RS_MAX_XFER;
		if (n > rs->sbuf_avail)
			n = rs->sbuf_avail;
		uint32_t sl = rs->tslots[rs->tslot].length;
		if (n > sl)
			n = sl;
		ret = send_one(rs, &c, n);
		if (ret < 0)
			break;
		left -= (size_t)ret;
		sent += (size_t)ret;
		ret = 0;
	}
	if (sent)
		return (ssize_t)sent;
	return ret;
}

static ssize_t send_iov_to(int fd, const struct iovec *iov, int iovcnt, int flags,
			   const struct sockaddr *to, socklen_t tolen)
{
	if (iovcnt < 0 || (iovcnt > 0 && !iov))
		return srn_rs_seterr(-EINVAL);
	struct srn_rs *rs = srn_rs_get(fd);
	if (!rs)
		return -1;
	ssize_t ret;
	if (rs->ds)
		ret = srn_ds_send(rs, iov, iovcnt, flags, to, tolen);
	else if (to || tolen)
		ret = -EISCONN;      /* a stream has its one peer */
	else
		ret = send_locked(rs, iov, iovcnt, flags);
	srn_rs_put(rs);
	return ret < 0 ? srn_rs_seterr((int)ret) : ret;
}

static ssize_t send_iov(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	return send_iov_to(fd, iov, iovcnt, flags, NULL, 0);
}

SRN_RDMACM_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	struct iovec v = { buf, len };
	return recv_iov(socket, &v, 1, flags);
}

SRN_RDMACM_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags,
				    struct sockaddr *src_addr, socklen_t *addrlen)
{
	struct iovec v = { buf, len };
	return recv_iov_from(socket, &v, 1, flags, src_addr, addrlen);
}

SRN_RDMACM_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	if (!msg)
		return srn_rs_seterr(-EINVAL);
	if (msg->msg_control && msg->msg_controllen)
		return srn_rs_seterr(-EOPNOTSUPP);
	return recv_iov_from(socket, msg->msg_iov, (int)msg->msg_iovlen, flags,
			     msg->msg_name, msg->msg_name ? &msg->msg_namelen : NULL);
}

SRN_RDMACM_EXPORT ssize_t rread(int socket, void *buf, size_t count)
{
	return rrecv(socket, buf, count, 0);
}

SRN_RDMACM_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	return recv_iov(socket, iov, iovcnt, 0);
}

SRN_RDMACM_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	struct iovec v = { (void *)buf, len };
	return send_iov(socket, &v, 1, flags);
}

SRN_RDMACM_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
				  const struct sockaddr *dest_addr, socklen_t addrlen)
{
	struct iovec v = { (void *)buf, len };
	return send_iov_to(socket, &v, 1, flags, dest_addr, addrlen);
}

SRN_RDMACM_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	if (!msg)
		return srn_rs_seterr(-EINVAL);
	if (msg->msg_control && msg->msg_controllen)
		return srn_rs_seterr(-EOPNOTSUPP);
	return send_iov_to(socket, msg->msg_iov, (int)msg->msg_iovlen, flags, msg->msg_name,
			   msg->msg_name ? msg->msg_namelen : 0);
}

SRN_RDMACM_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return rsend(socket, buf, count, 0);
}

SRN_RDMACM_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	return send_iov(socket, iov, iovcnt, 0);
}
