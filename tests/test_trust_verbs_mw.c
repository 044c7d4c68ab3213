/*
 * test_trust_verbs_mw - memory windows bound the way rdma-core's own
 * tests bind them (tests/test_mr.py, MWTest) work (issue 10, item 12).
 *
 * rdma-core registers the region with LOCAL_WRITE | MW_BIND only and
 * binds its windows with LOCAL_WRITE | REMOTE_WRITE; mlx5 and rxe accept
 * local write in a window's rights (it means nothing for a key that is
 * only ever an rkey), softrnic refused the bind, so every memory-window
 * test of rdma-core failed.
 *
 * Two processes: the child owns a 64 KiB region and binds three windows
 * on its RC QP, each with LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ:
 *   w1  type 1 through ibv_bind_mw
 *   w2  type 2 through ibv_wr_bind_mw (the ibv_wr_* API)
 *   w3  type 2 through ibv_post_send(IBV_WR_BIND_MW), as rdma-core's test
 * The parent RDMA-Writes a pattern through each window and RDMA-Reads it
 * back; the child checks the bytes landed in its region.  Then, as
 * rdma-core's invalidate_mw_type1: the child rebinds w1 with length 0
 * and no rights (succeeds), and a Write through w1 is a remote access
 * error.  As test_qpex.py: a window bound with LOCAL_WRITE alone takes no
 * remote Write; zero-length Write and Read through a window succeed.  A zero-based window is refused (IBV_WC_MW_BIND_ERR): not
 * implemented, as mlx5 refuses it for type 1.
 */
#include <string.h>

#include "test_trust_verbs_peer.h"

#define REGION (64u << 10)
#define WIN 4096u
#define NWIN 3
#define WIN_RIGHTS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

struct windows {
	uint32_t rkey[NWIN];
	uint32_t lw_rkey;              /* LOCAL_WRITE-only window, bound on qps[1] */
	uint64_t addr[NWIN];
};

static uint64_t win_off(int w)
{
	return (uint64_t)w * 2 * WIN + 1024;   /* not page aligned on purpose */
}

static uint8_t pattern(int w, uint32_t i)
{
	return (uint8_t)(w * 59 + i * 13 + 3);
}

/* ---- the window owner ------------------------------------------------- */

static int run_owner(int fd)
{
	struct tv_side s;
	tv_open(&s);
	uint8_t *region = calloc(1, REGION);
	CHECK(region);
	/* As rdma-core's MWRC.create_mr: no remote rights on the region. */
	struct ibv_mr *mr = ibv_reg_mr(s.pd, region, REGION,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	CHECK(mr);
	/* qps[1] carries rdma-core's test_qp_ex_rc_bind_mw (a window with
	 * local write only: a remote Write through it fails), qps[2] the
	 * zero-based bind; each error leaves its QP in ERR. */
	struct ibv_qp *qps[3] = { tv_qp_ex(&s, 16, 16), tv_qp_ex(&s, 16, 16),
				  tv_qp_ex(&s, 16, 16) };
	tv_connect(&s, fd, qps, 3);
	struct ibv_qp *qp = qps[0];
	struct ibv_cq *cq = qp->send_cq;
	struct windows wins;

	struct ibv_mw *w1 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_1);
	CHECK(w1);
	struct ibv_mw_bind b = { .wr_id = 1, .send_flags = IBV_SEND_SIGNALED,
		.bind_info = { .mr = mr, .addr = (uintptr_t)region + win_off(0), .length = WIN,
			       .mw_access_flags = WIN_RIGHTS } };
	CHECK(ibv_bind_mw(qp, w1, &b) == 0);
	struct ibv_wc wc = tv_expect(cq, IBV_WC_SUCCESS, 1);
	CHECK(wc.opcode == IBV_WC_BIND_MW);
	wins.rkey[0] = w1->rkey;

	struct ibv_mw *w2 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
	CHECK(w2);
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);
	struct ibv_mw_bind_info bi = { .mr = mr, .addr = (uintptr_t)region + win_off(1),
				       .length = WIN, .mw_access_flags = WIN_RIGHTS };
	uint32_t k2 = ibv_inc_rkey(w2->rkey);
	ibv_wr_start(x);
	x->wr_id = 2;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(x, w2, k2, &bi);
	CHECK(ibv_wr_complete(x) == 0);
	wc = tv_expect(cq, IBV_WC_SUCCESS, 2);
	CHECK(wc.opcode == IBV_WC_BIND_MW && w2->rkey == k2);
	wins.rkey[1] = k2;

	struct ibv_mw *w3 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
	CHECK(w3);
	struct ibv_send_wr wr = { .wr_id = 3, .opcode = IBV_WR_BIND_MW,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.bind_mw.mw = w3;
	wr.bind_mw.rkey = ibv_inc_rkey(w3->rkey);
	wr.bind_mw.bind_info = bi;
	wr.bind_mw.bind_info.addr = (uintptr_t)region + win_off(2);
	CHECK(ibv_post_send(qp, &wr, &bad) == 0);
	tv_expect(cq, IBV_WC_SUCCESS, 3);
	wins.rkey[2] = wr.bind_mw.rkey;
	struct ibv_mw *w5 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
	CHECK(w5);
	struct ibv_qp_ex *x1 = ibv_qp_to_qp_ex(qps[1]);
	struct ibv_mw_bind_info lw = { .mr = mr, .addr = (uintptr_t)region, .length = REGION,
				       .mw_access_flags = IBV_ACCESS_LOCAL_WRITE };
	wins.lw_rkey = ibv_inc_rkey(w5->rkey);
	ibv_wr_start(x1);
	x1->wr_id = 6;
	x1->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(x1, w5, wins.lw_rkey, &lw);
	CHECK(ibv_wr_complete(x1) == 0);
	tv_expect(qps[1]->send_cq, IBV_WC_SUCCESS, 6);
	for (int w = 0; w < NWIN; w++)
		wins.addr[w] = (uintptr_t)region + win_off(w);
	srn_tc_send(fd, &wins, sizeof(wins));

	srn_tc_barrier(fd, 0xe1, 30000);          /* the peer wrote and read back */
	for (int w = 0; w < NWIN; w++)
		for (uint32_t i = 0; i < WIN; i++)
			CHECK(region[win_off(w) + i] == pattern(w, i));
	for (uint32_t i = 0; i < win_off(0); i++)
		CHECK(region[i] == 0);            /* nothing before the first window */

	/* Zero-based windows are not implemented: refused, not mistranslated. */
	struct ibv_mw *w4 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
	CHECK(w4);
	wr.bind_mw.bind_info = bi;
	wr.wr_id = 5;
	wr.bind_mw.mw = w4;
	wr.bind_mw.rkey = ibv_inc_rkey(w4->rkey);
	wr.bind_mw.bind_info.mw_access_flags = WIN_RIGHTS | IBV_ACCESS_ZERO_BASED;
	CHECK(ibv_post_send(qps[2], &wr, &bad) == 0);
	tv_expect(qps[2]->send_cq, IBV_WC_MW_BIND_ERR, 5);
	/* rdma-core's invalidate_mw_type1: rebind with zero length. */
	b = (struct ibv_mw_bind){ .wr_id = 4, .send_flags = IBV_SEND_SIGNALED,
		.bind_info = { .mr = mr, .addr = (uintptr_t)region, .length = 0,
			       .mw_access_flags = 0 } };
	CHECK(ibv_bind_mw(qp, w1, &b) == 0);
	tv_expect(cq, IBV_WC_SUCCESS, 4);
	srn_tc_barrier(fd, 0xe2, 30000);
	srn_tc_barrier(fd, 0xe3, 30000);          /* the peer saw its access error */

	printf("[child] 3 windows bound with LOCAL_WRITE in their rights, data checked\n");
	return 0;
}

/* ---- the peer --------------------------------------------------------- */

static void rdma(struct ibv_qp *qp, enum ibv_wr_opcode op, struct ibv_mr *mr, uint8_t *buf,
		 uint32_t rkey, uint64_t addr, uint64_t id, enum ibv_wc_status want)
{
	struct ibv_sge sg = { (uintptr_t)buf, WIN, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sg, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.wr.rdma.rkey = rkey;
	wr.wr.rdma.remote_addr = addr;
	CHECK(ibv_post_send(qp, &wr, &bad) == 0);
	tv_expect(qp->send_cq, want, id);
}

static int run_peer(int fd)
{
	struct tv_side s;
	tv_open(&s);
	uint8_t *buf = calloc(2, WIN);
	CHECK(buf);
	struct ibv_mr *mr = ibv_reg_mr(s.pd, buf, 2 * WIN, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	struct ibv_qp *qps[3] = { tv_qp_ex(&s, 16, 16), tv_qp_ex(&s, 16, 16),
				  tv_qp_ex(&s, 16, 16) };
	tv_connect(&s, fd, qps, 3);
	struct ibv_qp *qp = qps[0];
	struct windows wins;
	srn_tc_recv(fd, &wins, sizeof(wins), 30000);
	/* rdma-core test_qp_ex_rc_bind_mw: no remote rights, no remote Write. */
	rdma(qps[1], IBV_WR_RDMA_WRITE, mr, buf, wins.lw_rkey, wins.addr[0], 40,
	     IBV_WC_REM_ACCESS_ERR);
	/* rdma-core test_qp_ex_rc_rdma_{write,read}_zero_size, through a window. */
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);
	ibv_wr_start(x);
	x->wr_id = 41;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, wins.rkey[0], wins.addr[0]);
	ibv_wr_set_sge(x, mr->lkey, (uintptr_t)buf, 0);
	x->wr_id = 42;
	ibv_wr_rdma_read(x, wins.rkey[0], wins.addr[0]);
	ibv_wr_set_sge(x, mr->lkey, (uintptr_t)buf, 0);
	CHECK(ibv_wr_complete(x) == 0);
	tv_expect(qp->send_cq, IBV_WC_SUCCESS, 41);
	tv_expect(qp->send_cq, IBV_WC_SUCCESS, 42);
	for (int w = 0; w < NWIN; w++) {
		for (uint32_t i = 0; i < WIN; i++)
			buf[i] = pattern(w, i);
		rdma(qp, IBV_WR_RDMA_WRITE, mr, buf, wins.rkey[w], wins.addr[w], 10 + w,
		     IBV_WC_SUCCESS);
		memset(buf + WIN, 0, WIN);
		rdma(qp, IBV_WR_RDMA_READ, mr, buf + WIN, wins.rkey[w], wins.addr[w], 20 + w,
		     IBV_WC_SUCCESS);
		CHECK(memcmp(buf, buf + WIN, WIN) == 0);
	}
	printf("[parent] wrote and read back through type 1, wr_bind_mw and post_send windows\n");
	srn_tc_barrier(fd, 0xe1, 30000);
	srn_tc_barrier(fd, 0xe2, 30000);          /* w1 rebound with length 0 */
	rdma(qp, IBV_WR_RDMA_WRITE, mr, buf, wins.rkey[0], wins.addr[0], 30,
	     IBV_WC_REM_ACCESS_ERR);
	srn_tc_barrier(fd, 0xe3, 30000);
	return 0;
}

int main(void)
{
	return tv_main(run_owner, run_peer);
}
