/*
 * test_shared_kill.c - steering on a shared address after members die
 * without leaving (SIGKILL), regression test for packets that went to
 * another member's socket (docs/known-issues.md, `rereg_recv_udp`;
 * link/udp_group_probe.c).
 *
 * Six member processes open one device each on a random 127.89.x.y
 * (shared, port 4791, SOFTRNIC_SHM=0 so every packet is UDP), in turn, so
 * the kernel's socket order is their join order M0..M5.  A sender process
 * with NSEND devices of its own (each its own address: a flow each, so
 * the kernel's hash varies) sends PER UD datagrams from each device to
 * the QP of every member it names.  A member counts what its QP received
 * and what other members forwarded to it (`grp_fwd_rcvd`): with steering
 * right, that stays 0.
 *
 *   baseline  all six alive: everything arrives, nothing forwarded
 *   A         M3 stopped (SIGSTOP: a member that reads nothing), M1
 *             killed: the kernel moves M5 into index 1.  After SETTLE_MS,
 *             M0 M2 M4 M5 must get all of theirs, none forwarded.  Before
 *             the probe, M5's flows went by hash, some into M3's socket.
 *   B         M5 then M2 killed back to back (lowest index first, the
 *             order a prune gets wrong), then a new member M6 joins (it
 *             takes member number 1, free again).  The kernel holds
 *             [M0 M4 M3 M6]; the prune believed [M0 M3 M4 M6] for good.  After SETTLE_MS, M0 M4 M6 must get all of theirs,
 *             none forwarded.
 *   end       M3 continued: it must get everything sent to it while it
 *             was stopped, none forwarded.
 *
 * Bounded: every wait has a deadline, the whole run an alarm; the seed is
 * printed (SRN_SEED to repeat).  Traffic to 127/8 only.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "rc_test_conn.h"

#define NMEM 7               /* M0..M5, then M6 joins */
#define NSEND 8              /* sender devices: flows */
#define PER 4                /* datagrams per flow and target */
#define RECVS 512
#define BUF 128
#define QKEY 0x11111111u
#define SETTLE_MS 1000       /* deaths and joins to steering (SRN_SETTLE_MS) */
#define ARRIVE_MS 2000       /* sent datagrams to their QP */
#define RUN_S 90

static char addr[32];
static unsigned long settle_ms;

struct member {
	pid_t pid;
	int fd;
	uint32_t qpn;
	bool alive, stopped;
	uint64_t want;           /* datagrams sent to it so far */
};
static struct member mem[NMEM];

struct report {
	uint64_t got, fwd_rcvd;
};

struct send_cmd {
	uint32_t n;
	uint32_t qpn[NMEM];
};

static struct ibv_context *open_dev(int i)
{
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	CHECK(l && n > i, "%d devices", n);
	struct ibv_context *c = ibv_open_device(l[i]);
	CHECK(c, "open %s: %s", ibv_get_device_name(l[i]), strerror(errno));
	ibv_free_device_list(l);
	return c;
}

static struct ibv_qp *ud_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
				       .cap = { .max_send_wr = 64, .max_recv_wr = RECVS,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	CHECK(qp, "create UD QP: %s", strerror(errno));
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0);
	a.qp_state = IBV_QPS_RTR;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
	return qp;
}

static void post_recv(struct ibv_qp *qp, struct ibv_mr *mr, uint8_t *buf, unsigned i)
{
	struct ibv_sge s = { (uintptr_t)(buf + (size_t)i * BUF), BUF, mr->lkey };
	struct ibv_recv_wr w = { .wr_id = i, .sg_list = &s, .num_sge = 1 }, *bad;
	CHECK(ibv_post_recv(qp, &w, &bad) == 0);
}

/* A member: its QPN to the parent, then count what arrives and answer
 * each 'C' with a report, until the parent closes. */
static int member_main(int fd)
{
	struct ibv_context *ctx = open_dev(0);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, RECVS + 64, NULL, NULL, 0);
	CHECK(pd && cq);
	struct ibv_qp *qp = ud_qp(pd, cq);
	static uint8_t buf[RECVS * BUF];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	for (unsigned i = 0; i < RECVS; i++)
		post_recv(qp, mr, buf, i);
	srn_tc_send(fd, &qp->qp_num, sizeof(qp->qp_num));
	uint64_t got = 0;
	for (;;) {
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(cq, 16, wc);
		CHECK(n >= 0);
		for (int i = 0; i < n; i++) {
			CHECK(wc[i].status == IBV_WC_SUCCESS, "receive: %s",
			      ibv_wc_status_str(wc[i].status));
			got++;
			post_recv(qp, mr, buf, (unsigned)wc[i].wr_id);
		}
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, n ? 0 : 1) <= 0)
			continue;
		char c;
		if (read(fd, &c, 1) != 1)
			return 0;       /* the parent is done */
		struct report r = { got, srn_tc_dev_counter(ctx, "grp_fwd_rcvd") };
		srn_tc_send(fd, &r, sizeof(r));
	}
}

/* The sender: NSEND devices of their own; each command sends PER
 * datagrams from every device to every QPN named, then says 'D'. */
static int sender_main(int fd)
{
	struct ibv_qp *qp[NSEND];
	struct ibv_cq *cq[NSEND];
	struct ibv_ah *ah[NSEND];
	struct ibv_mr *mr[NSEND];
	static uint8_t msg[NSEND][64];
	union ibv_gid dgid = { .raw = { [10] = 0xff, [11] = 0xff } };
	CHECK(inet_pton(AF_INET, addr, &dgid.raw[12]) == 1);
	for (int d = 0; d < NSEND; d++) {
		struct ibv_context *ctx = open_dev(d);
		struct ibv_pd *pd = ibv_alloc_pd(ctx);
		cq[d] = ibv_create_cq(ctx, 128, NULL, NULL, 0);
		CHECK(pd && cq[d]);
		qp[d] = ud_qp(pd, cq[d]);
		struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
					  .grh = { .dgid = dgid, .hop_limit = 64 } };
		ah[d] = ibv_create_ah(pd, &aa);
		mr[d] = ibv_reg_mr(pd, msg[d], sizeof(msg[d]), 0);
		CHECK(ah[d] && mr[d]);
	}
	char ok = 'R';
	srn_tc_send(fd, &ok, 1);
	for (;;) {
		struct send_cmd c;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 60000) <= 0 || read(fd, &c, sizeof(c)) != (ssize_t)sizeof(c))
			return 0;
		CHECK(c.n <= NMEM);
		for (uint32_t t = 0; t < c.n; t++)
			for (int k = 0; k < PER; k++)
				for (int d = 0; d < NSEND; d++) {
					struct ibv_sge s = { (uintptr_t)msg[d], sizeof(msg[d]), mr[d]->lkey };
					struct ibv_send_wr w = { .sg_list = &s, .num_sge = 1,
								 .opcode = IBV_WR_SEND,
								 .send_flags = IBV_SEND_SIGNALED }, *bad;
					w.wr.ud.ah = ah[d];
					w.wr.ud.remote_qpn = c.qpn[t];
					w.wr.ud.remote_qkey = QKEY;
					CHECK(ibv_post_send(qp[d], &w, &bad) == 0);
					struct ibv_wc wc = srn_tc_poll_one(cq[d], 5);
					CHECK(wc.status == IBV_WC_SUCCESS);
				}
		ok = 'D';
		srn_tc_send(fd, &ok, 1);
	}
}

static void start_member(int i)
{
	pid_t pid = srn_tc_fork(&mem[i].fd);
	if (pid == 0)
		exit(member_main(mem[i].fd));
	mem[i].pid = pid;
	mem[i].alive = true;
	srn_tc_recv(mem[i].fd, &mem[i].qpn, sizeof(mem[i].qpn), 20000);
	/* The first six take members 0..5; a joiner the lowest free one. */
	CHECK(i >= 6 || ((mem[i].qpn >> 16) & 0xff) == (uint32_t)i, "M%d got member %u", i,
	      mem[i].qpn >> 16);
	printf("M%d: member %u, qpn %#x\n", i, (mem[i].qpn >> 16) & 0xff, mem[i].qpn);
}

static struct report ask(int i)
{
	struct report r;
	char c = 'C';
	srn_tc_send(mem[i].fd, &c, 1);
	srn_tc_recv(mem[i].fd, &r, sizeof(r), 5000);
	return r;
}

static void kill_member(int i)
{
	CHECK(kill(mem[i].pid, SIGKILL) == 0);
	int st;
	CHECK(waitpid(mem[i].pid, &st, 0) == mem[i].pid);   /* its sockets are closed */
	mem[i].alive = false;
}

/* Send to the named members and judge the ones not stopped: everything
 * sent to them so far arrived within ARRIVE_MS, and nothing ever came
 * forwarded (a count since the member's start: what came to a stopped
 * member's socket through another's is counted once it runs).  Returns
 * the failures. */
static int phase(const char *name, int sender_fd, const int *who, int n)
{
	struct send_cmd c = { .n = (uint32_t)n };
	for (int j = 0; j < n; j++) {
		c.qpn[j] = mem[who[j]].qpn;
		mem[who[j]].want += NSEND * PER;
	}
	srn_tc_send(sender_fd, &c, sizeof(c));
	char d;
	srn_tc_recv(sender_fd, &d, 1, 30000);
	CHECK(d == 'D');
	int bad = 0;
	for (int j = 0; j < n; j++) {
		int i = who[j];
		if (mem[i].stopped)
			continue;
		struct report r;
		double t0 = srn_tc_now();
		do {
			usleep(20000);
			r = ask(i);
		} while (r.got < mem[i].want && srn_tc_now() - t0 < ARRIVE_MS / 1000.0);
		usleep(50000);          /* the counters are mirrored as the socket is read */
		r = ask(i);
		uint64_t fwd = r.fwd_rcvd;
		bool ok = r.got == mem[i].want && fwd == 0;
		printf("%-8s M%d (qpn %#x): received %llu of %llu, %llu forwarded to it%s\n", name, i,
		       mem[i].qpn, (unsigned long long)r.got, (unsigned long long)mem[i].want,
		       (unsigned long long)fwd, ok ? "" : "  <-- steered astray");
		bad += !ok;
	}
	fflush(stdout);
	return bad;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	alarm(RUN_S);
	settle_ms = srn_tc_env_ul("SRN_SETTLE_MS", SETTLE_MS);
	const char *s = getenv("SRN_SEED");
	unsigned seed = s ? (unsigned)strtoul(s, NULL, 0) : (unsigned)(time(NULL) ^ getpid());
	srandom(seed);
	unsigned a = (unsigned)(random() % 250) + 1, b = (unsigned)(random() % 240) + 1;
	snprintf(addr, sizeof(addr), "127.89.%u.%u", a, b);
	setenv("SOFTRNIC_SHM", "0", 1);
	char devs[128];
	snprintf(devs, sizeof(devs), "name=softrnic0,addr=%s", addr);
	setenv("SOFTRNIC_DEVICES", devs, 1);
	printf("seed %u: members on %s:4791\n", seed, addr);

	for (int i = 0; i < 6; i++)
		start_member(i);
	/* The sender's devices: 127.90.a.b+d each, alone on its address. */
	char sdevs[NSEND * 48] = "";
	for (int d = 0; d < NSEND; d++)
		snprintf(sdevs + strlen(sdevs), sizeof(sdevs) - strlen(sdevs),
			 "%sname=snd%d,addr=127.90.%u.%u,share=0", d ? ";" : "", d, a, b + (unsigned)d);
	setenv("SOFTRNIC_DEVICES", sdevs, 1);
	int sfd;
	pid_t spid = srn_tc_fork(&sfd);
	if (spid == 0)
		exit(sender_main(sfd));
	setenv("SOFTRNIC_DEVICES", devs, 1);
	char r;
	srn_tc_recv(sfd, &r, 1, 20000);
	CHECK(r == 'R');

	int bad = 0;
	int all[] = { 0, 1, 2, 3, 4, 5 };
	int bl = phase("baseline", sfd, all, 6);
	CHECK(bl == 0, "steering wrong before any death: the harness, not the bug");

	CHECK(kill(mem[3].pid, SIGSTOP) == 0);
	mem[3].stopped = true;
	kill_member(1);
	usleep((useconds_t)settle_ms * 1000);
	int pa[] = { 0, 2, 4, 5, 3 };
	bad += phase("A", sfd, pa, 5);

	kill_member(5);
	kill_member(2);
	start_member(6);
	usleep((useconds_t)settle_ms * 1000);
	int pb[] = { 0, 4, 6, 3 };
	bad += phase("B", sfd, pb, 4);

	CHECK(kill(mem[3].pid, SIGCONT) == 0);
	mem[3].stopped = false;
	int pe[] = { 3 };
	bad += phase("end", sfd, pe, 1);

	close(sfd);
	for (int i = 0; i < NMEM; i++)
		if (mem[i].alive) {
			close(mem[i].fd);
			kill(mem[i].pid, SIGKILL);
			waitpid(mem[i].pid, NULL, 0);
		}
	waitpid(spid, NULL, 0);
	CHECK(bad == 0, "%d members missed datagrams or got them forwarded", bad);
	printf("ok\n");
	return 0;
}
