/*
 * probe.c - `softrnic-nvmf probe`: bad input, and the NVMe status the
 * specification names for each; and `discover`, the discovery log.
 *
 * Each check sends one malformed or out-of-range command (or a Connect
 * or rdma_cm REQUEST that lies) and compares the status of the answer;
 * after all of them the queues must still work (a good command last).
 * Prints "ok NAME" or "FAIL NAME: ..." per check; exit 0 if all passed.
 */
#include "perf.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int fails, passes;

static void expect(const char *name, int ret, const struct nvme_cqe *c, uint16_t want)
{
	if (ret && ret != -EPROTO) {
		printf("FAIL %s: no completion (%s)\n", name, strerror(-ret));
		fails++;
		return;
	}
	uint16_t got = cqe_status(c);
	if (got != want) {
		printf("FAIL %s: status 0x%03x, want 0x%03x\n", name, got, want);
		fails++;
		return;
	}
	printf("ok %s (status 0x%03x)\n", name, got);
	passes++;
}

static void put_le24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
}

static struct nvme_sqe rw(struct host *h, uint8_t opc, uint64_t slba, uint32_t nlb)
{
	struct nvme_sqe s = { .opc = opc, .nsid = h->nsid, .cdw10 = (uint32_t)slba,
			      .cdw11 = (uint32_t)(slba >> 32), .cdw12 = nlb - 1 };
	return s;
}

static void io_checks(struct host *h)
{
	struct hq *q = h->ioq[0];
	struct nvme_cqe c;
	struct nvme_sqe s = rw(h, 0x7e, 0, 1);
	expect("invalid_opcode", host_sync(h, q, &s, 512, HQ_AUTO, &c, 2000), &c, ST_INVALID_OPCODE);
	s = rw(h, OPC_READ, h->nlb, 1);
	expect("read_lba_out_of_range", host_sync(h, q, &s, 512, HQ_AUTO, &c, 2000), &c, ST_LBA_RANGE);
	s = rw(h, OPC_READ, h->nlb - 1, 2);
	expect("read_straddles_end", host_sync(h, q, &s, 1024, HQ_AUTO, &c, 2000), &c, ST_LBA_RANGE);
	s = rw(h, OPC_READ, 0, 1);
	s.nsid = 99;
	expect("invalid_nsid", host_sync(h, q, &s, 512, HQ_AUTO, &c, 2000), &c, ST_INVALID_NS);
	s = rw(h, OPC_READ, 0, 1); /* PSDT 0: PRPs, which fabrics do not have */
	expect("prp_not_sgl", host_sync(h, q, &s, 0, HQ_RAW, &c, 2000), &c, ST_INVALID_FIELD);
	s = rw(h, OPC_READ, 0, 1);
	s.flags = 1 << 6;
	s.sgl.type = h->o.xport == HX_RDMA ? SGL_TRANSPORT : SGL_KEYED_ADDR;
	put_le24(s.sgl.len, 512);
	expect("sgl_type_for_other_transport", host_sync(h, q, &s, 0, HQ_RAW, &c, 2000), &c,
	       ST_SGL_TYPE_INVALID);
	s = rw(h, OPC_WRITE, 0, 1);
	s.flags = 1 << 6;
	s.sgl.type = SGL_DATA_OFFSET;
	s.sgl.addr = 4096; /* beyond the 512 bytes that came */
	s.sgl.len[1] = 2;
	expect("incapsule_offset_beyond", host_sync(h, q, &s, 512, HQ_RAW, &c, 2000), &c,
	       ST_SGL_OFFSET_INVALID);
	s.sgl.addr = 0;
	s.sgl.len[1] = 16; /* 4096 claimed, 512 came */
	expect("incapsule_length_beyond", host_sync(h, q, &s, 512, HQ_RAW, &c, 2000), &c,
	       ST_SGL_LEN_INVALID);
	s = rw(h, OPC_WRITE, 0, 8);
	expect("sgl_shorter_than_transfer", host_sync(h, q, &s, 512, HQ_AUTO, &c, 2000), &c,
	       ST_SGL_LEN_INVALID);
	s = rw(h, OPC_READ, 0, 128);
	s.flags = 1 << 6;
	s.sgl.type = h->o.xport == HX_RDMA ? SGL_KEYED_ADDR : SGL_TRANSPORT;
	s.sgl.len[2] = 1; /* 64 KiB: beyond MDTS */
	expect("beyond_mdts", host_sync(h, q, &s, 0, HQ_RAW, &c, 2000), &c, ST_INVALID_FIELD);
	s = rw(h, OPC_WRITE_ZEROES, h->nlb - 4, 8);
	expect("write_zeroes_out_of_range", host_sync(h, q, &s, 0, HQ_AUTO, &c, 2000), &c,
	       ST_LBA_RANGE);
	uint64_t *rg = h->ops->buf(q, 0);
	rg[0] = 1ull << 32; /* context attributes 0, NLB 1 */
	rg[1] = h->nlb;     /* SLBA: the first LBA past the end */
	s = (struct nvme_sqe){ .opc = OPC_DSM, .nsid = h->nsid, .cdw10 = 0, .cdw11 = 4 };
	expect("dsm_range_out_of_range", host_sync(h, q, &s, 16, HQ_AUTO, &c, 2000), &c,
	       ST_LBA_RANGE);
	/* Good commands still work: write, zero, read back zeros, flush. */
	memset(h->ops->buf(q, 0), 0xa5, 4096);
	s = rw(h, OPC_WRITE, 8, 8);
	expect("write_ok", host_sync(h, q, &s, 4096, HQ_AUTO, &c, 2000), &c, ST_OK);
	s = rw(h, OPC_WRITE_ZEROES, 8, 8);
	expect("write_zeroes_ok", host_sync(h, q, &s, 0, HQ_AUTO, &c, 2000), &c, ST_OK);
	s = rw(h, OPC_READ, 8, 8);
	int ret = host_sync(h, q, &s, 4096, HQ_AUTO, &c, 2000);
	const uint8_t *d = h->ops->buf(q, 0);
	bool zero = true;
	for (unsigned i = 0; i < 4096; i++)
		zero &= !d[i];
	if (!ret && !zero)
		c.status = 0x7ff << 1; /* report: not zeros */
	expect("read_back_zeros", ret, &c, ST_OK);
	rg[0] = 8ull << 32;
	rg[1] = 16;
	s = (struct nvme_sqe){ .opc = OPC_DSM, .nsid = h->nsid, .cdw10 = 0, .cdw11 = 4 };
	expect("dsm_deallocate_ok", host_sync(h, q, &s, 16, HQ_AUTO, &c, 2000), &c, ST_OK);
	s = (struct nvme_sqe){ .opc = OPC_FLUSH, .nsid = h->nsid };
	expect("flush_ok", host_sync(h, q, &s, 0, HQ_AUTO, &c, 2000), &c, ST_OK);
}

static void count_cb(void *arg, unsigned slot, const struct nvme_cqe *c)
{
	(*(int *)arg)++;
}

static void admin_checks(struct host *h)
{
	struct nvme_cqe c;
	struct nvme_sqe s = { .opc = OPC_IDENTIFY, .cdw10 = 0x55 };
	expect("identify_bad_cns", host_sync(h, h->aq, &s, 4096, HQ_AUTO, &c, 2000), &c,
	       ST_INVALID_FIELD);
	s = (struct nvme_sqe){ .opc = OPC_GET_LOG, .cdw10 = 0x33 | 127u << 16 };
	expect("log_page_unknown", host_sync(h, h->aq, &s, 512, HQ_AUTO, &c, 2000), &c,
	       ST_INVALID_LOG);
	s = (struct nvme_sqe){ .opc = OPC_GET_LOG, .nsid = 0xffffffff,
			       .cdw10 = LOG_SMART | 127u << 16 };
	expect("log_page_smart", host_sync(h, h->aq, &s, 512, HQ_AUTO, &c, 2000), &c, ST_OK);
	s = (struct nvme_sqe){ .opc = OPC_FABRICS, .cdw11 = 0x40 };
	((uint8_t *)&s)[4] = FCT_PROP_GET;
	expect("property_unknown", host_sync(h, h->aq, &s, 0, HQ_AUTO, &c, 2000), &c,
	       ST_INVALID_FIELD);
	s = (struct nvme_sqe){ .opc = OPC_SET_FEAT, .cdw10 = 0x77 };
	expect("feature_unknown", host_sync(h, h->aq, &s, 0, HQ_AUTO, &c, 2000), &c,
	       ST_INVALID_FIELD);
	s = (struct nvme_sqe){ .opc = OPC_GET_FEAT, .cdw10 = FEAT_KATO };
	expect("get_kato", host_sync(h, h->aq, &s, 0, HQ_AUTO, &c, 2000), &c, ST_OK);
	s = (struct nvme_sqe){ .opc = OPC_KEEP_ALIVE };
	expect("keep_alive", host_sync(h, h->aq, &s, 0, HQ_AUTO, &c, 2000), &c, ST_OK);
	/* An Asynchronous Event Request is held: no completion comes. */
	s = (struct nvme_sqe){ .opc = OPC_AER };
	int seen = 0;
	if (!h->ops->submit(h->aq, 5, &s, 0, HQ_AUTO)) {
		uint64_t end = host_now_ns() + 200000000ull;
		while (host_now_ns() < end)
			h->ops->poll(h->aq, count_cb, &seen);
	}
	printf("%s aer_held\n", seen ? "FAIL" : "ok");
	seen ? fails++ : passes++;
}

static void connect_checks(struct host *h, const struct host_opts *o)
{
	struct nvme_cqe c;
	struct hq *q;
	/* An I/O queue beyond the one granted. */
	if (h->ops->open(&q, o, 5, 8) == 0) {
		int ret = host_connect_queue(h, q, 5, 7, &c);
		expect("connect_qid_not_granted", ret, &c, ST_CONNECT_INVALID);
		if (c.dw0 != CONNECT_IPO_QID)
			printf("FAIL connect_qid_not_granted: IPO %#x\n", c.dw0), fails++;
		h->ops->close(q);
	} else {
		printf("FAIL connect_qid_not_granted: queue did not open\n");
		fails++;
	}
	/* An admin queue with SQSIZE beyond CAP.MQES. */
	if (h->ops->open(&q, o, 0, NVMF_AQ_MIN) == 0) {
		int ret = host_connect_queue(h, q, 0, 200, &c);
		expect("connect_sqsize_too_big", ret, &c, ST_CONNECT_INVALID);
		if (c.dw0 != CONNECT_IPO_SQSIZE)
			printf("FAIL connect_sqsize_too_big: IPO %#x\n", c.dw0), fails++;
		h->ops->close(q);
	}
	if (o->xport == HX_TCP && h->ops->open(&q, o, 1, 8) == 0) {
		struct nvme_sqe s = rw(h, OPC_READ, 0, 1);
		int ret = host_sync(h, q, &s, 512, HQ_AUTO, &c, 2000);
		expect("command_before_connect", ret, &c, ST_CMD_SEQ_ERROR);
		h->ops->close(q);
	}
	if (o->xport != HX_RDMA)
		return;
	/* rdma_cm REQUESTs that lie: the REJECT carries the status. */
	struct host_opts bad = *o;
	bad.cm_qid = 40;
	int ret = h->ops->open(&q, &bad, 1, 8);
	printf("%s cm_reject_qid (reject status %d)\n",
	       !ret || hq_rdma_last_reject != CM_REJ_INVALID_QID ? "FAIL" : "ok",
	       hq_rdma_last_reject);
	!ret || hq_rdma_last_reject != CM_REJ_INVALID_QID ? fails++ : passes++;
	if (!ret)
		h->ops->close(q);
	bad = *o;
	bad.cm_hsqsize = 500;
	ret = h->ops->open(&q, &bad, 1, 8);
	printf("%s cm_reject_hsqsize (reject status %d)\n",
	       !ret || hq_rdma_last_reject != CM_REJ_INVALID_HSQSIZE ? "FAIL" : "ok",
	       hq_rdma_last_reject);
	!ret || hq_rdma_last_reject != CM_REJ_INVALID_HSQSIZE ? fails++ : passes++;
	if (!ret)
		h->ops->close(q);
}

/* NVMe/TCP PDUs that lie: the target answers with a C2HTermReq naming
 * the fatal error, then closes the connection (NVMe/TCP 3.6.2.9). */
static void raw_tcp_check(const struct host_opts *o, const char *name, const void *pdu,
			  size_t len, uint16_t want_fes)
{
	uint8_t in[512];
	int n = hq_tcp_raw(o, pdu, len, in, sizeof(in));
	const struct nvme_tcp_term *t = (const void *)in;
	bool ok = n >= (int)sizeof(*t) && t->h.type == TCP_C2H_TERM && t->fes == want_fes;
	printf("%s %s (%d bytes back, %s fes %u)\n", ok ? "ok" : "FAIL", name, n,
	       n >= (int)sizeof(*t) && t->h.type == TCP_C2H_TERM ? "C2HTermReq" : "no C2HTermReq",
	       n >= (int)sizeof(*t) ? t->fes : 0);
	ok ? passes++ : fails++;
}

static void raw_tcp_checks(const struct host_opts *o)
{
	struct nvme_tcp_cmd cmd = { .h = { .type = TCP_CMD, .hlen = 72, .plen = 72 } };
	raw_tcp_check(o, "tcp_capsule_before_icreq", &cmd, sizeof(cmd), TCP_FES_SEQUENCE);
	struct nvme_tcp_icreq ic = { .h = { .type = TCP_ICREQ, .hlen = 100, .plen = 128 } };
	raw_tcp_check(o, "tcp_icreq_bad_hlen", &ic, sizeof(ic), TCP_FES_HDR_FIELD);
	ic.h.hlen = 128;
	ic.pfv = 7;
	raw_tcp_check(o, "tcp_icreq_bad_pfv", &ic, sizeof(ic), TCP_FES_UNSUPPORTED);
	struct nvme_tcp_r2t r2t = { .h = { .type = TCP_R2T, .hlen = 24, .plen = 24 } };
	raw_tcp_check(o, "tcp_r2t_from_host", &r2t, sizeof(r2t), TCP_FES_HDR_FIELD);
}

/* A keyed SGL whose key the host never registered: the target's RDMA
 * Read fails with a remote access error, which ends that queue's
 * connection (RC has no other answer); the target serves on. */
static void bad_key_check(const struct host_opts *o)
{
	struct host h;
	struct nvme_cqe c;
	int ret = host_start(&h, o, 1, 4);
	int st = -1;
	if (!ret) {
		struct nvme_sqe s = rw(&h, OPC_WRITE, 0, 8);
		s.flags = 1 << 6;
		s.sgl.type = SGL_KEYED_ADDR;
		s.sgl.addr = 0x10000;
		s.sgl.len[1] = 16; /* 4096 */
		memcpy(s.sgl.key, "\xef\xbe\xad\xde", 4);
		st = host_sync(&h, h.ioq[0], &s, 0, HQ_RAW, &c, 1000);
	}
	bool ok = !ret && st && st != -EPROTO;
	printf("%s rdma_bad_rkey_ends_queue (%s)\n", ok ? "ok" : "FAIL",
	       ret ? "no controller" : st == -EPROTO ? "answered with a status" : strerror(-st));
	ok ? passes++ : fails++;
	host_stop(&h);
}

static int set_cc(struct host *h, uint32_t cc)
{
	struct nvme_cqe c;
	struct nvme_sqe s = { .opc = OPC_FABRICS, .cdw11 = PROP_CC, .cdw12 = cc };
	((uint8_t *)&s)[4] = FCT_PROP_SET;
	return host_sync(h, h->aq, &s, 0, HQ_AUTO, &c, 5000);
}

/* Whether the target closes I/O queue q within 5 s (a loaded machine
 * delays it).  NVMe/TCP says so: the connection ends.  NVMe/RDMA does
 * not (a disconnect leaves the host's QP as it was), so a read goes out:
 * no answer in 500 ms means closed; Command Sequence Error means the
 * queue is marked and not closed yet, so ask again; success means the
 * queue still serves I/O, the failure this looks for. */
static bool queue_closed(struct host *h, struct hq *q)
{
	uint64_t end = host_now_ns() + 5000000000ull;
	int seen = 0;
	while (host_now_ns() < end) {
		if (h->o.xport == HX_TCP) {
			if (h->ops->poll(q, count_cb, &seen) < 0)
				return true;
			continue;
		}
		struct nvme_cqe c;
		struct nvme_sqe r = rw(h, OPC_READ, 0, 8);
		int ret = host_sync(h, q, &r, 4096, HQ_AUTO, &c, 500);
		if (ret && ret != -EPROTO)
			return true;
		if (ret != -EPROTO || cqe_status(&c) != ST_CMD_SEQ_ERROR)
			return false;
		usleep(100000);
	}
	return false;
}

static bool queues_end(struct host *h)
{
	bool all = true;
	for (unsigned i = 0; i < h->nioq; i++)
		all &= queue_closed(h, h->ioq[i]);
	return all;
}

/* A controller whose host falls silent for longer than KATO is torn
 * down: its queues stop answering, the I/O ones too (two: with --cores,
 * on another thread than the admin queue and the timer). */
static void kato_check(const struct host_opts *o)
{
	struct host_opts k = *o;
	k.kato = 200; /* expiry within 2 x 200 ms + the 50 ms housekeeping period */
	struct host h;
	struct nvme_cqe c;
	struct nvme_sqe s = { .opc = OPC_KEEP_ALIVE };
	int ret = host_start(&h, &k, 2, 4);
	if (!ret)
		ret = host_sync(&h, h.aq, &s, 0, HQ_AUTO, &c, 1000);
	int after = -1;
	if (!ret) {
		usleep(1500000); /* over three times that bound: a loaded machine delays the target */
		after = host_sync(&h, h.aq, &s, 0, HQ_AUTO, &c, 500);
	}
	bool ioq_gone = !ret && queues_end(&h);
	bool ok = !ret && after && after != -EPROTO && ioq_gone;
	printf("%s keep_alive_timeout (before %d, after %d: %s; I/O queues %s)\n", ok ? "ok" : "FAIL",
	       ret, after, after ? strerror(-after) : "answered", ioq_gone ? "closed" : "not closed");
	ok ? passes++ : fails++;
	host_stop(&h);
}

/* Bring I/O queues 1..n up again on a controller that is enabled anew,
 * and read once on each. */
static int ioq_again(struct host *h, const struct host_opts *o, unsigned n)
{
	struct nvme_cqe c;
	struct nvme_sqe s = { .opc = OPC_FABRICS, .cdw11 = PROP_CSTS };
	((uint8_t *)&s)[4] = FCT_PROP_GET;
	int ret = set_cc(h, CC_EN | 6u << 16 | 4u << 20);
	uint64_t end = host_now_ns() + 5000000000ull;
	for (c.dw0 = 0; !ret && !(c.dw0 & CSTS_RDY);) {
		ret = host_sync(h, h->aq, &s, 0, HQ_AUTO, &c, 5000);
		if (!ret && host_now_ns() > end)
			ret = -ETIMEDOUT;
	}
	for (unsigned i = 0; !ret && i < n; i++) {
		if ((ret = h->ops->open(&h->ioq[i], o, (uint16_t)(i + 1), 16)))
			break;
		h->nioq++;
		h->ops->set_incap(h->ioq[i], h->incap);
		struct nvme_sqe r = rw(h, OPC_READ, 0, 8);
		ret = host_connect_queue(h, h->ioq[i], (uint16_t)(i + 1), 15, &c);
		if (!ret)
			ret = host_sync(h, h->ioq[i], &r, 4096, HQ_AUTO, &c, 5000);
	}
	return ret;
}

/* CC.EN cleared while both I/O queues have reads in flight: the target
 * (with --cores, on other threads than the admin queue's) drops them
 * mid-command; enabled again, new queues with the same QIDs work. */
static void reset_check(const struct host_opts *o)
{
	struct host h;
	int ret = host_start(&h, o, 2, 16);
	for (unsigned i = 0; !ret && i < h.nioq; i++)
		for (unsigned sl = 1; sl < 16; sl++) {
			struct nvme_sqe r = rw(&h, OPC_READ, sl * 8, 8);
			h.ops->submit(h.ioq[i], sl, &r, 4096, HQ_AUTO);
		}
	if (!ret)
		ret = set_cc(&h, 6u << 16 | 4u << 20);
	bool ended = !ret && queues_end(&h);
	for (unsigned i = 0; i < h.nioq; i++)
		h.ops->close(h.ioq[i]);
	h.nioq = 0;
	if (!ret)
		ret = ioq_again(&h, o, 2);
	bool ok = !ret && ended;
	printf("%s reset_under_io (old queues %s; again: %s)\n", ok ? "ok" : "FAIL",
	       ended ? "closed" : "not closed", ret ? strerror(-ret) : "ok");
	ok ? passes++ : fails++;
	host_stop(&h);
}

int nvmf_probe(const struct host_opts *o)
{
	struct host h;
	int ret = host_start(&h, o, 1, 8);
	if (ret) {
		printf("FAIL bring-up: %s (status %#x)\n", strerror(-ret), h.last_status);
		host_stop(&h);
		return 1;
	}
	io_checks(&h);
	admin_checks(&h);
	connect_checks(&h, o);
	host_stop(&h);
	kato_check(o);
	reset_check(o);
	if (o->xport == HX_TCP)
		raw_tcp_checks(o);
	else
		bad_key_check(o);
	printf("probe: %d passed, %d failed\n", passes, fails);
	return fails ? 1 : 0;
}

int nvmf_discover(const struct host_opts *o)
{
	struct host_opts d = *o;
	d.subnqn = NVMF_DISC_NQN;
	struct host h;
	int ret = host_start(&h, &d, 0, 0);
	struct nvme_cqe c;
	if (!ret) {
		/* 8 KiB: the header and up to seven entries. */
		struct nvme_sqe s = { .opc = OPC_GET_LOG, .cdw10 = LOG_DISCOVERY | 2047u << 16 };
		ret = host_sync(&h, h.aq, &s, 8192, HQ_AUTO, &c, 2000);
	}
	if (ret) {
		fprintf(stderr, "discover: %s (status %#x)\n", strerror(-ret), h.last_status);
		host_stop(&h);
		return 1;
	}
	const uint8_t *b = h.ops->buf(h.aq, 0);
	uint64_t n;
	memcpy(&n, b + 8, 8);
	printf("discovery log: %llu records\n", (unsigned long long)n);
	for (uint64_t i = 0; i < n && i < 7; i++) {
		const struct nvmf_disc_entry *e = (const void *)(b + 1024 + i * 1024);
		printf("trtype=%s traddr=%.64s trsvcid=%.32s subnqn=%.223s\n",
		       e->trtype == TRTYPE_RDMA ? "rdma" : e->trtype == TRTYPE_TCP ? "tcp" : "?",
		       e->traddr, e->trsvcid, e->subnqn);
	}
	host_stop(&h);
	return 0;
}
