/*
 * tgt.h - the target program: one thread, one epoll set, both transports.
 *
 * Everything runs in the thread of tgt_run(): the RDMA CQ is polled
 * there, TCP sockets are read there, and the core (core.h) is called
 * from there, so no state is shared between threads.  Each transport
 * registers its file descriptors with a struct tgt_watch whose callback
 * tgt.c calls when epoll reports the descriptor.
 */
#ifndef NVMF_TGT_H
#define NVMF_TGT_H

#include <stdbool.h>
#include <stdint.h>

#include "core.h"

struct tgt_watch {
	void (*fn)(struct tgt_watch *w, uint32_t events);
};

struct tgt_opts {
	const char *addr;
	int port;
	bool poll;         /* busy-poll instead of sleeping */
	bool no_rdma, no_tcp;
	const char *pidfile;
};

struct rtgt;
struct ttgt;

struct tgt {
	struct nvmf_tgt core;
	struct tgt_opts o;
	int ep;
	volatile int stop;
	struct rtgt *rdma;
	struct ttgt *tcp;
};

int tgt_watch_add(struct tgt *t, int fd, struct tgt_watch *w, uint32_t events);
int tgt_watch_mod(struct tgt *t, int fd, struct tgt_watch *w, uint32_t events);
void tgt_watch_del(struct tgt *t, int fd);
int tgt_run(struct tgt *t);

/* tgt_rdma.c */
int rdma_tgt_start(struct tgt *t);
int rdma_tgt_poll(struct rtgt *r);   /* completions handled */
int rdma_tgt_arm(struct rtgt *r);    /* arm the CQ; >0 if work slipped in */
void rdma_tgt_reap(struct rtgt *r, bool force);
void rdma_tgt_stop(struct rtgt *r);

/* tgt_tcp.c */
int tcp_tgt_start(struct tgt *t);
void tcp_tgt_reap(struct ttgt *tt);
void tcp_tgt_stop(struct ttgt *tt);

#endif
