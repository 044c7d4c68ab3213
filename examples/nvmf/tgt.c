/*
 * tgt.c - the target's loop: the RDMA CQ, the CM channel, TCP sockets
 * and signals in one epoll set, in one thread.
 *
 * Event-driven (default): handle what is there, arm the CQ, look once
 * more (a completion may have arrived before the arm), then sleep in
 * epoll.  Polled (--poll): never sleep; poll the CQ and collect ready
 * sockets with a zero-timeout epoll every turn, so both transports are
 * busy-polled alike and a comparison between them is fair.
 * Keep-alive timers and the reaping of dead connections run every 50 ms.
 */
#include "tgt.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

int tgt_watch_add(struct tgt *t, int fd, struct tgt_watch *w, uint32_t events)
{
	struct epoll_event e = { .events = events, .data.ptr = w };
	return epoll_ctl(t->ep, EPOLL_CTL_ADD, fd, &e);
}

int tgt_watch_mod(struct tgt *t, int fd, struct tgt_watch *w, uint32_t events)
{
	struct epoll_event e = { .events = events, .data.ptr = w };
	return epoll_ctl(t->ep, EPOLL_CTL_MOD, fd, &e);
}

void tgt_watch_del(struct tgt *t, int fd)
{
	epoll_ctl(t->ep, EPOLL_CTL_DEL, fd, NULL);
}

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
		s->t->stop = 1;
}

static int dispatch(struct tgt *t, int timeout_ms)
{
	struct epoll_event evs[32];
	int n = epoll_wait(t->ep, evs, 32, timeout_ms);
	for (int i = 0; i < n; i++) {
		struct tgt_watch *w = evs[i].data.ptr;
		w->fn(w, evs[i].events);
	}
	return n > 0 ? n : 0;
}

static void housekeeping(struct tgt *t)
{
	nvmf_tick(&t->core, nvmf_now_ns());
	if (t->rdma)
		rdma_tgt_reap(t->rdma, false);
	if (t->tcp)
		tcp_tgt_reap(t->tcp);
}

int tgt_run(struct tgt *t)
{
	t->ep = epoll_create1(EPOLL_CLOEXEC);
	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGTERM);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	struct sigwatch sw = { .w.fn = on_signal, .t = t, .fd = signalfd(-1, &ss, SFD_CLOEXEC) };
	tgt_watch_add(t, sw.fd, &sw.w, EPOLLIN);
	t->core.now_ns = nvmf_now_ns();
	int ret = 0;
	if (!t->o.no_rdma && (ret = rdma_tgt_start(t)))
		fprintf(stderr, "nvmf: RDMA transport not started (%s)%s\n", strerror(-ret),
			t->o.no_tcp ? "" : "; serving TCP only");
	if (ret && t->o.no_tcp)
		return ret;
	if (!t->o.no_tcp && (ret = tcp_tgt_start(t)))
		return ret;
	if (t->o.pidfile) {
		FILE *f = fopen(t->o.pidfile, "w");
		if (f) {
			fprintf(f, "%d\n", (int)getpid());
			fclose(f);
		}
	}
	fprintf(stderr, "nvmf: target ready on %s port %d (%s%s%s)\n", t->o.addr, t->o.port,
		t->rdma ? "rdma" : "", t->rdma && t->tcp ? "+" : "", t->tcp ? "tcp" : "");
	uint64_t next_hk = 0;
	while (!t->stop) {
		int work = t->rdma ? rdma_tgt_poll(t->rdma) : 0;
		uint64_t now = nvmf_now_ns();
		if (now >= next_hk) {
			housekeeping(t);
			next_hk = now + 50000000ull;
		}
		if (t->o.poll) {
			dispatch(t, 0);
			continue;
		}
		if (work)
			continue;
		if (t->rdma && rdma_tgt_arm(t->rdma) > 0)
			continue;
		dispatch(t, 50);
	}
	if (t->tcp)
		tcp_tgt_stop(t->tcp);
	if (t->rdma)
		rdma_tgt_stop(t->rdma);
	close(sw.fd);
	close(t->ep);
	return 0;
}
