/*
 * wait.c - a thread that sleeps for a completion event serves the NIC
 * itself: one wake-up per hop.
 *
 * Before, a blocked ibv_get_cq_event slept on the channel while the
 * progress thread slept on the socket: the packet woke the progress
 * thread, which received it, queued the event and woke the application,
 * two wake-ups (and two threads on a 2-CPU machine) where a TCP server
 * pays one.  Now the waiting thread becomes the socket's owner: it sleeps
 * in epoll_wait on the device socket (where a same-host peer's ring doorbell
 * lands too) and on a bell for events other threads queue, receives and
 * processes what came in its own thread, and returns when its channel
 * holds an event.  The progress thread stands aside meanwhile (progress.c)
 * and sleeps only to its deadlines: transport timers, held packets.
 *
 * srn_wait_fds does the same for a program's own poll or epoll on a set
 * that holds a channel fd (verbs/verbs_fdwait.c): the program's fds are
 * polled beside the device's, and it returns for the program's alone.
 *
 * One owner per device.  A second waiting thread, or a device with
 * multicast groups (their sockets are not watched here), waits the old
 * way (the progress thread serves it).  A shared address's forwarding
 * socket is watched beside the device's own.
 */
#include "engine/wait.h"

#include <errno.h>
#include <poll.h>
#include <sys/epoll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "core/cq.h"
#include "engine/nic.h"
#include "link/gso.h"
#include "transport/tx.h"
#include "transport/txq.h"

/* Raised by the faulting instruction of the thread itself, so never
 * while it sleeps: their handlers do not count (sanitizers and
 * crash reporters install them without SA_RESTART). */
static bool synchronous_signal(int s)
{
	return s == SIGSEGV || s == SIGBUS || s == SIGFPE || s == SIGILL || s == SIGTRAP ||
	       s == SIGSYS;
}

/* epoll_wait and poll are never restarted after a signal handler ran;
 * read() on the kernel's channel fd is, when that handler has
 * SA_RESTART.  Which signal ran is not known here, so restart only when
 * every handler this thread could have run asks for it (any other
 * answer is EINTR, which a program with a handler without SA_RESTART
 * must expect anyway).  With no handler at all, EINTR is a stop and
 * SIGCONT (epoll_wait fails then, signal(7); read() does not): restart. */
static bool restart_after_signal(void)
{
	sigset_t blocked;
	if (pthread_sigmask(SIG_BLOCK, NULL, &blocked))
		return false;
	for (int s = 1; s < NSIG; s++) {
		struct sigaction sa;
		if (s == SIGKILL || s == SIGSTOP || synchronous_signal(s) ||
		    sigismember(&blocked, s) == 1 || sigaction(s, NULL, &sa))
			continue;
		if (!(sa.sa_flags & SA_SIGINFO) &&
		    (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN))
			continue;
		if (!(sa.sa_flags & SA_RESTART))
			return false;
	}
	return true;
}

static bool can_own(struct srn_nic *nic)
{
	/* Multicast groups bring packets on sockets of their own, which
	 * this wait does not watch. */
	return nic->engine.thread_started && nic->engine.ep_wait >= 0 && !nic->tables.nmcast;
}

static void leave(struct srn_nic *nic)
{
	srn_progress_app_active(nic);
	atomic_store(&nic->engine.sock_owner, 0);
	atomic_fetch_add(&nic->engine.owner_epoch, 1);
	/* Mirrored in progress.c: it raises aside_long, then reads the
	 * epoch (both sequentially consistent). */
	if (atomic_load(&nic->engine.aside_long))
		srn_nic_kick(nic);
}

/* One pass in this thread: what the rings and (sockets: they were
 * readable) the sockets hold, timers, then the transmit queue. */
static void serve(struct srn_nic *nic, bool sockets)
{
	srn_nic_lock(nic);
	srn_count(nic->diag.cnt, SRN_CNT_APP_PROGRESS, 1);
	srn_progress_poll(nic, sockets ? SRN_POLL_WAITER : SRN_POLL_WAITER_RINGS);
	srn_nic_unlock(nic);
}

/* After a wake: what the sockets and rings hold.  sock, ring, fwd: the
 * device socket, the rings' bell, a shared address's forwarding socket
 * (has_fwd: watched) were reported ready. */
static void woken(struct srn_nic *nic, bool sock, bool ring, bool fwd, bool has_fwd)
{
	srn_count(nic->diag.cnt, SRN_CNT_WAITER_WAKEUPS, 1);
	/* The wait just looked at the sockets.  The forwarding socket: ask
	 * it now if it holds something, else not this pass.  The device
	 * socket, found empty, counts as asked: the program's ibv_poll_cq
	 * calls right after this wake need not ask it again (the pacing of
	 * progress.c), a recvmmsg that would find nothing on every hop of a
	 * same-host ping-pong. */
	srn_nic_lock(nic);
	if (has_fwd)
		srn_udp_group_fwd_seen(&nic->link.udp, fwd);
	if (!sock)
		srn_progress_socket_seen_empty(nic);
	srn_nic_unlock(nic);
	if (sock || ring || fwd)
		serve(nic, sock || fwd);
}

/* srn_wait_fds's poll watched the bells level-triggered: empty them. */
static void woken_polled(struct srn_nic *nic, const struct pollfd *pfd, nfds_t nfd)
{
	for (int i = 1; i <= 2; i++) {
		uint64_t v;
		if (pfd[i].revents && read(pfd[i].fd, &v, sizeof(v)) < 0) {
			/* EAGAIN: another wake took it */
		}
	}
	woken(nic, pfd[0].revents, pfd[2].revents, nfd == 4 && pfd[3].revents, nfd == 4);
}

/* One sleep of srn_wait_event in the owner's epoll set (engine.ep_wait:
 * the bells edge-triggered, so never read).  ready[i]: the set's member
 * i (socket, event bell, ring bell, forwarding socket) woke it.
 * Returns epoll_wait's answer. */
static int sleep_in_set(struct srn_nic *nic, bool ready[4])
{
	struct epoll_event ev[4];
	int n = epoll_wait(nic->engine.ep_wait, ev, 4, -1);
	for (int i = 0; i < n; i++)
		ready[ev[i].data.u32 & 3] = true;
	return n;
}

/* Become the device's socket owner (false: another thread is, or it
 * cannot be owned), as thread `me`. */
static bool enter(struct srn_nic *nic, uint32_t me)
{
	uint32_t none = 0;
	if (!can_own(nic) || !atomic_compare_exchange_strong(&nic->engine.sock_owner, &none, me))
		return false;
	/* Asleep on the socket, the progress thread would wake with this
	 * thread for every packet: have it stand aside. */
	if (atomic_load(&nic->engine.bg_deep_sleep))
		srn_nic_kick(nic);
	srn_count(nic->diag.cnt, SRN_CNT_WAITS_SERVING, 1);
	return true;
}

/* What a waiting thread holds, for a cancellation in its sleep
 * (epoll_wait and ppoll are cancellation points, as read() on the kernel's channel fd
 * is): without this the device would stay owned by a thread that is
 * gone, and the progress thread would stand aside for ever. */
struct wait_state {
	struct srn_nic *nic;
	struct srn_channel *ch;        /* NULL: srn_wait_fds */
	bool owned, asleep;
};

static void wait_cancelled(void *arg)
{
	struct wait_state *w = arg;
	if (w->asleep)
		srn_shm_sleep_end(&w->nic->link.shm);
	if (w->owned)
		srn_channel_unown(w->ch);
	leave(w->nic);
}

/* A wait is cancellable only in its sleep, as the kernel channel's
 * read() is.  Everywhere else it may hold the device (the kick on
 * entering is a write(), a cancellation point, before the cleanup
 * handler is in place: a thread cancelled there left the device owned
 * for ever, wait_fds_cancel_rings under TSan) or the nic lock (serve's
 * recvmmsg and sendmmsg).  Returns the caller's state, restored at the
 * sleep and at the end. */
static int cancel_off(void)
{
	int old = PTHREAD_CANCEL_ENABLE;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	return old;
}

int srn_wait_event(struct srn_nic *nic, struct srn_channel *ch, struct srn_cq **cq)
{
	uint32_t me = srn_diag_tid();
	int cs = cancel_off();
	if (!enter(nic, me)) {
		pthread_setcancelstate(cs, NULL);
		return -EOPNOTSUPP;
	}
	int ret;
	/* Owner of the channel from the first sleep to the return: events
	 * other threads queue ring the bell, and the events this thread's
	 * own passes queue hold no count on the fd (core/cq.c), since it
	 * takes them at the top of the loop. */
	struct wait_state w = { .nic = nic, .ch = ch };
	pthread_cleanup_push(wait_cancelled, &w);
	for (;;) {
		if (srn_channel_take(ch, cq) == 0) {
			ret = 0;
			break;
		}
		/* ACKs held for a post that will not come while this thread
		 * sleeps (it entered, or its pass brought no event of its
		 * own, say a passive target's Write): they leave first. */
		if (atomic_load_explicit(&nic->engine.acks_deferred, memory_order_relaxed)) {
			srn_nic_lock(nic);
			srn_ack_flush(nic);
			srn_txq_flush(nic);
			srn_nic_unlock(nic);
		}
		if (!w.owned && !srn_channel_own(ch, me, nic->engine.bell_fd))
			continue;   /* queued meanwhile */
		w.owned = true;
		/* Same-host senders ring the socket while this is raised;
		 * rings that already hold packets are served first. */
		if (!srn_shm_sleep_begin(&nic->link.shm)) {
			serve(nic, false);
			continue;
		}
		w.asleep = true;
		bool ready[4] = { false };
		pthread_setcancelstate(cs, NULL);
		int n = sleep_in_set(nic, ready);
		int err = errno;
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		w.asleep = false;
		srn_shm_sleep_end(&nic->link.shm);
		if (n < 0) {
			if (err == EINTR && !restart_after_signal()) {
				ret = -EINTR;
				break;
			}
			if (err != EINTR && err != ENOMEM) {
				ret = -err;
				break;
			}
			continue;
		}
		woken(nic, ready[0], ready[2], ready[3], srn_udp_group_fd(&nic->link.udp) >= 0);
	}
	pthread_cleanup_pop(0);
	if (w.owned)
		srn_channel_unown(ch);   /* counts what this thread queued and left */
	leave(nic);
	pthread_setcancelstate(cs, NULL);
	return ret;
}

/* Why long: one loop with the ownership, the flush before sleeping, the
 * shm sleeping word and the deadline, as srn_wait_event's, plus the
 * split of the poll result between the program's fds and ours. */
int srn_wait_fds(struct srn_nic *nic, struct pollfd *app, nfds_t napp, int timeout_ms,
		 const sigset_t *mask, srn_ppoll_fn *real_ppoll, srn_wait_ready_fn *ready, void *arg)
{
	if (napp > SRN_WAIT_FDS_MAX)
		return -EOPNOTSUPP;
	int cs = cancel_off();
	if (!enter(nic, srn_diag_tid())) {
		pthread_setcancelstate(cs, NULL);
		return -EOPNOTSUPP;
	}
	/* The program's fds first, then ours as srn_wait_event watches
	 * them (the event bell is not needed: the program's channel fd is
	 * in its set and counts every event). */
	struct pollfd pfd[SRN_WAIT_FDS_MAX + 4];
	for (nfds_t i = 0; i < napp; i++) {
		pfd[i] = (struct pollfd){ .fd = app[i].fd, .events = app[i].events };
		app[i].revents = 0;     /* output only, as the kernel's poll: 0 after a timeout too */
	}
	struct pollfd *ours = pfd + napp;
	ours[0] = (struct pollfd){ .fd = nic->link.udp.fd, .events = POLLIN };
	ours[1] = (struct pollfd){ .fd = -1 };
	ours[2] = (struct pollfd){ .fd = nic->engine.ring_bell_fd, .events = POLLIN };
	ours[3] = (struct pollfd){ .fd = srn_udp_group_fd(&nic->link.udp), .events = POLLIN };
	nfds_t nours = ours[3].fd >= 0 ? 4 : 3;
	uint64_t deadline = timeout_ms < 0 ? 0 : srn_now_ns() + (uint64_t)timeout_ms * 1000000;
	struct timespec zero = { 0, 0 };
	int ret;
	struct wait_state w = { .nic = nic };
	pthread_cleanup_push(wait_cancelled, &w);
	for (bool first = true;; first = false) {
		if (atomic_load_explicit(&nic->engine.acks_deferred, memory_order_relaxed)) {
			srn_nic_lock(nic);
			srn_ack_flush(nic);
			srn_txq_flush(nic);
			srn_nic_unlock(nic);
		}
		struct timespec ts, *tsp = NULL;
		if (timeout_ms >= 0) {
			uint64_t now = srn_now_ns();
			uint64_t left = now < deadline ? deadline - now : 0;
			ts = (struct timespec){ (time_t)(left / 1000000000), (long)(left % 1000000000) };
			tsp = &ts;
		}
		bool asleep = srn_shm_sleep_begin(&nic->link.shm);
		w.asleep = asleep;
		pthread_setcancelstate(cs, NULL);
		int n = real_ppoll(pfd, napp + nours, asleep ? tsp : &zero, mask);
		int err = errno;
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		w.asleep = false;
		if (asleep)
			srn_shm_sleep_end(&nic->link.shm);
		if (n < 0) {
			if (err == ENOMEM && !first)
				continue;
			ret = -err;       /* EINTR too: poll and epoll_wait never restart */
			break;
		}
		int mine = 0;
		for (nfds_t i = 0; i < napp; i++)
			mine += pfd[i].revents != 0;
		if (asleep)
			woken_polled(nic, ours, nours);
		else
			serve(nic, false);
		if (!mine && ready && ready(arg)) {
			app[0].revents = POLLIN;   /* our pass queued what the program waits for */
			ret = 1;
			break;
		}
		if (mine) {
			for (nfds_t i = 0; i < napp; i++)
				app[i].revents = pfd[i].revents;
			ret = mine;
			break;
		}
		if (asleep && tsp && !ts.tv_sec && !ts.tv_nsec) {
			ret = 0;          /* the time is up */
			break;
		}
	}
	pthread_cleanup_pop(0);
	leave(nic);
	pthread_setcancelstate(cs, NULL);
	return ret;
}
