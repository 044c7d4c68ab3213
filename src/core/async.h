/*
 * async.h - the asynchronous event queue of a context.
 *
 * ibv_get_async_event blocks on context->async_fd; here that fd is an
 * eventfd that is readable while the queue holds events, so poll/epoll on
 * it works as with the kernel's uverbs fd.  Events are queued from the
 * data path (any thread); the queue has its own leaf lock.
 */
#ifndef SRN_CORE_ASYNC_H
#define SRN_CORE_ASYNC_H

#include <infiniband/verbs.h>
#include <pthread.h>

#define SRN_ASYNC_QUEUE_LEN 256

struct srn_async {
	pthread_mutex_t lock;
	int efd;
	unsigned head, tail;           /* free-running, masked on access */
	struct ibv_async_event ev[SRN_ASYNC_QUEUE_LEN];
	unsigned long dropped;         /* queue full: oldest kept, newest dropped */
};

int srn_async_init(struct srn_async *a);
void srn_async_destroy(struct srn_async *a);
void srn_async_post(struct srn_async *a, const struct ibv_async_event *ev);
/* 0, or -EAGAIN when non-blocking and empty, or -errno. */
int srn_async_get(struct srn_async *a, struct ibv_async_event *ev);

#endif
