/*
 * test_cm_destroyed_channel - regression test for the rping server's
 * SIGBUS at exit: Debian's rping (rdma-core 44) destroys its event channel
 * while its CM thread, never joined, is about to call rdma_get_cm_event on
 * it again.  That call read the freed channel: the "head" it found was
 * malloc's tcache key, a non-canonical pointer, and dereferencing it
 * through %rbp raised #SS, which Linux reports as SIGBUS.
 *
 * Checks, each bounded by alarm():
 *   a. rdma_get_cm_event on a channel destroyed before the call: the
 *      thread sleeps (as rping's thread must), the process stays well;
 *   b. a thread already asleep in rdma_get_cm_event when the channel is
 *      destroyed stays asleep;
 *   c. a channel destroyed while an id still uses it: the id can still be
 *      destroyed, at once;
 *   d. rdma_create_id and rdma_migrate_id refuse a destroyed channel
 *      (EINVAL), and destroying it twice is harmless;
 *   e. a non-blocking channel with nothing queued answers EAGAIN.
 * Run under ASan, any read of freed channel memory is a report.
 * Exit 0 pass, 1 fail, 77 skip (no device).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include "check.h"

struct getter {
	struct rdma_event_channel *ch;
	atomic_int go;                 /* a: call only once the channel is gone */
	atomic_int entered, returned;
};

static void *get_thread(void *arg)
{
	struct getter *g = arg;
	while (!atomic_load(&g->go))
		usleep(1000);
	struct rdma_cm_event *ev;
	atomic_store(&g->entered, 1);
	int r = rdma_get_cm_event(g->ch, &ev);
	(void)r;
	atomic_store(&g->returned, 1);
	return NULL;
}

static void ms_sleep(int ms) { usleep((useconds_t)ms * 1000); }

int main(void)
{
	alarm(20);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	if (!ch) {
		fprintf(stderr, "SKIP: rdma_create_event_channel: %m\n");
		return 77;
	}

	/* a. The call comes after the destroy (rping's CM thread after its last ack). */
	struct getter a = { .ch = ch };
	pthread_t ta;
	pthread_create(&ta, NULL, get_thread, &a);
	rdma_destroy_event_channel(ch);
	atomic_store(&a.go, 1);
	ms_sleep(300);
	CHECK(atomic_load(&a.entered) && !atomic_load(&a.returned),
	      "a: rdma_get_cm_event on a destroyed channel returned");

	/* b. The call sleeps already when the channel goes. */
	struct rdma_event_channel *ch2 = rdma_create_event_channel();
	CHECK(ch2, "b: rdma_create_event_channel: %m");
	if (ch2) {
		struct getter b = { .ch = ch2, .go = 1 };
		pthread_t tb;
		pthread_create(&tb, NULL, get_thread, &b);
		ms_sleep(100);
		rdma_destroy_event_channel(ch2);
		ms_sleep(200);
		CHECK(!atomic_load(&b.returned), "b: a sleeping rdma_get_cm_event returned");
		pthread_detach(tb);
	}

	/* c, d. An id outlives its channel. */
	struct rdma_event_channel *ch3 = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL, *id2 = NULL;
	CHECK(ch3 && rdma_create_id(ch3, &id, NULL, RDMA_PS_TCP) == 0, "c: create: %m");
	if (id) {
		rdma_destroy_event_channel(ch3);
		errno = 0;
		CHECK(rdma_create_id(ch3, &id2, NULL, RDMA_PS_TCP) == -1 && errno == EINVAL,
		      "d: rdma_create_id on a destroyed channel: errno %d", errno);
		errno = 0;
		CHECK(rdma_migrate_id(id, ch3) == -1 && errno == EINVAL,
		      "d: rdma_migrate_id to a destroyed channel: errno %d", errno);
		rdma_destroy_event_channel(ch3);   /* twice: ignored */
		CHECK(rdma_destroy_id(id) == 0, "c: rdma_destroy_id: %m");
	}

	/* e. Non-blocking and empty. */
	struct rdma_event_channel *ch4 = rdma_create_event_channel();
	CHECK(ch4, "e: rdma_create_event_channel: %m");
	if (ch4) {
		fcntl(ch4->fd, F_SETFL, fcntl(ch4->fd, F_GETFL) | O_NONBLOCK);
		struct rdma_cm_event *ev;
		errno = 0;
		CHECK(rdma_get_cm_event(ch4, &ev) == -1 && errno == EAGAIN,
		      "e: empty non-blocking channel: errno %d", errno);
		rdma_destroy_event_channel(ch4);
	}

	pthread_detach(ta);
	if (srn_check_failures)
		return 1;
	printf("ok: destroyed channels: a late call and a sleeper stay asleep, ids outlive them\n");
	return 0;   /* exit with the sleepers still asleep, as rping does */
}
