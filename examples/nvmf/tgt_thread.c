/*
 * tgt_thread.c - the I/O threads: one per core of --cores, each pinned,
 * each looping over its own epoll set (tgt.h); their mailboxes, kill
 * requests and the placement of new queues.
 *
 * A thread's loop, event-driven (default): handle what is there, arm the
 * CQ, look once more (a completion may have arrived before the arm),
 * then sleep in epoll.  Polled (--poll): never sleep; poll the CQ and
 * collect ready sockets with a zero-timeout epoll every turn, so both
 * transports are busy-polled alike and a comparison between them is
 * fair.  Every 50 ms a thread reaps its dead connections; thread 0 also
 * runs the keep-alive timers.
 *
 * Each thread's eventfd sits in its own epoll set: a message posted or a
 * kill request wakes a sleeping thread, and a polling one sees it on its
 * next turn.  On that event the thread runs its messages first, then the
 * kill requests, so a queue handed over and then marked is found.
 */
#include "tgt.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

int tgt_watch_add(struct tgt_thread *th, int fd, struct tgt_watch *w, uint32_t events)
{
	struct epoll_event e = { .events = events, .data.ptr = w };
	return epoll_ctl(th->ep, EPOLL_CTL_ADD, fd, &e);
}

int tgt_watch_mod(struct tgt_thread *th, int fd, struct tgt_watch *w, uint32_t events)
{
	struct epoll_event e = { .events = events, .data.ptr = w };
	return epoll_ctl(th->ep, EPOLL_CTL_MOD, fd, &e);
}

void tgt_watch_del(struct tgt_thread *th, int fd)
{
	epoll_ctl(th->ep, EPOLL_CTL_DEL, fd, NULL);
}

/* ---- --cores ---- */

static int add_core(struct tgt_opts *o, long c)
{
	if (c < 0 || c >= CPU_SETSIZE || o->ncores >= NVMF_MAX_THREADS)
		return -EINVAL;
	for (unsigned i = 0; i < o->ncores; i++)
		if (o->cores[i] == c)
			return -EINVAL; /* one thread per core */
	o->cores[o->ncores++] = (int)c;
	return 0;
}

/* "0,1", "0-3,6", SPDK's list "[0,1]" or its mask "0x3". */
int tgt_parse_cores(const char *s, struct tgt_opts *o)
{
	char *end;
	o->ncores = 0;
	if (!strncmp(s, "0x", 2) || !strncmp(s, "0X", 2)) {
		unsigned long long m = strtoull(s + 2, &end, 16);
		if (*end || !m)
			return -EINVAL;
		for (int c = 0; c < 64; c++)
			if (m >> c & 1 && add_core(o, c))
				return -EINVAL;
		return 0;
	}
	size_t n = strlen(s);
	bool br = n >= 2 && s[0] == '[' && s[n - 1] == ']';
	const char *p = s + br;
	const char *stop = s + n - br;
	while (p < stop) {
		long a = strtol(p, &end, 10), b = a;
		if (end == p)
			return -EINVAL;
		if (*end == '-') {
			p = end + 1;
			b = strtol(p, &end, 10);
			if (end == p || b < a)
				return -EINVAL;
		}
		for (long c = a; c <= b; c++)
			if (add_core(o, c))
				return -EINVAL;
		if (end != stop && (*end != ',' || end + 1 == stop))
			return -EINVAL; /* junk, or a trailing comma */
		p = end + (end != stop);
	}
	return o->ncores ? 0 : -EINVAL;
}

/* ---- mailboxes and kill requests ---- */

static void wake(struct tgt_thread *th)
{
	uint64_t one = 1;
	if (th->efd >= 0 && write(th->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		perror("nvmf: eventfd");
}

void tgt_post(struct tgt_thread *th, struct tgt_msg *m)
{
	m->next = NULL;
	pthread_mutex_lock(&th->mb_lock);
	if (th->mb_tail)
		th->mb_tail->next = m;
	else
		th->mb_head = m;
	th->mb_tail = m;
	pthread_mutex_unlock(&th->mb_lock);
	wake(th);
}

/* A queue of th's has kill_req set (the caller holds the core's lock).
 * Release: pairs with on_wake's exchange, so the owner then sees the
 * request. */
void tgt_poke(struct tgt_thread *th)
{
	__atomic_store_n(&th->kill_pending, 1, __ATOMIC_RELEASE);
	wake(th);
}

/* Run every message posted so far, in order. */
void tgt_thread_drain(struct tgt_thread *th)
{
	pthread_mutex_lock(&th->mb_lock);
	struct tgt_msg *m = th->mb_head;
	th->mb_head = th->mb_tail = NULL;
	pthread_mutex_unlock(&th->mb_lock);
	while (m) {
		struct tgt_msg *next = m->next;
		m->fn(th, m);
		m = next;
	}
}

static void on_wake(struct tgt_watch *w, uint32_t events)
{
	struct tgt_thread *th = (struct tgt_thread *)((char *)w - offsetof(struct tgt_thread, efd_w));
	uint64_t v;
	if (read(th->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		perror("nvmf: eventfd");
	tgt_thread_drain(th);
	if (!__atomic_exchange_n(&th->kill_pending, 0, __ATOMIC_ACQ_REL))
		return;
	if (th->rdma)
		rdma_thr_kills(th->rdma);
	if (th->tcp)
		tcp_thr_kills(th->tcp);
}

/* Thread 0, for a new I/O queue: the thread with the fewest open I/O
 * queues; among equals the one after the last pick, so a host's queues
 * spread over the cores. */
struct tgt_thread *tgt_pick(struct tgt *t)
{
	/* Stopping: a thread k may have left its loop and drained its
	 * mailbox already, so a queue handed there would never be closed.
	 * Thread 0 drains its own after every other has stopped. */
	if (__atomic_load_n(&t->stop, __ATOMIC_RELAXED))
		return &t->thr[0];
	unsigned best = 0, fewest = UINT_MAX;
	for (unsigned i = 0; i < t->nthr; i++) {
		unsigned k = (t->next_pick + i) % t->nthr;
		unsigned n = __atomic_load_n(&t->thr[k].nq, __ATOMIC_RELAXED);
		if (n < fewest) {
			best = k;
			fewest = n;
		}
	}
	t->next_pick = best + 1;
	return &t->thr[best];
}

/* Thread 0: an I/O queue goes to th (counted until tgt_unplace). */
void tgt_place(struct tgt_thread *th)
{
	th->placed++;
	__atomic_fetch_add(&th->nq, 1, __ATOMIC_RELAXED);
}

/* The owner: a queue tgt_pick() placed here is gone. */
void tgt_unplace(struct tgt_thread *th)
{
	__atomic_fetch_sub(&th->nq, 1, __ATOMIC_RELAXED);
}

/* ---- the loop ---- */

static int dispatch(struct tgt_thread *th, int timeout_ms)
{
	struct epoll_event evs[32];
	int n = epoll_wait(th->ep, evs, 32, timeout_ms);
	for (int i = 0; i < n; i++) {
		struct tgt_watch *w = evs[i].data.ptr;
		w->fn(w, evs[i].events);
	}
	return n > 0 ? n : 0;
}

static void housekeeping(struct tgt_thread *th, uint64_t now)
{
	if (th->idx == 0)
		nvmf_tick(&th->t->core, now);
	if (th->rdma)
		rdma_thr_reap(th->rdma, false);
	if (th->tcp)
		tcp_thr_reap(th->tcp);
}

void tgt_thread_loop(struct tgt_thread *th)
{
	struct tgt *t = th->t;
	uint64_t next_hk = 0;
	while (!__atomic_load_n(&t->stop, __ATOMIC_RELAXED)) {
		int work = th->rdma ? rdma_thr_poll(th->rdma) : 0;
		uint64_t now = nvmf_now_ns();
		if (now >= next_hk) {
			housekeeping(th, now);
			next_hk = now + 50000000ull;
		}
		if (t->o.poll) {
			dispatch(th, 0);
			continue;
		}
		if (work)
			continue;
		if (th->rdma && rdma_thr_arm(th->rdma) > 0)
			continue;
		dispatch(th, 50);
	}
}

/* ---- starting and stopping ---- */

static void pin(struct tgt_thread *th)
{
	char name[16];
	snprintf(name, sizeof(name), "nvmf-io%u", th->idx);
	if (th->idx)
		pthread_setname_np(pthread_self(), name); /* thread 0 keeps the program's */
	if (th->cpu < 0)
		return;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(th->cpu, &set);
	int e = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (e) {
		fprintf(stderr, "nvmf: thread %u: cannot pin to cpu %d (%s); running unpinned\n",
			th->idx, th->cpu, strerror(e));
		th->cpu = -1;
	}
}

int tgt_threads_init(struct tgt *t)
{
	t->nthr = t->o.ncores ? t->o.ncores : 1;
	t->thr = calloc(t->nthr, sizeof(*t->thr));
	if (!t->thr)
		return -ENOMEM;
	for (unsigned i = 0; i < t->nthr; i++)
		t->thr[i].ep = t->thr[i].efd = -1;   /* a failure half-way closes only what is open */
	for (unsigned i = 0; i < t->nthr; i++) {
		struct tgt_thread *th = &t->thr[i];
		th->t = t;
		th->idx = i;
		th->cpu = t->o.ncores ? t->o.cores[i] : -1;
		pthread_mutex_init(&th->mb_lock, NULL);
		th->ep = epoll_create1(EPOLL_CLOEXEC);
		th->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		th->efd_w.fn = on_wake;
		if (th->ep < 0 || th->efd < 0 || tgt_watch_add(th, th->efd, &th->efd_w, EPOLLIN))
			return -errno;
	}
	return 0;
}

/* A thread other than 0: loop, then close its queues (once the stop
 * flag is up tgt_pick() keeps new queues on thread 0). */
static void *thread_main(void *arg)
{
	struct tgt_thread *th = arg;
	pin(th);
	tgt_thread_loop(th);
	tgt_thread_drain(th);
	if (th->tcp)
		tcp_thr_stop(th->tcp);
	if (th->rdma)
		rdma_thr_stop(th->rdma);
	return NULL;
}

/* Threads 1.. start; then thread 0 (the caller) is pinned.  Pinning
 * comes after the transports started, so the threads a verbs library
 * spawned there do not inherit core 0. */
int tgt_threads_start(struct tgt *t)
{
	for (unsigned i = 1; i < t->nthr; i++) {
		int e = pthread_create(&t->thr[i].tid, NULL, thread_main, &t->thr[i]);
		if (e) {
			fprintf(stderr, "nvmf: cannot start thread %u: %s\n", i, strerror(e));
			return -e; /* the ones started still stop and join */
		}
		t->thr[i].started = true;
	}
	pin(&t->thr[0]);
	return 0;
}

/* Thread 0: every thread's share of the transports named (TGT_RDMA,
 * TGT_TCP) still there (thread 0's, those of threads that never ran, or
 * all of a transport that failed to start): their queues closed, freed.
 * Before the transport's own stop, which frees what the shares use. */
void tgt_threads_release(struct tgt *t, unsigned which)
{
	for (unsigned i = 0; i < t->nthr; i++) {
		if ((which & TGT_TCP) && t->thr[i].tcp)
			tcp_thr_stop(t->thr[i].tcp);
		if ((which & TGT_RDMA) && t->thr[i].rdma)
			rdma_thr_stop(t->thr[i].rdma);
	}
}

/* Thread 0, after its loop: the others stop (t->stop is up) and close
 * their queues; then thread 0's own. */
void tgt_threads_stop(struct tgt *t)
{
	__atomic_store_n(&t->stop, 1, __ATOMIC_RELAXED);
	for (unsigned i = 1; i < t->nthr; i++)
		wake(&t->thr[i]);
	for (unsigned i = 1; i < t->nthr; i++)
		if (t->thr[i].started)
			pthread_join(t->thr[i].tid, NULL);
	/* Thread 0's messages, and any for a thread that never ran. */
	for (unsigned i = 0; i < t->nthr; i++)
		if (i == 0 || !t->thr[i].started)
			tgt_thread_drain(&t->thr[i]);
	tgt_threads_release(t, TGT_RDMA | TGT_TCP);
	if (t->nthr > 1)
		for (unsigned i = 0; i < t->nthr; i++)
			fprintf(stderr, "nvmf: thread %u (cpu %d): %u I/O queues served\n", i,
				t->thr[i].cpu, t->thr[i].placed);
}
