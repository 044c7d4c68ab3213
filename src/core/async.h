/*
 * async.h - the asynchronous event queue of a context.
 *
 * ibv_get_async_event blocks on context->async_fd; here that fd is an
 * eventfd that is readable while the queue holds events, so poll/epoll on
 * it works as with the kernel's uverbs fd.  Events are queued from the
 * data path (any thread); the queue has its own leaf lock.
 *
 * Events that name a QP, CQ or SRQ hold it as uverbs does: destroying
 * the object withdraws its unread events and waits until every event
 * already read has been acknowledged, so no reader ever sees a pointer
 * to freed memory (an object freed with an event in flight is how a
 * reader dispatches one object's event as another's).
 *
 * The fd's count is written and read under the lock, one per queued
 * event, as the completion channel's (cq.c): it never falls below the
 * queue's length, so taking an event or withdrawing one reads its count
 * without blocking whatever the fd's flags, and the fd is readable
 * exactly while an event waits.  A blocking reader sleeps on wait_efd.
 */
#ifndef SRN_CORE_ASYNC_H
#define SRN_CORE_ASYNC_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdbool.h>

#define SRN_ASYNC_QUEUE_LEN 256

/* Kept in each object events can name. */
struct srn_async_ref {
	unsigned reported;             /* read by ibv_get_async_event */
	unsigned acked;                /* given back by ibv_ack_async_event */
};

struct srn_async_slot {
	struct ibv_async_event ev;
	struct srn_async_ref *ref;     /* NULL: names no object */
};

struct srn_async {
	pthread_mutex_t lock;
	pthread_cond_t acked;          /* an acknowledgement came */
	int efd;                       /* context->async_fd: one count per event */
	int wait_efd;                  /* blocking readers sleep here */
	unsigned waiters;              /* ... this many (under lock) */
	unsigned head, tail;           /* free-running, masked on access */
	struct srn_async_slot q[SRN_ASYNC_QUEUE_LEN];
	unsigned long dropped;         /* queue full: oldest kept, newest dropped */
};

int srn_async_init(struct srn_async *a);
void srn_async_destroy(struct srn_async *a);
/* ref: the object the event names, or NULL (port and device events). */
void srn_async_post(struct srn_async *a, const struct ibv_async_event *ev,
		    struct srn_async_ref *ref);
/* 0, or -EAGAIN when non-blocking and empty, or -errno. */
int srn_async_get(struct srn_async *a, struct ibv_async_event *ev);
void srn_async_ack(struct srn_async *a, struct srn_async_ref *ref);
/* The object is being destroyed: withdraw its queued events, then wait
 * up to wait_ms (-1: for ever) for those read to be acknowledged; true
 * once they are.  Call after nothing can post for it any more, without
 * locks the reader may need. */
bool srn_async_forget(struct srn_async *a, struct srn_async_ref *ref, int wait_ms);

#endif
