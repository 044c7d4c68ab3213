/*
 * server.h - what the two server transports (RDMA, TCP) share: options,
 * the cache and store, signals, counters.
 *
 * Threads: one I/O thread runs the transport's event loop and does all
 * protocol work; the cache's write-back thread does the disk writes.
 */
#ifndef BS_SERVER_H
#define BS_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "cache.h"
#include "proto.h"
#include "store.h"

#define BS_MAX_CONNS 64

struct bs_server_opts {
	const char *dev;   /* backing file */
	uint64_t nblocks;  /* size when it is created */
	uint32_t nslots;   /* cache slots */
	const char *addr;  /* address to listen on */
	int port;
	bool tcp;
	unsigned poll_us;  /* spin this long on an idle loop before sleeping */
	bool mw;           /* RDMA: each connection gets its own type-2 memory window */
	const char *pidfile;
};

struct bs_server {
	struct bs_server_opts o;
	struct bs_store *st;
	struct bs_cache *cache;
	int sigfd;        /* SIGUSR1: move the cache; SIGUSR2: revoke one connection's
			   * window (--mw); SIGINT/SIGTERM: stop */
	uint64_t ios;     /* requests answered */
	uint64_t remaps;
	uint32_t epoch;
	bool stop;
	bool remap_wanted;
	bool revoke_wanted;
};

int bs_server_main(int argc, char **argv);
int bs_server_rdma(struct bs_server *s);
int bs_server_tcp(struct bs_server *s);

/* Read pending signals from s->sigfd into s->stop / remap_wanted / revoke_wanted. */
void bs_server_signals(struct bs_server *s);
/* A STATS reply: CPU time of the process and of the calling (I/O) thread. */
void bs_server_stats(struct bs_server *s, struct bs_rep *rep);
/* Answer REQ's WRITE-less parts the same way in both transports: check
 * the request; 0 or -errno for the reply status. */
int bs_server_check_req(const struct bs_server *s, const struct bs_req *req);
uint64_t bs_now_ns(void);
/* Both transports call this once they listen: the pidfile appears, so a
 * script can wait for it. */
void bs_server_ready(struct bs_server *s);

#endif
