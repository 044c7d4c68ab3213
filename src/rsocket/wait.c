/*
 * wait.c - waiting on rsockets without spinning: srn_rs_wait for one
 * socket (blocking r* calls), rpoll and rselect for any mix of rsockets
 * and ordinary descriptors.
 *
 * An rsocket has two descriptors to sleep on: its rdma_cm event channel
 * (connection events; readable while events are queued) and, once it has
 * a QP, its CQ's completion channel (readable after a completion on an
 * armed CQ).  Before sleeping the CQ is armed and polled once more, so a
 * completion that raced the arming is seen, not slept through.  Sleeps
 * are cut into slices of SRN_RS_WAKE_MS so that a completion event another
 * thread consumed cannot keep this one asleep for long.  A datagram
 * socket sleeps on its UDP socket and on an epoll set of its QPs'
 * completion channels (dgram.h).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>

#include "diag/clock.h"
#include "rdmacm/export.h"
#include "rsocket/rs.h"

#define SRN_RS_WAKE_MS 1000

static int64_t now_ms(void)
{
	return (int64_t)(srn_now_ns() / 1000000);
}

void srn_rs_progress(struct srn_rs *rs)
{
	if (rs->ds) {
		srn_ds_progress(rs);
		return;
	}
	srn_rs_cm_progress(rs);
	if (rs->cq) {
		srn_rs_poll_cq(rs);
		srn_rs_credits(rs);
	}
}

/* Take the completion channel's event (non-blocking) and ack it at once:
 * ibv_destroy_cq waits for unacked events. */
static void take_cq_event(struct srn_rs *rs)
{
	struct ibv_cq *cq;
	void *ctx;
	if (rs->ds) {
		srn_ds_take_events(rs);
		return;
	}
	if (rs->cq_ch && !ibv_get_cq_event(rs->cq_ch, &cq, &ctx)) {
		ibv_ack_cq_events(cq, 1);
		rs->cq_armed = false;
	}
}

/* Arm the CQ if it is not; true if it was armed now (poll again first). */
static bool arm(struct srn_rs *rs)
{
	if (rs->ds)
		return srn_ds_arm(rs);
	if (!rs->cq || rs->cq_armed)
		return false;
	if (ibv_req_notify_cq(rs->cq, 0))
		return false;
	rs->cq_armed = true;
	return true;
}

/* Descriptors to sleep on for rs: 1 or 2 entries. */
static int sleep_fds(const struct srn_rs *rs, struct pollfd *p)
{
	int n = 0;
	if (rs->ds) {
		/* A datagram socket: its UDP socket (a peer's handshake) and
		 * the epoll set of its QPs' completion channels. */
		p[n++] = (struct pollfd){ .fd = rs->fd, .events = POLLIN };
		p[n++] = (struct pollfd){ .fd = rs->ds->epfd, .events = POLLIN };
		return n;
	}
	if (rs->ch)
		p[n++] = (struct pollfd){ .fd = rs->ch->fd, .events = POLLIN };
	if (rs->cq_ch)
		p[n++] = (struct pollfd){ .fd = rs->cq_ch->fd, .events = POLLIN };
	return n;
}

int srn_rs_wait(struct srn_rs *rs, bool nonblock, int timeout_ms, bool (*test)(const struct srn_rs *))
{
	int64_t deadline = timeout_ms >= 0 ? now_ms() + timeout_ms : -1;
	for (;;) {
		srn_rs_progress(rs);
		if (test(rs))
			return 0;
		if (nonblock)
			return -EAGAIN;
		if (arm(rs))
			continue;
		int slice = SRN_RS_WAKE_MS;
		if (deadline >= 0) {
			int64_t left = deadline - now_ms();
			if (left <= 0)
				return -ETIMEDOUT;
			if (left < slice)
				slice = (int)left;
		}
		srn_rs_probe(rs, now_ms());
		struct pollfd p[2];
		int n = sleep_fds(rs, p);
		if (n == 0)
			return -ENOTCONN;
		pthread_mutex_unlock(&rs->lock);
		int r = poll(p, (nfds_t)n, slice);
		pthread_mutex_lock(&rs->lock);
		if (r < 0 && errno == EINTR)
			return -EINTR;
		if (r > 0 && n == 2 && p[1].revents)
			take_cq_event(rs);
	}
}

/* What rpoll reports for rs now.  POLLHUP and POLLERR are reported
 * whatever was asked, as poll does. */
static short rs_revents(const struct srn_rs *rs, short events)
{
	short r = 0;
	if (rs->ds)
		return srn_ds_revents(rs, events);
	switch (rs->state) {
	case SRN_RS_LISTENING:
		if (rs->accept_head)
			r |= POLLIN;
		break;
	case SRN_RS_CONNECTED:
		if (srn_rs_have_data(rs) || !rs->readable)
			r |= POLLIN;
		if (srn_rs_can_send(rs))
			r |= POLLOUT;
		break;
	case SRN_RS_DISCONNECTED:
		/* As TCP after the peer's FIN: readable (data, then end of
		 * stream); hung up only once nothing is left to read, so a
		 * program that treats POLLHUP as the end loses no data. */
		r |= POLLIN;
		if (!srn_rs_have_data(rs))
			r |= POLLHUP;
		if (srn_rs_can_send(rs))
			r |= POLLOUT;
		break;
	case SRN_RS_ERROR:
		/* A failed connect: the caller looks at SO_ERROR after POLLOUT. */
		r |= POLLERR | POLLIN | POLLOUT;
		break;
	default:
		break;
	}
	return (short)(r & (events | POLLHUP | POLLERR));
}

/* rpoll's look at one rsocket: progress, and when nothing is ready arm its
 * CQ and look again.  Fills its sleep descriptors. */
static short rs_check(int fd, short events, struct pollfd *sleep, int *nsleep)
{
	struct srn_rs *rs = srn_rs_get(fd);
	if (!rs)
		return POLLNVAL;
	srn_rs_progress(rs);
	short r = rs_revents(rs, events);
	if (!r && arm(rs)) {
		srn_rs_progress(rs);
		r = rs_revents(rs, events);
	}
	*nsleep = r ? 0 : sleep_fds(rs, sleep);
	if (!r)
		srn_rs_probe(rs, now_ms());
	srn_rs_put(rs);
	return r;
}

static void rs_woken(int fd)
{
	struct srn_rs *rs = srn_rs_get(fd);
	if (!rs)
		return;
	take_cq_event(rs);
	srn_rs_put(rs);
}

/* One look at every entry: an rsocket answers from its state and names
 * the descriptors to sleep on, another fd goes to poll as it is.  Fills
 * p and owner (p's entry -> fds' index) and returns how many entries;
 * *ready counts the rsockets found ready. */
static nfds_t rpoll_look(struct pollfd *fds, nfds_t nfds, const bool *is_rs, struct pollfd *p,
			 nfds_t *owner, int *ready)
{
	nfds_t n = 0;
	for (nfds_t i = 0; i < nfds; i++) {
		fds[i].revents = 0;
		if (is_rs[i]) {
			int k = 0;
			fds[i].revents = rs_check(fds[i].fd, fds[i].events, &p[n], &k);
			for (int j = 0; j < k; j++)
				owner[n + (nfds_t)j] = i;
			n += (nfds_t)k;
			*ready += fds[i].revents != 0;
		} else {
			p[n] = fds[i];
			p[n].revents = 0;
			owner[n++] = i;
		}
	}
	return n;
}

/* What poll saw in p's n entries, back into fds: returns how many plain
 * fds are ready; an rsocket's descriptor that fired takes its event
 * and sets *woken (its news is counted at the next look). */
static int rpoll_seen(struct pollfd *fds, const bool *is_rs, const struct pollfd *p,
		      const nfds_t *owner, nfds_t n, bool *woken)
{
	int ready = 0;
	for (nfds_t k = 0; k < n; k++) {
		nfds_t i = owner[k];
		if (!p[k].revents)
			continue;
		if (is_rs[i]) {
			rs_woken(fds[i].fd);
			*woken = true;
		} else {
			fds[i].revents = p[k].revents;
			ready++;
		}
	}
	return ready;
}

SRN_RDMACM_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	if (nfds && !fds)
		return srn_rs_seterr(-EFAULT);
	/* Each user entry becomes up to two sleep entries; owner[] maps back. */
	struct pollfd *p = calloc(2 * nfds + 1, sizeof(*p));
	nfds_t *owner = calloc(2 * nfds + 1, sizeof(*owner));
	bool *is_rs = calloc(nfds + 1, sizeof(*is_rs));
	if (!p || !owner || !is_rs) {
		free(p);
		free(owner);
		free(is_rs);
		return srn_rs_seterr(-ENOMEM);
	}
	for (nfds_t i = 0; i < nfds; i++)
		is_rs[i] = srn_rs_is_rsocket(fds[i].fd);
	int64_t deadline = timeout >= 0 ? now_ms() + timeout : -1;
	bool last_look = false;
	int ret;
	for (;;) {
		int ready = 0;
		nfds_t n = rpoll_look(fds, nfds, is_rs, p, owner, &ready);
		int slice = 0;
		if (!ready) {
			slice = SRN_RS_WAKE_MS;
			if (deadline >= 0) {
				int64_t left = deadline - now_ms();
				slice = left <= 0 ? 0 : left < slice ? (int)left : slice;
			}
		}
		int r = poll(p, n, slice);
		if (r < 0) {
			ret = -errno;
			break;
		}
		bool woken = false;
		ready += rpoll_seen(fds, is_rs, p, owner, n, &woken);
		if (ready) {
			ret = ready;
			break;
		}
		/* Past the deadline: one more look if an rsocket woke us (its
		 * news is not counted yet), then give up. */
		if (deadline >= 0 && now_ms() >= deadline) {
			if (!woken || last_look) {
				ret = 0;
				break;
			}
			last_look = true;
		}
	}
	free(p);
	free(owner);
	free(is_rs);
	return srn_rs_seterr(ret);
}

SRN_RDMACM_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
			      struct timeval *timeout)
{
	if (nfds < 0 || nfds > FD_SETSIZE)
		return srn_rs_seterr(-EINVAL);
	struct pollfd *fds = calloc((size_t)nfds + 1, sizeof(*fds));
	if (!fds)
		return srn_rs_seterr(-ENOMEM);
	nfds_t n = 0;
	for (int fd = 0; fd < nfds; fd++) {
		short ev = 0;
		if (readfds && FD_ISSET(fd, readfds))
			ev |= POLLIN;
		if (writefds && FD_ISSET(fd, writefds))
			ev |= POLLOUT;
		if (ev || (exceptfds && FD_ISSET(fd, exceptfds)))
			fds[n++] = (struct pollfd){ .fd = fd, .events = ev };
	}
	int ms = -1;
	if (timeout) {
		long long t = (long long)timeout->tv_sec * 1000 + timeout->tv_usec / 1000;
		ms = t > 0x7fffffff ? 0x7fffffff : (int)t;
	}
	fd_set ein;
	FD_ZERO(&ein);
	if (exceptfds)
		ein = *exceptfds;
	int ret = rpoll(fds, n, ms);
	if (readfds)
		FD_ZERO(readfds);
	if (writefds)
		FD_ZERO(writefds);
	if (exceptfds)
		FD_ZERO(exceptfds);
	if (ret > 0) {
		ret = 0;
		for (nfds_t i = 0; i < n; i++) {
			short r = fds[i].revents;
			short ev = fds[i].events;
			if (readfds && (ev & POLLIN) && (r & (POLLIN | POLLHUP | POLLERR))) {
				FD_SET(fds[i].fd, readfds);
				ret++;
			}
			if (writefds && (ev & POLLOUT) && (r & (POLLOUT | POLLERR))) {
				FD_SET(fds[i].fd, writefds);
				ret++;
			}
			if (exceptfds && FD_ISSET(fds[i].fd, &ein) && (r & POLLPRI)) {
				FD_SET(fds[i].fd, exceptfds);
				ret++;
			}
		}
	}
	free(fds);
	return ret;
}
