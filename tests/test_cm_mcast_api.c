/*
 * test_cm_mcast_api - rdma_join_multicast, rdma_join_multicast_ex and
 * rdma_leave_multicast of our librdmacm, on the zero-configuration device
 * (loopback), one process with two ids:
 *
 *   a. misuse answers as librdmacm/the kernel do: a TCP id, an unbound
 *      id, a unicast or wrong-family address, bad join_ex masks and flags
 *      (EINVAL / ENOTSUP), leaving a group never joined (EADDRNOTAVAIL);
 *   b. the receiver joins 239.x before it has a QP: MULTICAST_JOIN with
 *      its context, QPN 0xFFFFFF, RDMA_UDP_QKEY and an ah_attr to
 *      ::ffff:239.x; the QP created afterwards is a member;
 *   c. the sender joins send-only (join_ex) after creating its QP, makes
 *      an AH from its event and sends 8 datagrams to the group: all reach
 *      the receiver's QP, from the sender's QPN, with their payload;
 *   d. leave: 0, then EADDRNOTAVAIL the second time;
 *   e. a synchronous id (no channel): the join returns with id->event the
 *      MULTICAST_JOIN it waited for.
 * Every wait is bounded (alarm, and a deadline on polling).  Exit 0 pass,
 * 1 fail, 77 skip (no device).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include "check.h"
#include "diag/clock.h"

#define NMSG 8
#define MSG 64
#define GRH 40

static struct sockaddr_in dev_addr(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int n = 0;
	struct ibv_context **devs = rdma_get_devices(&n);
	union ibv_gid gid;
	if (!devs || n < 1 || ibv_query_gid(devs[0], 1, 0, &gid)) {
		printf("SKIP: no device\n");
		exit(77);
	}
	memcpy(&a.sin_addr, gid.raw + 12, 4);
	rdma_free_devices(devs);
	return a;
}

static struct rdma_cm_event *get_event(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;
	if (rdma_get_cm_event(ch, &ev)) {
		CHECK(0, "rdma_get_cm_event: %s", strerror(errno));
		return NULL;
	}
	CHECK(ev->event == want, "event %s, wanted %s", rdma_event_str(ev->event), rdma_event_str(want));
	return ev;
}

static struct rdma_cm_id *bound_id(struct rdma_event_channel *ch, enum rdma_port_space ps, void *ctx)
{
	struct rdma_cm_id *id;
	struct sockaddr_in a = dev_addr();
	if (rdma_create_id(ch, &id, ctx, ps) || rdma_bind_addr(id, (struct sockaddr *)&a)) {
		printf("FAIL: create/bind: %s\n", strerror(errno));
		exit(1);
	}
	return id;
}

static void misuse(struct rdma_event_channel *ch, struct sockaddr_in *grp)
{
	struct rdma_cm_id *tcp = bound_id(ch, RDMA_PS_TCP, NULL), *idle, *ud = bound_id(ch, RDMA_PS_UDP, NULL);
	CHECK(rdma_join_multicast(tcp, (struct sockaddr *)grp, NULL) == -1 && errno == EINVAL, "TCP id joined");
	CHECK(rdma_create_id(ch, &idle, NULL, RDMA_PS_UDP) == 0, "create");
	CHECK(rdma_join_multicast(idle, (struct sockaddr *)grp, NULL) == -1 && errno == EINVAL, "unbound id joined");
	struct sockaddr_in uni = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x0a010203) };
	CHECK(rdma_join_multicast(ud, (struct sockaddr *)&uni, NULL) == -1 && errno == EINVAL, "unicast joined");
	struct sockaddr_in6 v6 = { .sin6_family = AF_INET6 };
	inet_pton(AF_INET6, "ff0e::77", &v6.sin6_addr);
	CHECK(rdma_join_multicast(ud, (struct sockaddr *)&v6, NULL) == -1 && errno == EINVAL,
	      "IPv6 group on an IPv4 device joined");
	struct rdma_cm_join_mc_attr_ex x = { .comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS, .addr = (struct sockaddr *)grp };
	CHECK(rdma_join_multicast_ex(ud, &x, NULL) == -1 && errno == EINVAL, "join_ex without flags");
	x.comp_mask = RDMA_CM_JOIN_MC_ATTR_RESERVED;
	CHECK(rdma_join_multicast_ex(ud, &x, NULL) == -1 && errno == ENOTSUP, "join_ex reserved mask");
	x.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	x.join_flags = RDMA_MC_JOIN_FLAG_RESERVED;
	CHECK(rdma_join_multicast_ex(ud, &x, NULL) == -1 && errno == EINVAL, "join_ex reserved flag");
	CHECK(rdma_leave_multicast(ud, (struct sockaddr *)grp) == -1 && errno == EADDRNOTAVAIL, "left unjoined");
	rdma_destroy_id(tcp);
	rdma_destroy_id(idle);
	rdma_destroy_id(ud);
}

static struct ibv_qp_init_attr qp_attr(struct ibv_cq *cq)
{
	return (struct ibv_qp_init_attr){ .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = NMSG, .max_recv_wr = NMSG, .max_send_sge = 1, .max_recv_sge = 1 } };
}

int main(void)
{
	alarm(60);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	if (!ch) {
		printf("SKIP: no rdma_cm: %s\n", strerror(errno));
		return 77;
	}
	struct sockaddr_in grp = { .sin_family = AF_INET };
	srand((unsigned)getpid());
	grp.sin_addr.s_addr = htonl(0xef4d0000u | (unsigned)(rand() & 0xffff));   /* 239.77.x.y */
	misuse(ch, &grp);

	/* b: receiver joins first, creates its QP after the event. */
	int ctx1 = 1, ctx2 = 2;
	struct rdma_cm_id *rx = bound_id(ch, RDMA_PS_UDP, NULL), *tx = bound_id(ch, RDMA_PS_UDP, NULL);
	CHECK(rdma_join_multicast(rx, (struct sockaddr *)&grp, &ctx1) == 0, "join: %s", strerror(errno));
	struct rdma_cm_event *ev = get_event(ch, RDMA_CM_EVENT_MULTICAST_JOIN);
	if (!ev)
		return 1;
	uint8_t mgid[16] = { [10] = 0xff, [11] = 0xff };
	memcpy(mgid + 12, &grp.sin_addr, 4);
	CHECK(ev->id == rx && ev->status == 0 && ev->param.ud.private_data == &ctx1, "join event id/context");
	CHECK(ev->param.ud.qp_num == 0xffffff && ev->param.ud.qkey == RDMA_UDP_QKEY, "qpn %#x qkey %#x",
	      ev->param.ud.qp_num, ev->param.ud.qkey);
	CHECK(ev->param.ud.ah_attr.is_global && memcmp(ev->param.ud.ah_attr.grh.dgid.raw, mgid, 16) == 0,
	      "ah_attr to the MGID");
	rdma_ack_cm_event(ev);
	struct ibv_pd *pd = ibv_alloc_pd(rx->verbs);
	struct ibv_cq *rcq = ibv_create_cq(rx->verbs, 2 * NMSG, NULL, NULL, 0);
	struct ibv_cq *scq = ibv_create_cq(tx->verbs, 2 * NMSG, NULL, NULL, 0);
	static uint8_t rbuf[NMSG][GRH + MSG], sbuf[MSG];
	struct ibv_mr *rmr = ibv_reg_mr(pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *smr = ibv_reg_mr(pd, sbuf, sizeof(sbuf), 0);
	struct ibv_qp_init_attr qa = qp_attr(rcq);
	CHECK(pd && rcq && scq && rmr && smr && rdma_create_qp(rx, pd, &qa) == 0, "receiver QP");
	for (int i = 0; i < NMSG; i++) {
		struct ibv_sge sge = { (uintptr_t)rbuf[i], GRH + MSG, rmr->lkey };
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1 }, *bad;
		CHECK(ibv_post_recv(rx->qp, &wr, &bad) == 0, "post_recv");
	}

	/* c: sender has its QP first, joins send-only. */
	qa = qp_attr(scq);
	CHECK(rdma_create_qp(tx, pd, &qa) == 0, "sender QP");
	struct rdma_cm_join_mc_attr_ex x = { .comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
					     .addr = (struct sockaddr *)&grp,
					     .join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER };
	CHECK(rdma_join_multicast_ex(tx, &x, &ctx2) == 0, "join_ex: %s", strerror(errno));
	ev = get_event(ch, RDMA_CM_EVENT_MULTICAST_JOIN);
	if (!ev)
		return 1;
	CHECK(ev->id == tx && ev->param.ud.private_data == &ctx2, "send-only event");
	struct ibv_ah *ah = ibv_create_ah(pd, &ev->param.ud.ah_attr);
	uint32_t qpn = ev->param.ud.qp_num, qkey = ev->param.ud.qkey;
	rdma_ack_cm_event(ev);
	CHECK(ah != NULL, "AH from the join event");
	for (int i = 0; ah && i < NMSG; i++) {
		memset(sbuf, 0xa0 + i, sizeof(sbuf));
		struct ibv_sge sge = { (uintptr_t)sbuf, MSG, smr->lkey };
		struct ibv_send_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = qpn;
		wr.wr.ud.remote_qkey = qkey;
		CHECK(ibv_post_send(tx->qp, &wr, &bad) == 0, "post_send %d", i);
		struct ibv_wc wc;
		int n = 0;
		for (double end = (srn_now_ns() / 1e9) + 10; n == 0 && (srn_now_ns() / 1e9) < end;)
			n = ibv_poll_cq(scq, 1, &wc);   /* one in flight: the payload buffer is reused */
		CHECK(n == 1 && wc.status == IBV_WC_SUCCESS, "send completion %d", i);
	}
	int got = 0;
	for (double end = (srn_now_ns() / 1e9) + 20; got < NMSG && (srn_now_ns() / 1e9) < end;) {
		struct ibv_wc wc;
		if (ibv_poll_cq(rcq, 1, &wc) != 1)
			continue;
		CHECK(wc.status == IBV_WC_SUCCESS && wc.byte_len == GRH + MSG && wc.src_qp == tx->qp->qp_num,
		      "receive: status %d len %u src_qp %#x", wc.status, wc.byte_len, wc.src_qp);
		CHECK(rbuf[wc.wr_id][GRH] >= 0xa0 && rbuf[wc.wr_id][GRH] < 0xa0 + NMSG, "payload");
		got++;
	}
	CHECK(got == NMSG, "the receiver got %d of %d datagrams", got, NMSG);

	/* d: leave. */
	CHECK(rdma_leave_multicast(rx, (struct sockaddr *)&grp) == 0, "leave: %s", strerror(errno));
	CHECK(rdma_leave_multicast(rx, (struct sockaddr *)&grp) == -1 && errno == EADDRNOTAVAIL, "leave twice");
	CHECK(rdma_leave_multicast(tx, (struct sockaddr *)&grp) == 0, "leave send-only");

	/* e: synchronous id. */
	struct rdma_cm_id *sync = bound_id(NULL, RDMA_PS_UDP, NULL);
	CHECK(rdma_join_multicast(sync, (struct sockaddr *)&grp, &ctx1) == 0, "sync join: %s", strerror(errno));
	CHECK(sync->event && sync->event->event == RDMA_CM_EVENT_MULTICAST_JOIN &&
	      sync->event->param.ud.private_data == &ctx1, "sync join holds its event");
	rdma_destroy_id(sync);

	ibv_destroy_ah(ah);
	rdma_destroy_qp(rx);
	rdma_destroy_qp(tx);
	ibv_destroy_cq(rcq);
	ibv_destroy_cq(scq);
	ibv_dereg_mr(rmr);
	ibv_dereg_mr(smr);
	ibv_dealloc_pd(pd);
	rdma_destroy_id(rx);
	rdma_destroy_id(tx);
	rdma_destroy_event_channel(ch);
	if (srn_check_failures)
		return 1;
	printf("ok\n");
	return 0;
}
