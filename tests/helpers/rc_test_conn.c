/*
 * rc_test_conn.c - fork, out-of-band exchange and QP connection for the
 * two-process RC tests.  See rc_test_conn.h.
 *
 * The socketpair is SOCK_STREAM, so every transfer loops until the exact
 * length has moved; receives wait in poll() with a deadline so a peer that
 * died or hung turns into a failure, never a hang.
 */
#include "rc_test_conn.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "common/qp_up.h"
#include "diag/clock.h"
#include "diag/seg_layout.h"

const char *srn_tc_role = "parent";

double srn_tc_now(void)
{
	return (double)srn_now_ns() / 1e9;
}

double srn_tc_cpu_s(void)
{
	struct rusage ru;
	CHECK(getrusage(RUSAGE_SELF, &ru) == 0);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

unsigned long srn_tc_env_ul(const char *name, unsigned long dflt)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return dflt;
	char *end;
	unsigned long v = strtoul(s, &end, 0);
	CHECK(*end == '\0' && v > 0);
	return v;
}

pid_t srn_tc_fork(int *fd)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	/* Each side its own 127.0.0.N, as these tests were written for: they
	 * test the transport between two processes, with timers as tight as
	 * 4 ms, and must not share an address (and its steering) with
	 * whatever else the suite runs at the time.  Sharing has its own
	 * tests (shared_addr_*, shared_many, default_addr).  A test that sets
	 * SOFTRNIC_DEVICES keeps its own. */
	setenv("SOFTRNIC_DEVICES", "name=softrnic0,addr=auto,share=0", 0);
	fflush(NULL);   /* no buffered output printed twice */
	pid_t parent = getpid();
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		srn_tc_role = "child";
		/* A parent that failed and exited must not leave us behind. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		close(sv[0]);
		*fd = sv[1];
	} else {
		close(sv[1]);
		*fd = sv[0];
	}
	return pid;
}

int srn_tc_wait_child(pid_t pid, int timeout_s)
{
	double end = srn_tc_now() + timeout_s;
	int st;
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			break;
		CHECK(r == 0 || errno == EINTR);
		if (srn_tc_now() > end) {
			fprintf(stderr, "[parent] child %d did not exit in %d s: killing it\n",
				(int)pid, timeout_s);
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return 1;
		}
		usleep(10000);
	}
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	fprintf(stderr, "[parent] child died by signal %d\n", WTERMSIG(st));
	return 1;
}

void srn_tc_send(int fd, const void *p, size_t len)
{
	const char *c = p;
	while (len) {
		ssize_t n = send(fd, c, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "[%s] out-of-band send: %s\n", srn_tc_role, strerror(errno));
			exit(1);
		}
		c += n;
		len -= (size_t)n;
	}
}

void srn_tc_recv(int fd, void *p, size_t len, int timeout_ms)
{
	char *c = p;
	double end = srn_tc_now() + timeout_ms / 1000.0;
	while (len) {
		int left = (int)((end - srn_tc_now()) * 1000.0);
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int r = left > 0 ? poll(&pfd, 1, left) : 0;
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0) {
			fprintf(stderr, "[%s] out-of-band receive: peer silent for %d ms\n",
				srn_tc_role, timeout_ms);
			exit(1);
		}
		ssize_t n = recv(fd, c, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "[%s] out-of-band receive: peer gone\n", srn_tc_role);
			exit(1);
		}
		c += n;
		len -= (size_t)n;
	}
}

void srn_tc_xchg(int fd, const void *mine, void *theirs, size_t len, int timeout_ms)
{
	srn_tc_send(fd, mine, len);
	srn_tc_recv(fd, theirs, len, timeout_ms);
}

int srn_tc_peer_closed(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	if (poll(&pfd, 1, 0) <= 0)
		return 0;
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
}

void srn_tc_barrier(int fd, uint32_t tag, int timeout_ms)
{
	uint32_t got;
	srn_tc_xchg(fd, &tag, &got, sizeof(got), timeout_ms);
	if (got != tag) {
		fprintf(stderr, "[%s] barrier %#x: peer is at %#x\n", srn_tc_role, tag, got);
		exit(1);
	}
}

struct ibv_context *srn_tc_open(union ibv_gid *gid)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n >= 1);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK(ctx);
	ibv_free_device_list(list);
	CHECK(ibv_query_gid(ctx, 1, 0, gid) == 0);
	return ctx;
}

struct srn_tc_qp_opts srn_tc_default_opts(void)
{
	return (struct srn_tc_qp_opts){
		.mtu = IBV_MTU_4096, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
		.min_rnr_timer = 1, .rd_atomic = 16,
		.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			  IBV_ACCESS_REMOTE_ATOMIC,
	};
}

void srn_tc_connect(struct ibv_qp *qp, const union ibv_gid *dgid, uint32_t dqpn,
		    uint32_t rq_psn, uint32_t sq_psn, const struct srn_tc_qp_opts *o)
{
	struct srn_qp_up_attr a = srn_qp_up_defaults();
	a.hop_limit = 1;
	a.mtu = o->mtu;
	a.access = (unsigned)o->access;
	a.max_rd_atomic = o->rd_atomic;
	a.min_rnr_timer = o->min_rnr_timer;
	a.timeout = o->timeout;
	a.retry_cnt = o->retry_cnt;
	a.rnr_retry = o->rnr_retry;
	const struct srn_qp_up_peer peer = { .qpn = dqpn, .psn = rq_psn, .gid = *dgid };
	const char *step;
	int ret = srn_qp_up(qp, &a, sq_psn, &peer, &step);
	CHECK(ret == 0, "%s: %s", step, strerror(-ret));
}

struct ibv_wc srn_tc_poll_one(struct ibv_cq *cq, double timeout_s)
{
	struct ibv_wc wc;
	double end = srn_tc_now() + timeout_s;
	for (;;) {
		int n = ibv_poll_cq(cq, 1, &wc);
		CHECK(n >= 0);
		if (n == 1)
			return wc;
		if (srn_tc_now() > end) {
			fprintf(stderr, "[%s] no completion in %.1f s\n", srn_tc_role, timeout_s);
			exit(1);
		}
	}
}

struct ibv_qp *srn_tc_rc_qp(struct ibv_pd *pd, struct ibv_cq *cq, uint32_t send_wr,
			    uint32_t recv_wr)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = send_wr, .max_recv_wr = recv_wr, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	CHECK(qp);
	return qp;
}

bool srn_tc_on_memfd(const void *p)
{
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return false;
	char line[512];
	bool yes = false;
	while (fgets(line, sizeof(line), f)) {
		unsigned long s, e;
		char perms[5];
		if (sscanf(line, "%lx-%lx %4s", &s, &e, perms) == 3 && (uintptr_t)p >= s &&
		    (uintptr_t)p < e) {
			yes = perms[3] == 's' && strstr(line, "/memfd:softrnic-mr");
			break;
		}
	}
	fclose(f);
	return yes;
}

uint64_t srn_tc_dev_counter(struct ibv_context *ctx, const char *name)
{
	const char *dir = getenv(SRN_DIAG_DIR_ENV);
	char path[512];
	snprintf(path, sizeof(path), "%s/softrnic.%d.%s", dir && *dir ? dir : SRN_DIAG_DEFAULT_DIR,
		 (int)getpid(), ibv_get_device_name(ctx->device));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0, "no diagnostic file %s", path);
	struct srn_diag_seg *seg = mmap(NULL, sizeof(*seg), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	CHECK(seg != MAP_FAILED);
	uint64_t v = UINT64_MAX;
	for (uint32_t i = 0; i < seg->hdr.ncounters && i < SRN_DIAG_MAX_COUNTERS; i++)
		if (!strncmp(seg->counter_names[i], name, SRN_DIAG_NAME_LEN))
			v = atomic_load(&seg->counters.v[i]);
	munmap(seg, sizeof(*seg));
	CHECK(v != UINT64_MAX, "no counter %s", name);
	return v;
}
