/*
 * test_gso_iov_limit.c - a GSO run never gathers more pieces than one
 * sendmsg may (UIO_MAXIOV, 1024).
 *
 * Each queued packet is a header, its payload pieces (one per SGE) and a
 * tail, so 64 equal small Sends of 17 SGEs each would make a run of 1216
 * pieces: the kernel refuses it with EMSGSIZE, every resend rebuilds the
 * same run, and the QP ends in RETRY_EXC_ERR.  Over the UDP link
 * (SOFTRNIC_SHM=0) one chain of such Sends must arrive whole: every
 * receive completes with the right length and bytes, every send succeeds.
 * Then the same with a GSO refusal in the middle of a burst is covered by
 * gso_refused (test_gso_refused.sh).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rc_test_conn.h"

#define NWR 64
#define NSGE 17
#define PIECE 4
#define MSG (NSGE * PIECE)
#define SLOT 256

struct info {
	union ibv_gid gid;
	uint32_t qpn;
};

static uint8_t expect(int wr, int byte)
{
	return (uint8_t)(wr * 31 + byte * 7 + 1);
}

static int receiver(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr, uint8_t *buf, int fd)
{
	for (int i = 0; i < NWR; i++) {
		struct ibv_sge s = { (uintptr_t)buf + (size_t)i * SLOT, SLOT, mr->lkey };
		struct ibv_recv_wr w = { .wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1 }, *bad;
		CHECK(ibv_post_recv(qp, &w, &bad) == 0);
	}
	srn_tc_barrier(fd, 1, 5000);
	int bad_msgs = 0;
	for (int i = 0; i < NWR; i++) {
		struct ibv_wc wc = srn_tc_poll_one(cq, 10);
		CHECK(wc.status == IBV_WC_SUCCESS);
		CHECK(wc.byte_len == MSG);
		const uint8_t *got = buf + wc.wr_id * SLOT;
		for (int b = 0; b < MSG; b++)
			if (got[b] != expect((int)wc.wr_id, b)) {
				fprintf(stderr, "receive %d: byte %d is 0x%02x, want 0x%02x\n",
					(int)wc.wr_id, b, got[b], expect((int)wc.wr_id, b));
				bad_msgs++;
				break;
			}
	}
	CHECK(bad_msgs == 0);
	srn_tc_barrier(fd, 2, 10000);
	return 0;
}

static int sender(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr, uint8_t *buf, int fd)
{
	static struct ibv_sge sg[NWR][NSGE];
	static struct ibv_send_wr wr[NWR];
	/* Message i's pieces are scattered (every other 4-byte slot) so the
	 * packets really carry NSGE iovecs each. */
	for (int i = 0; i < NWR; i++) {
		uint8_t *src = buf + (size_t)i * SLOT * 2;
		for (int k = 0; k < NSGE; k++) {
			for (int b = 0; b < PIECE; b++)
				src[k * 2 * PIECE + b] = expect(i, k * PIECE + b);
			sg[i][k] = (struct ibv_sge){ (uintptr_t)src + (size_t)k * 2 * PIECE, PIECE, mr->lkey };
		}
		wr[i] = (struct ibv_send_wr){ .wr_id = (uint64_t)i, .sg_list = sg[i], .num_sge = NSGE,
					      .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
					      .next = i + 1 < NWR ? &wr[i + 1] : NULL };
	}
	srn_tc_barrier(fd, 1, 5000);
	struct ibv_send_wr *bad;
	CHECK(ibv_post_send(qp, wr, &bad) == 0);
	for (int i = 0; i < NWR; i++) {
		struct ibv_wc wc = srn_tc_poll_one(cq, 10);
		if (wc.status != IBV_WC_SUCCESS)
			fprintf(stderr, "send %d: %s\n", (int)wc.wr_id, ibv_wc_status_str(wc.status));
		CHECK(wc.status == IBV_WC_SUCCESS);
	}
	srn_tc_barrier(fd, 2, 10000);
	printf("ok: %d Sends of %d SGEs in one chain over UDP, all delivered intact\n", NWR, NSGE);
	return 0;
}

int main(void)
{
	setenv("SOFTRNIC_SHM", "0", 1);     /* the UDP link: GSO lives there */
	int fd;
	pid_t pid = srn_tc_fork(&fd);
	srn_tc_role = pid ? "sender" : "receiver";
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 2 * NWR, NULL, NULL, 0);
	static uint8_t buf[NWR * SLOT * 2];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = NWR, .max_recv_wr = NWR, .max_send_sge = NSGE, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	CHECK(pd && cq && mr && qp);
	struct info me = { gid, qp->qp_num }, peer;
	srn_tc_xchg(fd, &me, &peer, sizeof(me), 5000);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	o.timeout = 12;     /* 16.8 ms: a refused run shows up fast as retries */
	o.retry_cnt = 3;
	srn_tc_connect(qp, &peer.gid, peer.qpn, 1, 1, &o);
	if (!pid)
		return receiver(qp, cq, mr, buf, fd);
	int ret = sender(qp, cq, mr, buf, fd);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return ret | srn_tc_wait_child(pid, 10);
}
