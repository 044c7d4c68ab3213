/*
 * test_trust_resp_xrc_srq - an XRC SRQ cannot be destroyed while an XRC
 * receive QP uses it (issue 10, item 5).
 *
 * An XRC receive QP takes each message into the SRQ the sender names.
 * It used to hold a pointer to that SRQ (and its PD and CQ) without
 * counting as its user, so ibv_destroy_srq freed an SRQ in use: the next
 * message, and the diagnostic tick, read freed memory (ASan:
 * heap-use-after-free).  Now:
 *
 *   XRC send QP --SEND(srqn)--> XRC recv QP --> XRC SRQ --> CQ
 *
 *   1. one message delivered through the SRQ (the receive QP now uses it);
 *   2. ibv_destroy_srq: EBUSY; ibv_close_xrcd: EBUSY (the SRQ is in it);
 *   3. a second message is still delivered, intact, through that SRQ;
 *   4. after the receive QP is destroyed the SRQ goes, then the domain.
 *
 * One process, two QPs of one device connected over the loopback device;
 * every wait bounded (srn_tc_poll_one).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "rc_test_conn.h"

#define MSG 3000        /* more than one packet at MTU 1024 */

static struct ibv_cq *cq;
static struct ibv_srq *srq;
static struct ibv_qp *sqp;
static struct ibv_mr *mr;
static uint8_t buf[2 * MSG];
static uint32_t srqn;

/* One SEND of MSG bytes named for the SRQ, received intact. */
static void deliver(uint8_t seed)
{
	memset(buf + MSG, 0, MSG);
	for (int i = 0; i < MSG; i++)
		buf[i] = (uint8_t)(seed + i * 7);
	struct ibv_sge rs = { (uintptr_t)(buf + MSG), MSG, mr->lkey };
	struct ibv_recv_wr rw = { .wr_id = 0x5000 + seed, .sg_list = &rs, .num_sge = 1 }, *bad_r;
	CHECK(ibv_post_srq_recv(srq, &rw, &bad_r) == 0);
	struct ibv_sge ss = { (uintptr_t)buf, MSG, mr->lkey };
	struct ibv_send_wr sw = { .wr_id = 0x7000 + seed, .sg_list = &ss, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
			   *bad_s;
	sw.qp_type.xrc.remote_srqn = srqn;
	CHECK(ibv_post_send(sqp, &sw, &bad_s) == 0);
	bool got_send = false, got_recv = false;
	for (int i = 0; i < 2; i++) {
		struct ibv_wc wc = srn_tc_poll_one(cq, 10);
		if (wc.status != IBV_WC_SUCCESS)
			fprintf(stderr, "wr_id 0x%llx: %s\n", (unsigned long long)wc.wr_id,
				ibv_wc_status_str(wc.status));
		CHECK(wc.status == IBV_WC_SUCCESS);
		if (wc.opcode == IBV_WC_RECV) {
			CHECK(wc.wr_id == 0x5000u + seed && wc.byte_len == MSG);
			got_recv = true;
		} else {
			CHECK(wc.wr_id == 0x7000u + seed);
			got_send = true;
		}
	}
	CHECK(got_send && got_recv);
	CHECK(memcmp(buf, buf + MSG, MSG) == 0);
}

/* RESET -> INIT -> RTR (-> RTS for the send QP) with the attributes
 * each XRC type takes (an XRC receive QP only receives: it stays in RTR,
 * as in ibv_xsrq_pingpong). */
static void connect_xrc(struct ibv_qp *qp, const union ibv_gid *gid, uint32_t dqpn, bool send)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			    IBV_QP_ACCESS_FLAGS) == 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.rq_psn = 0x100;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	if (!send)
		rtr |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	CHECK(ibv_modify_qp(qp, &a, rtr) == 0);
	if (!send)
		return;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x100;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			    IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0);
}

int main(void)
{
	srn_tc_role = "xrc";
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(cq);
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	struct ibv_xrcd_init_attr xa = { .comp_mask = IBV_XRCD_INIT_ATTR_FD |
						      IBV_XRCD_INIT_ATTR_OFLAGS,
					 .fd = -1, .oflags = O_CREAT };
	struct ibv_xrcd *xrcd = ibv_open_xrcd(ctx, &xa);
	CHECK(xrcd);
	struct ibv_srq_init_attr_ex sa = {
		.attr = { .max_wr = 8, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			     IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ,
		.srq_type = IBV_SRQT_XRC, .pd = pd, .xrcd = xrcd, .cq = cq,
	};
	srq = ibv_create_srq_ex(ctx, &sa);
	CHECK(srq);
	CHECK(ibv_get_srq_num(srq, &srqn) == 0);

	struct ibv_qp_init_attr_ex ra = { .qp_type = IBV_QPT_XRC_RECV,
					  .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = xrcd };
	struct ibv_qp *rqp = ibv_create_qp_ex(ctx, &ra);
	CHECK(rqp);
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_XRC_SEND, .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd,
		.send_cq = cq, .cap = { .max_send_wr = 8, .max_send_sge = 1 },
	};
	sqp = ibv_create_qp_ex(ctx, &ia);
	CHECK(sqp);
	connect_xrc(rqp, &gid, sqp->qp_num, false);
	connect_xrc(sqp, &gid, rqp->qp_num, true);

	deliver(1);
	/* The receive QP took a message into the SRQ: it uses it. */
	int r = ibv_destroy_srq(srq);
	if (r != EBUSY) {
		fprintf(stderr, "ibv_destroy_srq of an XRC SRQ in use returned %d (%s), want "
			"EBUSY\n", r, strerror(r));
		return 1;
	}
	CHECK(ibv_close_xrcd(xrcd) == EBUSY);
	/* Refused means untouched: the next message is delivered through it. */
	deliver(2);
	deliver(3);

	CHECK(ibv_destroy_qp(rqp) == 0);
	CHECK(ibv_destroy_srq(srq) == 0);
	CHECK(ibv_destroy_qp(sqp) == 0);
	CHECK(ibv_close_xrcd(xrcd) == 0);
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	printf("XRC SRQ in use: destroy EBUSY, later messages delivered, freed after its QP\n");
	return 0;
}
