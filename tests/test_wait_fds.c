/*
 * test_wait_fds - a program that sleeps in its own poll or epoll on a
 * completion channel's fd (tgtd, UCX, the block store) serves the device
 * in that sleep (verbs/verbs_fdwait.c), and the calls still behave as
 * libc's towards the program.
 *
 * Two processes (rc_test_conn.h): the child waits, its channel fd
 * O_NONBLOCK as tgtd's and the block store's are; the parent Sends when
 * the child asks over the out-of-band socket.  Cases (argv[1]):
 *
 *   epoll, epoll_pwait2, poll, ppoll
 *       ROUNDS times: arm, ask for a Send, sleep in that call on the
 *       channel's fd (epoll: a set holding it and an idle pipe) until it
 *       reports the channel; then ibv_get_cq_event on the non-blocking
 *       fd must find the event (a readable channel without one is what
 *       makes tgtd exit), and the CQ the receive.  Most waits must have
 *       served the device (event_waits_serving_nic), and the events come
 *       from this thread's passes (comp_events_in_app_thread).
 *   eintr
 *       epoll_wait on the set, a SIGALRM handler with SA_RESTART, nothing
 *       coming: -1/EINTR, as libc's epoll_wait, which never restarts.
 *   timeout
 *       epoll_wait(100 ms) and poll(100 ms) with nothing coming return 0
 *       after about their time (bounded from below only: ≥ 90 ms).
 *   other_fd
 *       the pipe in the same epoll set becomes readable while the channel
 *       is idle: epoll_wait reports the pipe, and only the pipe.
 *   oneshot
 *       the channel in the set with EPOLLONESHOT: once reported, a Send's
 *       event does not end a 200 ms epoll_wait (0) until EPOLL_CTL_MOD
 *       arms it again, and then it does.
 *   cancel
 *       a thread cancelled in epoll_wait while it serves the device:
 *       the next wait serves it again and the Send arrives (a thread
 *       gone with the device owned would leave nobody serving it).
 *
 * Each runs over the rings, and over UDP with SOFTRNIC_SHM=0 (wait.cmake).
 * The bounds only turn a hang into a failure.
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "core/device.h"
#include "core/nic.h"
#include "rc_test_conn.h"

#define NRECV 4
#define MSG 8
#define ROUNDS 200
#define WAIT_S 10

#define CMD_SEND 1u
#define CMD_DONE 0x80000000u

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	uint8_t buf[NRECV][MSG];
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	int oob;
	int ep;                  /* the waiter's epoll set: the channel and a pipe */
	int pipe[2];
};

struct info {
	union ibv_gid gid;
	uint32_t qpn;
};

static uint64_t cnt(struct side *s, enum srn_counter c)
{
	return atomic_load(&srn_ctx(s->ctx)->nic->diag.cnt->v[c]);
}

static void post_recv(struct side *s, int slot)
{
	struct ibv_sge sge = { (uintptr_t)s->buf[slot], MSG, s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = (uint64_t)slot, .sg_list = &sge, .num_sge = 1 }, *bad;
	CHECK(ibv_post_recv(s->qp, &wr, &bad) == 0);
}

static void setup(struct side *s, int fd, bool waiter)
{
	union ibv_gid gid;
	s->oob = fd;
	s->ctx = srn_tc_open(&gid);
	s->pd = ibv_alloc_pd(s->ctx);
	s->mr = ibv_reg_mr(s->pd, s->buf, sizeof(s->buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(s->pd && s->mr);
	if (waiter) {
		s->ch = ibv_create_comp_channel(s->ctx);
		CHECK(s->ch);
		int fl = fcntl(s->ch->fd, F_GETFL);
		CHECK(fl >= 0 && fcntl(s->ch->fd, F_SETFL, fl | O_NONBLOCK) == 0);
	}
	s->cq = ibv_create_cq(s->ctx, 2 * NRECV, NULL, s->ch, 0);
	CHECK(s->cq);
	struct ibv_qp_init_attr qa = {
		.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = NRECV, .max_recv_wr = NRECV, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	s->qp = ibv_create_qp(s->pd, &qa);
	CHECK(s->qp);
	struct info mine = { .gid = gid, .qpn = s->qp->qp_num }, theirs;
	srn_tc_xchg(fd, &mine, &theirs, sizeof(mine), WAIT_S * 1000);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	srn_tc_connect(s->qp, &theirs.gid, theirs.qpn, waiter ? 2000 : 1000, waiter ? 1000 : 2000,
		       &o);
	if (waiter) {
		CHECK(pipe(s->pipe) == 0);
		s->ep = epoll_create1(EPOLL_CLOEXEC);
		CHECK(s->ep >= 0);
		struct epoll_event e = { .events = EPOLLIN, .data.fd = s->ch->fd };
		CHECK(epoll_ctl(s->ep, EPOLL_CTL_ADD, s->ch->fd, &e) == 0);
		e.data.fd = s->pipe[0];
		CHECK(epoll_ctl(s->ep, EPOLL_CTL_ADD, s->pipe[0], &e) == 0);
		for (int i = 0; i < NRECV; i++)
			post_recv(s, i);
	}
}

static void teardown(struct side *s)
{
	if (s->ch) {
		CHECK(epoll_ctl(s->ep, EPOLL_CTL_DEL, s->ch->fd, NULL) == 0);
		close(s->ep);
		close(s->pipe[0]);
		close(s->pipe[1]);
	}
	CHECK(ibv_destroy_qp(s->qp) == 0);
	CHECK(ibv_destroy_cq(s->cq) == 0);
	if (s->ch)
		CHECK(ibv_destroy_comp_channel(s->ch) == 0);
	ibv_dereg_mr(s->mr);
	ibv_dealloc_pd(s->pd);
	ibv_close_device(s->ctx);
}

static void ask(struct side *s, uint32_t cmd)
{
	srn_tc_send(s->oob, &cmd, sizeof(cmd));
}

/* ---- the waits ---- */

enum how { EPOLL, EPOLL_PWAIT2, POLL, PPOLL };

/* Sleep in `how` until the channel's fd is reported readable. */
static void sleep_for_channel(struct side *s, enum how how)
{
	double end = srn_tc_now() + WAIT_S;
	for (;;) {
		CHECK(srn_tc_now() < end, "the channel was not reported within %d s", WAIT_S);
		int n;
		if (how == EPOLL || how == EPOLL_PWAIT2) {
			struct epoll_event ev[2];
			struct timespec ts = { WAIT_S, 0 };
			n = how == EPOLL ? epoll_wait(s->ep, ev, 2, WAIT_S * 1000)
					 : epoll_pwait2(s->ep, ev, 2, &ts, NULL);
			CHECK(n >= 0, "epoll: %s", strerror(errno));
			for (int i = 0; i < n; i++) {
				CHECK(ev[i].data.fd == s->ch->fd, "the idle pipe reported");
				return;
			}
		} else {
			struct pollfd p[2] = { { .fd = s->pipe[0], .events = POLLIN },
					       { .fd = s->ch->fd, .events = POLLIN } };
			struct timespec ts = { WAIT_S, 0 };
			n = how == POLL ? poll(p, 2, WAIT_S * 1000) : ppoll(p, 2, &ts, NULL);
			CHECK(n >= 0, "poll: %s", strerror(errno));
			CHECK(!p[0].revents, "the idle pipe reported");
			if (p[1].revents & POLLIN)
				return;
		}
	}
}

static void case_rounds(struct side *s, enum how how)
{
	uint64_t serving0 = cnt(s, SRN_CNT_WAITS_SERVING), app0 = cnt(s, SRN_CNT_EVENTS_BY_APP);
	for (int r = 0; r < ROUNDS; r++) {
		CHECK(ibv_req_notify_cq(s->cq, 0) == 0);
		ask(s, CMD_SEND);
		sleep_for_channel(s, how);
		struct ibv_cq *ecq;
		void *ectx;
		CHECK(ibv_get_cq_event(s->ch, &ecq, &ectx) == 0,
		      "round %d: the fd was readable, yet no event (%s)", r, strerror(errno));
		CHECK(ecq == s->cq);
		ibv_ack_cq_events(ecq, 1);
		struct ibv_wc wc = srn_tc_poll_one(s->cq, WAIT_S);
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.byte_len == MSG,
		      "round %d: status %s opcode %d", r, ibv_wc_status_str(wc.status), wc.opcode);
		post_recv(s, (int)wc.wr_id);
	}
	uint64_t serving = cnt(s, SRN_CNT_WAITS_SERVING) - serving0;
	uint64_t app = cnt(s, SRN_CNT_EVENTS_BY_APP) - app0;
	printf("waits serving the NIC %llu, events queued in this thread %llu, of %d rounds\n",
	       (unsigned long long)serving, (unsigned long long)app, ROUNDS);
	CHECK(serving >= ROUNDS / 2, "the waits did not serve the device");
	CHECK(app >= ROUNDS / 2, "the events came from another thread");
}

static volatile sig_atomic_t ticks;

static void on_alarm(int sig)
{
	(void)sig;
	ticks++;
}

static void case_eintr(struct side *s)
{
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
	CHECK(ibv_req_notify_cq(s->cq, 0) == 0);
	uint64_t serving0 = cnt(s, SRN_CNT_WAITS_SERVING);
	struct itimerval it = { { 0, 20000 }, { 0, 20000 } };
	CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
	struct epoll_event ev[2];
	int n = epoll_wait(s->ep, ev, 2, WAIT_S * 1000);
	int err = errno;
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	CHECK(n == -1 && err == EINTR, "epoll_wait gave %d (%s), not EINTR", n, strerror(err));
	CHECK(ticks >= 1);
	CHECK(cnt(s, SRN_CNT_WAITS_SERVING) > serving0, "the wait did not serve the device");
	/* Nothing lost: the next Send is the next event. */
	ask(s, CMD_SEND);
	sleep_for_channel(s, EPOLL);
	struct ibv_cq *ecq;
	void *ectx;
	CHECK(ibv_get_cq_event(s->ch, &ecq, &ectx) == 0);
	ibv_ack_cq_events(ecq, 1);
	struct ibv_wc wc = srn_tc_poll_one(s->cq, WAIT_S);
	CHECK(wc.status == IBV_WC_SUCCESS);
	post_recv(s, (int)wc.wr_id);
}

static void case_timeout(struct side *s)
{
	CHECK(ibv_req_notify_cq(s->cq, 0) == 0);
	double t0 = srn_tc_now();
	struct epoll_event ev[2];
	CHECK(epoll_wait(s->ep, ev, 2, 100) == 0);
	double t1 = srn_tc_now();
	/* revents is output only: a timeout leaves it 0 whatever it held
	 * (libiscsi hands it to iscsi_service after every poll). */
	struct pollfd p = { .fd = s->ch->fd, .events = POLLIN, .revents = POLLERR | POLLOUT };
	CHECK(poll(&p, 1, 100) == 0, "poll did not time out");
	CHECK(!p.revents, "revents 0x%x after a timeout", p.revents);
	double t2 = srn_tc_now();
	printf("epoll_wait(100 ms) took %.0f ms, poll(100 ms) %.0f ms\n", (t1 - t0) * 1e3,
	       (t2 - t1) * 1e3);
	CHECK(t1 - t0 >= 0.09 && t2 - t1 >= 0.09, "returned before its time");
}

static void case_other_fd(struct side *s)
{
	CHECK(ibv_req_notify_cq(s->cq, 0) == 0);
	CHECK(write(s->pipe[1], "x", 1) == 1);
	struct epoll_event ev[2];
	int n = epoll_wait(s->ep, ev, 2, WAIT_S * 1000);
	CHECK(n == 1 && ev[0].data.fd == s->pipe[0], "epoll_wait gave %d", n);
	char c;
	CHECK(read(s->pipe[0], &c, 1) == 1);
}

/* One Send's event, taken, and its receive reposted. */
static void take_one(struct side *s)
{
	struct ibv_cq *ecq;
	void *ectx;
	CHECK(ibv_get_cq_event(s->ch, &ecq, &ectx) == 0, "%s", strerror(errno));
	ibv_ack_cq_events(ecq, 1);
	struct ibv_wc wc = srn_tc_poll_one(s->cq, WAIT_S);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV);
	post_recv(s, (int)wc.wr_id);
}

static void case_oneshot(struct side *s)
{
	struct epoll_event e = { .events = EPOLLIN | EPOLLONESHOT, .data.fd = s->ch->fd };
	CHECK(epoll_ctl(s->ep, EPOLL_CTL_MOD, s->ch->fd, &e) == 0);
	CHECK(ibv_req_notify_cq(s->cq, 0) == 0);
	ask(s, CMD_SEND);
	sleep_for_channel(s, EPOLL);
	take_one(s);
	/* Spent: the next event must not be reported. */
	CHECK(ibv_req_notify_cq(s->cq, 0) == 0);
	ask(s, CMD_SEND);
	struct epoll_event ev[2];
	int n = epoll_wait(s->ep, ev, 2, 200);
	CHECK(n == 0, "a spent EPOLLONESHOT fd reported (%d)", n);
	CHECK(epoll_ctl(s->ep, EPOLL_CTL_MOD, s->ch->fd, &e) == 0);
	sleep_for_channel(s, EPOLL);
	take_one(s);
}

static void *cancelled_waiter(void *arg)
{
	struct side *s = arg;
	struct epoll_event ev[2];
	for (;;)
		epoll_wait(s->ep, ev, 2, WAIT_S * 1000);
	return NULL;
}

static void case_cancel(struct side *s)
{
	CHECK(ibv_req_notify_cq(s->cq, 0) == 0);
	uint64_t serving0 = cnt(s, SRN_CNT_WAITS_SERVING);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, cancelled_waiter, s) == 0);
	double end = srn_tc_now() + WAIT_S;
	while (cnt(s, SRN_CNT_WAITS_SERVING) == serving0 && srn_tc_now() < end)
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	CHECK(cnt(s, SRN_CNT_WAITS_SERVING) > serving0, "the thread never served the device");
	nanosleep(&(struct timespec){ .tv_nsec = 20000000 }, NULL);
	CHECK(pthread_cancel(t) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	uint64_t serving1 = cnt(s, SRN_CNT_WAITS_SERVING);
	ask(s, CMD_SEND);
	sleep_for_channel(s, EPOLL);
	CHECK(cnt(s, SRN_CNT_WAITS_SERVING) > serving1, "after the cancel no wait served the device");
	take_one(s);
}

/* ---- the peer ---- */

static void peer(struct side *s)
{
	struct ibv_sge sge = { (uintptr_t)s->buf[0], MSG, s->mr->lkey };
	for (;;) {
		uint32_t cmd;
		srn_tc_recv(s->oob, &cmd, sizeof(cmd), 3 * WAIT_S * 1000);
		if (cmd == CMD_DONE)
			return;
		struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;
		CHECK(ibv_post_send(s->qp, &wr, &bad) == 0);
		struct ibv_wc wc = srn_tc_poll_one(s->cq, WAIT_S);
		CHECK(wc.status == IBV_WC_SUCCESS, "Send: %s", ibv_wc_status_str(wc.status));
	}
}

int main(int argc, char **argv)
{
	static const char *const modes[] = { "epoll", "epoll_pwait2", "poll", "ppoll", "eintr",
					     "timeout", "other_fd", "oneshot", "cancel" };
	const char *mode = argc > 1 ? argv[1] : "";
	int m = -1;
	for (int i = 0; i < 9; i++)
		if (!strcmp(mode, modes[i]))
			m = i;
	CHECK(m >= 0, "usage: test_wait_fds epoll|epoll_pwait2|poll|ppoll|eintr|timeout|other_fd|"
		      "oneshot|cancel");
	int fd;
	pid_t pid = srn_tc_fork(&fd);
	static struct side s;
	if (pid) {
		setup(&s, fd, false);
		srn_tc_barrier(fd, 1, WAIT_S * 1000);
		peer(&s);
		srn_tc_barrier(fd, 2, WAIT_S * 1000);
		teardown(&s);
		int st = srn_tc_wait_child(pid, 6 * WAIT_S);
		CHECK(st == 0, "the waiting side failed (status %d)", st);
		return srn_check_result();
	}
	setup(&s, fd, true);
	srn_tc_barrier(fd, 1, WAIT_S * 1000);
	switch (m) {
	case 0: case_rounds(&s, EPOLL); break;
	case 1: case_rounds(&s, EPOLL_PWAIT2); break;
	case 2: case_rounds(&s, POLL); break;
	case 3: case_rounds(&s, PPOLL); break;
	case 4: case_eintr(&s); break;
	case 5: case_timeout(&s); break;
	case 6: case_other_fd(&s); break;
	case 7: case_oneshot(&s); break;
	case 8: case_cancel(&s); break;
	}
	ask(&s, CMD_DONE);
	srn_tc_barrier(fd, 2, WAIT_S * 1000);
	teardown(&s);
	return srn_check_result();
}
