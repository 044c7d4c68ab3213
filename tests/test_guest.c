/*
 * test_guest - softrnic behaves as a guest in its host process.
 *
 *   signals       Every thread softrnic starts (srn-progress, and the
 *                 rdma_cm's srn-cm with its own device's srn-progress)
 *                 blocks every signal.  Then tgtd's pattern: the main
 *                 thread blocks SIGUSR2 and reads it from a signalfd, a
 *                 worker (born with the same mask) raises it process-wide
 *                 with kill(getpid()).  A library thread that left
 *                 SIGUSR2 unblocked would take it and its default action
 *                 would kill the process (tgtd died so, exit status 140).
 *   epoll_enosys  Run with epoll_fail_preload.so making epoll_pwait2 fail
 *                 with ENOSYS (Linux before 5.11, valgrind 3.19): the
 *                 progress thread falls back to epoll_wait, so a Send
 *                 between two QPs of this process completes while this
 *                 thread sleeps on the completion channel, with no
 *                 application polling to move it.
 *   epoll_fatal   The same preload failing with EBADF, which no retry
 *                 mends: the program gets IBV_EVENT_DEVICE_FATAL on
 *                 async_fd (the script checks the stderr line).
 *   crash         A target whose srn-progress thread dies inside an
 *                 operation: it registers a region, then makes it
 *                 inaccessible behind the library's back (a raw
 *                 mprotect), and sleeps; the parent's RDMA Write over
 *                 UDP makes the target's responder fault placing it.
 *                 Prints "target PID QPN" for test_guest_crash.sh, which
 *                 asks `softrnic explain` what the target was doing.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "rc_test_conn.h"   /* CHECK (fatal), srn_tc_open, srn_tc_connect */

/* The library's threads of this process: how many, and whether each
 * blocks every signal the kernel lets a thread block. */
static int check_library_threads(int *progress, int *cm)
{
	DIR *d = opendir("/proc/self/task");
	CHECK(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char path[320], comm[32] = "", line[256];
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;          /* the thread ended meanwhile */
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = 0;
		fclose(f);
		comm[strcspn(comm, "\n")] = 0;
		if (strncmp(comm, "srn-", 4))
			continue;
		n++;
		*progress += !strcmp(comm, "srn-progress");
		*cm += !strcmp(comm, "srn-cm");
		snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
		f = fopen(path, "r");
		CHECK(f);
		unsigned long long blk = 0;
		bool seen = false;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "SigBlk: %llx", &blk) == 1)
				seen = true;
		fclose(f);
		CHECK(seen, "no SigBlk for thread %s", comm);
		/* 1..31 and the real-time signals glibc leaves to
		 * applications; SIGKILL and SIGSTOP cannot be blocked. */
		for (int sig = 1; sig <= 64; sig++) {
			if (sig == SIGKILL || sig == SIGSTOP || (sig >= 32 && sig < SIGRTMIN))
				continue;
			CHECK(blk >> (sig - 1) & 1, "thread %s (tid %s) takes signal %d (%s)", comm,
			      e->d_name, sig, strsignal(sig));
		}
	}
	closedir(d);
	return n;
}

static void *raise_usr2(void *arg)
{
	(void)arg;
	for (int i = 0; i < 200; i++) {
		kill(getpid(), SIGUSR2);
		nanosleep(&(struct timespec){ .tv_nsec = 500000 }, NULL);
	}
	return NULL;
}

static int signals_mode(void)
{
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	CHECK(ch, "rdma_create_event_channel: %s", strerror(errno));
	int progress = 0, cm = 0;
	int n = check_library_threads(&progress, &cm);
	CHECK(progress >= 1 && cm == 1, "%d srn threads: %d srn-progress, %d srn-cm", n, progress,
	      cm);

	/* tgtd: its own threads block SIGUSR2, the main loop reads it. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	CHECK(pthread_sigmask(SIG_BLOCK, &set, NULL) == 0);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC);
	CHECK(sfd >= 0);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, raise_usr2, NULL) == 0);
	int got = 0;
	double end = srn_tc_now() + 20;
	for (;;) {
		struct pollfd p = { .fd = sfd, .events = POLLIN };
		int r = poll(&p, 1, 200);
		if (r > 0) {
			struct signalfd_siginfo si;
			CHECK(read(sfd, &si, sizeof(si)) == sizeof(si));
			CHECK(si.ssi_signo == SIGUSR2);
			got++;
		}
		if (r == 0 || srn_tc_now() > end)
			break;
	}
	pthread_join(t, NULL);
	CHECK(got > 0, "the main thread's signalfd saw no SIGUSR2");
	printf("signals: %d srn threads block every signal; SIGUSR2 raised 200 times, %d read "
	       "by the program's signalfd\n", n, got);
	close(sfd);
	rdma_destroy_event_channel(ch);
	ibv_close_device(ctx);
	return srn_check_result();
}

/* One Send between two QPs of this process, completed while this thread
 * sleeps on the channel: only the progress thread can receive it (the
 * script sets SOFTRNIC_FDWAIT=0, else this poll would serve the device). */
static void send_while_asleep(struct ibv_context *ctx, const union ibv_gid *gid)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_comp_channel *cc = ibv_create_comp_channel(ctx);
	struct ibv_cq *scq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_cq *rcq = ibv_create_cq(ctx, 8, NULL, cc, 0);
	CHECK(pd && cc && scq && rcq);
	struct ibv_qp_init_attr qa = {
		.send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *a = ibv_create_qp(pd, &qa), *b = ibv_create_qp(pd, &qa);
	CHECK(a && b);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	srn_tc_connect(a, gid, b->qp_num, 100, 200, &o);
	srn_tc_connect(b, gid, a->qp_num, 200, 100, &o);
	char src[64], dst[64];
	memset(src, 0x5a, sizeof(src));
	memset(dst, 0, sizeof(dst));
	struct ibv_mr *smr = ibv_reg_mr(pd, src, sizeof(src), 0);
	struct ibv_mr *dmr = ibv_reg_mr(pd, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE);
	CHECK(smr && dmr);
	struct ibv_sge rs = { (uintptr_t)dst, sizeof(dst), dmr->lkey };
	struct ibv_recv_wr rw = { .wr_id = 2, .sg_list = &rs, .num_sge = 1 }, *brw;
	CHECK(ibv_post_recv(b, &rw, &brw) == 0);
	CHECK(ibv_req_notify_cq(rcq, 0) == 0);
	struct ibv_sge ss = { (uintptr_t)src, sizeof(src), smr->lkey };
	struct ibv_send_wr sw = { .wr_id = 1, .sg_list = &ss, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bsw;
	CHECK(ibv_post_send(a, &sw, &bsw) == 0);
	struct pollfd p = { .fd = cc->fd, .events = POLLIN };
	int r = poll(&p, 1, 10000);
	CHECK(r == 1, "no completion event within 10 s (poll: %d): nothing received the Send", r);
	struct ibv_cq *ecq;
	void *ectx;
	CHECK(ibv_get_cq_event(cc, &ecq, &ectx) == 0 && ecq == rcq);
	ibv_ack_cq_events(rcq, 1);
	struct ibv_wc wc = srn_tc_poll_one(rcq, 5);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 2 && wc.byte_len == sizeof(src),
	      "status %d wr_id %llu len %u", wc.status, (unsigned long long)wc.wr_id, wc.byte_len);
	CHECK(memcmp(src, dst, sizeof(src)) == 0, "received bytes differ");
	wc = srn_tc_poll_one(scq, 5);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 1);
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	ibv_destroy_cq(scq);
	ibv_destroy_cq(rcq);
	ibv_destroy_comp_channel(cc);
	ibv_dealloc_pd(pd);
}

static int epoll_enosys_mode(void)
{
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	/* Past the time an application counts as polling: from here on
	 * the progress thread is the one receiving. */
	nanosleep(&(struct timespec){ .tv_nsec = 300000000 }, NULL);
	send_while_asleep(ctx, &gid);
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	CHECK(poll(&p, 1, 0) == 0, "an async event came (the device should be healthy)");
	printf("epoll_enosys: a Send completed while the program slept on its channel\n");
	ibv_close_device(ctx);
	return srn_check_result();
}

static int epoll_fatal_mode(void)
{
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	int r = poll(&p, 1, 10000);
	CHECK(r == 1, "no async event within 10 s (poll: %d)", r);
	struct ibv_async_event ev;
	CHECK(ibv_get_async_event(ctx, &ev) == 0);
	CHECK(ev.event_type == IBV_EVENT_DEVICE_FATAL, "event %s",
	      ibv_event_type_str(ev.event_type));
	ibv_ack_async_event(&ev);
	printf("epoll_fatal: %s\n", ibv_event_type_str(ev.event_type));
	ibv_close_device(ctx);
	return srn_check_result();
}

struct crash_info {
	struct srn_tc_qp_info qp;
	union ibv_gid gid;
	uint64_t addr;
	uint32_t rkey;
};

/* Under the pin's 64 KiB (core/mr_share.c): a pinned region is reached
 * through the library's own mapping, which the program's mprotect does
 * not touch, as a kernel NIC's DMA goes on into pinned pages. */
#define CRASH_LEN (32 * 1024)

static struct ibv_qp *crash_qp(struct ibv_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(cq);
	struct ibv_qp_init_attr qa = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &qa);
	CHECK(qp);
	return qp;
}

static int crash_mode(void)
{
	int fd;
	pid_t pid = srn_tc_fork(&fd);
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	struct ibv_qp *qp = crash_qp(ctx, pd);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	struct crash_info mine = { .qp = { qp->qp_num, pid ? 300 : 400 }, .gid = gid }, theirs;
	void *buf = NULL;
	struct ibv_mr *mr = NULL;
	if (!pid) {
		buf = mmap(NULL, CRASH_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			   -1, 0);
		CHECK(buf != MAP_FAILED);
		mr = ibv_reg_mr(pd, buf, CRASH_LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		CHECK(mr);
		mine.addr = (uintptr_t)buf;
		mine.rkey = mr->rkey;
	}
	srn_tc_xchg(fd, &mine, &theirs, sizeof(mine), 10000);
	srn_tc_connect(qp, &theirs.gid, theirs.qp.qpn, mine.qp.psn, theirs.qp.psn, &o);
	srn_tc_barrier(fd, 1, 10000);
	if (!pid) {
		/* Inaccessible behind the library's back (the raw system call,
		 * not the interposed mprotect): the region's keys stay.  Not
		 * unmapped: a later mapping (the sanitizer's allocator, say)
		 * could take the hole and the Write land there unharmed. */
		CHECK(syscall(SYS_mprotect, buf, CRASH_LEN, PROT_NONE) == 0);
		srn_tc_barrier(fd, 2, 10000);
		/* Asleep: only srn-progress takes the Write. */
		char c;
		srn_tc_recv(fd, &c, 1, 20000);
		fprintf(stderr, "[child] still alive after the Write\n");
		return 1;
	}
	srn_tc_barrier(fd, 2, 10000);
	char *src = calloc(1, 4096);
	struct ibv_mr *smr = ibv_reg_mr(pd, src, 4096, 0);
	CHECK(src && smr);
	struct ibv_sge sge = { (uintptr_t)src, 4096, smr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { theirs.addr + 8192, theirs.rkey } }, *bad;
	CHECK(ibv_post_send(qp, &wr, &bad) == 0);
	int st = 0;
	double end = srn_tc_now() + 20;
	pid_t r;
	while ((r = waitpid(pid, &st, WNOHANG)) == 0 && srn_tc_now() < end)
		usleep(10000);
	if (r == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	CHECK(r == pid && WIFSIGNALED(st), "the target did not die of a signal (status 0x%x)", st);
	printf("target %d 0x%06x signal %d\n", (int)pid, theirs.qp.qpn,
	       WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	return srn_check_result();
}

int main(int argc, char **argv)
{
	srn_tc_role = "guest";
	const char *mode = argc > 1 ? argv[1] : "";
	if (!strcmp(mode, "signals"))
		return signals_mode();
	if (!strcmp(mode, "epoll_enosys"))
		return epoll_enosys_mode();
	if (!strcmp(mode, "epoll_fatal"))
		return epoll_fatal_mode();
	if (!strcmp(mode, "crash"))
		return crash_mode();
	fprintf(stderr, "usage: test_guest signals|epoll_enosys|epoll_fatal|crash\n");
	return 2;
}
