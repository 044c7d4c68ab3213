/*
 * test_cm_xrc_api.c - XRC through the rdma_cm API, asynchronous, two
 * processes (forked before either touches a device, each with its own
 * device on a random 127.x address):
 *
 *   client: two ids, each rdma_create_qp with IBV_QPT_XRC_SEND, connect
 *     to the server, read the SRQ number from the accept's private data
 *     and send one message to that SRQ
 *   server: one listener on RDMA_PS_IB; each CONNECT_REQUEST comes on an
 *     id of type IBV_QPT_XRC_RECV (the REQ said XRC); the first gets an
 *     XRC SRQ (rdma_create_srq: the device's XRC domain, a receive CQ of
 *     its own), each gets an XRC receive QP in the same domain; both
 *     messages land in the one SRQ, through two receive QPs
 *
 * Also checked: rdma_init_qp_attr gives each XRC type the attribute set
 * the kernel's CM gives (RTR of a receive QP with responder resources and
 * RNR timer, RTS of a send QP with the retry counts, of a receive QP the
 * timeout alone).  Every wait is bounded (poll, 20 s).  Exit 0 pass,
 * 1 fail, 77 skip (no device).
 */
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#define SRN_CHECK_FATAL
#define SRN_CHECK_TAG (is_server ? "server" : "client")
static int is_server;
#include "check.h"

#define NCONN 2
#define WAIT_MS 20000

/* The next event on ch, which must be of type want (bounded wait). */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	CHECK(poll(&p, 1, WAIT_MS) == 1, "no event (wanted %s)", rdma_event_str(want));
	struct rdma_cm_event *e;
	CHECK(rdma_get_cm_event(ch, &e) == 0);
	CHECK(e->event == want, "got %s, wanted %s", rdma_event_str(e->event), rdma_event_str(want));
	return e;
}

/* One completion from cq (bounded busy poll with short sleeps). */
static void one_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (int i = 0; i < WAIT_MS; i++) {
		int n = ibv_poll_cq(cq, 1, wc);
		CHECK(n >= 0);
		if (n == 1) {
			CHECK(wc->status == IBV_WC_SUCCESS, "wc status %s", ibv_wc_status_str(wc->status));
			return;
		}
		usleep(1000);
	}
	CHECK(0, "no completion");
}

static void check_masks(struct rdma_cm_id *id, int rtr_want, int rts_want)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR };
	int mask = 0;
	CHECK(rdma_init_qp_attr(id, &a, &mask) == 0);
	CHECK(mask == rtr_want, "RTR mask %#x, want %#x", mask, rtr_want);
	a.qp_state = IBV_QPS_RTS;
	CHECK(rdma_init_qp_attr(id, &a, &mask) == 0);
	CHECK(mask == rts_want, "RTS mask %#x, want %#x", mask, rts_want);
}

static const int RTR_BASE = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;

static int server(const char *addr, int port_fd)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *l, *ids[NCONN];
	struct sockaddr_in sin = { .sin_family = AF_INET };
	CHECK(ch && inet_pton(AF_INET, addr, &sin.sin_addr) == 1);
	CHECK(rdma_create_id(ch, &l, NULL, RDMA_PS_IB) == 0);
	CHECK(rdma_bind_addr(l, (struct sockaddr *)&sin) == 0);
	CHECK(rdma_listen(l, 4) == 0);
	uint16_t port = ntohs(rdma_get_src_port(l));
	CHECK(write(port_fd, &port, sizeof(port)) == sizeof(port));
	char buf[NCONN][16];
	struct ibv_mr *mr = NULL;
	uint32_t srqn = 0;
	for (int i = 0; i < NCONN; i++) {
		struct rdma_cm_event *e = next_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
		struct rdma_cm_id *id = ids[i] = e->id;
		rdma_ack_cm_event(e);
		CHECK(id->qp_type == IBV_QPT_XRC_RECV, "request's qp_type %d", id->qp_type);
		if (i == 0) {
			struct ibv_srq_init_attr sa = { .attr = { .max_wr = NCONN, .max_sge = 1 } };
			CHECK(rdma_create_srq(id, NULL, &sa) == 0);
			CHECK(ibv_get_srq_num(id->srq, &srqn) == 0 && srqn != 0);
			mr = rdma_reg_msgs(id, buf, sizeof(buf));
			CHECK(mr != NULL);
			for (int k = 0; k < NCONN; k++)
				CHECK(rdma_post_recv(id, NULL, buf[k], sizeof(buf[k]), mr) == 0);
		}
		struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_XRC_RECV };
		CHECK(rdma_create_qp(id, NULL, &qa) == 0);
		CHECK(id->qp->qp_type == IBV_QPT_XRC_RECV);
		check_masks(id, RTR_BASE | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
			    IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT);
		uint32_t be = htonl(srqn);
		struct rdma_conn_param cp = { .private_data = &be, .private_data_len = sizeof(be) };
		CHECK(rdma_accept(id, &cp) == 0);
		rdma_ack_cm_event(next_event(ch, RDMA_CM_EVENT_ESTABLISHED));
	}
	/* Both messages, through two receive QPs, in the one SRQ's CQ. */
	for (int k = 0; k < NCONN; k++) {
		struct ibv_wc wc;
		one_wc(ids[0]->recv_cq, &wc);
		CHECK(wc.opcode == IBV_WC_RECV && wc.byte_len == sizeof(buf[0]));
	}
	int seen = 0;
	for (int k = 0; k < NCONN; k++) {
		CHECK(strncmp(buf[k], "hello ", 6) == 0, "message %d: %.16s", k, buf[k]);
		seen |= 1 << atoi(buf[k] + 6);
	}
	CHECK(seen == (1 << NCONN) - 1, "messages from connections %#x", seen);
	/* The peer's DREQ: DISCONNECTED, and our rdma_disconnect sends the
	 * DREP the peer waits for (as with the kernel's CM). */
	for (int i = 0; i < NCONN; i++) {
		struct rdma_cm_event *e = next_event(ch, RDMA_CM_EVENT_DISCONNECTED);
		struct rdma_cm_id *id = e->id;
		rdma_ack_cm_event(e);
		CHECK(rdma_disconnect(id) == 0);
	}
	for (int i = NCONN - 1; i >= 0; i--) {
		rdma_destroy_qp(ids[i]);
		if (i == 0) {
			rdma_dereg_mr(mr);
			rdma_destroy_srq(ids[0]);
		}
		CHECK(rdma_destroy_id(ids[i]) == 0);
	}
	CHECK(rdma_destroy_id(l) == 0);
	rdma_destroy_event_channel(ch);
	printf("server: %d XRC connections into one SRQ\n", NCONN);
	return srn_check_result();
}

static int client(const char *addr, uint16_t port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(port) };
	CHECK(ch && inet_pton(AF_INET, addr, &to.sin_addr) == 1);
	char msg[NCONN][16];
	struct rdma_cm_id *ids[NCONN];
	/* Both connected before either disconnects: the server takes both. */
	for (int i = 0; i < NCONN; i++) {
		struct rdma_cm_id *id;
		CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_IB) == 0);
		ids[i] = id;
		CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&to, 2000) == 0);
		rdma_ack_cm_event(next_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
		CHECK(rdma_resolve_route(id, 2000) == 0);
		rdma_ack_cm_event(next_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
		struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_XRC_SEND, .sq_sig_all = 1,
					       .cap = { .max_send_wr = 1, .max_send_sge = 1 } };
		CHECK(rdma_create_qp(id, NULL, &qa) == 0);
		CHECK(id->qp_type == IBV_QPT_XRC_SEND);
		struct rdma_conn_param cp = { .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7 };
		CHECK(rdma_connect(id, &cp) == 0);
		struct rdma_cm_event *e = next_event(ch, RDMA_CM_EVENT_ESTABLISHED);
		CHECK(e->param.conn.private_data_len >= 4);
		uint32_t srqn = ntohl(*(const uint32_t *)e->param.conn.private_data);
		rdma_ack_cm_event(e);
		check_masks(id, RTR_BASE, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
						  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
		snprintf(msg[i], sizeof(msg[i]), "hello %d", i);
		struct ibv_sge sge = { (uintptr_t)msg[i], sizeof(msg[i]), 0 };
		struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_INLINE }, *bad;
		wr.qp_type.xrc.remote_srqn = srqn;
		CHECK(ibv_post_send(id->qp, &wr, &bad) == 0);
		struct ibv_wc wc;
		one_wc(id->send_cq, &wc);
	}
	for (int i = 0; i < NCONN; i++) {
		struct rdma_cm_id *id = ids[i];
		CHECK(rdma_disconnect(id) == 0);
		rdma_ack_cm_event(next_event(ch, RDMA_CM_EVENT_DISCONNECTED));
		rdma_destroy_qp(id);
		CHECK(rdma_destroy_id(id) == 0);
	}
	rdma_destroy_event_channel(ch);
	return srn_check_result();
}

static void rand_addr(char *out, size_t n, unsigned salt)
{
	srand((unsigned)time(NULL) ^ (unsigned)getpid() ^ salt);
	snprintf(out, n, "127.%d.%d.%d", rand() % 200 + 20, rand() % 250 + 1, rand() % 250 + 1);
}

int main(void)
{
	char saddr[32], caddr[32], env[96];
	rand_addr(saddr, sizeof(saddr), 1);
	do
		rand_addr(caddr, sizeof(caddr), 2);
	while (strcmp(saddr, caddr) == 0);
	int p[2];
	CHECK(pipe(p) == 0);
	pid_t child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		close(p[1]);
		snprintf(env, sizeof(env), "name=softrnic0,addr=%s", caddr);
		setenv("SOFTRNIC_DEVICES", env, 1);
		uint16_t port;
		struct pollfd pf = { .fd = p[0], .events = POLLIN };
		CHECK(poll(&pf, 1, WAIT_MS) == 1 && read(p[0], &port, sizeof(port)) == sizeof(port));
		_exit(client(saddr, port));
	}
	is_server = 1;
	close(p[0]);
	snprintf(env, sizeof(env), "name=softrnic0,addr=%s", saddr);
	setenv("SOFTRNIC_DEVICES", env, 1);
	int ret = server(saddr, p[1]);
	int st = 0;
	CHECK(waitpid(child, &st, 0) == child);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "client ended with %#x", st);
	return ret ? ret : srn_check_result();
}
