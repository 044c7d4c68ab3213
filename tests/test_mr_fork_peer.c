/*
 * test_mr_fork_peer - a target forks and grows a registered region while
 * a same-host peer streams RDMA Writes into it (issue 27 items 1 and 3):
 *
 *  - the target registers a 1 MiB region with remote write (it moves
 *    onto a memfd: the peer copies through a mapping); the peer writes
 *    64 KiB pieces into its first 960 KiB, one after another, each piece
 *    a byte value that changes per Write (never 0x11 nor 0xee);
 *  - the target forks 8 children while that goes on; each child copies
 *    the streamed part, sleeps 30 ms (thousands of Writes land in the
 *    parent meanwhile) and finds its own memory unchanged, then stores
 *    0xee over the whole region; the parent's last 64 KiB (which the
 *    peer never writes) must stay 0x11;
 *  - the target then grows the mapping in place to 4 MiB with the peer
 *    still writing and fills the new tail: no SIGBUS;
 *  - every Write the peer posted completed with success.
 *
 * Two processes, one device each, through the same-host link (direct
 * placement when on).  A machine where the pages never move skips (77).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "rc_test_conn.h"

#define REGION (1u << 20)
#define QUIET (64u << 10)              /* the region's tail the peer leaves alone */
#define PIECE (64u << 10)
#define TMO 20000

struct info {
	union ibv_gid gid;
	uint32_t qpn, rkey;
	uint64_t addr;
	int moved;
};

/* The forked child: its copy must not move while the peer writes the
 * parent's; then it writes its own. */
static int child_of_target(uint8_t *buf)
{
	uint8_t *snap = malloc(REGION - QUIET);
	if (!snap)
		return 2;
	memcpy(snap, buf, REGION - QUIET);
	usleep(30000);
	int ret = memcmp(snap, buf, REGION - QUIET) ? 3 : 0;
	memset(buf, 0xee, REGION);
	free(snap);
	return ret;
}

static bool quiet_ok(const uint8_t *buf)
{
	for (size_t i = REGION - QUIET; i < REGION; i++)
		if (buf[i] != 0x11)
			return false;
	return true;
}

/* False: the pages did not move (nothing checked). */
static bool target(int fd)
{
	struct info me = { 0 }, peer;
	struct ibv_context *ctx = srn_tc_open(&me.gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	/* Room to grow in place: reserve 4 MiB, give back all but 1 MiB. */
	uint8_t *buf = mmap(NULL, 4 * REGION, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(buf != MAP_FAILED);
	munmap(buf + REGION, 3 * REGION);
	memset(buf, 0x11, REGION);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, REGION,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr);
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)buf;
	me.moved = srn_tc_on_memfd(buf);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp *qp = srn_tc_rc_qp(pd, cq, 16, 1);
	me.qpn = qp->qp_num;
	srn_tc_xchg(fd, &me, &peer, sizeof(me), TMO);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	srn_tc_connect(qp, &peer.gid, peer.qpn, 0x100, 0x100, &o);
	srn_tc_barrier(fd, 1, TMO);
	if (!me.moved) {
		srn_tc_barrier(fd, 2, TMO);
		srn_tc_barrier(fd, 3, TMO);
		return false;
	}
	/* Writes are landing before the first fork. */
	double until = srn_tc_now() + 10;
	while (buf[0] == 0x11 && srn_tc_now() < until)
		usleep(100);
	CHECK(buf[0] != 0x11, "no Write landed in 10 s");
	for (int i = 0; i < 8; i++) {
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0)
			_exit(child_of_target(buf));
		int st = 0;
		CHECK(waitpid(pid, &st, 0) == pid);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "fork %d: the child ended with %#x (3: the peer's Writes reached it)", i, st);
		CHECK(quiet_ok(buf), "fork %d: the child's stores reached the parent", i);
	}
	/* Grow in place under the stream (the hook lets an in-place growth
	 * through without revoking: no page moves). */
	uint8_t *g = mremap(buf, REGION, 4 * REGION, 0);
	if (g == MAP_FAILED) {
		printf("note: no room to grow in place (%s), growth not checked\n", strerror(errno));
	} else {
		memset(g + REGION, 0x22, 3 * REGION);   /* SIGBUS here on a tight memfd */
		CHECK(g[4 * REGION - 1] == 0x22 && quiet_ok(g));
	}
	srn_tc_barrier(fd, 2, TMO);         /* the peer stops */
	srn_tc_barrier(fd, 3, TMO);
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(!srn_tc_on_memfd(buf) && (g == MAP_FAILED || !srn_tc_on_memfd(g + 4 * REGION - 1)),
	      "the region stayed on the memfd after dereg");
	return true;
}

/* Post Writes until the target says stop; all must succeed. */
static void peer(int fd)
{
	struct info me = { 0 }, tg;
	struct ibv_context *ctx = srn_tc_open(&me.gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	uint8_t *src = malloc(PIECE);
	struct ibv_mr *mr = ibv_reg_mr(pd, src, PIECE, IBV_ACCESS_LOCAL_WRITE);
	CHECK(src && mr);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp *qp = srn_tc_rc_qp(pd, cq, 16, 1);
	me.qpn = qp->qp_num;
	srn_tc_xchg(fd, &me, &tg, sizeof(me), TMO);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	srn_tc_connect(qp, &tg.gid, tg.qpn, 0x100, 0x100, &o);
	srn_tc_barrier(fd, 1, TMO);
	uint64_t n = 0;
	while (tg.moved) {
		char c;
		ssize_t r = recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
		if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
			break;                     /* the target's barrier 2 */
		memset(src, (int)(1 + n % 200), PIECE);
		struct ibv_sge sge = { (uintptr_t)src, PIECE, mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = n, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { tg.addr + (n % ((REGION - QUIET) / PIECE)) * PIECE, tg.rkey },
		}, *bad;
		CHECK(ibv_post_send(qp, &wr, &bad) == 0);
		struct ibv_wc wc = srn_tc_poll_one(cq, 10);
		CHECK(wc.status == IBV_WC_SUCCESS, "Write %llu: %s", (unsigned long long)n,
		      ibv_wc_status_str(wc.status));
		n++;
	}
	srn_tc_barrier(fd, 2, TMO);
	srn_tc_barrier(fd, 3, TMO);
	if (tg.moved)
		printf("peer: %llu Writes of 64 KiB, all successful\n", (unsigned long long)n);
}

int main(void)
{
	int fd;
	pid_t pid = srn_tc_fork(&fd);
	srn_tc_role = pid ? "target" : "peer";
	if (!pid) {
		peer(fd);
		exit(srn_check_failures ? 1 : 0);
	}
	bool moved = target(fd);
	int st = srn_tc_wait_child(pid, 60);
	CHECK(st == 0, "the peer ended with %d", st);
	if (!moved && !srn_check_failures) {
		printf("SKIP: the region's pages did not move (userfaultfd refused?)\n");
		return 77;
	}
	if (!srn_check_failures)
		printf("ok: 8 forks and a growth under a stream of Writes: children kept their "
		       "own copies, the parent's bytes and the grown tail intact\n");
	return srn_check_result();
}
