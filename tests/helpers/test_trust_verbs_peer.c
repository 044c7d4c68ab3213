/*
 * test_trust_verbs_peer.c - see test_trust_verbs_peer.h.
 */
#include "test_trust_verbs_peer.h"

#include <string.h>
#include <unistd.h>

void tv_open(struct tv_side *s)
{
	s->ctx = srn_tc_open(&s->gid);
	s->pd = ibv_alloc_pd(s->ctx);
	CHECK(s->pd);
}

struct ibv_qp *tv_qp_ex(struct tv_side *s, int depth, int cq_depth)
{
	struct ibv_cq *cq = ibv_create_cq(s->ctx, cq_depth, NULL, NULL, 0);
	CHECK(cq);
	struct ibv_qp_init_attr_ex ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = (uint32_t)depth, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = s->pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ |
				  IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_BIND_MW |
				  IBV_QP_EX_WITH_LOCAL_INV,
	};
	struct ibv_qp *qp = ibv_create_qp_ex(s->ctx, &ia);
	CHECK(qp);
	CHECK(ibv_qp_to_qp_ex(qp));
	return qp;
}

struct tv_info {
	union ibv_gid gid;
	uint32_t qpn[TV_MAX_QP];
};

void tv_connect(struct tv_side *s, int fd, struct ibv_qp **qp, int n)
{
	CHECK(n <= TV_MAX_QP);
	struct tv_info me = { .gid = s->gid }, peer;
	for (int i = 0; i < n; i++)
		me.qpn[i] = qp[i]->qp_num;
	srn_tc_xchg(fd, &me, &peer, sizeof(me), 30000);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	for (int i = 0; i < n; i++)
		srn_tc_connect(qp[i], &peer.gid, peer.qpn[i], 0x100 + (uint32_t)i,
			       0x100 + (uint32_t)i, &o);
	srn_tc_barrier(fd, 0x7c, 30000);
}

struct ibv_wc tv_expect(struct ibv_cq *cq, enum ibv_wc_status st, uint64_t wr_id)
{
	struct ibv_wc wc = srn_tc_poll_one(cq, 10);
	if (wc.status != st || wc.wr_id != wr_id)
		fprintf(stderr, "[%s] completion wr_id %llu: %s, wanted wr_id %llu: %s\n",
			srn_tc_role, (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status),
			(unsigned long long)wr_id, ibv_wc_status_str(st));
	CHECK(wc.status == st && wc.wr_id == wr_id);
	return wc;
}

int tv_main(int (*child)(int fd), int (*parent)(int fd))
{
	alarm(90);
	int fd;
	pid_t pid = srn_tc_fork(&fd);
	if (pid == 0) {
		int r = child(fd);
		fflush(NULL);
		_exit(r);
	}
	int rc = parent(fd);
	int crc = srn_tc_wait_child(pid, 30);
	if (rc == 0 && crc == 0)
		printf("ok\n");
	return rc || crc;
}
