/*
 * test_nvmf_core.c - examples/nvmf's doors and controller core, directly:
 * known-good and known-bad vectors for each parser (wire.c), the status
 * encoding, and a controller's life through the core (Connect, CC.EN ->
 * CSTS.RDY, Identify offsets, the discovery log per host, CC.SHN, a
 * keep-alive expiry that takes the I/O queues along); and the teardown
 * rules the I/O threads rely on: a torn-down controller lives until the
 * last of its queues' owners lets go, and refuses their commands until
 * then; a queue CC.EN's reset dropped, closed late, does not take the
 * slot of the queue that reconnected with its QID.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core.h"

static uint8_t buf[NVMF_MAX_DATA];
static int killed;

static void count_kill(struct nvmf_q *q) { killed++; }

static struct nvme_sqe sgl_sqe(uint8_t type, uint64_t addr, uint32_t len)
{
	struct nvme_sqe s = { .opc = OPC_WRITE, .flags = 0x40 };
	s.sgl.type = type;
	s.sgl.addr = addr;
	if (type >> 4 == 4) {
		s.sgl.len[0] = (uint8_t)len;
		s.sgl.len[1] = (uint8_t)(len >> 8);
		s.sgl.len[2] = (uint8_t)(len >> 16);
	} else {
		memcpy(s.sgl.len, &len, 4);
	}
	return s;
}

static void test_sgl(void)
{
	struct sgl_info g;
	struct nvme_sqe s = sgl_sqe(SGL_DATA_OFFSET, 0, 512);
	CHECK(nvmf_sgl_parse(&s, 512, 1, &g) == 0 && g.kind == SGLK_INCAP && g.len == 512);
	s = sgl_sqe(SGL_DATA_OFFSET, 513, 0);
	CHECK(nvmf_sgl_parse(&s, 512, 1, &g) == ST_SGL_OFFSET_INVALID);
	s = sgl_sqe(SGL_DATA_OFFSET, 256, 512);
	CHECK(nvmf_sgl_parse(&s, 512, 1, &g) == ST_SGL_LEN_INVALID);
	s = sgl_sqe(SGL_KEYED_INV, 0x1000, 4096);
	memcpy(s.sgl.key, "\x11\x22\x33\x44", 4);
	CHECK(nvmf_sgl_parse(&s, 0, 1, &g) == 0 && g.kind == SGLK_KEYED && g.len == 4096 &&
	      g.key == 0x44332211 && g.invalidate);
	CHECK(nvmf_sgl_parse(&s, 0, 0, &g) == ST_SGL_TYPE_INVALID); /* keyed on TCP */
	s = sgl_sqe(SGL_TRANSPORT, 0, 8192);
	CHECK(nvmf_sgl_parse(&s, 0, 0, &g) == 0 && g.kind == SGLK_TRANSPORT && g.len == 8192);
	CHECK(nvmf_sgl_parse(&s, 0, 1, &g) == ST_SGL_TYPE_INVALID); /* TCP's on RDMA */
	s = sgl_sqe(SGL_TRANSPORT, 0, NVMF_MAX_DATA + 512);
	CHECK(nvmf_sgl_parse(&s, 0, 0, &g) == ST_INVALID_FIELD); /* beyond MDTS */
	s = sgl_sqe(0x20, 0, 512); /* a segment descriptor */
	CHECK(nvmf_sgl_parse(&s, 0, 1, &g) == ST_SGL_TYPE_INVALID);
	s.flags = 0; /* PRPs */
	CHECK(nvmf_sgl_parse(&s, 0, 1, &g) == ST_INVALID_FIELD);
}

static void test_cm(void)
{
	struct nvme_rdma_cm_req r, in = { .recfmt = 0, .qid = 1, .hrqsize = 128, .hsqsize = 127 };
	CHECK(nvmf_cm_req_parse(&in, sizeof(in), NVMF_MAX_QUEUES, &r) == 0 && r.qid == 1);
	CHECK(nvmf_cm_req_parse(&in, 31, NVMF_MAX_QUEUES, &r) == CM_REJ_INVALID_LEN);
	in.qid = NVMF_MAX_QUEUES + 1;
	CHECK(nvmf_cm_req_parse(&in, sizeof(in), NVMF_MAX_QUEUES, &r) == CM_REJ_INVALID_QID);
	in.qid = 0;
	in.hsqsize = 15; /* an admin queue under 32 entries */
	in.hrqsize = 16;
	CHECK(nvmf_cm_req_parse(&in, sizeof(in), NVMF_MAX_QUEUES, &r) == CM_REJ_INVALID_HSQSIZE);
	in.hsqsize = 31;
	in.hrqsize = 31; /* cannot take 32 completions */
	CHECK(nvmf_cm_req_parse(&in, sizeof(in), NVMF_MAX_QUEUES, &r) == CM_REJ_INVALID_HRQSIZE);
	in.hrqsize = 32;
	in.recfmt = 1;
	CHECK(nvmf_cm_req_parse(&in, sizeof(in), NVMF_MAX_QUEUES, &r) == CM_REJ_INVALID_RECFMT);
}

static void test_pdu(void)
{
	struct tcp_pdu_shape sh;
	struct nvme_tcp_hdr h = { .type = TCP_CMD, .hlen = 72, .pdo = 76, .plen = 76 + 512 + 4,
				  .flags = TCP_F_HDGST | TCP_F_DDGST };
	CHECK(nvmf_tcp_pdu_check(&h, 0, 1, 1, &sh) == 0 && sh.hlen == 76 && sh.pdo == 76 &&
	      sh.dlen == 512 && sh.ddgst);
	CHECK(nvmf_tcp_pdu_check(&h, 0, 0, 1, &sh) == TCP_FES_HDR_FIELD); /* HDGSTF unasked */
	CHECK(nvmf_tcp_pdu_check(&h, 1, 1, 1, &sh) == TCP_FES_HDR_FIELD); /* wrong direction */
	h.pdo = 40; /* data inside the header */
	CHECK(nvmf_tcp_pdu_check(&h, 0, 1, 1, &sh) == TCP_FES_HDR_FIELD);
	h = (struct nvme_tcp_hdr){ .type = TCP_CMD, .hlen = 72, .pdo = 72,
				   .plen = 72 + NVMF_INCAP + 1 };
	CHECK(nvmf_tcp_pdu_check(&h, 0, 0, 0, &sh) == TCP_FES_RANGE);
	h = (struct nvme_tcp_hdr){ .type = TCP_R2T, .hlen = 24, .plen = 24 };
	CHECK(nvmf_tcp_pdu_check(&h, 1, 0, 0, &sh) == 0 && sh.dlen == 0);
	h.plen = 30; /* data on an R2T */
	CHECK(nvmf_tcp_pdu_check(&h, 1, 0, 0, &sh) == TCP_FES_HDR_FIELD);
	h = (struct nvme_tcp_hdr){ .type = 0x08, .hlen = 24, .plen = 24 };
	CHECK(nvmf_tcp_pdu_check(&h, 0, 0, 0, &sh) == TCP_FES_HDR_FIELD);
}

static uint16_t run(struct nvmf_tgt *t, struct nvmf_q *q, struct nvme_sqe s, uint32_t len,
		    struct nvme_cqe *cqe)
{
	struct nvmf_req r = { .sqe = s, .data = buf, .len = len };
	CHECK(nvmf_exec(t, q, &r) == NVMF_DONE);
	CHECK(r.cqe.cid == s.cid);
	if (cqe)
		*cqe = r.cqe;
	return (r.cqe.status >> 1) & 0x7ff;
}

static struct nvme_sqe connect(uint16_t qid, uint16_t sqsize, uint32_t kato, const char *sub,
			       const char *host, uint16_t cntlid)
{
	struct nvme_sqe s = { .opc = OPC_FABRICS, .cid = 7, .cdw10 = (uint32_t)qid << 16,
			      .cdw11 = sqsize, .cdw12 = kato };
	((uint8_t *)&s)[4] = FCT_CONNECT;
	struct nvmf_connect_data *d = (void *)buf;
	memset(d, 0, sizeof(*d));
	strcpy(d->subnqn, sub);
	strcpy(d->hostnqn, host);
	d->cntlid = cntlid;
	return s;
}

static struct nvme_sqe prop(bool set, uint32_t off, uint32_t val)
{
	struct nvme_sqe s = { .opc = OPC_FABRICS, .cdw10 = off == PROP_CAP, .cdw11 = off,
			      .cdw12 = val };
	((uint8_t *)&s)[4] = set ? FCT_PROP_SET : FCT_PROP_GET;
	return s;
}

static void test_controller(void)
{
	static struct nvmf_tgt t;
	static uint8_t ram[1 << 20];
	nvmf_tgt_init(&t);
	struct nvmf_subsys *a = nvmf_subsys_add(&t, "nqn.t:a");
	struct nvmf_subsys *b = nvmf_subsys_add(&t, "nqn.t:b");
	strcpy(a->allow[a->nallow++], "nqn.h1");
	strcpy(b->allow[b->nallow++], "nqn.h2");
	a->ns[a->nns++] = (struct nvmf_ns){ .nsid = 1, .nlb = sizeof(ram) / 512, .fd = -1, .ram = ram };
	t.ports[t.nports++] = (struct nvmf_port){ .trtype = TRTYPE_RDMA, .traddr = "10.0.0.1",
						  .trsvcid = "4420" };
	t.ports[t.nports++] = (struct nvmf_port){ .trtype = TRTYPE_TCP, .traddr = "10.0.0.1",
						  .trsvcid = "4420" };
	struct nvmf_q aq = { .cm_qid = -1, .cm_sqsize = -1, .kill = count_kill }, ioq = aq, dq = aq;
	struct nvme_cqe c;
	CHECK(run(&t, &aq, connect(0, 31, 0, "nqn.t:a", "nqn.h2", 0xffff), 1024, &c) == ST_CONNECT_HOST);
	CHECK(run(&t, &aq, connect(0, 200, 0, "nqn.t:a", "nqn.h1", 0xffff), 1024, &c) == ST_CONNECT_INVALID);
	CHECK(c.dw0 == CONNECT_IPO_SQSIZE);
	CHECK(run(&t, &aq, connect(0, 31, 1000, "nqn.t:a", "nqn.h1", 0xffff), 1024, &c) == 0);
	uint16_t cntlid = (uint16_t)c.dw0;
	CHECK(cntlid != 0 && aq.ctrl && aq.ctrl->cntlid == cntlid);
	CHECK(run(&t, &ioq, connect(1, 15, 0, "nqn.t:a", "nqn.h1", cntlid), 1024, &c) == ST_CMD_SEQ_ERROR);
	CHECK(run(&t, &aq, prop(false, PROP_CSTS, 0), 0, &c) == 0 && c.dw0 == 0);
	CHECK(run(&t, &aq, prop(true, PROP_CC, CC_EN | 6u << 16 | 4u << 20), 0, &c) == 0);
	CHECK(run(&t, &aq, prop(false, PROP_CSTS, 0), 0, &c) == 0 && (c.dw0 & CSTS_RDY));
	CHECK(run(&t, &aq, prop(false, PROP_CAP, 0), 0, &c) == 0 && (c.dw0 & 0xffff) == NVMF_MQES);
	CHECK(run(&t, &ioq, connect(1, 15, 0, "nqn.t:a", "nqn.h1", cntlid + 1), 1024, &c) == ST_CONNECT_INVALID);
	CHECK(c.dw0 == (1u << 16 | CONNECT_IPO_CNTLID));
	CHECK(run(&t, &ioq, connect(1, 15, 0, "nqn.t:a", "nqn.h1", cntlid), 1024, &c) == 0);
	CHECK(c.sqhd == 1); /* SQ flow control: the Connect itself was entry 0 */
	/* Identify Controller: the offsets a host reads. */
	struct nvme_sqe id = { .opc = OPC_IDENTIFY, .cdw10 = 1 };
	CHECK(run(&t, &aq, id, 4096, NULL) == 0);
	uint32_t v;
	memcpy(&v, buf + 536, 4);
	CHECK(v == (1u | 1u << 2 | 1u << 20)); /* SGLS */
	memcpy(&v, buf + 1792, 4);
	CHECK(v == NVMF_IOCCSZ);
	CHECK(buf[77] == NVMF_MDTS && buf[111] == 1 && !memcmp(buf + 78, &cntlid, 2));
	CHECK(!strcmp((char *)buf + 768, "nqn.t:a"));
	CHECK(run(&t, &aq, id, 1024, NULL) == ST_SGL_LEN_INVALID);
	/* The discovery controller lists A (on both ports) for h1, not B. */
	CHECK(run(&t, &dq, connect(0, 31, 0, NVMF_DISC_NQN, "nqn.h1", 0xffff), 1024, &c) == 0);
	struct nvme_sqe log = { .opc = OPC_GET_LOG, .cdw10 = LOG_DISCOVERY | (3 * 256 - 1u) << 16 };
	CHECK(run(&t, &dq, log, 3072, NULL) == 0);
	uint64_t n;
	memcpy(&n, buf + 8, 8);
	CHECK(n == 2);
	const struct nvmf_disc_entry *e = (const void *)(buf + 1024);
	CHECK(!strcmp(e[0].subnqn, "nqn.t:a") && e[0].trtype == TRTYPE_RDMA && e[1].trtype == TRTYPE_TCP);
	nvmf_q_gone(&dq);
	/* CC.SHN reports shutdown complete at once. */
	CHECK(run(&t, &aq, prop(true, PROP_CC, CC_EN | 6u << 16 | 4u << 20 | 1u << 14), 0, NULL) == 0);
	CHECK(run(&t, &aq, prop(false, PROP_CSTS, 0), 0, &c) == 0 && (c.dw0 & 0xc) == CSTS_SHST_DONE);
	/* Silence for two KATO periods: controller gone, both queues told. */
	killed = 0;
	nvmf_tick(&t, t.now_ns + 1500000000ull);
	CHECK(aq.ctrl); /* the first check only clears "seen" */
	nvmf_tick(&t, t.now_ns + 1500000000ull);
	CHECK(killed == 2 && t.ka_expired == 1 && aq.kill_req && ioq.kill_req);
	for (unsigned i = 0; i < NVMF_MAX_CTRL; i++)
		CHECK(!t.ctrls[i]);
	/* Until their owners close them the queues hold the controller: a
	 * command that comes meanwhile fails and touches nothing freed. */
	struct nvme_sqe rd = { .opc = OPC_READ, .nsid = 1 };
	CHECK(run(&t, &ioq, rd, 512, NULL) == ST_CMD_SEQ_ERROR);
	CHECK(run(&t, &aq, id, 4096, NULL) == ST_CMD_SEQ_ERROR);
	nvmf_q_gone(&ioq);
	nvmf_q_gone(&aq); /* the last reference frees it (the ASan build checks) */
	CHECK(!aq.ctrl && !ioq.ctrl);
}

/* CC.EN 1 -> 0 drops the I/O queues; the host enables again and
 * connects QID 1 anew before the old queue's owner closed it. */
static void test_reset_reconnect(void)
{
	static struct nvmf_tgt t;
	static uint8_t ram[1 << 16];
	nvmf_tgt_init(&t);
	struct nvmf_subsys *a = nvmf_subsys_add(&t, "nqn.t:a");
	a->allow_any = true;
	a->ns[a->nns++] = (struct nvmf_ns){ .nsid = 1, .nlb = sizeof(ram) / 512, .fd = -1, .ram = ram };
	struct nvmf_q aq = { .cm_qid = -1, .cm_sqsize = -1, .kill = count_kill }, old = aq, nq = aq;
	struct nvme_cqe c;
	struct nvme_sqe en = prop(true, PROP_CC, CC_EN | 6u << 16 | 4u << 20);
	CHECK(run(&t, &aq, connect(0, 31, 0, "nqn.t:a", "nqn.h1", 0xffff), 1024, &c) == 0);
	uint16_t cntlid = (uint16_t)c.dw0;
	CHECK(run(&t, &aq, en, 0, NULL) == 0);
	CHECK(run(&t, &old, connect(1, 15, 0, "nqn.t:a", "nqn.h1", cntlid), 1024, &c) == 0);
	killed = 0;
	CHECK(run(&t, &aq, prop(true, PROP_CC, 6u << 16 | 4u << 20), 0, NULL) == 0);
	CHECK(killed == 1 && old.kill_req && old.ctrl && !aq.kill_req);
	CHECK(run(&t, &aq, en, 0, NULL) == 0);
	CHECK(run(&t, &nq, connect(1, 15, 0, "nqn.t:a", "nqn.h1", cntlid), 1024, &c) == 0);
	struct nvme_sqe rd = { .opc = OPC_READ, .nsid = 1 };
	CHECK(run(&t, &old, rd, 512, NULL) == ST_CMD_SEQ_ERROR); /* dropped: no more I/O */
	nvmf_q_gone(&old);
	CHECK(!old.ctrl && aq.ctrl->q[1] == &nq);
	CHECK(run(&t, &nq, rd, 512, NULL) == 0);
	nvmf_q_gone(&aq); /* tears the controller down: nq is told */
	CHECK(killed == 2 && nq.kill_req && nq.ctrl);
	nvmf_q_gone(&nq);
	CHECK(!nq.ctrl);
}

static void test_status(void)
{
	CHECK(nvmf_status(ST_OK) == 0);
	CHECK(nvmf_status(ST_LBA_RANGE) == 0x80 << 1);
	CHECK(nvmf_status(ST_CONNECT_HOST | ST_DNR) == (0x8000 | 1u << 9 | 0x84 << 1));
}

int main(void)
{
	test_sgl();
	test_cm();
	test_pdu();
	test_status();
	test_controller();
	test_reset_reconnect();
	return srn_check_result();
}
