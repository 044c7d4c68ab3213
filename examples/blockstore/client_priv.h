/*
 * client_priv.h - between client.c (queues, retries) and the two client
 * transports (cli_rdma.c, cli_tcp.c).
 */
#ifndef BS_CLIENT_PRIV_H
#define BS_CLIENT_PRIV_H

#include "client.h"

struct bs_transport {
	int (*open)(struct bs_client *c);
	/* Send IO now: 0, or -EAGAIN when no connection has room for it. */
	int (*post)(struct bs_client *c, struct bs_io *io);
	/* Handle completions and connection events, sleeping at most
	 * TIMEOUT_MS when there are none. */
	void (*progress)(struct bs_client *c, int timeout_ms);
	void (*close)(struct bs_client *c);
};

extern const struct bs_transport bs_rdma_transport, bs_tcp_transport;

struct bs_client {
	struct bs_client_opts o;
	const struct bs_transport *t;
	void *tp;           /* the transport's state */
	uint64_t nblocks;   /* from the server's hello */
	unsigned nios;
	struct bs_io *ios;
	uint8_t *bufs;      /* nios * BS_SLOT_STRIDE, page aligned */
	struct bs_io *pending, **pending_tail;
	struct bs_io *done, **done_tail;
	struct bs_client_counters cnt;
};

/* IO finished with STATUS (reads: the tag is checked here). */
void bs_complete(struct bs_client *c, struct bs_io *io, int status);
/* Send IO again, before newer requests: RETRY when its connection failed
 * (counted), not when the transport only changes its mind (a stale slot). */
void bs_requeue(struct bs_client *c, struct bs_io *io, bool retry);

/* A connection is up again: count the reconnect and how long it took
 * since *DOWN_SINCE (0: it was never down), then clear it. */
void bs_note_up(struct bs_client *c, uint64_t *down_since);

#endif
