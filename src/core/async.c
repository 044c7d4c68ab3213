/*
 * async.c - per-context asynchronous event queue behind context->async_fd.
 */
#include "core/async.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

int srn_async_init(struct srn_async *a)
{
	pthread_mutex_init(&a->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->acked, &ca);
	pthread_condattr_destroy(&ca);
	a->head = a->tail = 0;
	a->waiters = 0;
	a->efd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	a->wait_efd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (a->efd < 0 || a->wait_efd < 0) {
		int e = errno;
		if (a->efd >= 0)
			close(a->efd);
		if (a->wait_efd >= 0)
			close(a->wait_efd);
		a->efd = a->wait_efd = -1;
		return -e;
	}
	return 0;
}

void srn_async_destroy(struct srn_async *a)
{
	if (a->efd >= 0)
		close(a->efd);
	if (a->wait_efd >= 0)
		close(a->wait_efd);
	pthread_cond_destroy(&a->acked);
	pthread_mutex_destroy(&a->lock);
}

static void take_count(int fd)
{
	uint64_t v;
	while (read(fd, &v, sizeof(v)) < 0 && errno == EINTR)
		;
}

void srn_async_post(struct srn_async *a, const struct ibv_async_event *ev,
		    struct srn_async_ref *ref)
{
	uint64_t one = 1;
	pthread_mutex_lock(&a->lock);
	if (a->head - a->tail >= SRN_ASYNC_QUEUE_LEN) {
		a->dropped++;
		pthread_mutex_unlock(&a->lock);
		return;
	}
	a->q[a->head++ % SRN_ASYNC_QUEUE_LEN] = (struct srn_async_slot){ .ev = *ev, .ref = ref };
	/* Counted under the lock (see async.h); neither counter can
	 * overflow at this queue length. */
	if (write(a->efd, &one, sizeof(one)) < 0) {
	}
	if (a->waiters && write(a->wait_efd, &one, sizeof(one)) < 0) {
		/* one count per event a sleeper may take; a count whose
		 * event another thread took costs a sleeper one look */
	}
	pthread_mutex_unlock(&a->lock);
}

int srn_async_get(struct srn_async *a, struct ibv_async_event *ev)
{
	/* Empty: EAGAIN if the application set O_NONBLOCK on async_fd,
	 * else sleep in read() on wait_efd, so a signal interrupts it or
	 * restarts it (SA_RESTART) as it would the kernel's fd. */
	for (;;) {
		pthread_mutex_lock(&a->lock);
		if (a->head != a->tail) {
			struct srn_async_slot *s = &a->q[a->tail++ % SRN_ASYNC_QUEUE_LEN];
			*ev = s->ev;
			if (s->ref)
				s->ref->reported++;
			take_count(a->efd);
			pthread_mutex_unlock(&a->lock);
			return 0;
		}
		int fl = fcntl(a->efd, F_GETFL);
		if (fl < 0 || (fl & O_NONBLOCK)) {
			pthread_mutex_unlock(&a->lock);
			return fl < 0 ? -errno : -EAGAIN;
		}
		a->waiters++;
		pthread_mutex_unlock(&a->lock);
		uint64_t v;
		ssize_t r = read(a->wait_efd, &v, sizeof(v));
		int e = errno;
		pthread_mutex_lock(&a->lock);
		a->waiters--;
		pthread_mutex_unlock(&a->lock);
		if (r < 0)
			return -e;
	}
}

void srn_async_ack(struct srn_async *a, struct srn_async_ref *ref)
{
	pthread_mutex_lock(&a->lock);
	/* More acks than reads (an event acknowledged twice with no other
	 * outstanding) would let a destroy pass a read still in use: not
	 * counted.  With others outstanding a double ack cannot be told
	 * from theirs, as in rdma-core. */
	if (ref->acked != ref->reported) {
		ref->acked++;
		pthread_cond_broadcast(&a->acked);
	}
	pthread_mutex_unlock(&a->lock);
}

bool srn_async_forget(struct srn_async *a, struct srn_async_ref *ref, int wait_ms)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	if (wait_ms > 0) {
		until.tv_sec += wait_ms / 1000;
		until.tv_nsec += (long)(wait_ms % 1000) * 1000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
	}
	pthread_mutex_lock(&a->lock);
	/* Withdraw: keep the others in order, and take the withdrawn
	 * events' counts, so the fd is not left readable with nothing to
	 * get (a program that polls it and then blocks in
	 * ibv_get_async_event would sleep until the next event). */
	unsigned w = a->tail;
	for (unsigned i = a->tail; i != a->head; i++) {
		struct srn_async_slot *s = &a->q[i % SRN_ASYNC_QUEUE_LEN];
		if (s->ref == ref)
			take_count(a->efd);
		else
			a->q[w++ % SRN_ASYNC_QUEUE_LEN] = *s;
	}
	a->head = w;
	int r = 0;
	while (ref->acked != ref->reported && r != ETIMEDOUT) {
		if (wait_ms < 0)
			pthread_cond_wait(&a->acked, &a->lock);
		else
			r = pthread_cond_timedwait(&a->acked, &a->lock, &until);
	}
	bool done = ref->acked == ref->reported;
	pthread_mutex_unlock(&a->lock);
	return done;
}
