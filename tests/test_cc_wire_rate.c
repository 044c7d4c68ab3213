/*
 * test_cc_wire_rate - QP rate limits honoured between two processes.
 *
 * The parent streams 64 KiB RDMA Writes (DEPTH outstanding) into the
 * child's region and measures the bytes completed over time in four
 * phases: unlimited; 40 Mb/s through ibv_modify_qp_rate_limit; 80 Mb/s
 * through IBV_QP_RATE_LIMIT in an RTS->RTS ibv_modify_qp; the limit
 * removed again.  The bounds are generous (a busy 2-CPU machine):
 * a limited phase must stay under 1.3 x its limit and reach a third of
 * it; the unlimited phases must beat the larger limit by half.  The rates
 * are printed, not asserted tightly.
 *
 * Also: packet_pacing_caps advertise the range and the QP types, and the
 * argument checks answer EINVAL as mlx5's provider does.
 *
 * Run with the same-host rings (default) and over UDP (SOFTRNIC_SHM=0).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rc_test_conn.h"

#define DEPTH 8
#define MSG (64u << 10)
#define REGION (1u << 20)

struct tinfo {
	union ibv_gid gid;
	uint32_t qpn;
	uint32_t rkey;
	uint64_t addr;
};

static int target(int fd)
{
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	void *region = calloc(1, REGION);
	CHECK(pd && cq && region);
	struct ibv_mr *mr =
		ibv_reg_mr(pd, region, REGION, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr);
	struct ibv_qp *qp = srn_tc_rc_qp(pd, cq, DEPTH, 1);
	struct tinfo me = { .gid = gid,
			    .qpn = qp->qp_num,
			    .rkey = mr->rkey,
			    .addr = (uintptr_t)region },
		     peer;
	srn_tc_xchg(fd, &me, &peer, sizeof(me), 30000);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	srn_tc_connect(qp, &peer.gid, peer.qpn, 0, 0, &o);
	srn_tc_barrier(fd, 1, 30000);
	/* The writer's phases; its Writes need nothing from this side. */
	srn_tc_barrier(fd, 2, 120000);
	CHECK(ibv_destroy_qp(qp) == 0);
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	free(region);
	return 0;
}

/* Stream Writes for secs seconds; the rate completed, Mb/s. */
static double stream(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr, const struct tinfo *t,
		     double secs)
{
	unsigned posted = 0, done = 0;
	double t0 = srn_tc_now(), end = t0 + secs;
	while (srn_tc_now() < end) {
		while (posted - done < DEPTH) {
			struct ibv_sge sge = { (uintptr_t)mr->addr, MSG, mr->lkey };
			struct ibv_send_wr wr = {
				.wr_id = posted, .sg_list = &sge, .num_sge = 1,
				.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
				.wr.rdma = { t->addr + (posted % (REGION / MSG)) * MSG, t->rkey },
			}, *bad;
			CHECK(ibv_post_send(qp, &wr, &bad) == 0);
			posted++;
		}
		struct ibv_wc wc[DEPTH];
		int n = ibv_poll_cq(cq, DEPTH, wc);
		CHECK(n >= 0);
		for (int i = 0; i < n; i++)
			CHECK(wc[i].status == IBV_WC_SUCCESS, "status %s",
			      ibv_wc_status_str(wc[i].status));
		done += (unsigned)n;
	}
	double elapsed = srn_tc_now() - t0;
	unsigned counted = done;
	/* Drain what is in flight (not counted): the next phase starts clean. */
	while (done < posted) {
		struct ibv_wc wc = srn_tc_poll_one(cq, 30);
		CHECK(wc.status == IBV_WC_SUCCESS);
		done++;
	}
	return (double)counted * MSG * 8 / elapsed / 1e6;
}

static void check_caps_and_args(struct ibv_context *ctx, struct ibv_qp *qp)
{
	struct ibv_device_attr_ex ex;
	CHECK(ibv_query_device_ex(ctx, NULL, &ex) == 0);
	struct ibv_packet_pacing_caps *c = &ex.packet_pacing_caps;
	CHECK(c->qp_rate_limit_min == 1000 && c->qp_rate_limit_max >= 1000000 &&
		      (c->supported_qpts & (1u << IBV_QPT_RC)) &&
		      (c->supported_qpts & (1u << IBV_QPT_UD)),
	      "caps: min %u max %u qpts 0x%x", c->qp_rate_limit_min, c->qp_rate_limit_max,
	      c->supported_qpts);
	struct ibv_qp_rate_limit_attr a = { .rate_limit = 40000, .comp_mask = 1 };
	CHECK(ibv_modify_qp_rate_limit(qp, &a) == EINVAL, "comp_mask 1 accepted");
	a = (struct ibv_qp_rate_limit_attr){ .rate_limit = 999 };
	CHECK(ibv_modify_qp_rate_limit(qp, &a) == EINVAL, "999 kb/s accepted");
	a = (struct ibv_qp_rate_limit_attr){ .rate_limit = c->qp_rate_limit_max + 1 };
	CHECK(ibv_modify_qp_rate_limit(qp, &a) == EINVAL, "above the maximum accepted");
	a = (struct ibv_qp_rate_limit_attr){ .max_burst_sz = 4096 };
	CHECK(ibv_modify_qp_rate_limit(qp, &a) == EINVAL, "a burst without a rate accepted");
	a = (struct ibv_qp_rate_limit_attr){ 0 };
	CHECK(ibv_modify_qp_rate_limit(qp, &a) == 0, "removing no limit refused");
	printf("[writer] packet_pacing_caps %u..%u kb/s, qpts 0x%x; bad arguments refused\n",
	       c->qp_rate_limit_min, c->qp_rate_limit_max, c->supported_qpts);
}

static int writer(int fd, pid_t child)
{
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 2 * DEPTH, NULL, NULL, 0);
	void *src = calloc(1, MSG);
	CHECK(pd && cq && src);
	struct ibv_mr *mr = ibv_reg_mr(pd, src, MSG, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	struct ibv_qp *qp = srn_tc_rc_qp(pd, cq, DEPTH, 1);
	check_caps_and_args(ctx, qp);
	struct tinfo me = { .gid = gid, .qpn = qp->qp_num }, peer;
	srn_tc_xchg(fd, &me, &peer, sizeof(me), 30000);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	srn_tc_connect(qp, &peer.gid, peer.qpn, 0, 0, &o);
	srn_tc_barrier(fd, 1, 30000);

	double free1 = stream(qp, cq, mr, &peer, 1.0);
	struct ibv_qp_rate_limit_attr rl = { .rate_limit = 40000 };
	CHECK(ibv_modify_qp_rate_limit(qp, &rl) == 0);
	double lim40 = stream(qp, cq, mr, &peer, 2.0);
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_RTS, .rate_limit = 80000 };
	CHECK(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_RATE_LIMIT) == 0);
	double lim80 = stream(qp, cq, mr, &peer, 2.0);
	rl.rate_limit = 0;
	CHECK(ibv_modify_qp_rate_limit(qp, &rl) == 0);
	double free2 = stream(qp, cq, mr, &peer, 1.0);
	printf("[writer] Mb/s: unlimited %.0f, limit 40: %.1f, limit 80: %.1f, unlimited again %.0f\n",
	       free1, lim40, lim80, free2);
	CHECK(lim40 < 40 * 1.3 && lim40 > 40 / 3.0, "40 Mb/s limit: %.1f Mb/s", lim40);
	CHECK(lim80 < 80 * 1.3 && lim80 > 80 / 3.0, "80 Mb/s limit: %.1f Mb/s", lim80);
	CHECK(free1 > 80 * 1.5 && free2 > 80 * 1.5, "unlimited: %.0f and %.0f Mb/s", free1, free2);

	srn_tc_barrier(fd, 2, 30000);
	CHECK(ibv_destroy_qp(qp) == 0);
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	free(src);
	return srn_tc_wait_child(child, 30);
}

int main(void)
{
	unsetenv("SOFTRNIC_FAULTS");
	int fd;
	pid_t pid = srn_tc_fork(&fd);
	if (pid == 0) {
		srn_tc_role = "target";
		exit(target(fd));
	}
	srn_tc_role = "writer";
	int rc = writer(fd, pid);
	if (rc == 0 && srn_check_result() == 0)
		printf("ok\n");
	return rc || srn_check_result() ? 1 : 0;
}
