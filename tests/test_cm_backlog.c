/*
 * test_cm_backlog.c - a full listen backlog behaves as the kernel's rdma_cm:
 * ucma counts CONNECT_REQUEST events queued and not yet fetched; a REQ
 * beyond the backlog is dropped unanswered (ib_cm: "do not reject to allow
 * future retries"), so the requester's CM sends it again after its
 * response timeout (~4.8 s) and it connects once the listener has room.
 * No REJECTED, no UNREACHABLE.
 *
 *   test_cm_backlog server ADDR PORT FIFO   listen(backlog 1), fetch nothing
 *                                           until the client has sent both
 *                                           REQs, then accept what comes
 *   test_cm_backlog client ADDR PORT FIFO   connect two ids at once
 *
 * Two processes (tests/test_cm_backlog.sh starts them); every wait is
 * bounded.  Exit 0 pass, 1 fail.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

#define WAIT_MS 40000

static int fail(const char *what)
{
	fprintf(stderr, "FAIL: %s: %s\n", what, strerror(errno));
	return 1;
}

/* The next event within ms, or NULL. */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ch, int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *e;
	if (rdma_get_cm_event(ch, &e) == 0)
		return e;
	if (errno != EAGAIN || poll(&p, 1, ms) <= 0 || rdma_get_cm_event(ch, &e))
		return NULL;
	return e;
}

static int make_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = 4, .max_recv_wr = 4,
					       .max_send_sge = 1, .max_recv_sge = 1 } };
	return rdma_create_qp(id, NULL, &a);
}

static int server(struct rdma_event_channel *ch, struct sockaddr_in *sin, const char *fifo)
{
	struct rdma_cm_id *l;
	if (rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) || rdma_bind_addr(l, (struct sockaddr *)sin) ||
	    rdma_listen(l, 1))
		return fail("listen");
	printf("listening\n");
	fflush(stdout);
	/* The client says when both REQs are out; then give them time to
	 * arrive before looking at the queue. */
	char buf[8];
	int f = open(fifo, O_RDONLY);
	if (f < 0 || read(f, buf, sizeof(buf)) <= 0)
		return fail("fifo");
	close(f);
	sleep(2);
	struct rdma_cm_event *e = next_event(ch, WAIT_MS);
	if (!e || e->event != RDMA_CM_EVENT_CONNECT_REQUEST)
		return fail("first CONNECT_REQUEST");
	struct rdma_cm_event *more;
	if (rdma_get_cm_event(ch, &more) == 0) {
		fprintf(stderr, "FAIL: a second CONNECT_REQUEST (%s) was queued past backlog 1\n",
			rdma_event_str(more->event));
		return 1;
	}
	int established = 0, requests = 1;
	for (;;) {
		if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
						      .rnr_retry_count = 7 };
			if (make_qp(e->id) || rdma_accept(e->id, &cp))
				return fail("accept");
		} else if (e->event == RDMA_CM_EVENT_ESTABLISHED) {
			established++;
		} else if (e->event != RDMA_CM_EVENT_DISCONNECTED) {
			fprintf(stderr, "FAIL: server got %s\n", rdma_event_str(e->event));
			return 1;
		}
		rdma_ack_cm_event(e);
		if (established == 2)
			break;
		if (!(e = next_event(ch, WAIT_MS)))
			return fail("server: no event in time");
		requests += e->event == RDMA_CM_EVENT_CONNECT_REQUEST;
	}
	printf("ok: server: backlog 1 held the second REQ back; %d requests, both connected\n", requests);
	return 0;
}

static int client(struct rdma_event_channel *ch, struct sockaddr_in *sin, const char *fifo)
{
	struct rdma_cm_id *id[2];
	for (int i = 0; i < 2; i++) {
		if (rdma_create_id(ch, &id[i], NULL, RDMA_PS_TCP) ||
		    rdma_resolve_addr(id[i], NULL, (struct sockaddr *)sin, 2000))
			return fail("resolve_addr");
		struct rdma_cm_event *e = next_event(ch, WAIT_MS);
		if (!e || e->event != RDMA_CM_EVENT_ADDR_RESOLVED)
			return fail("ADDR_RESOLVED");
		rdma_ack_cm_event(e);
		if (rdma_resolve_route(id[i], 2000))
			return fail("resolve_route");
		e = next_event(ch, WAIT_MS);
		if (!e || e->event != RDMA_CM_EVENT_ROUTE_RESOLVED)
			return fail("ROUTE_RESOLVED");
		rdma_ack_cm_event(e);
		struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
					      .retry_count = 7, .rnr_retry_count = 7 };
		if (make_qp(id[i]) || rdma_connect(id[i], &cp))
			return fail("connect");
	}
	int f = open(fifo, O_WRONLY);
	if (f < 0 || write(f, "sent\n", 5) != 5)
		return fail("fifo");
	close(f);
	int established = 0;
	while (established < 2) {
		struct rdma_cm_event *e = next_event(ch, WAIT_MS);
		if (!e)
			return fail("client: no ESTABLISHED in time");
		if (e->event != RDMA_CM_EVENT_ESTABLISHED) {
			fprintf(stderr, "FAIL: client got %s (status %d): a full backlog must not answer\n",
				rdma_event_str(e->event), e->status);
			return 1;
		}
		established++;
		rdma_ack_cm_event(e);
	}
	printf("ok: client: both connections established, none refused\n");
	for (int i = 0; i < 2; i++)
		rdma_disconnect(id[i]);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 5)
		return fprintf(stderr, "usage: %s server|client ADDR PORT FIFO\n", argv[0]), 2;
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3])) };
	if (inet_pton(AF_INET, argv[2], &sin.sin_addr) != 1)
		return 2;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	if (!ch)
		return fail("channel");
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	return strcmp(argv[1], "server") == 0 ? server(ch, &sin, argv[4]) : client(ch, &sin, argv[4]);
}
