/*
 * server.c - `blockstore server`: open the device and the cache, then run
 * the RDMA or the TCP transport until SIGINT/SIGTERM; flush on the way
 * out.  SIGUSR1 asks the transport to move (re-register) the cache.
 */
#include "server.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

uint64_t bs_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void bs_server_signals(struct bs_server *s)
{
	struct signalfd_siginfo si;
	while (read(s->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGUSR1)
			s->remap_wanted = true;
		else if (si.ssi_signo == SIGUSR2)
			s->revoke_wanted = true;
		else
			s->stop = true;
	}
}

static uint64_t tv_us(struct timeval tv)
{
	return (uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec;
}

void bs_server_stats(struct bs_server *s, struct bs_rep *rep)
{
	struct rusage all, me;
	getrusage(RUSAGE_SELF, &all);
	getrusage(RUSAGE_THREAD, &me);
	rep->v[0] = tv_us(all.ru_utime) + tv_us(all.ru_stime);
	rep->v[1] = tv_us(me.ru_utime) + tv_us(me.ru_stime);
	rep->v[2] = s->ios;
	rep->v[3] = s->remaps;
}

int bs_server_check_req(const struct bs_server *s, const struct bs_req *req)
{
	if (req->magic != BS_MAGIC)
		return -EPROTO;
	switch (req->op) {
	case BS_OP_WRITE:
	case BS_OP_READ:
		if (req->lba >= bs_store_nblocks(s->st))
			return -ERANGE;
		if (req->op == BS_OP_WRITE && req->len != BS_BLOCK)
			return -EINVAL;
		return 0;
	case BS_OP_FLUSH:
	case BS_OP_STATS:
		return 0;
	default:
		return -EOPNOTSUPP;
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: blockstore server --dev FILE [--blocks N] [--slots N] --addr IP\n"
			"       [--port P] [--tcp] [--poll-us US] [--pidfile FILE] [--mw]\n"
			"--mw: a type-2 memory window per connection instead of the cache's\n"
			"rkey; SIGUSR2 revokes one connection's window\n");
}

int bs_server_main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "dev", 1, 0, 'd' },	  { "blocks", 1, 0, 'b' }, { "slots", 1, 0, 's' },
		{ "addr", 1, 0, 'a' },	  { "port", 1, 0, 'p' },   { "tcp", 0, 0, 't' },
		{ "poll-us", 1, 0, 'u' }, { "pidfile", 1, 0, 'P' }, { "mw", 0, 0, 'm' },
		{ 0 },
	};
	struct bs_server s = { .o = { .nblocks = 0, .nslots = 12288, .port = 7470,
				      .poll_us = 1000, .addr = "127.0.0.1" } };
	int c;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'd': s.o.dev = optarg; break;
		case 'b': s.o.nblocks = strtoull(optarg, NULL, 0); break;
		case 's': s.o.nslots = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'a': s.o.addr = optarg; break;
		case 'p': s.o.port = atoi(optarg); break;
		case 't': s.o.tcp = true; break;
		case 'u': s.o.poll_us = (unsigned)atoi(optarg); break;
		case 'P': s.o.pidfile = optarg; break;
		case 'm': s.o.mw = true; break;
		default: usage(); return 2;
		}
	}
	if (!s.o.dev || s.o.nslots < 2 * BS_MAX_QP_DEPTH || s.o.nslots > (1u << 30)) {
		usage();
		return 2;
	}
	/* A client killed mid-request leaves a socket whose next write would
	 * raise SIGPIPE and end the server: take EPIPE instead (the TCP
	 * twin then drops that connection, as the RDMA one drops a QP). */
	signal(SIGPIPE, SIG_IGN);
	/* Signals go to the signalfd; block them before any thread starts. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	s.sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	int ret = bs_store_open(s.o.dev, s.o.nblocks, &s.st);
	if (ret) {
		fprintf(stderr, "blockstore: %s: %s\n", s.o.dev, strerror(-ret));
		return 1;
	}
	ret = bs_cache_create(s.st, s.o.nslots, &s.cache);
	if (ret) {
		fprintf(stderr, "blockstore: cache: %s\n", strerror(-ret));
		bs_store_close(s.st);
		return 1;
	}
	ret = s.o.tcp ? bs_server_tcp(&s) : bs_server_rdma(&s);
	int fret = bs_cache_destroy(s.cache); /* writes back every dirty slot */
	bs_store_close(s.st);
	if (fret)
		fprintf(stderr, "blockstore: final write-back: %s\n", strerror(-fret));
	if (s.o.pidfile)
		unlink(s.o.pidfile);
	fprintf(stderr, "blockstore: server stopped: %llu I/Os, %llu cache moves\n",
		(unsigned long long)s.ios, (unsigned long long)s.remaps);
	return ret || fret ? 1 : 0;
}

void bs_server_ready(struct bs_server *s)
{
	if (s->o.pidfile) {
		char tmp[4096];
		snprintf(tmp, sizeof(tmp), "%s.tmp", s->o.pidfile);
		FILE *f = fopen(tmp, "w");
		if (f) {
			fprintf(f, "%d\n", (int)getpid());
			fclose(f);
			rename(tmp, s->o.pidfile);
		}
	}
	fprintf(stderr, "blockstore: %s server on %s:%d, %llu blocks, %u cache slots\n",
		s->o.tcp ? "tcp" : "rdma", s->o.addr, s->o.port,
		(unsigned long long)bs_store_nblocks(s->st), s->o.nslots);
}
