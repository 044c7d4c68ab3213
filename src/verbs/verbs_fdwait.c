/*
 * verbs_fdwait.c - a program that sleeps in its own poll or epoll on a
 * completion channel's fd (tgtd, UCX, libfabric, the block store example)
 * serves the NIC in that sleep: one wake-up per hop, as a thread blocked
 * in ibv_get_cq_event gets (engine/wait.c).
 *
 * The channel fd must stay readable exactly while an event waits, so
 * the socket's readiness cannot show through it: tgtd takes a readable
 * channel for an event and exits when ibv_get_cq_event finds none.
 * Instead poll, ppoll, epoll_wait, epoll_pwait and epoll_pwait2 are
 * interposed, as mmap and munmap are (verbs_unmap.c).  When the set holds
 * one of our channel fds (epoll: the fd was added by epoll_ctl), the call
 * polls the program's fds with the device socket and the same-host bell
 * beside them; a wake for the device is served in this thread, and the
 * call returns only for the program's own fds, as before.  A set without
 * our fds, or a device another thread already serves, goes straight to
 * libc.  select is not interposed: it waits the old way.
 *
 * The registry maps channel fds to channels, and epoll fds to the channel
 * fds added to them.  An epoll fd closed without EPOLL_CTL_DEL stays in it
 * until its number is reused for another epoll set that gets a channel,
 * or its channel is destroyed: at worst a wait on an unrelated set serves
 * the device too, which delays nothing.
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/cq.h"
#include "core/device.h"
#include "engine/wait.h"
#include "verbs/verbs.h"
#include "verbs/visibility.h"

#define FDW_CHANNELS 256
#define FDW_PAIRS 256
#define FDW_SET_CH 8                   /* channels of one set a wait watches */

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int nreg;               /* channels registered: 0 keeps every call direct */
static struct { int fd; struct srn_channel *ch; } chans[FDW_CHANNELS];
static struct { int epfd, chfd; } pairs[FDW_PAIRS];   /* epfd -1: free */
static bool pairs_init;

/* ---- libc's own functions ---- */

typedef int poll_fn(struct pollfd *, nfds_t, int);
typedef int epoll_pwait_fn(int, struct epoll_event *, int, int, const sigset_t *);
typedef int epoll_pwait2_fn(int, struct epoll_event *, int, const struct timespec *, const sigset_t *);

static poll_fn *real_poll;
static srn_ppoll_fn *real_ppoll;
static epoll_pwait_fn *real_epoll_pwait;
static epoll_pwait2_fn *real_epoll_pwait2;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;

static void find_real(void)
{
	real_poll = (poll_fn *)dlsym(RTLD_NEXT, "poll");
	real_ppoll = (srn_ppoll_fn *)dlsym(RTLD_NEXT, "ppoll");
	real_epoll_pwait = (epoll_pwait_fn *)dlsym(RTLD_NEXT, "epoll_pwait");
	real_epoll_pwait2 = (epoll_pwait2_fn *)dlsym(RTLD_NEXT, "epoll_pwait2");
}

/* What libc does, by libc when it can be found (they are cancellation
 * points), else by the system call. */
static int sys_poll(struct pollfd *fds, nfds_t n, int tmo)
{
	pthread_once(&real_once, find_real);
	return real_poll ? real_poll(fds, n, tmo) : (int)syscall(SYS_poll, fds, n, tmo);
}

static int sys_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask)
{
	pthread_once(&real_once, find_real);
	return real_ppoll ? real_ppoll(fds, n, tmo, mask)
			  : (int)syscall(SYS_ppoll, fds, n, tmo, mask, (size_t)(_NSIG / 8));
}

static int sys_epoll_pwait(int epfd, struct epoll_event *ev, int max, int tmo, const sigset_t *mask)
{
	pthread_once(&real_once, find_real);
	return real_epoll_pwait ? real_epoll_pwait(epfd, ev, max, tmo, mask)
				: (int)syscall(SYS_epoll_pwait, epfd, ev, max, tmo, mask, (size_t)(_NSIG / 8));
}

/* ---- the registry ---- */

/* SOFTRNIC_FDWAIT=0: every wait goes straight to libc (a comparison, or
 * a way out should serving the device in a program's poll misbehave). */
static bool fdwait_off(void);

#ifdef __SANITIZE_THREAD__
/* ThreadSanitizer's own poll and epoll interceptors run the call they
 * wrap in a state where it ignores the synchronisation of whatever runs
 * inside, so behind them this code's locking reads as races.  In such a
 * build, serve only where the program's calls reach this code first
 * (a static link: the tests wait_fds_*). */
static bool behind_another_poll(void)
{
	Dl_info first, ours;
	void *p = dlsym(RTLD_DEFAULT, "poll");
	return !p || !dladdr(p, &first) || !dladdr((void *)fdwait_off, &ours) ||
	       first.dli_fbase != ours.dli_fbase;
}
#else
static bool behind_another_poll(void)
{
	return false;
}
#endif

static bool fdwait_off(void)
{
	static int off = -1;
	if (off < 0) {
		const char *e = getenv("SOFTRNIC_FDWAIT");
		off = (e && e[0] == '0') || behind_another_poll();
	}
	return off;
}

void srn_fdwait_channel_add(struct srn_channel *ch)
{
	if (fdwait_off())
		return;
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < FDW_CHANNELS; i++)
		if (!chans[i].ch) {
			chans[i].fd = ch->ibch.fd;
			chans[i].ch = ch;
			atomic_fetch_add(&nreg, 1);
			break;
		}
	/* A full table: this channel waits the old way. */
	pthread_mutex_unlock(&reg_lock);
}

void srn_fdwait_channel_del(struct srn_channel *ch)
{
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < FDW_CHANNELS; i++)
		if (chans[i].ch == ch) {
			for (int k = 0; pairs_init && k < FDW_PAIRS; k++)
				if (pairs[k].chfd == chans[i].fd)
					pairs[k].epfd = -1;
			chans[i].ch = NULL;
			atomic_fetch_sub(&nreg, 1);
		}
	pthread_mutex_unlock(&reg_lock);
}

/* Must hold reg_lock. */
static struct srn_channel *channel_of(int fd)
{
	for (int i = 0; i < FDW_CHANNELS; i++)
		if (chans[i].ch && chans[i].fd == fd)
			return chans[i].ch;
	return NULL;
}

static void pair_note(int epfd, int op, int fd)
{
	pthread_mutex_lock(&reg_lock);
	if (!pairs_init) {
		for (int k = 0; k < FDW_PAIRS; k++)
			pairs[k].epfd = -1;
		pairs_init = true;
	}
	int free_k = -1;
	bool ours = channel_of(fd) != NULL;
	for (int k = 0; k < FDW_PAIRS; k++) {
		if (pairs[k].epfd == epfd && pairs[k].chfd == fd) {
			if (op == EPOLL_CTL_DEL || !ours)
				pairs[k].epfd = -1;
			ours = false;      /* already noted */
		} else if (pairs[k].epfd < 0 && free_k < 0) {
			free_k = k;
		}
	}
	if (ours && op == EPOLL_CTL_ADD && free_k >= 0) {
		pairs[free_k].epfd = epfd;
		pairs[free_k].chfd = fd;
	}
	pthread_mutex_unlock(&reg_lock);
}

/* The channels a wait on this set watches: those of one device. */
struct fdw_set {
	struct srn_nic *nic;
	int n;
	struct srn_channel *ch[FDW_SET_CH];
};

/* Must hold reg_lock. */
static void set_add(struct fdw_set *s, struct srn_channel *ch)
{
	struct srn_nic *nic = ch->ctx->nic;
	if (s->n == FDW_SET_CH || (s->nic && s->nic != nic))
		return;
	s->nic = nic;
	s->ch[s->n++] = ch;
}

/* The scans below only try the lock: poll is async-signal-safe, and a
 * handler that polls while its thread holds the lock here must not
 * deadlock.  Busy, the call goes to libc as if the set held none of
 * ours. */
static bool set_of_epoll(int epfd, struct fdw_set *s)
{
	s->nic = NULL;
	s->n = 0;
	if (pthread_mutex_trylock(&reg_lock))
		return false;
	for (int k = 0; pairs_init && k < FDW_PAIRS; k++) {
		struct srn_channel *ch;
		if (pairs[k].epfd == epfd && (ch = channel_of(pairs[k].chfd)))
			set_add(s, ch);
	}
	pthread_mutex_unlock(&reg_lock);
	return s->n > 0;
}

static bool set_of_pollfds(const struct pollfd *fds, nfds_t n, struct fdw_set *s)
{
	s->nic = NULL;
	s->n = 0;
	if (pthread_mutex_trylock(&reg_lock))
		return false;
	for (nfds_t i = 0; i < n; i++) {
		struct srn_channel *ch;
		if (fds[i].fd >= 0 && (fds[i].events & POLLIN) && (ch = channel_of(fds[i].fd)))
			set_add(s, ch);
	}
	pthread_mutex_unlock(&reg_lock);
	return s->n > 0;
}

/* Must hold reg_lock: ch has not been destroyed since the set was made
 * (another thread may destroy a channel while one waits on its set). */
static bool registered(const struct srn_channel *ch)
{
	for (int k = 0; k < FDW_CHANNELS; k++)
		if (chans[k].ch == ch)
			return true;
	return false;
}

/* After a pass: does a channel of the set hold an event now? */
static bool set_ready(void *arg)
{
	struct fdw_set *s = arg;
	bool any = false;
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < s->n && !any; i++)
		any = registered(s->ch[i]) && srn_channel_pending(s->ch[i]);
	pthread_mutex_unlock(&reg_lock);
	return any;
}

/* A wait on this set served the device: arming its channels needs no
 * hand-over to the progress thread for a while (core/cq.h). */
static void set_mark(const struct fdw_set *s)
{
	uint64_t now = srn_now_ns();
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < s->n; i++)
		if (registered(s->ch[i]))
			atomic_store_explicit(&s->ch[i]->fdwait_ns, now, memory_order_relaxed);
	pthread_mutex_unlock(&reg_lock);
}

static int ts_to_ms(const struct timespec *ts)
{
	if (!ts)
		return -1;
	if (ts->tv_sec < 0 || ts->tv_nsec < 0)
		return -2;                  /* invalid: libc answers EINVAL */
	long long ms = (long long)ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000;
	return ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}

/* ---- poll ---- */

static int fdw_poll(struct pollfd *fds, nfds_t n, int tmo, const struct timespec *ts,
		    const sigset_t *mask)
{
	struct fdw_set s;
	if (tmo != 0 && tmo != -2 && atomic_load_explicit(&nreg, memory_order_relaxed) &&
	    n <= SRN_WAIT_FDS_MAX && set_of_pollfds(fds, n, &s)) {
		int r = srn_wait_fds(s.nic, fds, n, tmo, mask, sys_ppoll, NULL, NULL);
		if (r != -EOPNOTSUPP) {
			set_mark(&s);
			if (r < 0) {
				errno = -r;
				return -1;
			}
			return r;
		}
	}
	return ts || mask ? sys_ppoll(fds, n, ts, mask) : sys_poll(fds, n, tmo);
}

SRN_EXPORT int poll(struct pollfd *fds, nfds_t n, int tmo)
{
	return fdw_poll(fds, n, tmo, NULL, NULL);
}

SRN_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	int tmo = ts_to_ms(ts);
	return fdw_poll(fds, n, tmo, ts, mask);
}

/* _FORTIFY_SOURCE builds call these instead. */
SRN_EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int tmo, size_t fdslen);
SRN_EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int tmo, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		abort();                    /* as libc's __chk_fail */
	return poll(fds, n, tmo);
}

SRN_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts,
			   const sigset_t *mask, size_t fdslen);
SRN_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts,
			   const sigset_t *mask, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		abort();
	return ppoll(fds, n, ts, mask);
}

/* ---- epoll ---- */

SRN_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	/* Not a cancellation point: the system call is libc's own. */
	int r = (int)syscall(SYS_epoll_ctl, epfd, op, fd, ev);
	if (r == 0 && atomic_load_explicit(&nreg, memory_order_relaxed))
		pair_note(epfd, op, fd);
	return r;
}

static int fdw_epoll(int epfd, struct epoll_event *ev, int max, int tmo, const sigset_t *mask)
{
	struct fdw_set s;
	if (tmo == 0 || !atomic_load_explicit(&nreg, memory_order_relaxed) || max <= 0 ||
	    !set_of_epoll(epfd, &s))
		return sys_epoll_pwait(epfd, ev, max, tmo, mask);
	uint64_t deadline = tmo < 0 ? 0 : srn_now_ns() + (uint64_t)tmo * 1000000;
	/* A queued event says the set is ready, unless the set disagreed
	 * once (EPOLLONESHOT spent, the fd taken out by another thread):
	 * from then on only the set's own readiness counts. */
	bool trust_ready = true;
	for (int round = 0;; round++) {
		int left = -1;
		if (tmo >= 0) {
			uint64_t now = srn_now_ns();
			left = now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
		}
		struct pollfd p = { .fd = epfd, .events = POLLIN };
		int r = left == 0 ? 0 : srn_wait_fds(s.nic, &p, 1, left, mask, sys_ppoll,
						     trust_ready ? set_ready : NULL, &s);
		if (r == -EOPNOTSUPP)
			return sys_epoll_pwait(epfd, ev, max, left, mask);
		set_mark(&s);      /* the next arm needs no hand-over */
		if (r < 0) {
			errno = -r;
			return -1;
		}
		/* Ready (or the time is up): what the set holds now. */
		int n = sys_epoll_pwait(epfd, ev, max, 0, NULL);
		if (n != 0 || r == 0 || round >= 1000)
			return n;
		/* Another thread took what woke us, or the set does not
		 * report the channel: wait on. */
		trust_ready = false;
	}
}

SRN_EXPORT int epoll_wait(int epfd, struct epoll_event *ev, int max, int tmo)
{
	return fdw_epoll(epfd, ev, max, tmo, NULL);
}

SRN_EXPORT int epoll_pwait(int epfd, struct epoll_event *ev, int max, int tmo, const sigset_t *mask)
{
	return fdw_epoll(epfd, ev, max, tmo, mask);
}

SRN_EXPORT int epoll_pwait2(int epfd, struct epoll_event *ev, int max, const struct timespec *ts,
			    const sigset_t *mask)
{
	int tmo = ts_to_ms(ts);
	if (tmo == -2) {
		errno = EINVAL;
		return -1;
	}
	if (tmo == 0 || !atomic_load_explicit(&nreg, memory_order_relaxed)) {
		pthread_once(&real_once, find_real);
		if (real_epoll_pwait2)
			return real_epoll_pwait2(epfd, ev, max, ts, mask);
		return (int)syscall(SYS_epoll_pwait2, epfd, ev, max, ts, mask, (size_t)(_NSIG / 8));
	}
	return fdw_epoll(epfd, ev, max, tmo, mask);
}
