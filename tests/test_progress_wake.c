/*
 * test_progress_wake - the progress thread wakes for a deadline another
 * thread sets while it sleeps.
 *
 * The pattern of tgtd's main loop: arm the CQ, go idle long enough for
 * the progress thread to sleep with no deadline, then post and wait on
 * the completion channel's fd with poll() (no ibv_get_cq_event, which
 * would kick the thread anyway).  The post arms a timer, or hands a
 * packet to the fault injector to hold; only the progress thread can act
 * on either, and it must not sleep on past it.
 *
 *   timer  SOFTRNIC_FAULTS drops every RDMA Write packet: the ACK timer
 *          (timeout 10, 4 ms; retry_cnt 1) must expire, retry, expire
 *          again and complete the Write with RETRY_EXC_ERR.
 *   held   SOFTRNIC_FAULTS delays every RDMA Write packet 5 ms: the held
 *          packet must leave at its deadline and the Write complete with
 *          success, with no ACK timeout on the way (timeout 17, 0.54 s:
 *          a thread that slept past the held packet would leave it to
 *          that timer's retry).  A 4 ms timer here was shorter than the
 *          hold itself and failed under load when the first ACK came
 *          after the retry's timer too.
 * Both between two QPs of this process over the UDP link (SOFTRNIC_SHM=0,
 * set by the CMake registration with the faults).
 */
#define _GNU_SOURCE
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#include "rc_test_conn.h"   /* CHECK (fatal), srn_tc_open, srn_tc_connect */

int main(int argc, char **argv)
{
	srn_tc_role = "wake";
	const char *mode = argc > 1 ? argv[1] : "";
	bool timer = !strcmp(mode, "timer");
	CHECK(timer || !strcmp(mode, "held"), "usage: test_progress_wake timer|held");
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_comp_channel *cc = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, cc, 0);
	CHECK(pd && cc && cq);
	struct ibv_qp_init_attr qa = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *a = ibv_create_qp(pd, &qa), *b = ibv_create_qp(pd, &qa);
	CHECK(a && b);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	o.timeout = timer ? 10 : 17;
	o.retry_cnt = 1;
	srn_tc_connect(a, &gid, b->qp_num, 100, 200, &o);
	srn_tc_connect(b, &gid, a->qp_num, 200, 100, &o);
	static char src[64], dst[64];
	memset(src, 0x6b, sizeof(src));
	struct ibv_mr *smr = ibv_reg_mr(pd, src, sizeof(src), 0);
	struct ibv_mr *dmr = ibv_reg_mr(pd, dst, sizeof(dst),
					IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(smr && dmr);
	CHECK(ibv_req_notify_cq(cq, 0) == 0);
	/* Idle: the progress thread goes to sleep with nothing due. */
	nanosleep(&(struct timespec){ .tv_nsec = 300000000 }, NULL);
	struct ibv_sge sge = { (uintptr_t)src, sizeof(src), smr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { (uintptr_t)dst, dmr->rkey } }, *bad;
	double t0 = srn_tc_now();
	CHECK(ibv_post_send(a, &wr, &bad) == 0);
	struct pollfd p = { .fd = cc->fd, .events = POLLIN };
	int r = poll(&p, 1, 10000);
	double waited = srn_tc_now() - t0;
	CHECK(r == 1, "no completion event within 10 s: the progress thread slept past its "
		      "deadline (%s)", timer ? "ACK timer" : "held packet");
	struct ibv_cq *ecq;
	void *ectx;
	CHECK(ibv_get_cq_event(cc, &ecq, &ectx) == 0);
	ibv_ack_cq_events(cq, 1);
	struct ibv_wc wc = srn_tc_poll_one(cq, 5);
	CHECK(wc.wr_id == 7);
	if (timer)
		CHECK(wc.status == IBV_WC_RETRY_EXC_ERR, "status %s",
		      ibv_wc_status_str(wc.status));
	else {
		CHECK(wc.status == IBV_WC_SUCCESS && !memcmp(src, dst, sizeof(src)), "status %s",
		      ibv_wc_status_str(wc.status));
		CHECK(srn_tc_dev_counter(ctx, "local_ack_timeout_err") == 0,
		      "the held packet left at the ACK timer's retry, not at its own deadline");
	}
	printf("%s: %s after %.1f ms\n", mode, ibv_wc_status_str(wc.status), waited * 1e3);
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	ibv_destroy_cq(cq);
	ibv_destroy_comp_channel(cc);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return srn_check_result();
}
