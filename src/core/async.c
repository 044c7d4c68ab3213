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
	a->efd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	return a->efd < 0 ? -errno : 0;
}

void srn_async_destroy(struct srn_async *a)
{
	if (a->efd >= 0)
		close(a->efd);
	pthread_cond_destroy(&a->acked);
	pthread_mutex_destroy(&a->lock);
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
	a->q[a->head++ % SRN_ASYNC_QUEUE_LEN] =
		(struct srn_async_slot){ .ev = *ev, .ref = ref };
	pthread_mutex_unlock(&a->lock);
	if (write(a->efd, &one, sizeof(one)) < 0) {
		/* eventfd counter cannot overflow at this queue length */
	}
}

int srn_async_get(struct srn_async *a, struct ibv_async_event *ev)
{
	/* Semaphore eventfd: one count per queued slot, withdrawn ones
	 * included, so a withdrawn slot costs its reader one more read. */
	for (;;) {
		uint64_t v;
		if (read(a->efd, &v, sizeof(v)) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		pthread_mutex_lock(&a->lock);
		if (a->head != a->tail) {
			struct srn_async_slot *s = &a->q[a->tail++ % SRN_ASYNC_QUEUE_LEN];
			if (!s->withdrawn) {
				*ev = s->ev;
				if (s->ref)
					s->ref->reported++;
				pthread_mutex_unlock(&a->lock);
				return 0;
			}
		}
		pthread_mutex_unlock(&a->lock);
	}
}

void srn_async_ack(struct srn_async *a, struct srn_async_ref *ref)
{
	pthread_mutex_lock(&a->lock);
	if (ref->acked != ref->reported) {      /* a second ack of one event: ignored */
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
	for (unsigned i = a->tail; i != a->head; i++) {
		struct srn_async_slot *s = &a->q[i % SRN_ASYNC_QUEUE_LEN];
		if (s->ref == ref) {
			s->withdrawn = true;
			s->ref = NULL;
		}
	}
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
