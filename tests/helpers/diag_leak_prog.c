/* diag_leak_prog - the registration-leak story, for test_res.sh and
 * test_stat.sh: opens the first softrnic device, registers three regions
 * (4096, 65536 and 1048576 bytes) and never deregisters them, creates a
 * CQ and an RC QP connected to itself, sends one 64-byte message to itself
 * (so the packet counters are not zero), prints
 *
 *   ready <pid> qpn 0x<qpn>
 *
 * and sleeps until killed (at most 120 s, then exits 0 without cleaning
 * up, like the programs it stands for).  Linked against libsoftrnic.
 */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/qp_up.h"
#include "diag/clock.h"

static int die(const char *what)
{
	fprintf(stderr, "diag_leak_prog: %s failed\n", what);
	return 1;
}

/* Poll until n completions arrived (bounded: 5 s). */
static int wait_cqes(struct ibv_cq *cq, int n)
{
	struct ibv_wc wc[4];
	uint64_t end = srn_now_ns() + 5000000000ull;
	while (n > 0) {
		int got = ibv_poll_cq(cq, 4, wc);
		if (got < 0)
			return -1;
		for (int i = 0; i < got; i++)
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "diag_leak_prog: completion status %s\n",
					ibv_wc_status_str(wc[i].status));
				return -1;
			}
		n -= got;
		if (srn_now_ns() > end)
			return -1;
	}
	return 0;
}

int main(void)
{
	static const size_t lens[3] = { 4096, 65536, 1048576 };
	int num;
	struct ibv_device **list = ibv_get_device_list(&num);
	if (!list || num < 1)
		return die("ibv_get_device_list");
	struct ibv_context *ctx = ibv_open_device(list[0]);
	if (!ctx)
		return die("ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		return die("ibv_alloc_pd");
	struct ibv_mr *mr[3];
	for (int i = 0; i < 3; i++) {
		void *buf;
		if (posix_memalign(&buf, 4096, lens[i]))
			return die("posix_memalign");
		memset(buf, 0, lens[i]);
		mr[i] = ibv_reg_mr(pd, buf, lens[i],
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		if (!mr[i])
			return die("ibv_reg_mr");
	}
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!cq)
		return die("ibv_create_cq");
	struct ibv_qp_init_attr qia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &qia);
	if (!qp)
		return die("ibv_create_qp");

	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, 0, &gid))
		return die("ibv_query_gid");
	/* Connected to itself: both directions start at PSN 0x100. */
	struct srn_qp_up_attr a = srn_qp_up_defaults();
	a.access = IBV_ACCESS_REMOTE_WRITE;
	a.min_rnr_timer = 12;
	const struct srn_qp_up_peer self = { .qpn = qp->qp_num, .psn = 0x100, .gid = gid };
	const char *step;
	if (srn_qp_up(qp, &a, 0x100, &self, &step))
		return die(step);

	struct ibv_sge rsge = { .addr = (uintptr_t)mr[1]->addr, .length = 64, .lkey = mr[1]->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &rsge, .num_sge = 1 }, *bad_r;
	struct ibv_sge ssge = { .addr = (uintptr_t)mr[0]->addr, .length = 64, .lkey = mr[0]->lkey };
	struct ibv_send_wr swr = { .wr_id = 2, .sg_list = &ssge, .num_sge = 1,
				   .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
			   *bad_s;
	if (ibv_post_recv(qp, &rwr, &bad_r) || ibv_post_send(qp, &swr, &bad_s))
		return die("post");
	if (wait_cqes(cq, 2))
		return die("self send");

	printf("ready %d qpn 0x%06x\n", (int)getpid(), qp->qp_num);
	fflush(stdout);
	for (int i = 0; i < 120; i++)
		sleep(1);
	return 0;
}
