/*
 * test_trust_resp_read_len - a remote sender's DMA length above the
 * device's max_msg_sz earns NAK invalid request and nothing else (issue
 * 10, item 7).
 *
 *   attacker: a plain UDP socket on 127.0.0.N:4791   target: softrnic device
 *   handcrafted RoCEv2 packets, valid ICRC  ------>  RC QP connected to it
 *                                           <------  what comes back, parsed
 *
 * The packet count of a READ was computed in 32 bits: a DMA length of
 * 2^32 - MTU + 1 or more made it 0, which stood for 2^24 response packets
 * running past the message.  Each case below goes to a fresh QP at its
 * expected PSN; the answer must be exactly one NAK invalid request for
 * that PSN, no READ response, and the QP in ERR:
 *   READ dmalen 0xffffff01, 0xffffffff, 2^31 + 1; WRITE FIRST dmalen
 *   0xffffffff (its RETH announces more than a message may hold).
 * The region is 4 GiB + 64 KiB of untouched anonymous memory when it can
 * be registered (so the old code passed the key check and flooded), else
 * 64 KiB (the old code then answered NAK remote access).  A READ of 3000
 * bytes first checks the plumbing: three responses carrying the region's
 * bytes.  Locally, a READ work request longer than max_msg_sz is refused
 * at post (EINVAL).  One process; every wait bounded.
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "core/limits.h"
#include "rc_test_conn.h"
#include "wire/icrc.h"
#include "wire/opcode.h"
#include "wire/roce_hdr.h"

#define ROCE_PORT 4791
#define PEER_QPN 0x4242
#define EPSN 0x1000
#define SMALL (64u << 10)
#define BIG ((4ull << 30) + SMALL)

static int sock;
static struct srn_ip_meta meta;         /* attacker -> target */
static struct sockaddr_in target_addr;
static union ibv_gid attacker_gid;

/* Bind the attacker's socket to the highest free 127.0.0.N (devices take
 * the lowest free one). */
static void attacker_socket(void)
{
	sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	CHECK(sock >= 0);
	int pmtu = IP_PMTUDISC_DO;      /* DF, as softrnic sends: IPv4 ID 0 */
	CHECK(setsockopt(sock, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) == 0);
	for (int n = 254; n > 200; n--) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(ROCE_PORT) };
		a.sin_addr.s_addr = htonl(0x7f000000u | (uint32_t)n);
		if (bind(sock, (struct sockaddr *)&a, sizeof(a)) == 0) {
			memset(&attacker_gid, 0, sizeof(attacker_gid));
			attacker_gid.raw[10] = attacker_gid.raw[11] = 0xff;
			memcpy(attacker_gid.raw + 12, &a.sin_addr, 4);
			memcpy(meta.src, &a.sin_addr, 4);
			return;
		}
	}
	fprintf(stderr, "SKIP: no free 127.0.0.N:%d for the attacker\n", ROCE_PORT);
	exit(77);
}

static void send_pkt(struct srn_pkt *p, const uint8_t *payload)
{
	uint8_t b[SRN_MAX_HDR_LEN + 4096 + 8];
	int hl = srn_pkt_build_hdr(b, p);
	CHECK(hl > 0);
	if (p->paylen)
		memcpy(b + hl, payload, p->paylen);
	size_t n = (size_t)hl + p->paylen;
	memset(b + n, 0, srn_pad_of(p->paylen));
	n += srn_pad_of(p->paylen);
	struct iovec v = { b, n };
	srn_icrc_put(b + n, srn_icrc_calc(&meta, &v, 1));
	n += SRN_ICRC_LEN;
	CHECK(sendto(sock, b, n, 0, (struct sockaddr *)&target_addr, sizeof(target_addr)) ==
	      (ssize_t)n);
}

struct answer {
	int naks, acks, read_resps, other;
	uint8_t syndrome;
	uint32_t nak_psn;
	uint64_t read_bytes;
	uint8_t first_bytes[16];
};

/* Collect what the target sends for `ms` milliseconds (stopping early
 * once `want` READ responses arrived). */
static struct answer collect(int ms, int want)
{
	struct answer a = { 0 };
	double end = srn_tc_now() + ms / 1000.0;
	while (srn_tc_now() < end && !(want && a.read_resps >= want)) {
		struct pollfd pf = { sock, POLLIN, 0 };
		if (poll(&pf, 1, 20) <= 0)
			continue;
		uint8_t b[9000];
		ssize_t n = recv(sock, b, sizeof(b), 0);
		struct srn_pkt p;
		if (n <= 0 || srn_pkt_parse(b, (size_t)n, &p)) {
			a.other++;
			continue;
		}
		if (p.info->flags & SRN_OPF_READ_RESP) {
			if (!a.read_resps)
				memcpy(a.first_bytes, p.payload, p.paylen < 16 ? p.paylen : 16);
			a.read_resps++;
			a.read_bytes += p.paylen;
		} else if (p.opcode == SRN_OP_RC_ACKNOWLEDGE &&
			   (p.aeth_syndrome & SRN_AETH_TYPE_MASK) == SRN_AETH_TYPE_NAK) {
			a.naks++;
			a.syndrome = p.aeth_syndrome;
			a.nak_psn = p.psn;
		} else if (p.opcode == SRN_OP_RC_ACKNOWLEDGE) {
			a.acks++;
		} else {
			a.other++;
		}
	}
	return a;
}

static struct ibv_pd *pd;
static struct ibv_cq *cq;
static union ibv_gid target_gid;

static struct ibv_qp *fresh_qp(void)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 2, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	CHECK(qp);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	o.mtu = IBV_MTU_1024;
	srn_tc_connect(qp, &attacker_gid, PEER_QPN, EPSN, 0x2000, &o);
	return qp;
}

static enum ibv_qp_state state_of(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	CHECK(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) == 0);
	return a.qp_state;
}

static int fails;

/* One hostile request to a fresh QP: exactly a NAK invalid request. */
static void hostile(const char *what, uint8_t opcode, uint64_t va, uint32_t rkey,
		    uint32_t dmalen)
{
	struct ibv_qp *qp = fresh_qp();
	uint8_t payload[1024];
	memset(payload, 0xa5, sizeof(payload));
	struct srn_pkt p = {
		.opcode = opcode, .dqpn = qp->qp_num, .psn = EPSN, .ackreq = true,
		.reth_va = va, .reth_rkey = rkey, .reth_len = dmalen,
		.paylen = opcode == SRN_OP_RC_RDMA_WRITE_FIRST ? 1024 : 0,
	};
	send_pkt(&p, payload);
	struct answer a = collect(800, 0);
	if (a.read_resps) {
		/* The target is busy answering past the message, under its
		 * lock: a verbs call would wait for that to end. */
		printf("%s dmalen 0x%08x: %d READ responses within 0.8 s: FAIL\n", what, dmalen,
		       a.read_resps);
		exit(1);
	}
	bool err = state_of(qp) == IBV_QPS_ERR;
	bool ok = a.naks == 1 && a.syndrome == SRN_AETH_NAK_INVALID && a.nak_psn == EPSN &&
		  a.acks == 0 && err;
	printf("%-12s dmalen 0x%08x: %d NAK (syndrome 0x%02x, PSN 0x%06x), %d ACK, no READ "
	       "response, QP %s: %s\n", what, dmalen, a.naks, a.syndrome, a.nak_psn, a.acks,
	       err ? "ERR" : "not ERR",
	       ok ? "ok" : "WRONG (want one NAK invalid request 0x61, nothing else)");
	fails += !ok;
	CHECK(ibv_destroy_qp(qp) == 0);
}

int main(void)
{
	srn_tc_role = "read_len";
	setvbuf(stdout, NULL, _IOLBF, 0);
	attacker_socket();
	struct ibv_context *ctx = srn_tc_open(&target_gid);
	target_addr = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(ROCE_PORT) };
	memcpy(&target_addr.sin_addr, target_gid.raw + 12, 4);
	meta.family = AF_INET;
	memcpy(meta.dst, target_gid.raw + 12, 4);
	meta.sport = meta.dport = ROCE_PORT;
	meta.ipv4_id = 0;
	meta.ipv4_frag = SRN_IPV4_DF;
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(pd && cq);

	/* Untouched anonymous memory costs nothing until written. */
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
	uint64_t size = BIG;
	uint8_t *buf = mmap(NULL, size, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	struct ibv_mr *mr = buf != MAP_FAILED ? ibv_reg_mr(pd, buf, size, acc) : NULL;
	if (!mr) {
		printf("a 4 GiB region could not be registered: a 64 KiB one instead\n");
		if (buf != MAP_FAILED)
			munmap(buf, size);
		size = SMALL;
		buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		CHECK(buf != MAP_FAILED);
		mr = ibv_reg_mr(pd, buf, size, acc);
		CHECK(mr);
	}
	for (int i = 0; i < 3000; i++)
		buf[i] = (uint8_t)(i * 13 + 1);

	/* The plumbing: a READ of 3000 bytes gets three responses. */
	struct ibv_qp *qp = fresh_qp();
	struct srn_pkt p = { .opcode = SRN_OP_RC_RDMA_READ_REQUEST, .dqpn = qp->qp_num,
			     .psn = EPSN, .reth_va = (uintptr_t)buf, .reth_rkey = mr->rkey,
			     .reth_len = 3000 };
	send_pkt(&p, NULL);
	struct answer a = collect(3000, 3);
	printf("READ of 3000 bytes: %d responses, %llu bytes\n", a.read_resps,
	       (unsigned long long)a.read_bytes);
	CHECK(a.read_resps == 3 && a.read_bytes == 3000 && a.naks == 0);
	CHECK(memcmp(a.first_bytes, buf, 16) == 0);
	CHECK(state_of(qp) == IBV_QPS_RTS);

	/* The local side: a READ longer than max_msg_sz is refused at post. */
	struct ibv_sge sg[2] = { { (uintptr_t)buf, 1u << 30, mr->lkey },
				 { (uintptr_t)buf, (1u << 30) + 1, mr->lkey } };
	struct ibv_send_wr wr = { .sg_list = sg, .num_sge = 2, .opcode = IBV_WR_RDMA_READ,
				  .wr.rdma = { 0x1000, 0x1234 } }, *bad;
	CHECK(ibv_post_send(qp, &wr, &bad) == EINVAL);
	CHECK(ibv_destroy_qp(qp) == 0);

	uint64_t va = (uintptr_t)buf;
	hostile("READ", SRN_OP_RC_RDMA_READ_REQUEST, va, mr->rkey, 0xffffff01u);
	hostile("READ", SRN_OP_RC_RDMA_READ_REQUEST, va, mr->rkey, 0xffffffffu);
	hostile("READ", SRN_OP_RC_RDMA_READ_REQUEST, va, mr->rkey, SRN_MAX_MSG_SZ + 1u);
	hostile("WRITE FIRST", SRN_OP_RC_RDMA_WRITE_FIRST, va, mr->rkey, 0xffffffffu);

	CHECK(ibv_dereg_mr(mr) == 0);
	munmap(buf, size);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	close(sock);
	return fails ? 1 : 0;
}
