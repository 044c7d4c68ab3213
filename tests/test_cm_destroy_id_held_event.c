/*
 * test_cm_destroy_id_held_event - regression test: rdma_destroy_id acked
 * (freed) an event that another thread had fetched and not yet acked, so
 * that thread's rdma_ack_cm_event freed it a second time.  ASan saw it in
 * rping: its CM thread holds the DISCONNECTED event while the main thread
 * destroys the id.  librdmacm's rule: rdma_destroy_id waits until every
 * event of the id handed out is acked; only the event a synchronous call
 * holds (id->event) is acked by the destroy itself.
 *
 * An asynchronous id resolves an address no device reaches, which gives
 * ADDR_ERROR at once; the event is fetched and held; another thread calls
 * rdma_destroy_id, which must still wait 200 ms later, and return once the
 * event is acked.  Exit 0 pass, 1 fail, 77 skip (no device).
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

static atomic_int destroyed;

static void *destroy_thread(void *arg)
{
	rdma_destroy_id(arg);
	atomic_store(&destroyed, 1);
	return NULL;
}

int main(void)
{
	alarm(20);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	if (!ch) {
		fprintf(stderr, "SKIP: rdma_create_event_channel: %m\n");
		return 77;
	}
	struct rdma_cm_id *id;
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		perror("rdma_create_id");
		return 1;
	}
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(7999) };
	inet_pton(AF_INET, "192.0.2.77", &dst.sin_addr);   /* TEST-NET-1: nobody's */
	struct rdma_cm_event *ev;
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) ||
	    rdma_get_cm_event(ch, &ev)) {
		perror("resolve/get");
		return 1;
	}
	if (ev->event != RDMA_CM_EVENT_ADDR_ERROR || ev->id != id) {
		fprintf(stderr, "FAIL: got %s\n", rdma_event_str(ev->event));
		return 1;
	}
	pthread_t t;
	pthread_create(&t, NULL, destroy_thread, id);
	usleep(200000);
	int fail = 0;
	if (atomic_load(&destroyed)) {
		fprintf(stderr, "FAIL: rdma_destroy_id returned with an event held\n");
		fail = 1;
	}
	rdma_ack_cm_event(ev);
	pthread_join(t, NULL);
	rdma_destroy_event_channel(ch);
	if (!fail)
		printf("ok: rdma_destroy_id waits for the held event's ack\n");
	return fail;
}
