/*
 * tgt.c - the target's life: signals, the threads (tgt_thread.c), both
 * transports, the ready line, the acceptor's loop on thread 0, and the
 * stop.
 *
 * Order matters in both directions.  Signals are blocked before any
 * thread starts (each inherits the mask; thread 0 alone reads them from
 * a signalfd).  The transports set up every thread's share (epoll
 * registrations, CQs, event channels) before the threads run, so each
 * finds its own ready.  Stopping, the other threads close their queues
 * and are joined before thread 0 closes its own and the listeners: the
 * shared protection domain and listeners go last.
 */
#include "tgt.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

struct sigwatch {
	struct tgt_watch w;
	struct tgt *t;
	int fd;
};

static void on_signal(struct tgt_watch *w, uint32_t events)
{
	struct sigwatch *s = (struct sigwatch *)w;
	struct signalfd_siginfo si;
	if (read(s->fd, &si, sizeof(si)) == sizeof(si))
		__atomic_store_n(&s->t->stop, 1, __ATOMIC_RELAXED);
}

static int start_transports(struct tgt *t)
{
	int ret = 0;
	if (!t->o.no_rdma && (ret = rdma_tgt_start(t)))
		fprintf(stderr, "nvmf: RDMA transport not started (%s)%s\n", strerror(-ret),
			t->o.no_tcp ? "" : "; serving TCP only");
	if (ret && t->o.no_tcp)
		return ret;
	if (!t->o.no_tcp && (ret = tcp_tgt_start(t)))
		return ret;
	/* Several threads serve one RAM namespace: its stripe locks (io.c). */
	for (unsigned i = 1; t->nthr > 1 && i <= t->core.nss; i++)
		for (unsigned k = 0; k < t->core.ss[i].nns; k++)
			if ((ret = nvmf_ns_share(&t->core.ss[i].ns[k])))
				return ret;
	return 0;
}

static void ready(struct tgt *t)
{
	if (t->o.pidfile) {
		FILE *f = fopen(t->o.pidfile, "w");
		if (f) {
			fprintf(f, "%d\n", (int)getpid());
			fclose(f);
		}
	}
	char thr[64] = "";
	if (t->o.ncores)
		snprintf(thr, sizeof(thr), ", %u I/O threads", t->nthr);
	fprintf(stderr, "nvmf: target ready on %s port %d (%s%s%s%s)\n", t->o.addr, t->o.port,
		t->rdma ? "rdma" : "", t->rdma && t->tcp ? "+" : "", t->tcp ? "tcp" : "", thr);
}

static void close_threads(struct tgt *t)
{
	for (unsigned i = 0; t->thr && i < t->nthr; i++) {
		struct tgt_thread *th = &t->thr[i];
		if (th->efd >= 0)
			close(th->efd);
		if (th->ep >= 0)
			close(th->ep);
		pthread_mutex_destroy(&th->mb_lock);
	}
	free(t->thr);
	t->thr = NULL;
}

static void stop_transports(struct tgt *t)
{
	if (t->tcp)
		tcp_tgt_stop(t->tcp);
	if (t->rdma)
		rdma_tgt_stop(t->rdma);
	t->tcp = NULL;
	t->rdma = NULL;
}

int tgt_run(struct tgt *t)
{
	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGTERM);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	struct sigwatch sw = { .w.fn = on_signal, .t = t, .fd = signalfd(-1, &ss, SFD_CLOEXEC) };
	t->core.now_ns = nvmf_now_ns();
	int ret = tgt_threads_init(t);
	if (!ret)
		ret = tgt_watch_add(&t->thr[0], sw.fd, &sw.w, EPOLLIN) ? -errno : 0;
	if (!ret)
		ret = start_transports(t);
	if (!ret) {
		ready(t);
		ret = tgt_threads_start(t);
	}
	if (!ret)
		tgt_thread_loop(&t->thr[0]);
	if (t->thr)
		tgt_threads_stop(t);
	stop_transports(t);
	close_threads(t);
	close(sw.fd);
	return ret;
}
