/*
 * progress.c - who runs the NIC.
 *
 * Application threads drive progress: ibv_post_send transmits at once and
 * ibv_poll_cq receives and processes packets when the CQ is empty.  The
 * progress thread below only takes over when no application thread has
 * driven progress for SRN_APP_IDLE_NS, so one-sided traffic, ACKs and
 * completion events still happen while the application sleeps or computes.
 *
 * It never spins against a polling application: while one polls, it sleeps
 * on the kick eventfd alone (not on the socket) for at least
 * SRN_BG_RECHECK_NS; otherwise it blocks in epoll on the socket and the
 * kick fd, and after socket traffic polls on briefly (busy_poll).  A thread
 * about to block for an event (ibv_get_cq_event, ibv_req_notify_cq) clears
 * last_app_ns and kicks, so the hand-over costs no timer.
 */
#include "engine/nic.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/device.h"
#include "core/mcast.h"
#include "core/qp.h"
#include "diag/thread.h"
#include "engine/diag_tick.h"
#include "link/fork_drop.h"
#include "link/gso.h"
#include "transport/rx.h"
#include "transport/timers.h"
#include "transport/tx.h"
#include "transport/txq.h"
#include "wire/roce_hdr.h"

#define SRN_APP_IDLE_NS 200000ull      /* app counts as polling for this long */
#define SRN_BG_RECHECK_NS 1000000ull   /* sleep at least this while it polls */
#define SRN_RX_BATCHES_PER_POLL 8      /* bound the work of one call */
/* An application still polling sends held ACKs at its third look
 * without a post, or by this time.  Counted, not timed alone: on a
 * loaded machine the thread is often descheduled between its poll and
 * its post for longer than any short bound (a 20 us bound sent every
 * other ping-pong ACK alone at load 5, each a second wake-up of the
 * peer). */
#define SRN_ACK_HOLD_LOOKS 2
#define SRN_ACK_HOLD_MAX_NS 1000000ull
#define SRN_SHM_POLL_MAX 256           /* ring packets per poll */
/* While same-host rings carry the traffic, an application's poll asks
 * the socket (a system call that usually finds nothing) at most this
 * often; SRN_SHM_QUIET_NS after the rings went quiet, every time again. */
#define SRN_UDP_POLL_GAP_NS 50000ull
#define SRN_SHM_QUIET_NS 1000000ull
#define SRN_TX_RETRY_NS 50000ull       /* a deferred transmit is tried again */
#define SRN_BG_SPIN_US 50               /* busy-poll this long after the last packet */
#define SRN_BG_SPIN_MAX_US 100000       /* SOFTRNIC_SPIN_US is held to 0.1 s */

static void drain_fd(int fd)
{
	uint64_t v;
	while (read(fd, &v, sizeof(v)) == sizeof(v))
		;
}

static void drain_kick(struct srn_nic *nic)
{
	drain_fd(nic->engine.kick_fd);
}

static bool app_is_polling(struct srn_nic *nic, uint64_t now, uint64_t *left)
{
	uint64_t last = atomic_load_explicit(&nic->engine.last_app_ns, memory_order_relaxed);
	if (!last || now - last >= SRN_APP_IDLE_NS)
		return false;
	*left = SRN_APP_IDLE_NS - (now - last);
	return true;
}

/* One progress pass by this thread; true if the socket delivered packets
 * (ring packets and doorbells do not count, see busy_poll).  *woke: the
 * pass queued a completion event, so an application thread is about to
 * run. */
static bool bg_pass(struct srn_nic *nic, bool *woke)
{
	srn_nic_lock(nic);
	uint64_t before = nic->engine.udp_rx_pkts, events = nic->engine.events_fired;
	srn_progress_poll(nic, SRN_POLL_BG);
	bool got = nic->engine.udp_rx_pkts != before;
	*woke = nic->engine.events_fired != events;
	srn_nic_unlock(nic);
	return got;
}

/* Socket traffic came while nobody polled (a passive target, a server
 * between calls): more is likely right behind it.  Poll on for a short
 * while before sleeping again, so a sender streaming at us does not pay a
 * wake-up (and this thread a context switch) per packet burst.  Bounded:
 * nic->bg_spin_ns (SOFTRNIC_SPIN_US) after the last packet, never while
 * an application thread polls.  A pass that queued a completion event
 * is followed by a yield of the CPU: the application it woke needs one
 * now, and on a 2-CPU machine this spin and the peer's kept it off both
 * for the rest of the spin (an event-driven block store's 4 KiB write
 * over the UDP link: 92-99 us before, 46-50 us yielding, side by side;
 * stopping the spin instead gave 69-75 us and cost event-driven Send
 * streams a wake-up per burst).  Ring traffic does not count: a same-host sender rings
 * a doorbell only when this thread sleeps, and a spinning consumer at
 * its heels made 1 MiB Writes 2.4x slower (21 -> 8.7 GB/s). */
static void busy_poll(struct srn_nic *nic, bool woke)
{
	uint64_t now = srn_now_ns(), last = now, left;
	if (woke)
		sched_yield();
	while (now - last < nic->engine.bg_spin_ns &&
	       !atomic_load_explicit(&nic->engine.stop, memory_order_relaxed) &&
	       !atomic_load_explicit(&nic->engine.sock_owner, memory_order_relaxed) &&
	       !app_is_polling(nic, now, &left)) {
		/* An application thread waits for the lock: let it have it
		 * (it may well do this work itself). */
		if (atomic_load_explicit(&nic->lock_waiters, memory_order_relaxed)) {
			sched_yield();
			now = srn_now_ns();
			continue;
		}
		bool got = bg_pass(nic, &woke);
		if (woke)
			sched_yield();
		now = srn_now_ns();
		if (got)
			last = now;
	}
}

uint64_t srn_progress_spin_ns(const char *env)
{
	if (!env || !*env)
		return SRN_BG_SPIN_US * 1000ull;
	char *end;
	unsigned long us = strtoul(env, &end, 10);
	if (*end || env[0] == '-')
		return SRN_BG_SPIN_US * 1000ull;   /* not a number: the default */
	return (uint64_t)(us < SRN_BG_SPIN_MAX_US ? us : SRN_BG_SPIN_MAX_US) * 1000ull;
}

/* epoll_pwait2 (a nanosecond timeout) needs Linux 5.11, and valgrind
 * 3.19 does not know it: ENOSYS, or EPERM from a seccomp filter that does
 * not list it.  Then epoll_wait for the rest of the device's life, its
 * timeout rounded up to a whole millisecond so a deadline is never
 * missed by waking early and sleeping again with a zero timeout. */
static int progress_wait(struct srn_nic *nic, int ep, struct epoll_event *ev, int max,
			 const struct timespec *ts)
{
	if (!nic->engine.epoll_ms) {
		int n = epoll_pwait2(ep, ev, max, ts, NULL);
		if (n >= 0 || (errno != ENOSYS && errno != EPERM))
			return n;
		nic->engine.epoll_ms = true;
		srn_diag_dev_log(nic->diag.seg, SRN_LOG_INFO,
				 "epoll_pwait2: %s: the progress thread sleeps with epoll_wait",
				 strerror(errno));
	}
	int ms = -1;
	if (ts) {
		uint64_t ns = (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
		uint64_t up = (ns + 999999) / 1000000;
		ms = up > INT_MAX ? INT_MAX : (int)up;
	}
	return epoll_wait(ep, ev, max, ms);
}

/* The progress thread cannot go on (its epoll failed for a reason no
 * retry mends).  It must not end silently: a program sleeping for a
 * completion would hang with no word.  Say so on stderr whatever
 * SOFTRNIC_LOG says, in the device log for `softrnic explain`, and to
 * the program as IBV_EVENT_DEVICE_FATAL. */
static void progress_fatal(struct srn_nic *nic, const char *what, int err)
{
	srn_diag_dev_log(nic->diag.seg, SRN_LOG_ERROR,
			 "fatal: progress thread stopped: %s: %s", what, strerror(err));
	if (srn_log_threshold() < SRN_LOG_ERROR)
		dprintf(STDERR_FILENO,
			"softrnic: %.32s: fatal: the progress thread stopped (%s: %s); "
			"nothing progresses unless the program polls; IBV_EVENT_DEVICE_FATAL sent\n",
			nic->cfg.name, what, strerror(err));
	srn_count(nic->diag.cnt, SRN_CNT_THREAD_FATAL, 1);
	srn_device_fatal(nic->dev, nic);
}

/* A transport timer or a held packet is due before dl (0: none). */
static bool earlier_due(struct srn_nic *nic, uint64_t dl)
{
	uint64_t t = atomic_load(&nic->lists.next_deadline);
	uint64_t f = srn_udp_fault_next_ns(&nic->link.udp);
	return (t && (!dl || t < dl)) || (f && (!dl || f < dl));
}

/* The earliest of: the next transport timer, the diagnostic tick, a
 * packet the fault injector holds (*fdl), a deferred transmission's
 * retry.  0: none. */
static uint64_t sleep_deadline(struct srn_nic *nic, uint64_t *fdl)
{
	uint64_t dl = atomic_load_explicit(&nic->lists.next_deadline, memory_order_relaxed);
	uint64_t ddl = srn_diag_deadline(nic->diag.seg);
	if (ddl && (!dl || ddl < dl))
		dl = ddl;
	*fdl = srn_udp_fault_next_ns(&nic->link.udp);
	if (*fdl && (!dl || *fdl < dl))
		dl = *fdl;
	if (atomic_load(&nic->engine.tx_waiting)) {
		uint64_t t = srn_now_ns() + SRN_TX_RETRY_NS;
		if (!dl || t < dl)
			dl = t;
	}
	return dl;
}

/* An application thread blocked for an event serves the socket and the
 * rings (wait.c): sleep on the kick alone, to the next deadline, and
 * look again every SRN_BG_RECHECK_NS, so that an owner that left and
 * went quiet hands back within about that.  While one owner's wait goes
 * on across looks, the look doubles up to SRN_ASIDE_MAX_NS (an idle
 * server costs a few wake-ups a second) and the owner kicks on leaving.
 * *aside_ns carries the current step between calls. */
#define SRN_ASIDE_MAX_NS 256000000ull
static bool stand_aside(struct srn_nic *nic, uint32_t *epoch_seen, uint64_t *aside_ns)
{
	struct epoll_event ev[4];
	uint32_t epoch = atomic_load(&nic->engine.owner_epoch);
	*aside_ns = epoch == *epoch_seen && *aside_ns ? *aside_ns * 2 : SRN_BG_RECHECK_NS;
	if (*aside_ns > SRN_ASIDE_MAX_NS)
		*aside_ns = SRN_ASIDE_MAX_NS;
	*epoch_seen = epoch;
	uint64_t fdl, dl = sleep_deadline(nic, &fdl), now = srn_now_ns();
	uint64_t wake = now + *aside_ns;
	bool timer = dl && dl <= wake;
	if (timer)
		wake = dl;
	if (*aside_ns > SRN_BG_RECHECK_NS) {
		atomic_store(&nic->engine.aside_long, true);
		if (atomic_load(&nic->engine.owner_epoch) != epoch ||
		    !atomic_load(&nic->engine.sock_owner)) {
			atomic_store(&nic->engine.aside_long, false);
			*aside_ns = 0;
			return true;
		}
	}
	atomic_store(&nic->engine.sleep_until, wake);
	if (!earlier_due(nic, wake)) {
		uint64_t d = wake > now ? wake - now : 0;
		struct timespec ts = { .tv_sec = (time_t)(d / 1000000000ull),
				       .tv_nsec = (long)(d % 1000000000ull) };
		int n = progress_wait(nic, nic->engine.ep_kick, ev, 4, &ts);
		if (n > 0)
			drain_kick(nic);
		else if (n < 0 && errno != EINTR) {
			progress_fatal(nic, "epoll_wait (aside)", errno);
			return false;
		}
	} else {
		timer = true;
	}
	atomic_store(&nic->engine.sleep_until, 0);
	atomic_store(&nic->engine.aside_long, false);
	/* Timers and held packets are still this thread's; and ACKs an
	 * owner held for a post that did not come. */
	uint64_t left;
	if (timer || (atomic_load(&nic->engine.acks_deferred) &&
		      !app_is_polling(nic, srn_now_ns(), &left))) {
		srn_nic_lock(nic);
		if (fdl)
			srn_udp_fault_flush(&nic->link.udp, srn_now_ns());
		srn_progress_poll(nic, SRN_POLL_BG);
		srn_nic_unlock(nic);
	}
	return true;
}

/* While an application polls: sleep on the kick alone, for left but at
 * least SRN_BG_RECHECK_NS.  False when the thread must stop. */
static bool watch_polling_app(struct srn_nic *nic, uint64_t left, struct epoll_event *ev)
{
	if (left < SRN_BG_RECHECK_NS)
		left = SRN_BG_RECHECK_NS;
	struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)left };
	int n = progress_wait(nic, nic->engine.ep_kick, ev, 4, &ts);
	if (n > 0)
		drain_kick(nic);
	else if (n < 0 && errno != EINTR) {
		progress_fatal(nic, "epoll_wait (kick)", errno);
		return false;
	}
	return true;
}

/* Announce the deep sleep and look once more at what must not wait for
 * it.  True: sleep to *dl (0: no deadline), with the announcements up;
 * false: they are down again (and the work found done), loop again.
 * *fdl: a packet the fault injector holds comes due then. */
static bool deep_sleep_begin(struct srn_nic *nic, uint64_t *dl, uint64_t *fdl)
{
	/* ACKs an application held for its next post, which did
	 * not come (see srn_progress_poll).  Announcing the deep
	 * sleep first and then looking (both sequentially consistent,
	 * mirrored in srn_progress_poll) means either this thread
	 * sees the held ACKs or the holder sees the announcement. */
	atomic_store(&nic->engine.bg_deep_sleep, true);
	/* An owner that came meanwhile saw the announcement and
	 * kicks, or is seen here (both sequentially consistent). */
	if (atomic_load(&nic->engine.sock_owner)) {
		atomic_store(&nic->engine.bg_deep_sleep, false);
		return false;
	}
	if (atomic_load(&nic->engine.acks_deferred)) {
		atomic_store(&nic->engine.bg_deep_sleep, false);
		srn_nic_lock(nic);
		srn_progress_poll(nic, SRN_POLL_BG);
		srn_nic_unlock(nic);
		return false;
	}
	/* Sleep until a packet, a kick, the next transport timer, or a
	 * packet the fault injector holds comes due. */
	*dl = sleep_deadline(nic, fdl);
	/* Same-host senders ring the socket while this is raised. */
	if (!srn_shm_sleep_begin(&nic->link.shm)) {
		atomic_store(&nic->engine.bg_deep_sleep, false);
		srn_nic_lock(nic);
		srn_count(nic->diag.cnt, SRN_CNT_BG_WAKEUPS, 1);
		srn_progress_poll(nic, SRN_POLL_BG);
		srn_nic_unlock(nic);
		return false;
	}
	/* Announce the deadline slept to, then look again: a timer
	 * armed or a packet held meanwhile by another thread is either
	 * seen here or kicks (srn_nic_deadline_set). */
	atomic_store(&nic->engine.sleep_until, *dl ? *dl : UINT64_MAX);
	if (earlier_due(nic, *dl)) {
		atomic_store(&nic->engine.sleep_until, 0);
		srn_shm_sleep_end(&nic->link.shm);
		atomic_store(&nic->engine.bg_deep_sleep, false);
		return false;
	}
	return true;
}

/* The deep sleep itself, on the socket, the kick and the rings' bell until
 * dl; lowers the announcements.  Returns epoll's count, *err its errno. */
static int deep_sleep(struct srn_nic *nic, uint64_t dl, struct epoll_event *ev, int *err)
{
	struct timespec ts, *tsp = NULL;
	if (dl) {
		uint64_t now = srn_now_ns();
		uint64_t d = dl > now ? dl - now : 0;
		ts.tv_sec = (time_t)(d / 1000000000ull);
		ts.tv_nsec = (long)(d % 1000000000ull);
		tsp = &ts;
	}
	int n = progress_wait(nic, nic->engine.ep_all, ev, 4, tsp);
	*err = errno;
	atomic_store_explicit(&nic->engine.sleep_until, 0, memory_order_relaxed);
	srn_shm_sleep_end(&nic->link.shm);
	atomic_store(&nic->engine.bg_deep_sleep, false);
	return n;
}

/* After the deep sleep: due work when it timed out, else the packets,
 * unless the application polls for them itself.  n: epoll's count. */
static void deep_sleep_woken(struct srn_nic *nic, const struct epoll_event *ev, int n,
			     uint64_t fdl)
{
	uint64_t left;
	if (n == 0 && !app_is_polling(nic, srn_now_ns(), &left)) {
		srn_nic_lock(nic);
		if (fdl)
			srn_udp_fault_flush(&nic->link.udp, srn_now_ns());
		srn_progress_poll(nic, SRN_POLL_BG);     /* timers; delayed RX packets */
		srn_nic_unlock(nic);
		return;
	}
	bool readable = false;
	for (int i = 0; i < n; i++) {
		if (ev[i].data.u32 == 0)
			drain_kick(nic);
		else if (ev[i].data.u32 == 2 && !atomic_load(&nic->engine.sock_owner))
			drain_fd(nic->engine.ring_bell_fd);   /* else the owner's: emptied
							       * here, its wake would find
							       * nothing (epoll looks again) */
		if (ev[i].data.u32 != 0)
			readable = true;
	}
	if (!readable || atomic_load(&nic->engine.stop))
		return;
	/* The application may have started polling meanwhile; if so
	 * leave the packets to it rather than contend for the lock. */
	if (app_is_polling(nic, srn_now_ns(), &left))
		return;
	srn_count(nic->diag.cnt, SRN_CNT_BG_WAKEUPS, 1);
	bool woke;
	if (bg_pass(nic, &woke))
		busy_poll(nic, woke);
}

static void *progress_main(void *arg)
{
	struct srn_nic *nic = arg;
	struct epoll_event ev[4];

	/* So a post-mortem tells this thread from the program's. */
	atomic_store_explicit(&nic->diag.busy->progress_tid, srn_diag_tid(), memory_order_relaxed);
	/* Same-host peers place directly only while this thread lives
	 * (link/direct.h "Liveness"): the kernel marks the mutex when the
	 * process dies. */
	srn_direct_own_hold(&nic->link.direct);
	atomic_store_explicit(&nic->engine.life_held, true, memory_order_release);

	uint32_t epoch_seen = 0;
	uint64_t aside_ns = 0;
	while (!atomic_load(&nic->engine.stop)) {
		uint64_t left;
		if (atomic_load(&nic->engine.sock_owner)) {
			if (!stand_aside(nic, &epoch_seen, &aside_ns))
				break;
			continue;
		}
		aside_ns = 0;
		if (app_is_polling(nic, srn_now_ns(), &left)) {
			if (!watch_polling_app(nic, left, ev))
				break;
			continue;
		}
		uint64_t dl = 0, fdl = 0;
		if (!deep_sleep_begin(nic, &dl, &fdl))
			continue;
		int err;
		int n = deep_sleep(nic, dl, ev, &err);
		if (n < 0 && err != EINTR) {
			progress_fatal(nic, "epoll_wait", err);
			break;
		}
		deep_sleep_woken(nic, ev, n, fdl);
	}
	srn_direct_own_unhold(&nic->link.direct);
	return NULL;
}

/* The owner's epoll set (engine/wait.c): what it sleeps on, the bells
 * edge-triggered.  Without it (or without the bells) a waiting thread
 * waits the old way. */
static int wait_set_create(struct srn_nic *nic, int fwd)
{
	if (nic->engine.bell_fd < 0 || nic->engine.ring_bell_fd < 0)
		return 0;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return -1;
	struct {
		int fd;
		uint32_t events;
	} add[4] = {
		{ nic->link.udp.fd, EPOLLIN },
		{ nic->engine.bell_fd, EPOLLIN | EPOLLET },
		{ nic->engine.ring_bell_fd, EPOLLIN | EPOLLET },
		{ fwd, EPOLLIN },
	};
	for (uint32_t i = 0; i < 4; i++) {
		struct epoll_event e = { .events = add[i].events, .data.u32 = i };
		if (add[i].fd >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, add[i].fd, &e)) {
			close(ep);
			return -1;
		}
	}
	/* A forked child would share this set (and take the parent's
	 * edge-triggered bells): it gets /dev/null there (link/fork_drop.h). */
	srn_fork_drop_add(ep);
	nic->engine.ep_wait = ep;
	return 0;
}

int srn_progress_start(struct srn_nic *nic)
{
	struct epoll_event e = { .events = EPOLLIN };
	nic->engine.kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	/* Not needed to run: without them waiting threads wait the old
	 * way, and same-host senders ring by datagram. */
	nic->engine.bell_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	nic->engine.ring_bell_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	nic->engine.ep_all = epoll_create1(EPOLL_CLOEXEC);
	nic->engine.ep_kick = epoll_create1(EPOLL_CLOEXEC);
	if (nic->engine.kick_fd < 0 || nic->engine.ep_all < 0 || nic->engine.ep_kick < 0)
		goto fail;
	e.data.u32 = 0;
	if (epoll_ctl(nic->engine.ep_all, EPOLL_CTL_ADD, nic->engine.kick_fd, &e) ||
	    epoll_ctl(nic->engine.ep_kick, EPOLL_CTL_ADD, nic->engine.kick_fd, &e))
		goto fail;
	e.data.u32 = 1;
	if (epoll_ctl(nic->engine.ep_all, EPOLL_CTL_ADD, nic->link.udp.fd, &e))
		goto fail;
	/* A shared address's forwarding socket (link/udp_group.h) brings
	 * packets and doorbells like the device socket. */
	int fwd = srn_udp_group_fd(&nic->link.udp);
	if (fwd >= 0 && epoll_ctl(nic->engine.ep_all, EPOLL_CTL_ADD, fwd, &e))
		goto fail;
	e.data.u32 = 2;
	if (nic->engine.ring_bell_fd >= 0) {
		if (epoll_ctl(nic->engine.ep_all, EPOLL_CTL_ADD, nic->engine.ring_bell_fd, &e))
			goto fail;
		srn_shm_set_bell(&nic->link.shm, nic->engine.ring_bell_fd);
	}
	if (wait_set_create(nic, fwd))
		goto fail;
	/* Every signal blocked, and named for top -H, perf and gdb. */
	int ret = srn_thread_spawn(&nic->engine.thread, "srn-progress", progress_main, nic);
	if (ret) {
		errno = ret;
		goto fail;
	}
	nic->engine.thread_started = true;
	/* Peers may already have found the inbox (published at open): until
	 * the thread holds the liveness mutex they read the target as
	 * "unsure" and send packets, which is right but slow, and under load
	 * the thread may take long to run.  The open returns once it holds
	 * it (bounded: the thread only has to be scheduled). */
	for (int i = 0; i < 5000 && !atomic_load_explicit(&nic->engine.life_held,
							  memory_order_acquire); i++)
		usleep(200);
	return 0;
fail:;
	int err = errno;
	srn_progress_stop(nic);
	return -err;
}

void srn_progress_stop(struct srn_nic *nic)
{
	if (nic->engine.thread_started) {
		atomic_store(&nic->engine.stop, true);
		srn_nic_kick(nic);
		pthread_join(nic->engine.thread, NULL);
		nic->engine.thread_started = false;
	}
	if (nic->engine.ep_all >= 0)
		close(nic->engine.ep_all);
	if (nic->engine.ep_kick >= 0)
		close(nic->engine.ep_kick);
	if (nic->engine.ep_wait >= 0) {
		srn_fork_drop_del(nic->engine.ep_wait);
		close(nic->engine.ep_wait);
	}
	if (nic->engine.kick_fd >= 0)
		close(nic->engine.kick_fd);
	srn_shm_set_bell(&nic->link.shm, -1);
	if (nic->engine.bell_fd >= 0)
		close(nic->engine.bell_fd);
	if (nic->engine.ring_bell_fd >= 0)
		close(nic->engine.ring_bell_fd);
	nic->engine.ep_all = nic->engine.ep_kick = nic->engine.kick_fd = nic->engine.bell_fd =
		nic->engine.ring_bell_fd = nic->engine.ep_wait = -1;
}

void srn_progress_app_sleeps(struct srn_nic *nic)
{
	atomic_store_explicit(&nic->engine.last_app_ns, 0, memory_order_relaxed);
	srn_nic_kick(nic);
}

uint64_t srn_progress_app_active(struct srn_nic *nic)
{
	uint64_t now = srn_now_ns();
	atomic_store_explicit(&nic->engine.last_app_ns, now, memory_order_relaxed);
	return now;
}

void srn_progress_held_acks_due(struct srn_nic *nic, uint64_t now)
{
	/* now may predate the stamp (read before the lock): signed. */
	if (nic->lists.ack && (++nic->engine.acks_held_looks > SRN_ACK_HOLD_LOOKS ||
			       (int64_t)(now - nic->engine.acks_held_ns) >= (int64_t)SRN_ACK_HOLD_MAX_NS)) {
		srn_ack_flush(nic);
		srn_txq_flush(nic);
	}
}

/* The injector's own tallies, as device counters (one store each). */
void srn_nic_mirror_faults(struct srn_nic *nic)
{
	const struct srn_udp_group_stats *g = srn_udp_group_stats(&nic->link.udp);
	if (g) {
		atomic_store_explicit(&nic->diag.cnt->v[SRN_CNT_GRP_FORWARDED], g->forwarded,
				      memory_order_relaxed);
		atomic_store_explicit(&nic->diag.cnt->v[SRN_CNT_GRP_FWD_RCVD], g->fwd_rcvd,
				      memory_order_relaxed);
	}
	const struct srn_fault_stats *f = srn_udp_fault_stats(&nic->link.udp);
	if (!f)
		return;
	const uint64_t v[] = { f->tx_dropped, f->tx_duplicated, f->tx_reordered, f->tx_delayed,
			       f->tx_corrupted, f->rx_dropped, f->rx_duplicated, f->rx_reordered,
			       f->rx_delayed, f->rx_corrupted };
	for (unsigned i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		atomic_store_explicit(&nic->diag.cnt->v[SRN_CNT_FAULT_TX_DROPPED + i], v[i],
				      memory_order_relaxed);
}

/* Only plain ACKs wait; a NAK or RNR NAK must reach the requester now. */
static bool acks_all_plain(const struct srn_nic *nic)
{
	for (const struct srn_qp *qp = nic->lists.ack; qp; qp = qp->resp.ack_next)
		if ((qp->resp.ack_syndrome & SRN_AETH_TYPE_MASK) != SRN_AETH_TYPE_ACK)
			return false;
	return true;
}

/* Receive what the multicast group sockets hold (core/mcast.h): each
 * packet goes to every attached QP.  Returns packets processed. */
static int mcast_poll(struct srn_nic *nic)
{
	int total = 0;
	for (int i = 0; i < nic->tables.nmcast; i++) {
		struct srn_mcast_group *g = nic->tables.mcast[i];
		int n = srn_udp_recv_batch(&g->sock, &nic->link.rx, NULL);
		for (int k = 0; k < n; k++)
			srn_rx_mcast_packet(nic, g, nic->link.rx.pkt[k].data, nic->link.rx.pkt[k].len,
					    (const struct sockaddr *)&nic->link.rx.pkt[k].src);
		if (n > 0)
			total += n;
	}
	return total;
}

static void shm_deliver(void *ctx, const uint8_t *data, uint32_t len, const struct sockaddr *src,
			uint8_t tos)
{
	struct srn_nic *nic = ctx;
	srn_udp_trace_ring_rx(&nic->link.udp, src, data, len, tos);
	srn_rx_packet_local(nic, data, len, src, tos);
}

/* Ask the socket this time?  Always, unless same-host rings carried
 * traffic lately and an application polls (the progress thread's
 * epoll watches the socket whenever it runs).  Our own direct placements
 * count as that traffic: a ping-pong of direct Writes delivers nothing
 * on the rings, and asked the socket (0.78 us) at every empty poll
 * (`softrnic perf` 8 B half round trip 0.84 -> 0.4 us without). */
static bool udp_due(struct srn_nic *nic, bool from_app, uint64_t now)
{
	if (nic->link.direct_placed) {
		nic->link.direct_placed = false;
		nic->engine.shm_rx_ns = now;
	}
	if (!from_app || now - nic->engine.shm_rx_ns >= SRN_SHM_QUIET_NS ||
	    now - nic->engine.udp_polled_ns >= SRN_UDP_POLL_GAP_NS) {
		nic->engine.udp_polled_ns = now;
		return true;
	}
	return false;
}

void srn_progress_socket_seen_empty(struct srn_nic *nic)
{
	nic->engine.udp_polled_ns = srn_now_ns();
}

/* Up to SRN_RX_BATCHES_PER_POLL batches from the socket through UDP GRO.
 * Returns packets processed. */
static int udp_poll_gro(struct srn_nic *nic)
{
	int total = 0;
	for (int b = 0; b < SRN_RX_BATCHES_PER_POLL; b++) {
		int n = srn_udp_recv_gro(&nic->link.udp, nic->link.gro);
		if (n <= 0)
			break;
		if (b)
			srn_ack_flush(nic);     /* the previous batch's */
		for (int i = 0; i < n; i++)
			srn_rx_packet(nic, nic->link.gro->pkt[i].data, nic->link.gro->pkt[i].len,
				      (const struct sockaddr *)nic->link.gro->pkt[i].src,
				      nic->link.gro->pkt[i].seg_index, nic->link.gro->pkt[i].tos);
		total += n;
		nic->engine.udp_rx_pkts += (uint64_t)n;
		/* A short batch drained the socket: asking again would be a
		 * system call that finds nothing, on the latency path. */
		if (nic->link.gro->datagrams < SRN_GRO_MSGS)
			break;
	}
	return total;
}

/* The same without GRO, a datagram per packet.  Returns packets processed. */
static int udp_poll_plain(struct srn_nic *nic)
{
	int total = 0;
	for (int b = 0; b < SRN_RX_BATCHES_PER_POLL; b++) {
		int trunc = 0;
		int n = srn_udp_recv_batch(&nic->link.udp, &nic->link.rx, &trunc);
		if (trunc)
			srn_count(nic->diag.cnt, SRN_CNT_RX_TRUNCATED, (uint64_t)trunc);
		if (n <= 0)
			break;
		if (b)
			srn_ack_flush(nic);     /* the previous batch's */
		for (int i = 0; i < n; i++) {
			srn_rx_packet(nic, nic->link.rx.pkt[i].data, nic->link.rx.pkt[i].len,
				      (const struct sockaddr *)&nic->link.rx.pkt[i].src, 0,
				      nic->link.rx.pkt[i].tos);
			/* A same-host doorbell (empty) is ring traffic. */
			nic->engine.udp_rx_pkts += nic->link.rx.pkt[i].len != 0;
		}
		total += n;
		if (n < SRN_RX_BATCH)
			break;
	}
	return total;
}

/* At the end of a pass: hold the owed ACKs for the application's next
 * post (see srn_progress_poll), or send them.  held: they were already
 * held when the pass began. */
static void acks_hold_or_send(struct srn_nic *nic, enum srn_poll_by by, bool held, uint64_t now)
{
	bool hold = by != SRN_POLL_BG && nic->lists.ack && !srn_egress_queued(nic->link.egress) && acks_all_plain(nic);
	if (hold) {
		atomic_store(&nic->engine.acks_deferred, true);
		if (atomic_load(&nic->engine.bg_deep_sleep)) {
			/* It would not notice them: send these now, and wake
			 * it so that it watches the polling application from
			 * now on (the kick is paid once per polling spell). */
			hold = false;
			srn_nic_kick(nic);
		}
	}
	if (hold) {
		/* Held since the first hold: looking again does not extend it. */
		if (!held) {
			nic->engine.acks_held_ns = now;
			nic->engine.acks_held_looks = 0;
		}
		srn_count(nic->diag.cnt, SRN_CNT_ACKS_HELD, 1);
	} else {
		srn_ack_flush(nic);
	}
}

int srn_progress_poll(struct srn_nic *nic, enum srn_poll_by by)
{
	return srn_progress_poll_at(nic, by, srn_now_ns());
}

int srn_progress_poll_at(struct srn_nic *nic, enum srn_poll_by by, uint64_t now)
{
	bool from_app = by == SRN_POLL_APP;
	int total = 0;
	/* One clock read serves the socket pacing, the timers, the held-ACK
	 * stamp and the diagnostic tick: this runs on every empty poll.  It
	 * is read under the lock: a reading taken before waiting for it
	 * could be older than stamps other threads wrote meanwhile. */
	/* ACKs owed from the previous call (or batch) go first, unless an
	 * application holds them for its post and looks again before making
	 * it (ibv_rc_pingpong asks for two completions and gets one: sent
	 * here, the ACK left alone and woke its peer a second time). */
	bool held = by != SRN_POLL_BG && atomic_load_explicit(&nic->engine.acks_deferred,
							       memory_order_relaxed) &&
		    ++nic->engine.acks_held_looks <= SRN_ACK_HOLD_LOOKS &&
		    (int64_t)(now - nic->engine.acks_held_ns) < (int64_t)SRN_ACK_HOLD_MAX_NS;
	if (!held)
		srn_ack_flush(nic);
	if (nic->link.shm.in) {
		int n = srn_shm_poll(&nic->link.shm, SRN_SHM_POLL_MAX, shm_deliver, nic);
		if (n) {
			nic->engine.shm_rx_ns = now;
			/* An application's pass decides at its end whether
			 * they wait for its post. */
			if (by == SRN_POLL_BG)
				srn_ack_flush(nic);
			total += n;
		}
	}
	/* A waiting thread woken by the rings' bell alone knows the
	 * socket holds nothing: a receive would be a wasted system call. */
	bool udp = by != SRN_POLL_WAITER_RINGS && udp_due(nic, from_app, now);
	if (udp)
		total += nic->link.gro ? udp_poll_gro(nic) : udp_poll_plain(nic);
	if (nic->tables.nmcast)
		total += mcast_poll(nic);
	srn_timers_run(nic, now);
	srn_tx_resume(nic);
	/* An application that polls usually answers what it received with a
	 * post of its own (a ping-pong).  Holding its plain ACKs until that
	 * post lets both leave in one sendmmsg, one system call instead of
	 * two on the latency path.  They wait at most until this thread's
	 * next verbs call that transmits or polls, or, if it goes quiet, until
	 * the progress thread takes over (SRN_APP_IDLE_NS to
	 * SRN_BG_RECHECK_NS later). */
	acks_hold_or_send(nic, by, held, now);
	srn_txq_flush(nic);
	atomic_store_explicit(&nic->engine.tx_waiting, nic->lists.tx != NULL, memory_order_relaxed);
	/* The injector's and the group's tallies move with socket traffic:
	 * mirrored when the socket was asked (and at close), not on every
	 * pass of a poll loop the rings or direct placement keep busy. */
	if (udp)
		srn_nic_mirror_faults(nic);
	srn_diag_tick(nic->diag.seg, now);
	return total;
}
