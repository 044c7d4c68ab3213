/*
 * test_trust_verbs_dev - two verbs corners of rdma-core's own tests
 * (issue 10, items 14 and 15).
 *
 * Item 14: ibv_create_qp_ex with IBV_QP_INIT_ATTR_CREATE_FLAGS and no
 * flags is an ordinary QP (rxe accepts it; softrnic refused the mask).
 * A flag the verbs API names but softrnic lacks is EOPNOTSUPP, as rxe
 * says for every create flag; a bit no flag names is EINVAL, as uverbs.
 *
 * Item 15: context->cmd_fd was -1, so rdma-core's import tests
 * (os.dup(ctx.cmd_fd), then ibv_import_device) died with EBADF before
 * they could learn that importing is not supported.  Now cmd_fd is a real
 * descriptor of the context: a character device, close-on-exec, that
 * dup() copies; importing it fails with EOPNOTSUPP; ibv_close_device
 * closes it (no descriptor left behind over 100 open/close cycles).  The
 * async_fd beside it is pollable: readable exactly while an event waits.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "rc_test_conn.h"

static struct ibv_device *dev0(void)
{
	static struct ibv_device **list;
	int n;
	if (!list)
		list = ibv_get_device_list(&n);
	CHECK(list && list[0]);
	return list[0];
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	CHECK(d);
	int n = 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static struct ibv_qp *create_ex(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq,
				uint32_t mask, uint32_t flags)
{
	struct ibv_qp_init_attr_ex ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | mask, .pd = pd, .create_flags = flags,
		.send_ops_flags = IBV_QP_EX_WITH_SEND,
	};
	errno = 0;
	return ibv_create_qp_ex(ctx, &ia);
}

static void test_create_flags(struct ibv_context *ctx)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	CHECK(pd && cq);
	struct ibv_qp *qp = create_ex(ctx, pd, cq, IBV_QP_INIT_ATTR_CREATE_FLAGS, 0);
	CHECK(qp);
	CHECK(ibv_destroy_qp(qp) == 0);
	qp = create_ex(ctx, pd, cq, IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		       0);
	CHECK(qp && ibv_qp_to_qp_ex(qp));
	CHECK(ibv_destroy_qp(qp) == 0);
	CHECK(!create_ex(ctx, pd, cq, IBV_QP_INIT_ATTR_CREATE_FLAGS,
			 IBV_QP_CREATE_BLOCK_SELF_MCAST_LB) && errno == EOPNOTSUPP);
	CHECK(!create_ex(ctx, pd, cq, IBV_QP_INIT_ATTR_CREATE_FLAGS,
			 IBV_QP_CREATE_SCATTER_FCS) && errno == EOPNOTSUPP);
	CHECK(!create_ex(ctx, pd, cq, IBV_QP_INIT_ATTR_CREATE_FLAGS, 1u << 30) && errno == EINVAL);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	printf("create_flags: 0 accepted, named flags EOPNOTSUPP, unnamed bits EINVAL\n");
}

/* rdma-core tests/test_device.py (SharedDMTest) and test_shared_pd.py. */
static void test_cmd_fd(void)
{
	struct ibv_context *ctx = ibv_open_device(dev0());
	CHECK(ctx);
	CHECK(ctx->cmd_fd >= 0 && ctx->cmd_fd != ctx->async_fd);
	struct stat st;
	CHECK(fstat(ctx->cmd_fd, &st) == 0 && S_ISCHR(st.st_mode));
	CHECK(fcntl(ctx->cmd_fd, F_GETFD) & FD_CLOEXEC);
	CHECK(fcntl(ctx->async_fd, F_GETFD) & FD_CLOEXEC);
	int dup_fd = dup(ctx->cmd_fd);
	CHECK(dup_fd >= 0);
	errno = 0;
	CHECK(ibv_import_device(dup_fd) == NULL && errno == EOPNOTSUPP);
	CHECK(close(dup_fd) == 0);
	int fd = ctx->cmd_fd;
	CHECK(ibv_close_device(ctx) == 0);
	CHECK(fcntl(fd, F_GETFD) == -1 && errno == EBADF);   /* closed with the context */

	int before = open_fds();
	for (int i = 0; i < 100; i++) {
		ctx = ibv_open_device(dev0());
		CHECK(ctx);
		CHECK(ibv_close_device(ctx) == 0);
	}
	int after = open_fds();
	if (after != before)
		fprintf(stderr, "%d descriptors open before 100 open/close cycles, %d after\n",
			before, after);
	CHECK(after == before);
	printf("cmd_fd: a close-on-exec character device; dup + import = EOPNOTSUPP; "
	       "no descriptor leaked over 100 open/close cycles\n");
}

/* async_fd: poll() says readable exactly while an event is queued.  The
 * event: SQ_DRAINED of an empty RTS QP moved to SQD (connected to itself,
 * no traffic needed). */
static void test_async_fd(struct ibv_context *ctx)
{
	union ibv_gid gid;
	CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	CHECK(pd && cq);
	struct ibv_qp *qp = create_ex(ctx, pd, cq, 0, 0);
	CHECK(qp);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	srn_tc_connect(qp, &gid, qp->qp_num, 0, 0, &o);
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	CHECK(poll(&p, 1, 0) == 0);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_SQD, .en_sqd_async_notify = 1 };
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY) == 0);
	CHECK(poll(&p, 1, 2000) == 1 && (p.revents & POLLIN));
	struct ibv_async_event ev;
	CHECK(ibv_get_async_event(ctx, &ev) == 0);
	CHECK(ev.event_type == IBV_EVENT_SQ_DRAINED && ev.element.qp == qp);
	ibv_ack_async_event(&ev);
	CHECK(poll(&p, 1, 0) == 0);
	CHECK(ibv_destroy_qp(qp) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	printf("async_fd: poll() readable while an event waits, not after it is read\n");
}

/* argv[1]: "create_flags" (item 14) or "fds" (item 15), one ctest each. */
int main(int argc, char **argv)
{
	alarm(60);
	CHECK(argc == 2);
	struct ibv_context *ctx = ibv_open_device(dev0());
	CHECK(ctx);
	if (!strcmp(argv[1], "create_flags")) {
		test_create_flags(ctx);
		CHECK(ibv_close_device(ctx) == 0);
	} else {
		CHECK(!strcmp(argv[1], "fds"));
		test_async_fd(ctx);
		CHECK(ibv_close_device(ctx) == 0);
		test_cmd_fd();
	}
	printf("ok\n");
	return 0;
}
