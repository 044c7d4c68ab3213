/*
 * cq.c - completion queue rings and completion channels.
 */
#include "core/cq.h"

#include "core/nic.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 1;
	while (p < n)
		p <<= 1;
	return p;
}

int srn_cq_init(struct srn_cq *cq, int cqe)
{
	cq->size = pow2_at_least((uint32_t)cqe + 1);
	cq->ring = calloc(cq->size, sizeof(*cq->ring));
	if (!cq->ring)
		return -ENOMEM;
	cq->head = cq->tail = 0;
	cq->arm = SRN_CQ_DISARMED;
	return 0;
}

void srn_cq_fini(struct srn_cq *cq)
{
	free(cq->ring);
	free(cq->ts);
	cq->ring = NULL;
	cq->ts = NULL;
}

/* Queue the armed CQ's event on its channel and disarm. */
static void srn_cq_fire(struct srn_cq *cq)
{
	cq->fired_arm = cq->arm;
	cq->event_maybe_pending = true;
	cq->arm = SRN_CQ_DISARMED;
	cq->nic->engine.events_fired++;
	/* Which thread made it: the one-wake-up work (a sleeping
	 * application woken by the packet itself) is measured so. */
	bool bg = srn_diag_tid() == atomic_load_explicit(&cq->nic->diag.busy->progress_tid,
							  memory_order_relaxed);
	srn_count(cq->nic->diag.cnt, bg ? SRN_CNT_EVENTS_BY_PROGRESS : SRN_CNT_EVENTS_BY_APP, 1);
	srn_channel_notify(cq->channel, cq);
}

int srn_cq_push(struct srn_cq *cq, const struct ibv_wc *wc, bool solicited)
{
	/* Usable depth is what the application asked for (ibcq.cqe); more
	 * entries than that is an overrun, as on a real CQ. */
	if (cq->head - cq->tail >= (uint32_t)cq->ibcq.cqe) {
		cq->overflowed = true;
		return -ENOSPC;
	}
	if (cq->ts)
		cq->ts[cq->head & (cq->size - 1)] = srn_now_ns();
	cq->ring[cq->head++ & (cq->size - 1)] = *wc;
	bool fire = cq->arm == SRN_CQ_ARM_NEXT ||
		    (cq->arm == SRN_CQ_ARM_SOLICITED && (solicited || wc->status != IBV_WC_SUCCESS));
	if (fire && cq->channel && cq->app_polling) {
		/* The thread that will pop this is the one receiving it.  A
		 * CQ stays armed in a program that polls (arm, poll once
		 * more, find something, go on polling: the withdrawal
		 * re-arms it), and every completion then cost an eventfd
		 * write here and a read in the withdrawal, two system calls
		 * on the latency path per completion (the block store's
		 * polled write: four per request on each side). */
		cq->fire_deferred = true;
		return 0;
	}
	if (fire && cq->channel)
		srn_cq_fire(cq);
	return 0;
}

void srn_cq_fire_deferred(struct srn_cq *cq)
{
	if (!cq->fire_deferred)
		return;
	cq->fire_deferred = false;
	if (cq->tail != cq->head && cq->arm != SRN_CQ_DISARMED)
		srn_cq_fire(cq);
}

int srn_cq_pop(struct srn_cq *cq, int n, struct ibv_wc *wc)
{
	int i = 0;
	while (i < n && cq->tail != cq->head)
		wc[i++] = cq->ring[cq->tail++ & (cq->size - 1)];
	if (i && cq->tail == cq->head)
		srn_cq_drained(cq);
	return i;
}

void srn_cq_clean(struct srn_cq *cq, uint32_t qpn)
{
	uint32_t mask = cq->size - 1, to = cq->tail;
	for (uint32_t from = cq->tail; from != cq->head; from++) {
		if (cq->ring[from & mask].qp_num == qpn)
			continue;
		if (to != from) {
			cq->ring[to & mask] = cq->ring[from & mask];
			if (cq->ts)
				cq->ts[to & mask] = cq->ts[from & mask];
		}
		to++;
	}
	bool emptied = to == cq->tail && cq->head != cq->tail;
	cq->head = to;
	/* Its event, if one waits, now announces nothing. */
	if (emptied)
		srn_cq_drained(cq);
}

void srn_cq_drained(struct srn_cq *cq)
{
	if (!cq->event_maybe_pending)
		return;
	cq->event_maybe_pending = false;
	if (cq->channel && srn_channel_forget(cq->channel, cq) && cq->arm == SRN_CQ_DISARMED)
		cq->arm = cq->fired_arm;
}

int srn_channel_init(struct srn_channel *ch, struct srn_context *ctx)
{
	ch->ctx = ctx;
	pthread_mutex_init(&ch->lock, NULL);
	ch->cap = 64;
	ch->events = calloc(ch->cap, sizeof(*ch->events));
	if (!ch->events)
		return -ENOMEM;
	ch->ibch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	ch->wait_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (ch->ibch.fd < 0 || ch->wait_fd < 0) {
		int e = errno;
		if (ch->ibch.fd >= 0)
			close(ch->ibch.fd);
		if (ch->wait_fd >= 0)
			close(ch->wait_fd);
		free(ch->events);
		return -e;
	}
	return 0;
}

void srn_channel_fini(struct srn_channel *ch)
{
	close(ch->ibch.fd);
	close(ch->wait_fd);
	free(ch->events);
	pthread_mutex_destroy(&ch->lock);
}

/* An event the waiting owner queued in its own pass holds no count on the
 * fd: the owner takes it before it returns (engine/wait.c), so the count
 * would be written and read back at once, two system calls a hop for a
 * readability nobody could see.  Such an entry carries this tag in its
 * low bit (a struct srn_cq is ours, from calloc: aligned).  Should one
 * still be queued when the owner leaves, srn_channel_unown counts it. */
#define EV_UNCOUNTED ((uintptr_t)1)

static struct srn_cq *ev_cq(struct srn_cq *e)
{
	return (struct srn_cq *)((uintptr_t)e & ~EV_UNCOUNTED);
}

static bool ev_counted(struct srn_cq *e)
{
	return !((uintptr_t)e & EV_UNCOUNTED);
}

void srn_channel_notify(struct srn_channel *ch, struct srn_cq *cq)
{
	uint64_t one = 1;
	pthread_mutex_lock(&ch->lock);
	if (ch->head - ch->tail == ch->cap) {
		/* One event per arm per CQ bounds the queue by the number of
		 * CQs; grow if an application has that many. */
		struct srn_cq **n = calloc(ch->cap * 2, sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&ch->lock);
			return;
		}
		for (unsigned i = 0; i < ch->cap; i++)
			n[i] = ch->events[(ch->tail + i) & (ch->cap - 1)];
		free(ch->events);
		ch->events = n;
		ch->tail = 0;
		ch->head = ch->cap;
		ch->cap *= 2;
	}
	bool owners = ch->owner_tid && ch->owner_tid == srn_diag_tid();
	ch->events[ch->head++ & (ch->cap - 1)] =
		owners ? (struct srn_cq *)((uintptr_t)cq | EV_UNCOUNTED) : cq;
	/* Counted under the lock: the count never falls below the number of
	 * counted events queued, which is what lets forget and get read
	 * without blocking. */
	if (!owners && write(ch->ibch.fd, &one, sizeof(one)) < 0) {
		/* cannot overflow: bounded by the queue */
	}
	if (ch->waiters && write(ch->wait_fd, &one, sizeof(one)) < 0) {
		/* one count per event a sleeper may take; a count whose event
		 * another thread took costs a sleeper one look */
	}
	/* The owner finds what its own pass queued without a bell. */
	if (ch->owner_tid && ch->owner_tid != srn_diag_tid() &&
	    write(ch->owner_bell, &one, sizeof(one)) < 0) {
		/* saturated: the owner is due to wake anyway */
	}
	pthread_mutex_unlock(&ch->lock);
}

bool srn_channel_forget(struct srn_channel *ch, struct srn_cq *cq)
{
	pthread_mutex_lock(&ch->lock);
	unsigned w = ch->tail, before = ch->head - ch->tail, counted = 0;
	for (unsigned r = ch->tail; r != ch->head; r++) {
		struct srn_cq *c = ch->events[r & (ch->cap - 1)];
		if (ev_cq(c) != cq)
			ch->events[w++ & (ch->cap - 1)] = c;
		else
			counted += ev_counted(c);
	}
	ch->head = w;
	unsigned removed = before - (ch->head - ch->tail);
	/* Take the withdrawn events' counts too, or the fd stays readable
	 * with nothing to get: a program that epolls the fd and then calls a
	 * blocking ibv_get_cq_event would sleep until the next completion.
	 * Each queued event holds one count (notify), so these reads find
	 * one each and never block, whatever the fd's flags. */
	for (unsigned i = 0; i < counted; i++) {
		uint64_t v;
		if (read(ch->ibch.fd, &v, sizeof(v)) < 0 && errno == EINTR)
			i--;
	}
	pthread_mutex_unlock(&ch->lock);
	return removed != 0;
}

/* The next event and its count on the fd, if one is queued.  Must hold
 * ch->lock.  Each queued event holds one count (notify), so the read
 * never blocks, whatever the fd's flags. */
static bool pop_locked(struct srn_channel *ch, struct srn_cq **cq)
{
	if (ch->head == ch->tail)
		return false;
	struct srn_cq *e = ch->events[ch->tail++ & (ch->cap - 1)];
	*cq = ev_cq(e);
	uint64_t v;
	/* read() is a cancellation point: not with ch->lock held. */
	int cs;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	while (ev_counted(e) && read(ch->ibch.fd, &v, sizeof(v)) < 0 && errno == EINTR)
		;
	pthread_setcancelstate(cs, NULL);
	return true;
}

int srn_channel_take(struct srn_channel *ch, struct srn_cq **cq)
{
	pthread_mutex_lock(&ch->lock);
	bool got = pop_locked(ch, cq);
	pthread_mutex_unlock(&ch->lock);
	return got ? 0 : -EAGAIN;
}

bool srn_channel_pending(struct srn_channel *ch)
{
	pthread_mutex_lock(&ch->lock);
	bool any = ch->head != ch->tail;
	pthread_mutex_unlock(&ch->lock);
	return any;
}

bool srn_channel_own(struct srn_channel *ch, uint32_t tid, int bell_fd)
{
	pthread_mutex_lock(&ch->lock);
	bool empty = ch->head == ch->tail;
	if (empty) {
		ch->owner_tid = tid;
		ch->owner_bell = bell_fd;
	}
	pthread_mutex_unlock(&ch->lock);
	return empty;
}

void srn_channel_unown(struct srn_channel *ch)
{
	uint64_t one = 1;
	pthread_mutex_lock(&ch->lock);
	ch->owner_tid = 0;
	/* What the owner queued and left behind is anyone's now: counted. */
	for (unsigned r = ch->tail; r != ch->head; r++) {
		struct srn_cq **e = &ch->events[r & (ch->cap - 1)];
		if (!ev_counted(*e)) {
			*e = ev_cq(*e);
			if (write(ch->ibch.fd, &one, sizeof(one)) < 0) {
				/* cannot overflow: bounded by the queue */
			}
		}
	}
	pthread_mutex_unlock(&ch->lock);
}

void srn_channel_note_wait(struct srn_channel *ch, bool blocked)
{
	/* Saturating at 8: a program that blocks keeps its score through
	 * the odd event that was ready before it asked; one that polls
	 * the fd (every event ready when asked) falls to 0 within 8. */
	int s = atomic_load_explicit(&ch->blocks_score, memory_order_relaxed);
	int n = blocked ? (s < 8 ? s + 1 : 8) : (s > 0 ? s - 1 : 0);
	if (n != s)
		atomic_store_explicit(&ch->blocks_score, n, memory_order_relaxed);
}

int srn_channel_get(struct srn_channel *ch, struct srn_cq **cq)
{
	/* The eventfd the application sees counts the queued events (one
	 * each, taken with the event), so it is readable exactly while an
	 * event waits, as the kernel's channel fd is.  An empty queue answers
	 * EAGAIN if the application set O_NONBLOCK on that fd; otherwise the
	 * thread sleeps in read() on wait_fd, which notify writes while anyone
	 * sleeps there.  read(), not poll(): a signal then interrupts it
	 * (EINTR, qperf ends its runs with SIGALRM) or restarts it
	 * (SA_RESTART) exactly as it would the kernel's fd. */
	for (;;) {
		pthread_mutex_lock(&ch->lock);
		if (pop_locked(ch, cq)) {
			pthread_mutex_unlock(&ch->lock);
			return 0;
		}
		int fl = fcntl(ch->ibch.fd, F_GETFL);
		if (fl < 0 || (fl & O_NONBLOCK)) {
			pthread_mutex_unlock(&ch->lock);
			return fl < 0 ? -errno : -EAGAIN;
		}
		ch->waiters++;
		pthread_mutex_unlock(&ch->lock);
		uint64_t v;
		ssize_t r = read(ch->wait_fd, &v, sizeof(v));
		int e = errno;
		pthread_mutex_lock(&ch->lock);
		ch->waiters--;
		pthread_mutex_unlock(&ch->lock);
		if (r < 0)
			return -e;
	}
}
