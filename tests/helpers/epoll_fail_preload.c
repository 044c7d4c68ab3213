/*
 * epoll_fail_preload.c - LD_PRELOAD library for test_guest.sh: a host
 * on which epoll_pwait2 fails.
 *
 * EPOLL_FAIL_ERRNO=ENOSYS (the default) plays Linux before 5.11, or
 * valgrind 3.19, which does not know the system call; EBADF plays an
 * error that no retry mends.  epoll_wait and epoll_pwait are left alone.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

int epoll_pwait2(int epfd, struct epoll_event *events, int maxevents,
		 const struct timespec *timeout, const sigset_t *sigmask)
{
	(void)epfd, (void)events, (void)maxevents, (void)timeout, (void)sigmask;
	const char *e = getenv("EPOLL_FAIL_ERRNO");
	errno = e && !strcmp(e, "EBADF") ? EBADF : ENOSYS;
	return -1;
}
