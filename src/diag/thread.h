/*
 * thread.h - how softrnic starts a thread inside someone else's process.
 *
 * A process-directed signal (kill(getpid(), ...), a timer's SIGALRM, a
 * terminal's SIGINT) goes to any thread that does not block it.  The host
 * program decides which of its threads take its signals; a library thread
 * must never be the one chosen.  tgtd, for one, blocks SIGUSR2 in its own
 * threads and raises it process-wide for every finished disk I/O: a thread
 * of ours that left it unblocked took it, and its default action killed
 * tgtd.  So every thread softrnic creates is born with every signal
 * blocked, as glibc's own helper threads are (the mask is inherited from
 * the creating thread, so it is set around pthread_create and restored).
 * Synchronous faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL) raised by the
 * thread itself are still delivered, as the kernel forces them.
 *
 * The name (at most 15 characters) is what top -H, gdb and perf show.
 * Header only: diag/ is the one layer both libraries (libibverbs.so.1 and
 * librdmacm.so.1) include, and this makes no call edge between layers.
 */
#ifndef SRN_DIAG_THREAD_H
#define SRN_DIAG_THREAD_H

#include <pthread.h>
#include <signal.h>

/* 0 or a positive error number, as pthread_create. */
static inline int srn_thread_spawn(pthread_t *t, const char *name, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int ret = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!ret)
		pthread_setname_np(*t, name);
	return ret;
}

#endif
