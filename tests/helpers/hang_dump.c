/*
 * hang_dump.c - the watchdog of hang_dump.h: print the stage and every
 * thread's stack, then exit, when a test outlives its deadline.
 */
#include "hang_dump.h"

#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/wait.h>

extern char **environ;

static _Atomic(const char *) stage = "start";
static atomic_llong deadline_s;
static atomic_int armed;

void srn_hang_dump_stage(const char *name)
{
	atomic_store(&stage, name);
}

static long long now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

/* gdb gets our environment without LD_PRELOAD: an ASan runtime given to
 * the test is not gdb's. */
static void environ_without_preload(char **out, size_t cap)
{
	size_t n = 0;
	for (char **e = environ; *e && n + 1 < cap; e++)
		if (strncmp(*e, "LD_PRELOAD=", 11))
			out[n++] = *e;
	out[n] = NULL;
}

/* Stacks of every thread of this process, on stderr, bounded to 60 s. */
static void dump_stacks(void)
{
	char pid[24];
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	/* Yama's ptrace_scope 1 lets only a declared tracer attach to us. */
	prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
	char *argv[] = { "gdb", "-nx", "-batch", "-p", pid, "-ex", "thread apply all bt", NULL };
	char *envp[512];
	environ_without_preload(envp, 512);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
	pid_t child;
	int rc = posix_spawnp(&child, "gdb", &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	if (rc) {
		fprintf(stderr, "hang_dump: no gdb to print the stacks (%s)\n", strerror(rc));
		return;
	}
	for (int i = 0; i < 600; i++) {
		if (waitpid(child, NULL, WNOHANG) == child)
			return;
		usleep(100000);
	}
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
}

static void *watch(void *arg)
{
	(void)arg;
	while (now_s() < atomic_load(&deadline_s))
		sleep(1);
	fprintf(stderr, "hang_dump: still running after the deadline, in stage \"%s\"\n",
		atomic_load(&stage));
	fflush(stderr);
	dump_stacks();
	_exit(124);
}

void srn_hang_dump_arm(unsigned seconds)
{
	atomic_store(&deadline_s, now_s() + (long long)seconds);
	if (atomic_exchange(&armed, 1))
		return;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_t t;
	if (pthread_create(&t, NULL, watch, NULL) == 0)
		pthread_detach(t);
	else
		fprintf(stderr, "hang_dump: no watchdog thread\n");
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}
