/*
 * test_cnp_source.c - a CNP is taken only from its QP's peer: the peer's
 * address and a UDP source port the peer sends from (issue 27 item 5;
 * transport/rx.c cnp_from_peer).
 *
 * Two processes over the UDP link (SOFTRNIC_SHM=0: ring packets carry no
 * port).  A is the requester whose reaction point the CNPs slow down; it
 * runs with SOFTRNIC_ECN_MARK=4, so every 4th datagram it sends arrives
 * CE-marked and B's notification point answers with real CNPs.
 *  1. 64 RDMA Writes of 4 KiB: B's CNPs, sent from B's QP's own source
 *     port (link/udp_ports.h), are handled (rp_cnp_handled grows) and
 *     none counts as rp_cnp_bad_source.
 *  2. 8 forged CNPs to A's QP, well formed and with a good ICRC, from a
 *     socket bound to B's address (any local user can bind 127.0.0.x) on
 *     a port the kernel picks: each is counted rp_cnp_bad_source and
 *     rp_cnp_ignored, none handled.
 *  3. With CAP_NET_RAW (root), one CNP from B's address and UDP source
 *     port 0, as ConnectX hardware sends them (wire vector E1): handled.
 *     Without it, said and skipped.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "core/device.h"
#include "core/nic.h"
#include "diag/clock.h"
#include "rc_test_conn.h"
#include "wire/cnp.h"
#include "wire/icrc.h"

#define TMO 20000
#define BUF (64u << 10)
#define MSG 4096u
#define NWRITE 64
#define NFORGED 8

struct info {
	union ibv_gid gid;
	uint32_t qpn, rkey;
	uint64_t addr;
};

static uint8_t buf[BUF];

static uint64_t cnt(struct srn_nic *nic, enum srn_counter c)
{
	return atomic_load(&nic->diag.cnt->v[c]);
}

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct info me, peer;
};

static void open_side(struct side *s, int fd)
{
	s->ctx = srn_tc_open(&s->me.gid);
	s->pd = ibv_alloc_pd(s->ctx);
	CHECK(s->pd);
	s->mr = ibv_reg_mr(s->pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(s->mr);
	s->cq = ibv_create_cq(s->ctx, 128, NULL, NULL, 0);
	CHECK(s->cq);
	struct ibv_qp_init_attr ia = {
		.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = NWRITE, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	s->qp = ibv_create_qp(s->pd, &ia);
	CHECK(s->qp);
	s->me.qpn = s->qp->qp_num;
	s->me.rkey = s->mr->rkey;
	s->me.addr = (uintptr_t)buf;
	srn_tc_xchg(fd, &s->me, &s->peer, sizeof(s->me), TMO);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	srn_tc_connect(s->qp, &s->peer.gid, s->peer.qpn, 0x4242, 0x4242, &o);
	srn_tc_barrier(fd, 0xc1, TMO);
}

static void close_side(struct side *s)
{
	CHECK(ibv_destroy_qp(s->qp) == 0);
	CHECK(ibv_destroy_cq(s->cq) == 0);
	CHECK(ibv_dereg_mr(s->mr) == 0);
	CHECK(ibv_dealloc_pd(s->pd) == 0);
	CHECK(ibv_close_device(s->ctx) == 0);
}

/* Poll (and so drive progress) for ms milliseconds. */
static void spin(struct ibv_cq *cq, int ms)
{
	uint64_t end = srn_now_ns() + (uint64_t)ms * 1000000ull;
	struct ibv_wc wc;
	while (srn_now_ns() < end) {
		CHECK(ibv_poll_cq(cq, 1, &wc) >= 0);
		usleep(200);
	}
}

/* A CNP to qpn from B's address (the IPv4-mapped GID) and port sport to
 * A's device address, its ICRC right for those headers. */
static void build_cnp(uint8_t cnp[SRN_CNP_LEN], uint32_t qpn, const union ibv_gid *from,
		      uint16_t sport, const struct sockaddr_in *to)
{
	struct srn_ip_meta m = { .family = AF_INET, .sport = sport, .dport = ntohs(to->sin_port),
				 .ipv4_id = 0, .ipv4_frag = SRN_IPV4_DF };
	memcpy(m.src, from->raw + 12, 4);
	memcpy(m.dst, &to->sin_addr, 4);
	srn_cnp_build(cnp, qpn, 0xffff, &m);
}

static int df_socket(int type, int proto, const union ibv_gid *from, uint16_t port)
{
	int fd = socket(AF_INET, type, proto);
	if (fd < 0)
		return -1;
	int pmtu = IP_PMTUDISC_DO;    /* DF, as the ICRC assumes */
	CHECK(setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) == 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	memcpy(&a.sin_addr, from->raw + 12, 4);
	CHECK(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "%s", strerror(errno));
	return fd;
}

static int requester(int fd)
{
	struct side s;
	open_side(&s, fd);
	struct srn_nic *nic = srn_ctx(s.ctx)->nic;
	CHECK(nic->link.udp.local.ss_family == AF_INET);
	const struct sockaddr_in *me = (const struct sockaddr_in *)&nic->link.udp.local;

	/* 1. Real CNPs from B. */
	uint64_t h0 = cnt(nic, SRN_CNT_RP_CNP_HANDLED);
	for (unsigned i = 0; i < NWRITE; i++) {
		struct ibv_sge sge = { (uintptr_t)buf + (i % (BUF / MSG)) * MSG, MSG, s.mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = i, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { .remote_addr = s.peer.addr + (i % (BUF / MSG)) * MSG,
				     .rkey = s.peer.rkey },
		}, *bad;
		CHECK(ibv_post_send(s.qp, &wr, &bad) == 0);
	}
	for (unsigned i = 0; i < NWRITE; i++)
		CHECK(srn_tc_poll_one(s.cq, 20).status == IBV_WC_SUCCESS);
	spin(s.cq, 100);      /* CNPs still on their way */
	uint64_t h1 = cnt(nic, SRN_CNT_RP_CNP_HANDLED), bad1 = cnt(nic, SRN_CNT_RP_CNP_BAD_SOURCE);
	printf("real CNPs from the peer QP's port: %lu handled, %lu bad source\n",
	       (unsigned long)(h1 - h0), (unsigned long)bad1);
	CHECK(h1 > h0, "no CNP of the peer's was handled");
	CHECK(bad1 == 0, "the peer's own CNPs counted as forged");

	/* 2. Forged: B's address, a port B does not send from. */
	int f = df_socket(SOCK_DGRAM, 0, &s.peer.gid, 0);
	CHECK(f >= 0);
	struct sockaddr_in fa;
	socklen_t fl = sizeof(fa);
	CHECK(getsockname(f, (struct sockaddr *)&fa, &fl) == 0);
	uint8_t cnp[SRN_CNP_LEN];
	build_cnp(cnp, s.me.qpn, &s.peer.gid, ntohs(fa.sin_port), me);
	uint64_t ig0 = cnt(nic, SRN_CNT_RP_CNP_IGNORED);
	for (int i = 0; i < NFORGED; i++)
		CHECK(sendto(f, cnp, sizeof(cnp), 0, (const struct sockaddr *)me, sizeof(*me)) ==
		      (ssize_t)sizeof(cnp));
	close(f);
	uint64_t end = srn_now_ns() + 5000000000ull;
	while (cnt(nic, SRN_CNT_RP_CNP_BAD_SOURCE) < NFORGED && srn_now_ns() < end)
		spin(s.cq, 10);
	uint64_t h2 = cnt(nic, SRN_CNT_RP_CNP_HANDLED), bad2 = cnt(nic, SRN_CNT_RP_CNP_BAD_SOURCE);
	uint64_t ig2 = cnt(nic, SRN_CNT_RP_CNP_IGNORED);
	printf("forged CNPs from %s port %u: %lu bad source, %lu ignored, %lu handled\n",
	       inet_ntoa(fa.sin_addr), ntohs(fa.sin_port), (unsigned long)bad2,
	       (unsigned long)(ig2 - ig0), (unsigned long)(h2 - h1));
	CHECK(bad2 == NFORGED, "%lu of %d forged CNPs counted", (unsigned long)bad2, NFORGED);
	CHECK(ig2 - ig0 >= NFORGED);
	CHECK(h2 == h1, "a forged CNP was handled");

	/* 3. Port 0 needs a raw socket: what hardware sends, what no
	 * ordinary user can. */
	int r = df_socket(SOCK_RAW, IPPROTO_UDP, &s.peer.gid, 0);
	if (r < 0) {
		printf("port 0: no raw socket (%s), not tried\n", strerror(errno));
	} else {
		uint8_t dg[sizeof(struct udphdr) + SRN_CNP_LEN];
		struct udphdr *u = (struct udphdr *)dg;
		u->source = 0;
		u->dest = me->sin_port;
		u->len = htons(sizeof(dg));
		u->check = 0;         /* none, as RoCE NICs send (IPv4) */
		build_cnp(dg + sizeof(*u), s.me.qpn, &s.peer.gid, 0, me);
		CHECK(sendto(r, dg, sizeof(dg), 0, (const struct sockaddr *)me, sizeof(*me)) ==
		      (ssize_t)sizeof(dg));
		close(r);
		end = srn_now_ns() + 5000000000ull;
		while (cnt(nic, SRN_CNT_RP_CNP_HANDLED) == h2 && srn_now_ns() < end)
			spin(s.cq, 10);
		uint64_t h3 = cnt(nic, SRN_CNT_RP_CNP_HANDLED);
		printf("a CNP from port 0: %lu handled, %lu bad source\n",
		       (unsigned long)(h3 - h2),
		       (unsigned long)(cnt(nic, SRN_CNT_RP_CNP_BAD_SOURCE) - bad2));
		CHECK(h3 == h2 + 1, "the port-0 CNP was not handled");
		CHECK(cnt(nic, SRN_CNT_RP_CNP_BAD_SOURCE) == bad2);
	}
	srn_tc_barrier(fd, 0xc2, TMO);
	close_side(&s);
	printf("ok\n");
	return 0;
}

static int peer(int fd)
{
	struct side s;
	open_side(&s, fd);
	srn_tc_barrier(fd, 0xc2, 60000);
	close_side(&s);
	return 0;
}

int main(void)
{
	/* The UDP link, where the source port is real. */
	setenv("SOFTRNIC_SHM", "0", 1);
	int fd;
	pid_t child = srn_tc_fork(&fd);
	if (!child)
		return peer(fd);
	/* Only A's datagrams are marked: B answers them with CNPs. */
	setenv("SOFTRNIC_ECN_MARK", "4", 1);
	int ret = requester(fd);
	CHECK(srn_tc_wait_child(child, 30) == 0);
	return ret ? ret : srn_check_result();
}
