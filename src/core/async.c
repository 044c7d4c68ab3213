/*
 * async.c - per-context asynchronous event queue behind context->async_fd.
 */
#include "core/async.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

int srn_async_init(struct srn_async *a)
{
	pthread_mutex_init(&a->lock, NULL);
	a->head = a->tail = 0;
	a->efd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	return a->efd < 0 ? -errno : 0;
}

void srn_async_destroy(struct srn_async *a)
{
	if (a->efd >= 0)
		close(a->efd);
	pthread_mutex_destroy(&a->lock);
}

void srn_async_post(struct srn_async *a, const struct ibv_async_event *ev)
{
	uint64_t one = 1;
	pthread_mutex_lock(&a->lock);
	if (a->head - a->tail >= SRN_ASYNC_QUEUE_LEN) {
		a->dropped++;
		pthread_mutex_unlock(&a->lock);
		return;
	}
	a->ev[a->head++ % SRN_ASYNC_QUEUE_LEN] = *ev;
	pthread_mutex_unlock(&a->lock);
	if (write(a->efd, &one, sizeof(one)) < 0) {
		/* eventfd counter cannot overflow at this queue length */
	}
}

int srn_async_get(struct srn_async *a, struct ibv_async_event *ev)
{
	/* Semaphore eventfd: one read per queued event (see cq.c). */
	for (;;) {
		uint64_t v;
		if (read(a->efd, &v, sizeof(v)) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		pthread_mutex_lock(&a->lock);
		if (a->head != a->tail) {
			*ev = a->ev[a->tail++ % SRN_ASYNC_QUEUE_LEN];
			pthread_mutex_unlock(&a->lock);
			return 0;
		}
		pthread_mutex_unlock(&a->lock);
	}
}
