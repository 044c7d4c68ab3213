/*
 * test_mr_share_own_stack - a thread registers a buffer on its own stack
 * with remote rights (regression, issue 29): the page move
 * (core/mr_share.c) write-protects the span and then makes calls whose
 * stores to that thread's stack waited for the very move they were part
 * of, so ibv_reg_mr never returned (64 KiB buffers since the mapped copy,
 * 64-byte ones once small regions moved too).  Such a span must not
 * move; the registration works and its pages stay private.
 *
 * Buffers of 64 B (remote write), 8 B (remote atomic) and 64 KiB (remote
 * write) on a thread's stack, then the same on another thread's stack
 * registered from this one (that thread parked meanwhile: the move may
 * happen, and its stores after it must stay).  An alarm turns a hang
 * into a failure.  One process, one device, no traffic.
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rc_test_conn.h"     /* CHECK exits at the first failure, from any thread */

static struct ibv_pd *pd;

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "FAIL: a registration on a thread's own stack hung\n";
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

/* Register and deregister len bytes at p with these rights; the bytes
 * stay what they were. */
static void reg_dereg(uint8_t *p, size_t len, int access)
{
	memset(p, 0x5c, len);
	struct ibv_mr *mr = ibv_reg_mr(pd, p, len, IBV_ACCESS_LOCAL_WRITE | access);
	CHECK(mr);
	p[0] = 1;                       /* this thread's stack stays writable */
	p[len - 1] = 2;
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(p[0] == 1 && p[len - 1] == 2 && (len < 3 || p[len / 2] == 0x5c));
}

static void *own_stack(void *arg)
{
	(void)arg;
	uint8_t small[64], word[8] __attribute__((aligned(8))), big[65536];
	reg_dereg(small, sizeof(small), IBV_ACCESS_REMOTE_WRITE);
	reg_dereg(word, sizeof(word), IBV_ACCESS_REMOTE_ATOMIC);
	reg_dereg(big, sizeof(big), IBV_ACCESS_REMOTE_WRITE);
	return NULL;
}

/* A thread that lends a stack buffer to the main thread and waits. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static uint8_t *lent;
static bool done;

static void *lender(void *arg)
{
	(void)arg;
	uint8_t buf[256];
	memset(buf, 0, sizeof(buf));
	pthread_mutex_lock(&mu);
	lent = buf;
	pthread_cond_broadcast(&cv);
	while (!done)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	buf[100] = 7;                   /* after the move and back: still ours */
	CHECK(buf[100] == 7 && buf[10] == 1);
	return NULL;
}

int main(void)
{
	signal(SIGALRM, on_alarm);
	alarm(60);
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);

	pthread_t t;
	CHECK(pthread_create(&t, NULL, own_stack, NULL) == 0);
	CHECK(pthread_join(t, NULL) == 0);

	CHECK(pthread_create(&t, NULL, lender, NULL) == 0);
	pthread_mutex_lock(&mu);
	while (!lent)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	struct ibv_mr *mr = ibv_reg_mr(pd, lent + 8, 16,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr);
	lent[10] = 1;
	CHECK(ibv_dereg_mr(mr) == 0);
	pthread_mutex_lock(&mu);
	done = true;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	CHECK(pthread_join(t, NULL) == 0);

	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	printf("ok: stack buffers of 64 B, 8 B (atomic) and 64 KiB registered on their own "
	       "thread, and one lent by another thread\n");
	return srn_check_result();
}
