/*
 * tgt.h - the target program: I/O threads, each with its own epoll set,
 * serving both transports.
 *
 * `target --cores LIST` starts one thread per core listed, each pinned
 * to its core (tgt_thread.c); without it one thread, unpinned.  A thread
 * owns its queues and everything they need: its epoll set, its RDMA CQ
 * and completion channel, its rdma_cm event channel, its TCP
 * connections.  It busy-polls them with --poll and sleeps in epoll
 * otherwise.  Thread 0 (the program's main thread) is also the acceptor,
 * as SPDK's first core is: the rdma_cm listener, the TCP listener,
 * signals, the keep-alive timers and every admin queue stay there.  It
 * hands each new I/O queue to the least-loaded thread, itself included:
 * an RDMA queue at its CM REQUEST (whose private data names the QID),
 * its cm_id moved to that thread's event channel before anything is
 * created for it; a TCP connection once its Connect named an I/O queue.
 *
 * After the hand-over only the owner touches a queue.  Others reach it
 * in two ways: a message in the owner's mailbox (struct tgt_msg, run on
 * the owner), and a kill request (core.h: the core sets q->kill_req with
 * its lock held and the transport pokes the owner, which then closes
 * every queue so marked).  Each transport registers its descriptors with
 * a struct tgt_watch in its thread's epoll set; the thread calls the
 * watch's callback when epoll reports the descriptor.
 */
#ifndef NVMF_TGT_H
#define NVMF_TGT_H

#include <pthread.h>
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
	int cores[NVMF_MAX_THREADS]; /* --cores: one pinned thread each */
	unsigned ncores;   /* 0: one thread, not pinned */
};

struct tgt_thread;

/* A message for a thread: fn runs there, and owns (frees) m. */
struct tgt_msg {
	struct tgt_msg *next;
	void (*fn)(struct tgt_thread *th, struct tgt_msg *m);
};

struct rthr;
struct tthr;

struct tgt_thread {
	struct tgt *t;
	unsigned idx;
	int cpu;                 /* the core it is pinned to, -1: none */
	pthread_t tid;
	bool started;            /* tid runs (threads 1..) */
	int ep;                  /* its epoll set */
	int efd;                 /* eventfd: a message or a kill request */
	struct tgt_watch efd_w;
	pthread_mutex_t mb_lock; /* guards mb_head, mb_tail */
	struct tgt_msg *mb_head, *mb_tail;
	int kill_pending;        /* atomic: a queue of ours has q.kill_req set */
	unsigned nq;             /* atomic: I/O queues placed here, still open */
	unsigned placed;         /* thread 0's: I/O queues ever placed here */
	struct rthr *rdma;       /* its CQ, event channel and queues (tgt_rdma.c) */
	struct tthr *tcp;        /* its connections (tgt_tcp.c) */
};

struct rtgt;
struct ttgt;

struct tgt {
	struct nvmf_tgt core;
	struct tgt_opts o;
	int stop;                /* atomic: SIGINT or SIGTERM came */
	unsigned nthr;
	struct tgt_thread *thr;  /* [nthr]; [0] is the acceptor */
	unsigned next_pick;      /* thread 0's: where placement looks first */
	struct rtgt *rdma;
	struct ttgt *tcp;
};

/* tgt.c */
int tgt_run(struct tgt *t);

/* tgt_thread.c */
int tgt_parse_cores(const char *s, struct tgt_opts *o);
int tgt_threads_init(struct tgt *t);
int tgt_threads_start(struct tgt *t);
void tgt_threads_stop(struct tgt *t);
enum { TGT_RDMA = 1, TGT_TCP = 2 };
void tgt_threads_release(struct tgt *t, unsigned which);
void tgt_thread_loop(struct tgt_thread *th);
void tgt_thread_drain(struct tgt_thread *th);
struct tgt_thread *tgt_pick(struct tgt *t);
void tgt_place(struct tgt_thread *th);
void tgt_unplace(struct tgt_thread *th);
void tgt_post(struct tgt_thread *th, struct tgt_msg *m);
void tgt_poke(struct tgt_thread *th);
int tgt_watch_add(struct tgt_thread *th, int fd, struct tgt_watch *w, uint32_t events);
int tgt_watch_mod(struct tgt_thread *th, int fd, struct tgt_watch *w, uint32_t events);
void tgt_watch_del(struct tgt_thread *th, int fd);

/* tgt_rdma.c: the listener (thread 0) and each thread's share */
int rdma_tgt_start(struct tgt *t);
void rdma_tgt_stop(struct rtgt *r);
int rdma_thr_poll(struct rthr *r);   /* completions handled */
int rdma_thr_arm(struct rthr *r);    /* arm the CQ; >0 if work slipped in */
void rdma_thr_reap(struct rthr *r, bool force);
void rdma_thr_kills(struct rthr *r); /* close the queues with kill_req */
void rdma_thr_stop(struct rthr *r);

/* tgt_tcp.c: the same */
int tcp_tgt_start(struct tgt *t);
void tcp_tgt_stop(struct ttgt *tt);
void tcp_thr_reap(struct tthr *h);
void tcp_thr_kills(struct tthr *h);
void tcp_thr_stop(struct tthr *h);

#endif
