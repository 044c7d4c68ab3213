/*
 * test_async_events - an async event never outlives the object it names.
 *
 * uverbs withdraws a destroyed QP's unread events and makes destroy wait
 * until every event already read has been acknowledged; rdma-core's
 * ibv_destroy_qp blocks on that.  UCX relies on it: its async thread
 * reads event->element.qp->qp_num to find the waiter, so an event read
 * after its QP was freed reads freed memory (a ucx_perftest crash here,
 * in the async thread handling IBV_EVENT_QP_LAST_WQE_REACHED).
 *
 * The events: LAST_WQE_REACHED, which a QP on an SRQ raises when it
 * enters Error (INIT -> ERR is enough; no peer needed).
 *   withdrawn  two QPs in Error, one destroyed unread: only the other's
 *              event is read, then the queue is empty; a lone QP's
 *              event withdrawn leaves async_fd not readable (poll, then
 *              a blocking ibv_get_async_event, must not sleep).
 *   held       an event read but not acknowledged holds the QP's destroy
 *              (another thread) until the acknowledgement; a second
 *              acknowledgement of the same event changes nothing.
 *   kinds      a CQ's CQ_ERR (overflow) and an SRQ's SRQ_LIMIT_REACHED,
 *              raised by two Sends of an RC QP connected to itself into
 *              a receive CQ of depth 1 and an SRQ armed at 3 of 4: read
 *              once to see they come, then raised again and withdrawn by
 *              destroying their CQ and SRQ unread.
 */
#define _GNU_SOURCE            /* gettid */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "rc_test_conn.h"   /* CHECK (fatal), srn_tc_connect */

struct objs {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
};

static struct objs open_objs(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n > 0);
	struct objs o = { .ctx = ibv_open_device(list[0]) };
	ibv_free_device_list(list);
	CHECK(o.ctx);
	o.pd = ibv_alloc_pd(o.ctx);
	o.cq = ibv_create_cq(o.ctx, 16, NULL, NULL, 0);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
	o.srq = o.pd ? ibv_create_srq(o.pd, &sa) : NULL;
	CHECK(o.pd && o.cq && o.srq);
	int fl = fcntl(o.ctx->async_fd, F_GETFL);
	CHECK(fcntl(o.ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0);
	return o;
}

static void close_objs(struct objs *o)
{
	CHECK(ibv_destroy_srq(o->srq) == 0);
	CHECK(ibv_destroy_cq(o->cq) == 0);
	CHECK(ibv_dealloc_pd(o->pd) == 0);
	CHECK(ibv_close_device(o->ctx) == 0);
}

/* A QP on the SRQ, moved INIT -> ERR: one LAST_WQE_REACHED queued. */
static struct ibv_qp *qp_in_error(struct objs *o)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = o->cq, .recv_cq = o->cq, .srq = o->srq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_send_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(o->pd, &ia);
	CHECK(qp);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			    IBV_QP_ACCESS_FLAGS) == 0);
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_ERR };
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0);
	return qp;
}

static void test_withdrawn(void)
{
	struct objs o = open_objs();
	struct ibv_qp *gone = qp_in_error(&o), *stays = qp_in_error(&o);
	CHECK(ibv_destroy_qp(gone) == 0);
	struct ibv_async_event ev;
	CHECK(ibv_get_async_event(o.ctx, &ev) == 0);
	CHECK(ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED && ev.element.qp == stays,
	      "read event %d for %p, want LAST_WQE_REACHED for %p", ev.event_type,
	      (void *)ev.element.qp, (void *)stays);
	ibv_ack_async_event(&ev);
	errno = 0;
	CHECK(ibv_get_async_event(o.ctx, &ev) == -1 && errno == EAGAIN,
	      "a second event was read: the destroyed QP's");
	CHECK(ibv_destroy_qp(stays) == 0);

	struct ibv_qp *lone = qp_in_error(&o);
	struct pollfd p = { .fd = o.ctx->async_fd, .events = POLLIN };
	CHECK(poll(&p, 1, 0) == 1, "async_fd not readable with an event queued");
	CHECK(ibv_destroy_qp(lone) == 0);
	CHECK(poll(&p, 1, 0) == 0, "async_fd readable after its only event was withdrawn");
	close_objs(&o);
	printf("withdrawn: a destroyed QP's unread event is never read, nor left readable\n");
}

struct destroyer {
	struct ibv_qp *qp;
	int ret;
	atomic_int tid;
	atomic_bool done;
};

static void *destroy_thread(void *arg)
{
	struct destroyer *d = arg;
	atomic_store(&d->tid, (int)gettid());
	d->ret = ibv_destroy_qp(d->qp);
	atomic_store(&d->done, true);
	return NULL;
}

/* The destroying thread is asleep (state S in /proc), or done. */
static bool asleep(struct destroyer *d)
{
	int tid = atomic_load(&d->tid);
	if (!tid)
		return false;
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return atomic_load(&d->done);
	bool s = false;
	if (fgets(buf, sizeof(buf), f)) {
		const char *c = strrchr(buf, ')');
		s = c && c[1] == ' ' && c[2] == 'S';
	}
	fclose(f);
	return s;
}

static void test_held(void)
{
	struct objs o = open_objs();
	struct destroyer d = { .qp = qp_in_error(&o) };
	struct ibv_async_event ev;
	CHECK(ibv_get_async_event(o.ctx, &ev) == 0 && ev.element.qp == d.qp);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, destroy_thread, &d) == 0);
	/* Waiting cannot end early, however loaded the machine: only the
	 * acknowledgement below lets the destroy return.  Look once the
	 * thread sleeps (bounded), so the check is not passed by a thread
	 * that did not get that far yet. */
	for (int i = 0; i < 500 && !asleep(&d); i++)
		usleep(10 * 1000);
	usleep(50 * 1000);
	CHECK(asleep(&d), "the destroying thread never went to sleep");
	CHECK(!atomic_load(&d.done), "ibv_destroy_qp returned with its event unacknowledged");
	ibv_ack_async_event(&ev);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(atomic_load(&d.done) && d.ret == 0);

	/* Acknowledged twice: the destroy still has nothing to wait for. */
	struct ibv_qp *qp = qp_in_error(&o);
	CHECK(ibv_get_async_event(o.ctx, &ev) == 0 && ev.element.qp == qp);
	ibv_ack_async_event(&ev);
	ibv_ack_async_event(&ev);
	CHECK(ibv_destroy_qp(qp) == 0);
	close_objs(&o);
	printf("held: destroy waited for the acknowledgement, and only for it\n");
}

/* A self-connected RC QP on an SRQ armed at 3 of 4 receives, receiving
 * into a CQ of depth 1 that nobody polls: the second Send takes the SRQ
 * below its limit (SRQ_LIMIT_REACHED) and overflows that CQ (CQ_ERR).
 * Both happen before the responder acknowledges the Send, so once both
 * sends completed, both events are queued.  The QP is destroyed then. */
static void raise_cq_and_srq_events(struct objs *o, struct ibv_cq **rcq)
{
	union ibv_gid gid;
	CHECK(ibv_query_gid(o->ctx, 1, 0, &gid) == 0);
	*rcq = ibv_create_cq(o->ctx, 1, NULL, NULL, 0);
	CHECK(*rcq);
	struct ibv_qp_init_attr ia = {
		.send_cq = o->cq, .recv_cq = *rcq, .srq = o->srq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_send_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(o->pd, &ia);
	CHECK(qp);
	struct srn_tc_qp_opts opts = srn_tc_default_opts();
	srn_tc_connect(qp, &gid, qp->qp_num, 0, 0, &opts);
	static char buf[64];
	struct ibv_mr *mr = ibv_reg_mr(o->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	for (int i = 0; i < 4; i++) {
		struct ibv_sge sg = { (uintptr_t)buf, 8, mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sg, .num_sge = 1 }, *bad;
		CHECK(ibv_post_srq_recv(o->srq, &wr, &bad) == 0);
	}
	struct ibv_srq_attr lim = { .srq_limit = 3 };
	CHECK(ibv_modify_srq(o->srq, &lim, IBV_SRQ_LIMIT) == 0);
	for (int i = 0; i < 2; i++) {
		struct ibv_sge sg = { (uintptr_t)buf + 32, 8, mr->lkey };
		struct ibv_send_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sg, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
				   *bad;
		CHECK(ibv_post_send(qp, &wr, &bad) == 0);
		struct ibv_wc w = srn_tc_poll_one(o->cq, 10);
		CHECK(w.status == IBV_WC_SUCCESS && w.opcode == IBV_WC_SEND);
	}
	CHECK(ibv_destroy_qp(qp) == 0);
	CHECK(ibv_dereg_mr(mr) == 0);
}

static void test_kinds(void)
{
	/* First round: the events come, and name their objects. */
	struct objs o = open_objs();
	struct ibv_cq *rcq;
	raise_cq_and_srq_events(&o, &rcq);
	bool cq_err = false, srq_limit = false;
	struct ibv_async_event ev;
	while (ibv_get_async_event(o.ctx, &ev) == 0) {
		cq_err |= ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == rcq;
		srq_limit |= ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == o.srq;
		ibv_ack_async_event(&ev);
	}
	CHECK(errno == EAGAIN);
	CHECK(cq_err && srq_limit, "CQ_ERR %d, SRQ_LIMIT_REACHED %d", cq_err, srq_limit);
	CHECK(ibv_destroy_cq(rcq) == 0);
	close_objs(&o);

	/* Second round, the same steps: destroyed unread, neither is read,
	 * and async_fd is not left readable. */
	o = open_objs();
	raise_cq_and_srq_events(&o, &rcq);
	struct pollfd p = { .fd = o.ctx->async_fd, .events = POLLIN };
	CHECK(poll(&p, 1, 0) == 1, "no event queued");
	CHECK(ibv_destroy_cq(rcq) == 0);
	CHECK(ibv_destroy_srq(o.srq) == 0);
	CHECK(poll(&p, 1, 0) == 0, "async_fd readable after its events were withdrawn");
	errno = 0;
	int r = ibv_get_async_event(o.ctx, &ev);
	CHECK(r == -1 && errno == EAGAIN, "read event %d of a destroyed object", ev.event_type);
	CHECK(ibv_destroy_cq(o.cq) == 0);
	CHECK(ibv_dealloc_pd(o.pd) == 0);
	CHECK(ibv_close_device(o.ctx) == 0);
	printf("kinds: a destroyed CQ's CQ_ERR and SRQ's SRQ_LIMIT_REACHED are never read\n");
}

int main(int argc, char **argv)
{
	alarm(60);
	CHECK(argc == 2);
	if (!strcmp(argv[1], "withdrawn"))
		test_withdrawn();
	else if (!strcmp(argv[1], "held"))
		test_held();
	else if (!strcmp(argv[1], "kinds"))
		test_kinds();
	else
		CHECK(0, "unknown mode %s", argv[1]);
	return srn_check_result();
}
