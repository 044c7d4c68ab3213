/*
 * thread.c - the CM thread, the top of the CM: init and fini, the epoll
 * loop, the dispatcher every received MAD goes through, the timers, and
 * what the thread does when a peer process dies (peer_watch.c).
 *
 * One thread per process sleeps in epoll on the devices' completion
 * channels (qp1.c), the kick eventfd, the peer watches and the earliest
 * CM timer; it receives MADs and runs timers
 * under srn_cm.lock.
 */
#include "cm/thread.h"
#include "cm/cm_id.h"
#include "cm/conn.h"
#include "cm/held.h"
#include "cm/peer_watch.h"
#include "cm/ports.h"
#include "cm/qp1.h"
#include "diag/thread.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Every CM MAD that reaches us, from QP1 or passed on by another CM:
 * counted, parsed, and handed to the protocol.  A REQ that no listener
 * takes yet waits a moment for one (held.c). */
static void dispatch(struct srn_cm_dev *dev, const uint8_t *mad, size_t len, const uint8_t gid[16])
{
	struct srn_cm_msg m;
	if (srn_cm_mad_parse(mad, len, &m)) {
		srn_cm.cnt[SRN_CM_CNT_RX_BAD]++;
		srn_cm_count_malformed(dev);
		return;
	}
	srn_cm.cnt_attr_rx[m.attr & 15]++;
	srn_cm_count_mad(dev, m.attr, SRN_CM_COUNT_RCVD);
	if (srn_cm_conn_mad(dev, &m, gid) == -ENOENT)
		srn_cm_held_add(dev, &m, gid);
}

/* Receive and handle every MAD that has reached d.  Behind a shared
 * address the link has already routed each to the process it is for. */
static void dev_drain(struct srn_cm_dev *d)
{
	srn_cm_qp1_poll(d, dispatch);
}

/* A same-host peer process died (peer_watch.c): end every connection to it. */
static void peer_died(pid_t pid)
{
	srn_cm.cnt[SRN_CM_CNT_PEER_DIED]++;
	/* What the peer said before it died comes first: an RTU or a DREQ
	 * may wait in our queues behind the pidfd's event. */
	for (int i = 0; i < srn_cm.ndev; i++)
		dev_drain(&srn_cm.dev[i]);
	for (struct srn_cm_id *id = srn_cm.ids; id; id = id->next)
		if (id->peer_pid == pid && !id->destroying) {
			id->peer_pid = 0;
			srn_cm_peer_died(id);
		}
}

/* Run expired timers; returns the next deadline (0 = none). */
static uint64_t timers(uint64_t now)
{
	uint64_t next = srn_cm_held_expire(now);
	for (struct srn_cm_id *id = srn_cm.ids; id; id = id->next) {
		if (!id->deadline_ns || id->destroying)
			continue;
		if (id->deadline_ns <= now)
			srn_cm_expire(id);
		if (id->deadline_ns && (!next || id->deadline_ns < next))
			next = id->deadline_ns;
	}
	return next;
}

static void *cm_thread(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&srn_cm.lock);
		uint64_t now = srn_now_ns();
		uint64_t next = timers(now);
		pthread_mutex_unlock(&srn_cm.lock);
		int tmo = -1;
		if (next) {
			now = srn_now_ns();
			tmo = next <= now ? 0 : (int)((next - now + 999999) / 1000000);
		}
		struct epoll_event ev[SRN_CM_MAX_DEV + 1];
		int n = epoll_wait(srn_cm.epfd, ev, SRN_CM_MAX_DEV + 1, tmo);
		if (atomic_load(&srn_cm.stop))
			return NULL;
		if (n < 0 && errno != EINTR) {
			/* Nothing mends this but the thread must not end: every
			 * connection's timers live here.  Say so once and
			 * retry at a pace that costs no CPU. */
			if (!srn_cm.wait_failed)
				dprintf(STDERR_FILENO,
					"softrnic: rdma_cm thread: epoll_wait: %s; retrying every 100 ms\n",
					strerror(errno));
			srn_cm.wait_failed = true;
			nanosleep(&(struct timespec){ .tv_nsec = 100000000 }, NULL);
			continue;
		}
		pthread_mutex_lock(&srn_cm.lock);
		for (int i = 0; i < n; i++) {
			if (ev[i].data.ptr == NULL) {
				uint64_t v;
				if (read(srn_cm.kick_fd, &v, sizeof(v)) < 0) { /* nothing to do */ }
				continue;
			}
			pid_t dead;
			if (srn_cm_watch_fired(ev[i].data.ptr, &dead)) {
				if (dead)
					peer_died(dead);
				continue;
			}
			struct srn_cm_dev *d = ev[i].data.ptr;
			struct ibv_cq *cq;
			void *ctx;
			if (ibv_get_cq_event(d->ch, &cq, &ctx) == 0)
				ibv_ack_cq_events(cq, 1);
			ibv_req_notify_cq(d->cq, 0);
			dev_drain(d);
		}
		pthread_mutex_unlock(&srn_cm.lock);
	}
	return NULL;
}

/* libibverbs.so.1's private entry point (src/verbs/verbs_gsi.c). */
int softrnic_gsi_serve(struct ibv_context *ctx, long (*listener)(const uint8_t *mad, size_t len));

/* Must hold srn_cm.lock. */
int srn_cm_init(void)
{
	if (srn_cm.inited)
		return srn_cm.init_err;
	srn_cm.inited = true;
	srn_cm.kick_fd = -1;
	uint32_t r;
	srn_cm.next_comm_id = (getrandom(&r, sizeof(r), 0) == sizeof(r) ? r : (uint32_t)srn_now_ns()) | 1;
	int n = 0, ret = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n == 0) {
		srn_cm.init_err = -ENODEV;
		return srn_cm.init_err;
	}
	srn_cm.epfd = epoll_create1(EPOLL_CLOEXEC);
	srn_cm.kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	struct epoll_event kev = { .events = EPOLLIN, .data.ptr = NULL };
	epoll_ctl(srn_cm.epfd, EPOLL_CTL_ADD, srn_cm.kick_fd, &kev);
	for (int i = 0; i < n && srn_cm.ndev < SRN_CM_MAX_DEV; i++) {
		struct srn_cm_dev *d = &srn_cm.dev[srn_cm.ndev];
		ret = srn_cm_qp1_open(d, list[i]);
		if (ret)
			break;
		/* By the system call, not libc's name: the interposed
		 * epoll_ctl (verbs/verbs_fdwait.c) would make this thread's
		 * sleep serve the device, and then no program thread could. */
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = d };
		syscall(SYS_epoll_ctl, srn_cm.epfd, EPOLL_CTL_ADD, d->ch->fd, &ev);
		srn_cm.ndev++;
	}
	ibv_free_device_list(list);
	/* QP1 is ours to serve: REQs behind a shared address route through
	 * our port files, the rest by the member number in our comm IDs. */
	for (int i = 0; !ret && i < srn_cm.ndev; i++) {
		int m = softrnic_gsi_serve(srn_cm.dev[i].ctx, srn_cm_port_holder);
		srn_cm.dev[i].member = m > 0 ? (unsigned)m : 0;
	}
	if (!ret && srn_thread_spawn(&srn_cm.thread, "srn-cm", cm_thread, NULL))
		ret = -EAGAIN;
	srn_cm.thread_started = !ret;
	srn_cm.pid = getpid();
	srn_cm.init_err = ret;
	return ret;
}

/* At exit the CM thread must be gone before libibverbs.so.1's destructor
 * closes the devices under it (ours runs first: we depend on it).  A
 * program that exits with connections open ends them on the wire first
 * (srn_cm_exit_abort), as the kernel does for a process that exits. */
__attribute__((destructor)) static void srn_cm_fini(void)
{
	/* A forked child has no CM thread: joining the parent's id is undefined. */
	if (!srn_cm.thread_started || srn_cm.pid != getpid())
		return;
	pthread_mutex_lock(&srn_cm.lock);
	srn_cm_exit_abort();
	for (int i = 0; i < srn_cm.ndev; i++)
		softrnic_gsi_serve(srn_cm.dev[i].ctx, NULL);
	pthread_mutex_unlock(&srn_cm.lock);
	atomic_store(&srn_cm.stop, true);
	/* Kick until it has ended: a pass that was already running may read
	 * this kick (taking it for a timer's) and then sleep again. */
	for (;;) {
		srn_cm_kick();
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (pthread_timedjoin_np(srn_cm.thread, NULL, &ts) == 0)
			break;
	}
	srn_cm.thread_started = false;
}
