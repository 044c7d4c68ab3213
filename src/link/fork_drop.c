/*
 * fork_drop.c - the registry of fork_drop.h and its atfork child handler.
 */
#include "link/fork_drop.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

/* -1: a free entry.  Lock-free: adds and deletes come from device open
 * and close in any thread, and the child handler reads it after fork,
 * where a lock another thread held would stay held. */
static atomic_int drop[SRN_FORK_DROP_MAX];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void fork_child(void)
{
	int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
	for (int i = 0; i < SRN_FORK_DROP_MAX; i++) {
		int fd = atomic_exchange_explicit(&drop[i], -1, memory_order_relaxed);
		if (fd < 0)
			continue;
		/* dup3 replaces in one step: the number never points at
		 * nothing, so no open in the child can take it meanwhile.
		 * Without /dev/null (a chroot), closing still releases the
		 * socket; the number is then free for the child's own use. */
		if (nul < 0 || dup3(nul, fd, O_CLOEXEC) < 0)
			close(fd);
	}
	if (nul >= 0)
		close(nul);
}

static void init(void)
{
	for (int i = 0; i < SRN_FORK_DROP_MAX; i++)
		atomic_init(&drop[i], -1);
	pthread_atfork(NULL, NULL, fork_child);
}

bool srn_fork_drop_add(int fd)
{
	if (fd < 0)
		return false;
	pthread_once(&once, init);
	for (int i = 0; i < SRN_FORK_DROP_MAX; i++) {
		int none = -1;
		if (atomic_compare_exchange_strong(&drop[i], &none, fd))
			return true;
	}
	return false;
}

void srn_fork_drop_del(int fd)
{
	if (fd < 0)
		return;
	pthread_once(&once, init);
	for (int i = 0; i < SRN_FORK_DROP_MAX; i++) {
		int want = fd;
		if (atomic_compare_exchange_strong(&drop[i], &want, -1))
			return;
	}
}
