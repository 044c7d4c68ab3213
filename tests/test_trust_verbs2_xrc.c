/*
 * test_trust_verbs2_xrc - an XRC receive QP has no send queue, so it gets
 * no ibv_wr_* table (issue 10, item 11, second review).
 *
 * ibv_create_qp_ex used to accept send_ops_flags for IBV_QPT_XRC_RECV;
 * ibv_wr_complete on such a QP in RTS then queued a send with no CQ to
 * complete it into, and the progress thread died of SIGSEGV flushing it.
 * rdma-core's rxe and mlx5 refuse send_ops_flags on an XRC receive QP
 * with EOPNOTSUPP (whatever the flags), which is what is checked here;
 * should a build create one anyway, the batch is driven as the reviewer
 * did and must be refused without killing the process.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "test_trust_verbs_peer.h"

static void to_rts(struct tv_side *s, struct ibv_qp *q)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	CHECK(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			    IBV_QP_ACCESS_FLAGS) == 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = q->qp_num;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = s->gid;
	a.ah_attr.port_num = 1;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	CHECK(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			    IBV_QP_MIN_RNR_TIMER) == 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	CHECK(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT) == 0);
}

/* A QP that should not exist: a send batch on it must be refused and
 * must not take the process down (the old build died here). */
static void drive_batch(struct tv_side *s, struct ibv_qp *q)
{
	to_rts(s, q);
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(q);
	CHECK(x);
	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, 0, 0, 0);
	int r = ibv_wr_complete(x);
	fprintf(stderr, "ibv_wr_complete on an XRC receive QP: %d\n", r);
	usleep(500000);                 /* the progress thread flushes meanwhile */
	CHECK(r != 0);
}

int main(void)
{
	alarm(60);
	struct tv_side s;
	tv_open(&s);
	struct ibv_xrcd_init_attr xa = { .comp_mask = IBV_XRCD_INIT_ATTR_FD |
						      IBV_XRCD_INIT_ATTR_OFLAGS,
					 .fd = -1, .oflags = O_CREAT };
	struct ibv_xrcd *xrcd = ibv_open_xrcd(s.ctx, &xa);
	CHECK(xrcd);

	const uint64_t flag_sets[] = { IBV_QP_EX_WITH_SEND, IBV_QP_EX_WITH_RDMA_WRITE, 0 };
	for (size_t i = 0; i < sizeof(flag_sets) / sizeof(flag_sets[0]); i++) {
		struct ibv_qp_init_attr_ex ia = {
			.qp_type = IBV_QPT_XRC_RECV,
			.comp_mask = IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
			.xrcd = xrcd,
			.send_ops_flags = flag_sets[i],
		};
		errno = 0;
		struct ibv_qp *q = ibv_create_qp_ex(s.ctx, &ia);
		if (q) {
			fprintf(stderr, "XRC receive QP created with send_ops_flags %#llx\n",
				(unsigned long long)flag_sets[i]);
			drive_batch(&s, q);
			return 1;
		}
		if (errno != EOPNOTSUPP) {
			fprintf(stderr, "send_ops_flags %#llx on an XRC receive QP: errno %d, "
				"wanted EOPNOTSUPP\n", (unsigned long long)flag_sets[i], errno);
			return 1;
		}
	}

	/* Without send_ops_flags it is created, has no ibv_wr_* table, and
	 * its (absent) send queue refuses a post in RTS. */
	struct ibv_qp_init_attr_ex ia = { .qp_type = IBV_QPT_XRC_RECV,
					  .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = xrcd };
	struct ibv_qp *q = ibv_create_qp_ex(s.ctx, &ia);
	CHECK(q);
	CHECK(ibv_qp_to_qp_ex(q) == NULL);
	to_rts(&s, q);
	struct ibv_send_wr wr = { .opcode = IBV_WR_SEND }, *bad = NULL;
	CHECK(ibv_post_send(q, &wr, &bad) == EINVAL && bad == &wr);
	CHECK(ibv_destroy_qp(q) == 0);
	CHECK(ibv_close_xrcd(xrcd) == 0);
	printf("ok\n");
	return 0;
}
