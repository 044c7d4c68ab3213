/*
 * test_cancel_in_verbs - a program's thread cancelled while it polls a CQ
 * must not take the device with it.
 *
 * An empty ibv_poll_cq does the device's work in the caller's thread,
 * under the device lock, and that work makes system calls that are
 * cancellation points (recvmmsg, sendmmsg, a doorbell's write()).  A
 * thread cancelled in one of them unwound with the lock held, and every
 * other thread's next verbs call hung.  With mlx5, ibv_poll_cq makes no
 * system call at all, so it is no cancellation point; ours must not be
 * one either.  The thread here loops ibv_poll_cq and pthread_testcancel,
 * as a program that wants to be cancellable there must; 20 times it is
 * cancelled and joined, and then this thread's own poll must return (an
 * alarm turns a hang into a failure).  Over the rings and over UDP
 * (SOFTRNIC_SHM=0).
 */
#include <infiniband/verbs.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "lib/check.h"

#define ROUNDS 20

static struct ibv_cq *cq;

static void *poller(void *arg)
{
	(void)arg;
	for (;;) {
		struct ibv_wc wc;
		ibv_poll_cq(cq, 1, &wc);
		pthread_testcancel();
	}
	return NULL;
}

static void hung(int sig)
{
	(void)sig;
	static const char m[] = "test_cancel_in_verbs: ibv_poll_cq hung after a thread was "
				"cancelled in one (the device lock left held)\n";
	if (write(2, m, sizeof(m) - 1) < 0) {
		/* exiting anyway */
	}
	_exit(1);
}

int main(void)
{
#if defined(__SANITIZE_ADDRESS__)
	/* ASan's sigaltstack interceptor reports a stack-buffer-underflow
	 * at the exit of a thread cancelled in pthread_testcancel (its own
	 * bookkeeping, before any of ours runs): the normal build tests this. */
	printf("skip: thread cancellation under AddressSanitizer\n");
	return 77;
#endif
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n > 0, "no device");
	if (!list || n <= 0)
		return srn_check_result();
	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK(ctx);
	cq = ctx ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	CHECK(cq);
	if (!cq)
		return srn_check_result();
	signal(SIGALRM, hung);
	for (int r = 0; r < ROUNDS; r++) {
		pthread_t t;
		CHECK(pthread_create(&t, NULL, poller, NULL) == 0);
		/* Long enough for polls that ask the socket (every 50 us). */
		usleep(5000 + 1000 * r);
		CHECK(pthread_cancel(t) == 0);
		alarm(10);
		void *res = NULL;
		CHECK(pthread_join(t, &res) == 0);
		CHECK(res == PTHREAD_CANCELED, "round %d: the thread ended without a cancel", r);
		struct ibv_wc wc;
		CHECK(ibv_poll_cq(cq, 1, &wc) == 0, "round %d", r);
		alarm(0);
	}
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	ibv_free_device_list(list);
	printf("ok: %d threads cancelled in ibv_poll_cq loops, the device still serves\n", ROUNDS);
	return srn_check_result();
}
