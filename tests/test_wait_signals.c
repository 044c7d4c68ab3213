/*
 * test_wait_signals - a thread blocked in ibv_get_cq_event serves the
 * device itself (engine/wait.c): it must still behave as a blocking read()
 * on the kernel's channel fd does towards signals, and wake for events
 * other threads make while it sleeps.
 *
 * Two processes (rc_test_conn.h): the child waits; the parent is the peer,
 * which Sends when the child asks over the out-of-band socket and reaps
 * the child within a bound (a wait that never returns is a kill, and a
 * failure).  Cases (argv[1]):
 *
 *   eintr        SIGALRM handler without SA_RESTART and a repeating timer,
 *                nothing coming: ibv_get_cq_event fails with EINTR, from
 *                the socket owner's wait; the event the peer then makes is
 *                got by the next call (nothing lost, nothing stuck).
 *   restart      the handler with SA_RESTART (and a SIGUSR1 handler
 *                without it, blocked in this thread, so not one it could
 *                run): the handler runs >= 3 times inside the call, which
 *                returns only with the peer's event.
 *   bell_flush   thread A owns the socket, asleep in epoll_wait; thread B moves
 *                a QP to Error, whose flushed receives complete on A's
 *                channel in B's thread: no packet, only the bell wakes A.
 *   bell         A waits on CQ0 (CQ1 on the same channel) while B busy-
 *                polls CQ1, driving the NIC in B's thread; the peer Sends
 *                to CQ0's QP, ROUNDS times: whichever thread took the
 *                packet, A gets the event.
 *   two_waiters  two threads block, each on its own channel (one owns the
 *                socket, the other waits the old way); the peer Sends to
 *                both, ROUNDS times, alternating which first.
 *   stopcont     no handler at all: the peer stops the waiting process
 *                (SIGSTOP) and continues it (SIGCONT) while it sleeps,
 *                then Sends.  epoll_wait fails with EINTR then (signal(7)),
 *                the kernel channel's read() does not: the call must
 *                return the event, not EINTR (Ctrl-Z, fg).
 * Each runs over the rings, and over UDP with SOFTRNIC_SHM=0 (wait.cmake).
 * No timing is asserted: the bounds only turn a hang into a failure.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>

#include "core/device.h"
#include "core/nic.h"
#include "rc_test_conn.h"

#define NQP 2
#define NRECV 4          /* receives kept posted per QP */
#define MSG 8            /* bytes per Send */
#define ROUNDS 100
#define WAIT_S 10        /* any one step; a hang beyond it is a failure */

/* Out-of-band commands to the peer: which QPs to Send on, in what order. */
#define CMD_QP0 1u
#define CMD_QP1 2u
#define CMD_QP1_FIRST 4u
#define CMD_STOPCONT 8u   /* stop and continue the asker before sending */
#define CMD_DONE 0x80000000u

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	uint8_t buf[NQP][NRECV][MSG];
	struct ibv_comp_channel *ch[NQP];
	struct ibv_cq *cq[NQP];
	struct ibv_qp *qp[NQP];
	int oob;
};

struct info {
	union ibv_gid gid;
	uint32_t qpn[NQP];
};

static uint64_t cnt(struct side *s, enum srn_counter c)
{
	return atomic_load(&srn_ctx(s->ctx)->nic->diag.cnt->v[c]);
}

/* Wait (bounded) until *v >= want; a hang is reported by name. */
static void wait_for(_Atomic int *v, int want, const char *what)
{
	double end = srn_tc_now() + WAIT_S;
	while (atomic_load(v) < want) {
		if (srn_tc_now() > end) {
			fprintf(stderr, "[%s] %s: not within %d s\n", srn_tc_role, what, WAIT_S);
			exit(1);
		}
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	}
}

static void post_recv(struct side *s, int q, int slot)
{
	struct ibv_sge sge = { (uintptr_t)s->buf[q][slot], MSG, s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = (uint64_t)(q * NRECV + slot), .sg_list = &sge,
				  .num_sge = 1 }, *bad;
	CHECK(ibv_post_recv(s->qp[q], &wr, &bad) == 0);
}

/* The channel layout is the case's: chans[i] is CQ i's channel (-1: none). */
static void setup(struct side *s, int fd, const int chans[NQP], uint32_t psn_base)
{
	union ibv_gid gid;
	s->oob = fd;
	s->ctx = srn_tc_open(&gid);
	s->pd = ibv_alloc_pd(s->ctx);
	s->mr = ibv_reg_mr(s->pd, s->buf, sizeof(s->buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(s->pd && s->mr);
	for (int i = 0; i < NQP; i++) {
		if (chans[i] == i) {
			s->ch[i] = ibv_create_comp_channel(s->ctx);
			CHECK(s->ch[i]);
		}
		s->cq[i] = ibv_create_cq(s->ctx, 2 * NRECV, NULL,
					 chans[i] >= 0 ? s->ch[chans[i]] : NULL, 0);
		CHECK(s->cq[i]);
	}
	struct info mine = { .gid = gid }, theirs;
	for (int i = 0; i < NQP; i++) {
		struct ibv_qp_init_attr qa = {
			.send_cq = s->cq[i], .recv_cq = s->cq[i], .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = NRECV, .max_recv_wr = NRECV,
				 .max_send_sge = 1, .max_recv_sge = 1 },
		};
		s->qp[i] = ibv_create_qp(s->pd, &qa);
		CHECK(s->qp[i]);
		mine.qpn[i] = s->qp[i]->qp_num;
	}
	srn_tc_xchg(fd, &mine, &theirs, sizeof(mine), WAIT_S * 1000);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	/* Each side sends with psn_base + i; the peer's base is the other. */
	uint32_t peer_base = psn_base == 1000 ? 2000 : 1000;
	for (int i = 0; i < NQP; i++)
		srn_tc_connect(s->qp[i], &theirs.gid, theirs.qpn[i], peer_base + i, psn_base + i, &o);
}

static void teardown(struct side *s)
{
	for (int i = 0; i < NQP; i++)
		CHECK(ibv_destroy_qp(s->qp[i]) == 0);
	for (int i = 0; i < NQP; i++)
		CHECK(ibv_destroy_cq(s->cq[i]) == 0);
	for (int i = 0; i < NQP; i++)
		if (s->ch[i])
			CHECK(ibv_destroy_comp_channel(s->ch[i]) == 0);
	ibv_dereg_mr(s->mr);
	ibv_dealloc_pd(s->pd);
	ibv_close_device(s->ctx);
}

static void ask(struct side *s, uint32_t cmd)
{
	srn_tc_send(s->oob, &cmd, sizeof(cmd));
}

/* The Send of round r has landed on QP q: one receive completion. */
static void take_recv(struct side *s, int q)
{
	struct ibv_wc wc = srn_tc_poll_one(s->cq[q], WAIT_S);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.byte_len == MSG,
	      "QP %d: status %s opcode %d len %u", q, ibv_wc_status_str(wc.status), wc.opcode,
	      wc.byte_len);
	CHECK(wc.wr_id / NRECV == (uint64_t)q, "QP %d got wr_id %llu", q,
	      (unsigned long long)wc.wr_id);
	post_recv(s, q, (int)(wc.wr_id % NRECV));
}

/* Block for the next event on CQ q's channel; it must be CQ q's. */
static void get_event(struct side *s, struct ibv_comp_channel *ch, int q)
{
	struct ibv_cq *ecq;
	void *ectx;
	CHECK(ibv_get_cq_event(ch, &ecq, &ectx) == 0, "%s", strerror(errno));
	CHECK(ecq == s->cq[q], "event for the wrong CQ");
	ibv_ack_cq_events(ecq, 1);
}

/* ---- eintr, restart: the main thread and SIGALRM ---- */

static volatile sig_atomic_t in_wait, ticks;
static int alarm_oob = -1;   /* restart: the handler asks the peer */

static void on_alarm(int sig)
{
	if (!in_wait)
		return;
	ticks++;
	if (ticks == 3 && alarm_oob >= 0) {
		uint32_t cmd = CMD_QP0;
		if (send(alarm_oob, &cmd, sizeof(cmd), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
			/* the peer then times out and says so */
		}
	}
}

static void on_usr1(int sig)
{
}

/* On a failed restart: the other handlers this thread could run that lack
 * SA_RESTART (the sanitizers' SIGSEGV/SIGBUS/SIGFPE, for one). */
static void note_handlers(void)
{
	sigset_t blocked;
	pthread_sigmask(SIG_BLOCK, NULL, &blocked);
	for (int n = 1; n < NSIG; n++) {
		struct sigaction sa;
		if (sigismember(&blocked, n) == 1 || sigaction(n, NULL, &sa) ||
		    (!(sa.sa_flags & SA_SIGINFO) &&
		     (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN)))
			continue;
		if (!(sa.sa_flags & SA_RESTART))
			fprintf(stderr, "[child] signal %d (%s) has a handler without SA_RESTART\n",
				n, strsignal(n));
	}
}

static void set_timer(int ms)
{
	struct itimerval it = { { 0, ms * 1000 }, { 0, ms * 1000 } };
	CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
}

static void case_signal(struct side *s, bool restart)
{
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = restart ? SA_RESTART : 0 };
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
	if (restart) {
		struct sigaction su = { .sa_handler = on_usr1 };
		sigemptyset(&su.sa_mask);
		CHECK(sigaction(SIGUSR1, &su, NULL) == 0);
		sigset_t m;
		sigemptyset(&m);
		sigaddset(&m, SIGUSR1);
		CHECK(pthread_sigmask(SIG_BLOCK, &m, NULL) == 0);
		alarm_oob = s->oob;
	}
	CHECK(ibv_req_notify_cq(s->cq[0], 0) == 0);
	uint64_t serving = cnt(s, SRN_CNT_WAITS_SERVING);
	struct ibv_cq *ecq = NULL;
	void *ectx;
	/* Repeating: one tick is bound to land while the call sleeps,
	 * however late this thread gets there. */
	in_wait = 1;
	set_timer(20);
	int r = ibv_get_cq_event(s->ch[0], &ecq, &ectx);
	int err = errno;
	in_wait = 0;
	set_timer(0);
	serving = cnt(s, SRN_CNT_WAITS_SERVING) - serving;
	printf("%s: returned %d (%s) after %d ticks; waits serving the NIC %llu\n",
	       restart ? "restart" : "eintr", r, r ? strerror(err) : "event", (int)ticks,
	       (unsigned long long)serving);
	CHECK(serving == 1, "the wait was not the socket owner's (%llu)",
	      (unsigned long long)serving);
	if (restart) {
		if (r)
			note_handlers();
		CHECK(r == 0 && ecq == s->cq[0], "r %d: %s", r, strerror(err));
		CHECK(ticks >= 3);
		ibv_ack_cq_events(s->cq[0], 1);
	} else {
		CHECK(r == -1 && err == EINTR, "r %d: %s", r, strerror(err));
		CHECK(ticks >= 1);
		ask(s, CMD_QP0);
		get_event(s, s->ch[0], 0);
	}
	take_recv(s, 0);
}

/* ---- bell_flush, bell: two threads of one process, one channel ---- */

struct bell_ctx {
	struct side *s;
	_Atomic int tid, armed, done, stop;
	int rounds;
};

/* A: arm, wait on the shared channel, take the event.  bell_flush: once,
 * on CQ1 (the flushed QP's); bell: each round, on CQ0, and the receive. */
static void *thread_a(void *arg)
{
	struct bell_ctx *b = arg;
	atomic_store(&b->tid, (int)gettid());
	int q = b->rounds ? 0 : 1;
	for (int r = 0; r < (b->rounds ? b->rounds : 1); r++) {
		CHECK(ibv_req_notify_cq(b->s->cq[q], 0) == 0);
		atomic_store(&b->armed, r + 1);
		get_event(b->s, b->s->ch[0], q);
		if (b->rounds)
			take_recv(b->s, q);
		atomic_store(&b->done, r + 1);
	}
	return NULL;
}

/* B in `bell`: spin on the other CQ, which has no QP (never a completion):
 * each empty poll runs a pass of the NIC in this thread. */
static void *thread_b(void *arg)
{
	struct bell_ctx *b = arg;
	struct ibv_wc wc;
	while (!atomic_load(&b->stop))
		CHECK(ibv_poll_cq(b->s->cq[1], 1, &wc) == 0);
	return NULL;
}

/* Is thread tid asleep in the owner's wait (epoll_wait on its set; the
 * old way reads)?  -1: this kernel does not say. */
static int in_poll(int tid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	long nr;
	int got = fscanf(f, "%ld", &nr);
	fclose(f);
	if (got != 1)
		return 0;   /* "running" */
#ifdef SYS_epoll_wait
	if (nr == SYS_epoll_wait)
		return 1;
#endif
	return nr == SYS_epoll_pwait;
}

static void case_bell_flush(struct side *s)
{
	struct bell_ctx b = { .s = s };
	uint64_t wakes = cnt(s, SRN_CNT_WAITER_WAKEUPS);
	pthread_t a;
	CHECK(pthread_create(&a, NULL, thread_a, &b) == 0);
	wait_for(&b.armed, 1, "A arming");
	/* Only once A sleeps in epoll_wait does the flush test the bell. */
	double end = srn_tc_now() + WAIT_S;
	int p;
	while ((p = in_poll(atomic_load(&b.tid))) == 0 && srn_tc_now() < end)
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	if (p < 0) {
		printf("bell_flush: /proc/self/task/*/syscall unreadable: waiting 200 ms instead\n");
		nanosleep(&(struct timespec){ .tv_nsec = 200000000 }, NULL);
	}
	CHECK(p != 0, "A never slept in epoll_wait: not the socket owner");
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_ERR };
	CHECK(ibv_modify_qp(s->qp[1], &at, IBV_QP_STATE) == 0);
	wait_for(&b.done, 1, "A woken by the bell for an event made in B");
	CHECK(pthread_join(a, NULL) == 0);
	wakes = cnt(s, SRN_CNT_WAITER_WAKEUPS) - wakes;
	CHECK(wakes >= 1, "A's event came without a wake-up of the owner");
	/* The event was for the flushed receives. */
	for (int i = 0; i < NRECV; i++) {
		struct ibv_wc wc = srn_tc_poll_one(s->cq[1], WAIT_S);
		CHECK(wc.status == IBV_WC_WR_FLUSH_ERR, "%s", ibv_wc_status_str(wc.status));
	}
	printf("bell_flush: A woken by the bell (owner wake-ups %llu)\n",
	       (unsigned long long)wakes);
}

static void case_bell(struct side *s)
{
	struct bell_ctx b = { .s = s, .rounds = ROUNDS };
	pthread_t a, bt;
	CHECK(pthread_create(&a, NULL, thread_a, &b) == 0);
	CHECK(pthread_create(&bt, NULL, thread_b, &b) == 0);
	for (int r = 0; r < ROUNDS; r++) {
		wait_for(&b.armed, r + 1, "A arming");
		ask(s, CMD_QP0);
		wait_for(&b.done, r + 1, "A's event (B busy-polling the other CQ)");
	}
	atomic_store(&b.stop, 1);
	CHECK(pthread_join(a, NULL) == 0 && pthread_join(bt, NULL) == 0);
}

/* ---- two_waiters: a thread per channel ---- */

struct waiter_ctx {
	struct side *s;
	int q;
	_Atomic int armed, done;
};

static void *waiter(void *arg)
{
	struct waiter_ctx *w = arg;
	for (int r = 0; r < ROUNDS; r++) {
		CHECK(ibv_req_notify_cq(w->s->cq[w->q], 0) == 0);
		atomic_store(&w->armed, r + 1);
		get_event(w->s, w->s->ch[w->q], w->q);
		take_recv(w->s, w->q);
		atomic_store(&w->done, r + 1);
	}
	return NULL;
}

static void case_two_waiters(struct side *s)
{
	struct waiter_ctx w[NQP] = { { .s = s, .q = 0 }, { .s = s, .q = 1 } };
	pthread_t t[NQP];
	for (int i = 0; i < NQP; i++)
		CHECK(pthread_create(&t[i], NULL, waiter, &w[i]) == 0);
	for (int r = 0; r < ROUNDS; r++) {
		wait_for(&w[0].armed, r + 1, "waiter 0 arming");
		wait_for(&w[1].armed, r + 1, "waiter 1 arming");
		ask(s, CMD_QP0 | CMD_QP1 | (r & 1 ? CMD_QP1_FIRST : 0));
		wait_for(&w[0].done, r + 1, "waiter 0's event");
		wait_for(&w[1].done, r + 1, "waiter 1's event");
	}
	for (int i = 0; i < NQP; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
}

/* ---- the peer: Send as asked until told it is done ---- */

/* stopcont: once the waiter sleeps in its wait (or after 2 s), stop
 * and continue it. */
static pid_t waiter_pid;

static void stop_and_continue(struct side *s)
{
	(void)s;
	struct timespec t = { 0, 20 * 1000 * 1000 };
	for (int i = 0; i < 100; i++) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)waiter_pid);
		FILE *f = fopen(path, "r");
		char st = 0;
		if (f) {
			if (fscanf(f, "%*d %*s %c", &st) != 1)
				st = 0;
			fclose(f);
		}
		if (st == 'S' && i >= 5)
			break;   /* asleep, and given 100 ms to get into the wait */
		nanosleep(&t, NULL);
	}
	CHECK(kill(waiter_pid, SIGSTOP) == 0);
	nanosleep(&t, NULL);
	CHECK(kill(waiter_pid, SIGCONT) == 0);
	nanosleep(&t, NULL);
}

static void case_stopcont(struct side *s)
{
	CHECK(ibv_req_notify_cq(s->cq[0], 0) == 0);
	ask(s, CMD_QP0 | CMD_STOPCONT);
	get_event(s, s->ch[0], 0);
	take_recv(s, 0);
	printf("stopcont: the event came through a stop and a continue\n");
}

static void peer(struct side *s)
{
	struct ibv_sge sge = { (uintptr_t)s->buf[0][0], MSG, s->mr->lkey };
	for (;;) {
		uint32_t cmd;
		srn_tc_recv(s->oob, &cmd, sizeof(cmd), WAIT_S * 1000);
		if (cmd == CMD_DONE)
			return;
		if (cmd & CMD_STOPCONT)
			stop_and_continue(s);
		int order[NQP] = { 0, 1 }, sent[NQP], n = 0;
		if (cmd & CMD_QP1_FIRST)
			order[0] = 1, order[1] = 0;
		for (int i = 0; i < NQP; i++) {
			if (!(cmd & (1u << order[i])))
				continue;
			struct ibv_send_wr wr = { .wr_id = (uint64_t)order[i], .sg_list = &sge,
						  .num_sge = 1, .opcode = IBV_WR_SEND,
						  .send_flags = IBV_SEND_SIGNALED }, *bad;
			CHECK(ibv_post_send(s->qp[order[i]], &wr, &bad) == 0);
			sent[n++] = order[i];
		}
		/* The peer's CQs have no channel: it only polls. */
		for (int i = 0; i < n; i++) {
			struct ibv_wc wc = srn_tc_poll_one(s->cq[sent[i]], WAIT_S);
			CHECK(wc.status == IBV_WC_SUCCESS, "Send: %s", ibv_wc_status_str(wc.status));
		}
	}
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	static const char *const modes[] = { "eintr", "restart", "bell_flush", "bell",
					     "two_waiters", "stopcont" };
	int m = -1;
	for (int i = 0; i < 6; i++)
		if (!strcmp(mode, modes[i]))
			m = i;
	CHECK(m >= 0, "usage: test_wait_signals eintr|restart|bell_flush|bell|two_waiters|stopcont");
	int fd;
	pid_t pid = srn_tc_fork(&fd);
	static struct side s;
	if (pid) {
		/* The peer: no channels. */
		waiter_pid = pid;
		setup(&s, fd, (const int[NQP]){ -1, -1 }, 2000);
		srn_tc_barrier(fd, 1, WAIT_S * 1000);
		peer(&s);
		srn_tc_barrier(fd, 2, WAIT_S * 1000);
		teardown(&s);
		int st = srn_tc_wait_child(pid, 3 * WAIT_S);
		CHECK(st == 0, "the waiting side failed (status %d)", st);
		return srn_check_result();
	}
	/* The waiter: which CQ uses which channel is the case's. */
	const int chans[6][NQP] = { { 0, -1 }, { 0, -1 }, { 0, 0 }, { 0, 0 }, { 0, 1 }, { 0, -1 } };
	setup(&s, fd, chans[m], 1000);
	for (int q = 0; q < NQP; q++)
		for (int i = 0; i < NRECV; i++)
			post_recv(&s, q, i);
	srn_tc_barrier(fd, 1, WAIT_S * 1000);
	uint64_t wakes0 = cnt(&s, SRN_CNT_WAITER_WAKEUPS), serving0 = cnt(&s, SRN_CNT_WAITS_SERVING);
	switch (m) {
	case 0: case_signal(&s, false); break;
	case 1: case_signal(&s, true); break;
	case 2: case_bell_flush(&s); break;
	case 3: case_bell(&s); break;
	case 4: case_two_waiters(&s); break;
	case 5: case_stopcont(&s); break;
	}
	uint64_t serving = cnt(&s, SRN_CNT_WAITS_SERVING) - serving0;
	printf("%s: waits serving the NIC %llu, their wake-ups %llu\n", mode,
	       (unsigned long long)serving,
	       (unsigned long long)(cnt(&s, SRN_CNT_WAITER_WAKEUPS) - wakes0));
	CHECK(serving >= 1, "no wait served the NIC: the new path was not tested");
	ask(&s, CMD_DONE);
	srn_tc_barrier(fd, 2, WAIT_S * 1000);
	teardown(&s);
	return srn_check_result();
}
