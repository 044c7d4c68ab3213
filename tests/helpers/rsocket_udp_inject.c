/*
 * rsocket_udp_inject ADDR PORT N - send N UD messages that are no
 * rsocket's to the datagram rsocket at ADDR:PORT, as a hostile peer
 * would: learn its QPN the way rdma-core's rsockets do (a UDP datagram
 * with the tagged header and our UD QPN; its CTRL reply names its QPN),
 * then post UD Sends whose source header is wrong (unknown version, too
 * short, a length that is not the version's).  The receiver must drop
 * and count each (tests/test_rsocket_udp.sh, mode malformed).  Built on
 * our librdmacm.so.1 and libibverbs.so.1.  Exit 0 when all were sent.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

static int die(const char *what)
{
	perror(what);
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])) };
	if (inet_pton(AF_INET, argv[1], &dst.sin_addr) != 1)
		return 2;
	int n = atoi(argv[3]);
	struct rdma_cm_id *id;
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_UDP) ||
	    rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) || rdma_resolve_route(id, 2000))
		return die("resolve");
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_UD, .sq_sig_all = 1,
				       .cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
						.max_recv_sge = 1 } };
	if (rdma_create_qp(id, NULL, &qa))
		return die("rdma_create_qp");
	static uint8_t buf[64];
	struct ibv_mr *mr = ibv_reg_mr(id->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		return die("ibv_reg_mr");

	/* The handshake: from our device's address, DATA with our QPN and a
	 * 16-byte payload (udpong reads it as a login and answers). */
	int u = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in me = *(struct sockaddr_in *)rdma_get_local_addr(id);
	me.sin_port = 0;
	if (u < 0 || bind(u, (struct sockaddr *)&me, sizeof(me)))
		return die("udp");
	uint8_t h[32] = { 0x55, 0x55, 0x55, 0x55, 4, 0, 16, 0 };
	uint32_t qpn = htonl(id->qp->qp_num & 0xffffff);
	memcpy(h + 8, &qpn, 4);
	memcpy(h + 12, &me.sin_addr, 4);
	uint32_t peer_qpn = 0;
	for (int t = 0; t < 50 && !peer_qpn; t++) {
		sendto(u, h, 32, 0, (struct sockaddr *)&dst, sizeof(dst));
		struct pollfd p = { .fd = u, .events = POLLIN };
		uint8_t r[64];
		while (poll(&p, 1, 200) == 1) {
			ssize_t k = recv(u, r, sizeof(r), 0);
			if (k >= 16 && r[0] == 0x55 && r[5] == 7) {
				memcpy(&peer_qpn, r + 8, 4);
				peer_qpn = ntohl(peer_qpn) & 0xffffff;
				break;
			}
		}
	}
	if (!peer_qpn) {
		fprintf(stderr, "no CTRL reply from %s\n", argv[1]);
		return 1;
	}
	const struct ibv_sa_path_rec *pr = id->route.path_rec;
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = id->port_num ? id->port_num : 1,
				  .grh = { .dgid = pr->dgid, .hop_limit = pr->hop_limit } };
	struct ibv_ah *ah = ibv_create_ah(id->pd, &aa);
	if (!ah)
		return die("ibv_create_ah");
	/* Wrong source headers: version 9; 3 bytes; IPv4 claiming 24 bytes;
	 * IPv6 in 10 bytes. */
	static const uint8_t bad[4][10] = { { 9, 8, 0, 1, 127, 0, 0, 1 }, { 4, 8, 0 },
					    { 4, 24, 0, 1, 127, 0, 0, 1 }, { 6, 24, 0, 1 } };
	static const uint32_t len[4] = { 8, 3, 8, 10 };
	int sent = 0;
	for (int i = 0; i < n; i++) {
		memcpy(buf, bad[i % 4], len[i % 4]);
		struct ibv_sge sg = { (uintptr_t)buf, len[i % 4], mr->lkey };
		struct ibv_send_wr wr = { .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .wr.ud = { .ah = ah, .remote_qpn = peer_qpn,
						     .remote_qkey = RDMA_UDP_QKEY } }, *badwr;
		if (ibv_post_send(id->qp, &wr, &badwr))
			return die("ibv_post_send");
		struct ibv_wc wc;
		int got = 0;
		for (int t = 0; t < 5000 && !got; t++) {
			got = ibv_poll_cq(id->send_cq, 1, &wc);
			if (!got)
				usleep(1000);
		}
		if (got != 1 || wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "send %d did not complete\n", i);
			return 1;
		}
		sent++;
	}
	printf("inject: peer QPN 0x%x, %d malformed UD messages sent\n", peer_qpn, sent);
	ibv_destroy_ah(ah);
	ibv_dereg_mr(mr);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	close(u);
	return 0;
}
