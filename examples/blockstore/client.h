/*
 * client.h - the block store client library: connect, submit 4 KiB reads
 * and writes (many in flight over several connections), reap them.
 *
 *	struct bs_client_opts o = { .host = "10.0.0.1", .port = 7470,
 *				    .nconn = 2, .depth = 16 };
 *	struct bs_client *c;
 *	bs_client_open(&o, &c);
 *	struct bs_io *io = bs_client_io(c, 0);   // owns a registered buffer
 *	io->op = BS_OP_WRITE; io->lba = 42; memcpy(io->buf, block, 4096);
 *	bs_submit(c, io);
 *	struct bs_io *done[8];
 *	int n = bs_reap(c, done, 8, 1000);      // done[i]->status: 0 or -errno
 *
 * Every block carries its CRC32C: the library computes it for writes (the
 * server checks it), and checks the tag of every block it reads.  A
 * connection that fails (the server moved its cache, restarted, or the
 * network broke) is reconnected in the background and its requests are
 * sent again; only a server gone for longer than `reconnect_ms` fails
 * them (-ENOTCONN).  One thread per client.
 */
#ifndef BS_CLIENT_H
#define BS_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "proto.h"

struct bs_client_opts {
	const char *host;
	const char *src; /* local address to use (optional) */
	int port;
	bool tcp;
	unsigned nconn;        /* connections (QPs) */
	unsigned depth;        /* requests in flight per connection, <= BS_MAX_QP_DEPTH */
	unsigned poll_us;      /* spin this long before sleeping in bs_reap */
	unsigned reconnect_ms; /* give up on a server gone this long; 0: 10 s */
	bool no_rdma_read;     /* always ask the server (no RDMA Read of the cache) */
	bool stale_rkey;       /* wrong on purpose, for `softrnic explain`: keep the first
				* cache address and rkey across reconnects (RDMA only) */
};

struct bs_io {
	uint8_t op;      /* BS_OP_WRITE, _READ, _FLUSH, _STATS */
	uint64_t lba;
	uint8_t *buf;    /* BS_SLOT_STRIDE bytes: the block, then (reads) its tag */
	int status;      /* 0 or -errno; -EBADMSG: a read failed its checksum */
	bool rdma_read;  /* served by an RDMA Read of the server's cache */
	uint64_t seq;    /* the server's version (0: loaded from the file, unknown):
			  * of a write, from its reply; of a read, from the tag */
	uint64_t v[4];   /* STATS: server CPU us, I/O thread CPU us, I/Os, cache moves */
	uint64_t t_submit;
	/* library-private */
	uint32_t index, csum;
	int conn;
	bool busy, no_hint;
	struct bs_io *next;
};

struct bs_client_counters {
	uint64_t retries;      /* requests sent again after a connection failed */
	uint64_t reconnects;
	uint64_t reconnect_max_us;
	uint64_t rdma_read_hits;
	uint64_t rdma_read_misses; /* slot recycled or moved: asked the server */
	uint64_t crc_rejects;      /* writes the server found corrupted, sent again */
	uint64_t remaps_seen;      /* new cache epochs */
	uint64_t access_errors;    /* remote access errors (a stale key): 3 in a row fail
				    * the connection's requests with -EACCES */
};

struct bs_client;

int bs_client_open(const struct bs_client_opts *o, struct bs_client **out);
void bs_client_close(struct bs_client *c);
unsigned bs_client_nios(const struct bs_client *c); /* nconn * depth */
struct bs_io *bs_client_io(struct bs_client *c, unsigned i);
uint64_t bs_client_nblocks(const struct bs_client *c);
const struct bs_client_counters *bs_client_counters(const struct bs_client *c);

/* Queue IO (not already in flight); never blocks. */
int bs_submit(struct bs_client *c, struct bs_io *io);
/* Up to MAX completed requests, waiting at most TIMEOUT_MS for the first. */
int bs_reap(struct bs_client *c, struct bs_io **out, int max, int timeout_ms);
/* CLOCK_MONOTONIC in ns: the clock of io->t_submit. */
uint64_t bs_client_now(void);
/* Submit one request and wait for it (bounded). */
int bs_do(struct bs_client *c, struct bs_io *io, int timeout_ms);

#endif
