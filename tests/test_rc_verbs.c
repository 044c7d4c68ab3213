/*
 * test_rc_verbs - RC Send/Receive and RDMA Write through the public verbs
 * API, two QPs of one process connected to each other over the loopback
 * device (real UDP packets through the kernel).  Checks every completion
 * field, data integrity across segmentation, inline and unsignaled sends,
 * completion events driven by the progress thread, and the error
 * semantics (bad lkey, bad rkey, receive buffer too small, flush on
 * error, RNR wait and RNR/transport retry exhaustion), RDMA Read and
 * atomics.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <infiniband/verbs.h>

#include "hang_dump.h"
#include "rc_test_conn.h"
#include "diag/clock.h"

#define BUF (1 << 20)

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_comp_channel *chan;
static struct ibv_cq *cq_a, *cq_b;
static struct ibv_qp *qa, *qb;
static struct ibv_mr *mr_a, *mr_b;
static uint8_t *buf_a, *buf_b;
static union ibv_gid gid;

static struct ibv_qp *make_qp(struct ibv_cq *cq, int sig_all)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .sq_sig_all = sig_all,
		.cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 4, .max_recv_sge = 4,
			 .max_inline_data = 64 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	CHECK(qp);
	CHECK(ia.cap.max_inline_data >= 64);
	return qp;
}

static int conn_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
static uint8_t conn_timeout = 14, conn_retry = 7, conn_rnr_retry = 7, conn_min_rnr = 12;

static void connect_qp(struct ibv_qp *qp, uint32_t dest, uint32_t psn, enum ibv_mtu mtu)
{
	struct srn_tc_qp_opts o = {
		.mtu = mtu, .timeout = conn_timeout, .retry_cnt = conn_retry,
		.rnr_retry = conn_rnr_retry, .min_rnr_timer = conn_min_rnr, .rd_atomic = 4,
		.access = conn_access,
	};
	srn_tc_connect(qp, &gid, dest, psn, psn, &o);
}

static void setup(enum ibv_mtu mtu, uint32_t psn)
{
	qa = make_qp(cq_a, 0);
	qb = make_qp(cq_b, 0);
	connect_qp(qa, qb->qp_num, psn, mtu);
	connect_qp(qb, qa->qp_num, psn, mtu);
}

static void teardown(void)
{
	CHECK(ibv_destroy_qp(qa) == 0);
	CHECK(ibv_destroy_qp(qb) == 0);
	struct ibv_wc wc;
	while (ibv_poll_cq(cq_a, 1, &wc) > 0) ;
	while (ibv_poll_cq(cq_b, 1, &wc) > 0) ;
}

/* Poll until one completion arrives (bounded: 10 s). */
static struct ibv_wc poll_one(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	uint64_t end = srn_now_ns() + 10000000000ull;
	for (;;) {
		int n = ibv_poll_cq(cq, 1, &wc);
		CHECK(n >= 0);
		if (n == 1)
			return wc;
		CHECK(srn_now_ns() < end);
	}
}

static void post_recv(struct ibv_qp *qp, uint64_t id, uint8_t *p, uint32_t len, struct ibv_mr *mr)
{
	struct ibv_sge s = { (uintptr_t)p, len, mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &s, .num_sge = 1 }, *bad;
	CHECK(ibv_post_recv(qp, &wr, &bad) == 0);
}

static void fill(uint8_t *p, uint32_t len, uint32_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
}

/* Sends of many sizes, split over three SGEs, with and without
 * immediate, checked byte for byte and field by field. */
static void test_send_sizes(enum ibv_mtu mtu, uint32_t psn)
{
	static const uint32_t sizes[] = { 0, 1, 3, 255, 256, 257, 1023, 1024, 1025, 4096, 4097,
					  65536, 100000, 1 << 20 };
	setup(mtu, psn);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t len = sizes[i];
		int imm = i & 1;
		memset(buf_b, 0xee, BUF + 64);
		fill(buf_a, len, i);
		post_recv(qb, 1000 + i, buf_b, BUF, mr_b);
		uint32_t l1 = len / 3, l2 = len / 3, l3 = len - l1 - l2;
		struct ibv_sge s[3] = { { (uintptr_t)buf_a, l1, mr_a->lkey },
					{ (uintptr_t)buf_a + l1, l2, mr_a->lkey },
					{ (uintptr_t)buf_a + l1 + l2, l3, mr_a->lkey } };
		struct ibv_send_wr wr = { .wr_id = 2000 + i, .sg_list = s, .num_sge = 3,
					  .opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED,
					  .imm_data = htobe32(0xabc00000 + i) }, *bad;
		CHECK(ibv_post_send(qa, &wr, &bad) == 0);
		struct ibv_wc w = poll_one(cq_b);
		CHECK(w.status == IBV_WC_SUCCESS);
		CHECK(w.wr_id == 1000 + i);
		CHECK(w.opcode == IBV_WC_RECV);
		CHECK(w.byte_len == len);
		CHECK(w.qp_num == qb->qp_num);
		CHECK(w.src_qp == qa->qp_num);
		CHECK(!!(w.wc_flags & IBV_WC_WITH_IMM) == imm);
		if (imm)
			CHECK(w.imm_data == htobe32(0xabc00000 + i));
		CHECK(memcmp(buf_a, buf_b, len) == 0);
		if (buf_b[len] != 0xee) { fprintf(stderr, "len %u: byte after = %#x\n", len, buf_b[len]); exit(1); }
		w = poll_one(cq_a);
		CHECK(w.status == IBV_WC_SUCCESS && w.wr_id == 2000 + i && w.opcode == IBV_WC_SEND);
		CHECK(w.qp_num == qa->qp_num);
	}
	teardown();
}

/* Unsignaled sends produce no CQE; inline data may be overwritten right
 * after post; a signaled one at the end completes. */
static void test_unsignaled_inline(void)
{
	setup(IBV_MTU_1024, 0x100);
	for (int i = 0; i < 20; i++)
		post_recv(qb, i, buf_b + i * 64, 64, mr_b);
	for (int i = 0; i < 20; i++) {
		uint8_t msg[40];
		memset(msg, 'a' + i, sizeof(msg));
		struct ibv_sge s = { (uintptr_t)msg, sizeof(msg), 0 /* inline: no key needed */ };
		struct ibv_send_wr wr = { .wr_id = i, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_INLINE |
							(i == 19 ? IBV_SEND_SIGNALED : 0) }, *bad;
		CHECK(ibv_post_send(qa, &wr, &bad) == 0);
		memset(msg, 0, sizeof(msg));
	}
	for (int i = 0; i < 20; i++) {
		struct ibv_wc w = poll_one(cq_b);
		CHECK(w.status == IBV_WC_SUCCESS && w.wr_id == (uint64_t)i && w.byte_len == 40);
		CHECK(buf_b[i * 64] == 'a' + i && buf_b[i * 64 + 39] == 'a' + i);
	}
	struct ibv_wc w = poll_one(cq_a);
	CHECK(w.wr_id == 19);
	CHECK(ibv_poll_cq(cq_a, 1, &w) == 0);
	teardown();
}

/* RDMA Write and Write-with-immediate land in the target region; only the
 * immediate form consumes a receive and makes a completion there. */
static void test_write(void)
{
	setup(IBV_MTU_1024, 0xfffff0);   /* crosses the 24-bit PSN wrap */
	uint32_t len = 300000;
	fill(buf_a, len, 99);
	memset(buf_b, 0, BUF);
	struct ibv_sge s = { (uintptr_t)buf_a, len, mr_a->lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.wr.rdma.remote_addr = (uintptr_t)buf_b + 100;
	wr.wr.rdma.rkey = mr_b->rkey;
	CHECK(ibv_post_send(qa, &wr, &bad) == 0);
	struct ibv_wc w = poll_one(cq_a);
	CHECK(w.status == IBV_WC_SUCCESS && w.opcode == IBV_WC_RDMA_WRITE && w.wr_id == 7);
	CHECK(memcmp(buf_a, buf_b + 100, len) == 0);
	CHECK(ibv_poll_cq(cq_b, 1, &w) == 0);

	post_recv(qb, 77, buf_b, 0, mr_b);
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.imm_data = htobe32(0x12345678);
	wr.wr.rdma.remote_addr = (uintptr_t)buf_b + 200000;
	s.length = 5000;
	CHECK(ibv_post_send(qa, &wr, &bad) == 0);
	w = poll_one(cq_b);
	CHECK(w.status == IBV_WC_SUCCESS && w.opcode == IBV_WC_RECV_RDMA_WITH_IMM);
	CHECK(w.wr_id == 77 && w.byte_len == 5000 && (w.wc_flags & IBV_WC_WITH_IMM));
	CHECK(w.imm_data == htobe32(0x12345678));
	CHECK(memcmp(buf_a, buf_b + 200000, 5000) == 0);
	poll_one(cq_a);
	teardown();
}

/* A connected pair for the event tests: qa sends (completions on cq_a),
 * the returned QP receives into ecq, which is bound to chan. */
static struct ibv_qp *event_pair(struct ibv_cq *ecq)
{
	struct ibv_qp_init_attr ia = { .send_cq = cq_a, .recv_cq = ecq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *r = ibv_create_qp(pd, &ia);
	CHECK(r);
	qa = make_qp(cq_a, 1);
	connect_qp(qa, r->qp_num, 5, IBV_MTU_4096);
	connect_qp(r, qa->qp_num, 5, IBV_MTU_4096);
	return r;
}

/* Completion events: the progress thread must deliver them while this
 * thread sleeps in poll() on the channel fd. */
static void test_events(void)
{
	struct ibv_cq *ecq = ibv_create_cq(ctx, 16, (void *)0x1234, chan, 0);
	CHECK(ecq);
	struct ibv_qp *r = event_pair(ecq);
	post_recv(r, 55, buf_b, 4096, mr_b);
	CHECK(ibv_req_notify_cq(ecq, 0) == 0);
	struct ibv_sge s = { (uintptr_t)buf_a, 4000, mr_a->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND }, *bad;
	CHECK(ibv_post_send(qa, &wr, &bad) == 0);
	struct pollfd pfd = { .fd = chan->fd, .events = POLLIN };
	CHECK(poll(&pfd, 1, 5000) == 1);
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	CHECK(ibv_get_cq_event(chan, &ev_cq, &ev_ctx) == 0);
	CHECK(ev_cq == ecq && ev_ctx == (void *)0x1234);
	ibv_ack_cq_events(ecq, 1);
	struct ibv_wc w;
	CHECK(ibv_poll_cq(ecq, 1, &w) == 1 && w.wr_id == 55 && w.byte_len == 4000);
	poll_one(cq_a);
	CHECK(ibv_destroy_qp(qa) == 0);
	CHECK(ibv_destroy_qp(r) == 0);
	CHECK(ibv_destroy_cq(ecq) == 0);
}

/* An event withdrawn because the application polled its completion first
 * leaves the channel fd unreadable, as the kernel's would be: a program
 * that epolls the fd and then calls a blocking ibv_get_cq_event must not
 * sleep until some later completion.  Then the re-armed CQ fires again. */
static void test_event_withdrawn(void)
{
	struct ibv_cq *ecq = ibv_create_cq(ctx, 16, NULL, chan, 0);
	CHECK(ecq);
	struct ibv_qp *r = event_pair(ecq);
	post_recv(r, 56, buf_b, 4096, mr_b);
	post_recv(r, 57, buf_b, 4096, mr_b);
	CHECK(ibv_req_notify_cq(ecq, 0) == 0);
	struct ibv_sge s = { (uintptr_t)buf_a, 100, mr_a->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND }, *bad;
	CHECK(ibv_post_send(qa, &wr, &bad) == 0);
	struct ibv_wc w;
	int got = 0;
	uint64_t end = srn_now_ns() + 10000000000ull;
	while (!got && srn_now_ns() < end)
		got = ibv_poll_cq(ecq, 1, &w);
	CHECK(got == 1 && w.wr_id == 56);
	poll_one(cq_a);
	struct pollfd pfd = { .fd = chan->fd, .events = POLLIN };
	CHECK(poll(&pfd, 1, 0) == 0);
	CHECK(ibv_post_send(qa, &wr, &bad) == 0);
	CHECK(poll(&pfd, 1, 5000) == 1);
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	CHECK(ibv_get_cq_event(chan, &ev_cq, &ev_ctx) == 0 && ev_cq == ecq);
	ibv_ack_cq_events(ecq, 1);
	CHECK(ibv_poll_cq(ecq, 1, &w) == 1 && w.wr_id == 57);
	poll_one(cq_a);
	CHECK(poll(&pfd, 1, 0) == 0);
	CHECK(ibv_destroy_qp(qa) == 0);
	CHECK(ibv_destroy_qp(r) == 0);
	CHECK(ibv_destroy_cq(ecq) == 0);
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* A signal interrupts a blocking ibv_get_cq_event as it interrupts the
 * read() on the kernel's channel fd: EINTR without SA_RESTART (qperf ends
 * each run with SIGALRM and waits for it there), a restart with it. */
static void test_event_signal(void)
{
	struct ibv_cq *ecq = ibv_create_cq(ctx, 16, NULL, chan, 0);
	CHECK(ecq);
	CHECK(ibv_req_notify_cq(ecq, 0) == 0);
	struct sigaction sa = { .sa_handler = on_alarm }, old;
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGALRM, &sa, &old) == 0);
	/* Repeating: a first signal that comes before the wait begins (a
	 * loaded machine) is followed by another that finds it waiting. */
	struct itimerval it = { .it_value = { .tv_usec = 100000 }, .it_interval = { .tv_usec = 100000 } };
	CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	errno = 0;
	CHECK(ibv_get_cq_event(chan, &ev_cq, &ev_ctx) == -1 && errno == EINTR);
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	CHECK(setitimer(ITIMER_REAL, &off, NULL) == 0);
	CHECK(sigaction(SIGALRM, &old, NULL) == 0);
	CHECK(ibv_destroy_cq(ecq) == 0);
}

/* Errors complete with the status a NIC gives, and flush the rest. */
/* The counters the errors below must move are the ones operators and
 * explain look at (srn_tc_dev_counter reads them as `softrnic stat`). */
static bool diag_off(void)
{
	const char *v = getenv("SOFTRNIC_DIAG");
	return v && !strcmp(v, "0");     /* pcap_mixed runs us so */
}

static uint64_t dev_counter(const char *name)
{
	return diag_off() ? 0 : srn_tc_dev_counter(ctx, name);
}

static void test_errors(void)
{
	struct ibv_sge s = { (uintptr_t)buf_a, 100, mr_a->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc w;

	/* bad lkey -> local protection error, QP to ERR, later WRs flushed */
	setup(IBV_MTU_1024, 0);
	s.lkey = mr_a->lkey ^ 0xff;
	CHECK(ibv_post_send(qa, &wr, &bad) == 0);
	w = poll_one(cq_a);
	CHECK(w.status == IBV_WC_LOC_PROT_ERR && w.wr_id == 1);
	s.lkey = mr_a->lkey;
	wr.wr_id = 2;
	CHECK(ibv_post_send(qa, &wr, &bad) == 0);
	w = poll_one(cq_a);
	CHECK(w.status == IBV_WC_WR_FLUSH_ERR && w.wr_id == 2);
	struct ibv_qp_attr qattr;
	struct ibv_qp_init_attr qinit;
	CHECK(ibv_query_qp(qa, &qattr, IBV_QP_STATE, &qinit) == 0 && qattr.qp_state == IBV_QPS_ERR);
	teardown();

	/* stale rkey -> NAK remote access error -> REM_ACCESS_ERR, counted
	 * on both sides under mlx5's names */
	uint64_t req_acc = dev_counter("req_remote_access_errors");
	uint64_t resp_acc = dev_counter("resp_remote_access_errors");
	uint64_t req_cqe = dev_counter("req_cqe_error");
	setup(IBV_MTU_1024, 0);
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr_id = 3;
	wr.wr.rdma.remote_addr = (uintptr_t)buf_b;
	wr.wr.rdma.rkey = mr_b->rkey + 1;
	CHECK(ibv_post_send(qa, &wr, &bad) == 0);
	w = poll_one(cq_a);
	CHECK(w.status == IBV_WC_REM_ACCESS_ERR && w.wr_id == 3);
	CHECK(diag_off() || dev_counter("req_remote_access_errors") == req_acc + 1);
	CHECK(diag_off() || dev_counter("resp_remote_access_errors") == resp_acc + 1);
	CHECK(diag_off() || dev_counter("req_cqe_error") == req_cqe + 1);
	/* out of range */
	teardown();
	setup(IBV_MTU_1024, 0);
	wr.wr.rdma.rkey = mr_b->rkey;
	wr.wr.rdma.remote_addr = (uintptr_t)buf_b + BUF - 10;
	CHECK(ibv_post_send(qa, &wr, &bad) == 0);
	w = poll_one(cq_a);
	CHECK(w.status == IBV_WC_REM_ACCESS_ERR);
	teardown();

	/* receive buffer too small -> LOC_LEN_ERR there, REM_INV_REQ_ERR here */
	setup(IBV_MTU_1024, 0);
	post_recv(qb, 9, buf_b, 50, mr_b);
	wr.opcode = IBV_WR_SEND;
	wr.wr_id = 4;
	CHECK(ibv_post_send(qa, &wr, &bad) == 0);
	w = poll_one(cq_b);
	CHECK(w.status == IBV_WC_LOC_LEN_ERR && w.wr_id == 9);
	w = poll_one(cq_a);
	CHECK(w.status == IBV_WC_REM_INV_REQ_ERR && w.wr_id == 4);
	teardown();

	/* post before RTS is refused; moving to ERR flushes receives */
	qa = make_qp(cq_a, 0);
	CHECK(ibv_post_send(qa, &wr, &bad) == EINVAL && bad == &wr);
	struct ibv_recv_wr rw = { .wr_id = 5 }, *rbad;
	CHECK(ibv_post_recv(qa, &rw, &rbad) == EINVAL);   /* RESET */
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	CHECK(ibv_modify_qp(qa, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			    IBV_QP_ACCESS_FLAGS) == 0);
	CHECK(ibv_post_recv(qa, &rw, &rbad) == 0);
	a.qp_state = IBV_QPS_ERR;
	CHECK(ibv_modify_qp(qa, &a, IBV_QP_STATE) == 0);
	w = poll_one(cq_a);
	CHECK(w.status == IBV_WC_WR_FLUSH_ERR && w.wr_id == 5 && w.opcode == IBV_WC_RECV);
	CHECK(ibv_destroy_qp(qa) == 0);
}

/* RDMA Read of many sizes, crossing MTU boundaries and SGEs. */
static void test_read(enum ibv_mtu mtu)
{
	static const uint32_t sizes[] = { 0, 1, 8, 1000, 1024, 1025, 4096, 65537, 1 << 20 };
	setup(mtu, 0xfffffa);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t len = sizes[i];
		fill(buf_b, len, 7 + i);
		memset(buf_a, 0, BUF);
		uint32_t h = len / 2;
		struct ibv_sge s[2] = { { (uintptr_t)buf_a, h, mr_a->lkey },
					{ (uintptr_t)buf_a + h, len - h, mr_a->lkey } };
		struct ibv_send_wr wr = { .wr_id = 300 + i, .sg_list = s, .num_sge = 2,
					  .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED }, *bad;
		wr.wr.rdma.remote_addr = (uintptr_t)buf_b;
		wr.wr.rdma.rkey = mr_b->rkey;
		CHECK(ibv_post_send(qa, &wr, &bad) == 0);
		struct ibv_wc w = poll_one(cq_a);
		CHECK(w.status == IBV_WC_SUCCESS && w.wr_id == 300 + i && w.opcode == IBV_WC_RDMA_READ);
		CHECK(w.byte_len == len);
		CHECK(memcmp(buf_a, buf_b, len) == 0);
	}
	teardown();
}

/* CAS (hit and miss) and FAA, results in the local buffer, and a chain of
 * 100 FAAs adds up exactly. */
static void test_atomics(void)
{
	setup(IBV_MTU_1024, 77);
	uint64_t *target = (uint64_t *)(buf_b + 64), *result = (uint64_t *)buf_a;
	*target = 1000;
	struct ibv_sge s = { (uintptr_t)result, 8, mr_a->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &s, .num_sge = 1,
				  .opcode = IBV_WR_ATOMIC_CMP_AND_SWP, .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.wr.atomic.remote_addr = (uintptr_t)target;
	wr.wr.atomic.rkey = mr_b->rkey;
	wr.wr.atomic.compare_add = 1000;
	wr.wr.atomic.swap = 2000;
	CHECK(ibv_post_send(qa, &wr, &bad) == 0);
	struct ibv_wc w = poll_one(cq_a);
	CHECK(w.status == IBV_WC_SUCCESS && w.opcode == IBV_WC_COMP_SWAP && w.byte_len == 8);
	CHECK(*result == 1000 && *target == 2000);
	wr.wr.atomic.compare_add = 1000;   /* miss: target stays */
	wr.wr.atomic.swap = 3000;
	CHECK(ibv_post_send(qa, &wr, &bad) == 0);
	w = poll_one(cq_a);
	CHECK(w.status == IBV_WC_SUCCESS && *result == 2000 && *target == 2000);
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.send_flags = 0;
	wr.wr.atomic.compare_add = 3;
	for (int i = 0; i < 100; i++) {
		if (i == 99)
			wr.send_flags = IBV_SEND_SIGNALED;
		CHECK(ibv_post_send(qa, &wr, &bad) == 0);
		if (i % 32 == 31)   /* stay within the send queue */
			for (int k = 0; k < 1000 && ibv_poll_cq(cq_a, 1, &w) == 0; k++)
				;
	}
	w = poll_one(cq_a);
	CHECK(w.status == IBV_WC_SUCCESS && w.opcode == IBV_WC_FETCH_ADD);
	CHECK(*target == 2300 && *result == 2297);
	/* misaligned -> invalid request */
	wr.wr.atomic.remote_addr = (uintptr_t)target + 4;
	CHECK(ibv_post_send(qa, &wr, &bad) == 0);
	w = poll_one(cq_a);
	CHECK(w.status == IBV_WC_REM_INV_REQ_ERR);
	teardown();

	/* no remote atomic right on the QP -> remote access error */
	conn_access = IBV_ACCESS_REMOTE_WRITE;
	setup(IBV_MTU_1024, 0);
	conn_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	wr.wr.atomic.remote_addr = (uintptr_t)target;
	CHECK(ibv_post_send(qa, &wr, &bad) == 0);
	w = poll_one(cq_a);
	CHECK(w.status == IBV_WC_REM_ACCESS_ERR);
	teardown();
}

/* RNR: a SEND with no receive posted waits and succeeds once one is;
 * with rnr_retry 1 it gives up with RNR_RETRY_EXC_ERR.  Peer gone: the
 * local ACK timeout and retry_cnt end in RETRY_EXC_ERR in bounded time. */
static void test_rnr_and_retry(void)
{
	conn_min_rnr = 1;                    /* 0.01 ms */
	setup(IBV_MTU_1024, 0);
	struct ibv_sge s = { (uintptr_t)buf_a, 100, mr_a->lkey };
	struct ibv_send_wr wr = { .wr_id = 11, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	CHECK(ibv_post_send(qa, &wr, &bad) == 0);
	struct ibv_wc w;
	double t0 = (srn_now_ns() / 1e9);
	while ((srn_now_ns() / 1e9) - t0 < 0.05)
		CHECK(ibv_poll_cq(cq_a, 1, &w) == 0);   /* still waiting */
	post_recv(qb, 12, buf_b, 4096, mr_b);
	w = poll_one(cq_b);
	CHECK(w.status == IBV_WC_SUCCESS && w.wr_id == 12 && w.byte_len == 100);
	w = poll_one(cq_a);
	CHECK(w.status == IBV_WC_SUCCESS && w.wr_id == 11);
	teardown();

	conn_rnr_retry = 1;
	setup(IBV_MTU_1024, 0);
	CHECK(ibv_post_send(qa, &wr, &bad) == 0);
	w = poll_one(cq_a);
	CHECK(w.status == IBV_WC_RNR_RETRY_EXC_ERR && w.wr_id == 11);
	teardown();
	conn_rnr_retry = 7;
	conn_min_rnr = 12;

	conn_timeout = 8;                    /* 1 ms */
	conn_retry = 2;
	setup(IBV_MTU_1024, 0);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };
	CHECK(ibv_modify_qp(qb, &a, IBV_QP_STATE) == 0);   /* peer stops answering */
	t0 = (srn_now_ns() / 1e9);
	CHECK(ibv_post_send(qa, &wr, &bad) == 0);
	w = poll_one(cq_a);
	CHECK(w.status == IBV_WC_RETRY_EXC_ERR && w.wr_id == 11);
	CHECK((srn_now_ns() / 1e9) - t0 < 2.0);
	teardown();
	conn_timeout = 14;
	conn_retry = 7;
}

static void write_via(uint32_t rkey, uint64_t addr, uint32_t len, enum ibv_wc_status want)
{
	struct ibv_sge s = { (uintptr_t)buf_a, len, mr_a->lkey };
	struct ibv_send_wr wr = { .wr_id = 900, .sg_list = &s, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.wr.rdma.rkey = rkey;
	wr.wr.rdma.remote_addr = addr;
	CHECK(ibv_post_send(qa, &wr, &bad) == 0);
	struct ibv_wc w = poll_one(cq_a);
	if (w.status != want)
		fprintf(stderr, "write via rkey %#x: %s, wanted %s\n", rkey,
			ibv_wc_status_str(w.status), ibv_wc_status_str(want));
	CHECK(w.status == want);
}

/* Memory windows: a type-2 window bound by work request grants remote
 * access to part of a region, only through the QP that bound it; local
 * invalidate and Send with Invalidate revoke it; a type-1 window via
 * ibv_bind_mw; a region with bound windows cannot be deregistered. */
static void test_mw(void)
{
	uint8_t *wbuf = calloc(1, 65536);
	CHECK(wbuf);
	struct ibv_mr *wmr = ibv_reg_mr(pd, wbuf, 65536, IBV_ACCESS_LOCAL_WRITE |
					IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND);
	CHECK(wmr);
	setup(IBV_MTU_1024, 0);
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	CHECK(mw && mw->type == IBV_MW_TYPE_2);
	uint32_t rkey = ibv_inc_rkey(mw->rkey);
	struct ibv_send_wr wr = { .wr_id = 1, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){ .mr = wmr, .addr = (uintptr_t)wbuf + 4096,
		.length = 8192, .mw_access_flags = IBV_ACCESS_REMOTE_WRITE };
	CHECK(ibv_post_send(qb, &wr, &bad) == 0);
	struct ibv_wc w = poll_one(cq_b);
	if (w.status != IBV_WC_SUCCESS) fprintf(stderr, "bind: %s op %d\n", ibv_wc_status_str(w.status), w.opcode);
	CHECK(w.status == IBV_WC_SUCCESS && w.opcode == IBV_WC_BIND_MW && w.wr_id == 1);
	CHECK(mw->rkey == rkey);
	fill(buf_a, 100, 5);
	write_via(rkey, (uintptr_t)wbuf + 4096, 100, IBV_WC_SUCCESS);
	CHECK(memcmp(wbuf + 4096, buf_a, 100) == 0);
	CHECK(ibv_dereg_mr(wmr) == EBUSY);
	write_via(rkey, (uintptr_t)wbuf, 100, IBV_WC_REM_ACCESS_ERR);   /* outside the window */
	teardown();

	/* bound to qb: a fresh QP pair cannot use it */
	setup(IBV_MTU_1024, 0);
	write_via(rkey, (uintptr_t)wbuf + 4096, 100, IBV_WC_REM_ACCESS_ERR);
	teardown();
	CHECK(ibv_dealloc_mw(mw) == 0);

	/* bind, use, local invalidate, refused */
	setup(IBV_MTU_1024, 0);
	mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	CHECK(mw);
	rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	CHECK(ibv_post_send(qb, &wr, &bad) == 0);
	CHECK(poll_one(cq_b).status == IBV_WC_SUCCESS);
	write_via(rkey, (uintptr_t)wbuf + 8192, 64, IBV_WC_SUCCESS);
	struct ibv_send_wr inv = { .wr_id = 2, .opcode = IBV_WR_LOCAL_INV, .send_flags = IBV_SEND_SIGNALED,
				   .invalidate_rkey = rkey };
	CHECK(ibv_post_send(qb, &inv, &bad) == 0);
	w = poll_one(cq_b);
	CHECK(w.status == IBV_WC_SUCCESS && w.opcode == IBV_WC_LOCAL_INV);
	write_via(rkey, (uintptr_t)wbuf + 8192, 64, IBV_WC_REM_ACCESS_ERR);
	teardown();

	/* re-bind with a new key, then the peer's Send with Invalidate */
	setup(IBV_MTU_1024, 0);
	rkey = ibv_inc_rkey(rkey);
	wr.bind_mw.rkey = rkey;
	CHECK(ibv_post_send(qb, &wr, &bad) == 0);
	CHECK(poll_one(cq_b).status == IBV_WC_SUCCESS);
	post_recv(qb, 3, buf_b, 4096, mr_b);
	struct ibv_sge s = { (uintptr_t)buf_a, 10, mr_a->lkey };
	struct ibv_send_wr si = { .wr_id = 4, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_INV,
				  .send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = rkey };
	CHECK(ibv_post_send(qa, &si, &bad) == 0);
	w = poll_one(cq_b);
	CHECK(w.status == IBV_WC_SUCCESS && (w.wc_flags & IBV_WC_WITH_INV) && w.invalidated_rkey == rkey);
	CHECK(w.byte_len == 10);
	CHECK(poll_one(cq_a).status == IBV_WC_SUCCESS);
	write_via(rkey, (uintptr_t)wbuf + 8192, 64, IBV_WC_REM_ACCESS_ERR);
	teardown();
	CHECK(ibv_dealloc_mw(mw) == 0);

	/* type 1 through ibv_bind_mw */
	setup(IBV_MTU_1024, 0);
	struct ibv_mw *mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	CHECK(mw1);
	uint32_t old = mw1->rkey;
	struct ibv_mw_bind b = { .wr_id = 5, .send_flags = IBV_SEND_SIGNALED,
		.bind_info = { .mr = wmr, .addr = (uintptr_t)wbuf, .length = 65536,
			       .mw_access_flags = IBV_ACCESS_REMOTE_WRITE } };
	CHECK(ibv_bind_mw(qb, mw1, &b) == 0);
	CHECK(mw1->rkey != old && (mw1->rkey >> 8) == (old >> 8));
	w = poll_one(cq_b);
	CHECK(w.status == IBV_WC_SUCCESS && w.opcode == IBV_WC_BIND_MW && w.wr_id == 5);
	write_via(mw1->rkey, (uintptr_t)wbuf + 60000, 100, IBV_WC_SUCCESS);
	write_via(old, (uintptr_t)wbuf + 60000, 100, IBV_WC_REM_ACCESS_ERR);   /* the old key is stale */
	teardown();
	CHECK(ibv_dealloc_mw(mw1) == 0);
	CHECK(ibv_dereg_mr(wmr) == 0);
	free(wbuf);
}

/* SRQ: two QPs share one receive queue; srq_limit raises
 * IBV_EVENT_SRQ_LIMIT_REACHED once when the posted count drops below it;
 * a QP attached to the SRQ that goes to ERR raises LAST_WQE_REACHED. */
static void test_srq_events(void)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1, .srq_limit = 0 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	CHECK(srq);
	struct ibv_qp_init_attr ia = { .send_cq = cq_b, .recv_cq = cq_b, .srq = srq,
		.qp_type = IBV_QPT_RC, .cap = { .max_send_wr = 4, .max_send_sge = 1 } };
	struct ibv_qp *r1 = ibv_create_qp(pd, &ia), *r2 = ibv_create_qp(pd, &ia);
	struct ibv_qp *s1 = make_qp(cq_a, 1), *s2 = make_qp(cq_a, 1);
	CHECK(r1 && r2);
	connect_qp(s1, r1->qp_num, 0, IBV_MTU_1024);
	connect_qp(r1, s1->qp_num, 0, IBV_MTU_1024);
	connect_qp(s2, r2->qp_num, 0, IBV_MTU_1024);
	connect_qp(r2, s2->qp_num, 0, IBV_MTU_1024);
	for (int i = 0; i < 8; i++) {
		struct ibv_sge sg = { (uintptr_t)buf_b + i * 256, 256, mr_b->lkey };
		struct ibv_recv_wr wr = { .wr_id = 500 + i, .sg_list = &sg, .num_sge = 1 }, *bad;
		CHECK(ibv_post_srq_recv(srq, &wr, &bad) == 0);
	}
	struct ibv_srq_attr lim = { .srq_limit = 5 };
	CHECK(ibv_modify_srq(srq, &lim, IBV_SRQ_LIMIT) == 0);
	/* four sends, alternating QPs: the SRQ goes 8 -> 4, below 5 */
	for (int i = 0; i < 4; i++) {
		struct ibv_sge sg = { (uintptr_t)buf_a, 10, mr_a->lkey };
		struct ibv_send_wr wr = { .wr_id = i, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND }, *bad;
		CHECK(ibv_post_send(i % 2 ? s2 : s1, &wr, &bad) == 0);
		struct ibv_wc w = poll_one(cq_b);
		CHECK(w.status == IBV_WC_SUCCESS && w.wr_id == 500u + i && w.byte_len == 10);
		CHECK(w.qp_num == (i % 2 ? r2 : r1)->qp_num);
		poll_one(cq_a);
	}
	int fl = fcntl(ctx->async_fd, F_GETFL);
	CHECK(fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0);
	struct ibv_async_event ev;
	int limit_events = 0, last_wqe = 0;
	while (ibv_get_async_event(ctx, &ev) == 0) {
		if (ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == srq)
			limit_events++;
		ibv_ack_async_event(&ev);
	}
	CHECK(limit_events == 1);
	struct ibv_srq_attr q;
	CHECK(ibv_query_srq(srq, &q) == 0 && q.srq_limit == 0);   /* one shot: disarmed */
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	CHECK(ibv_modify_qp(r1, &a, IBV_QP_STATE) == 0);
	CHECK(ibv_destroy_srq(srq) == EBUSY);                    /* QPs still use it */
	while (ibv_get_async_event(ctx, &ev) == 0) {
		if (ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED)
			last_wqe++;
		ibv_ack_async_event(&ev);
	}
	CHECK(fcntl(ctx->async_fd, F_SETFL, fl) == 0);
	CHECK(last_wqe == 1);
	CHECK(ibv_destroy_qp(s1) == 0 && ibv_destroy_qp(s2) == 0);
	CHECK(ibv_destroy_qp(r1) == 0 && ibv_destroy_qp(r2) == 0);
	CHECK(ibv_destroy_srq(srq) == 0);
	struct ibv_wc w;
	while (ibv_poll_cq(cq_a, 1, &w) > 0) ;
	while (ibv_poll_cq(cq_b, 1, &w) > 0) ;
}

/* Each step is named to the watchdog, so a hang in CI says where. */
#define STAGE(call) do { srn_hang_dump_stage(#call); call; } while (0)

int main(void)
{
	srn_hang_dump_arm(100);
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n >= 1);
	ctx = ibv_open_device(list[0]);
	CHECK(ctx);
	ibv_free_device_list(list);
	CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0);
	pd = ibv_alloc_pd(ctx);
	chan = ibv_create_comp_channel(ctx);
	cq_a = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	cq_b = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	buf_a = malloc(BUF + 64);
	buf_b = malloc(BUF + 64);
	CHECK(pd && chan && cq_a && cq_b && buf_a && buf_b);
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		  IBV_ACCESS_REMOTE_ATOMIC;
	mr_a = ibv_reg_mr(pd, buf_a, BUF + 64, acc);
	mr_b = ibv_reg_mr(pd, buf_b, BUF + 64, acc);
	CHECK(mr_a && mr_b && mr_a->rkey != mr_b->rkey);

	STAGE(test_send_sizes(IBV_MTU_1024, 0));
	STAGE(test_send_sizes(IBV_MTU_256, 0xffff00));
	STAGE(test_send_sizes(IBV_MTU_4096, 12345));
	STAGE(test_unsignaled_inline());
	STAGE(test_write());
	STAGE(test_events());
	STAGE(test_event_withdrawn());
	STAGE(test_event_signal());
	STAGE(test_errors());
	STAGE(test_read(IBV_MTU_1024));
	STAGE(test_read(IBV_MTU_256));
	STAGE(test_read(IBV_MTU_4096));
	STAGE(test_atomics());
	STAGE(test_rnr_and_retry());
	STAGE(test_mw());
	STAGE(test_srq_events());

	CHECK(ibv_dealloc_pd(pd) == EBUSY);   /* MRs still registered */
	CHECK(ibv_dereg_mr(mr_a) == 0 && ibv_dereg_mr(mr_b) == 0);
	CHECK(ibv_destroy_cq(cq_a) == 0 && ibv_destroy_cq(cq_b) == 0);
	CHECK(ibv_destroy_comp_channel(chan) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	free(buf_a);
	free(buf_b);
	printf("ok\n");
	return 0;
}
