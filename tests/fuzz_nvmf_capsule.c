/*
 * fuzz_nvmf_capsule.c - libFuzzer harness for command capsules: the SGL
 * decoding (examples/nvmf/wire.c) and the whole NVMe core behind it
 * (core.c, admin.c, io.c) on a 1 MiB RAM namespace.
 *
 * Each input is a run of capsules: 64 bytes of SQE, a byte of flags
 * (which queue, keyed or not, how much in-capsule data follows) and the
 * data.  Two queues are connected and the controller enabled first, with
 * well-formed commands, so mutated commands reach every admin and I/O
 * path, not only "Connect first".  Every command must come back with a
 * completion naming its CID, C2H data no longer than the SGL, and the
 * teardown must leave no controller behind (ASan checks the rest).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t buf[NVMF_MAX_DATA];

static void no_kill(struct nvmf_q *q) { }

static int run(struct nvmf_tgt *t, struct nvmf_q *q, struct nvme_sqe *sqe, const uint8_t *d,
	       uint32_t dlen, int keyed)
{
	struct nvmf_req r = { .sqe = *sqe, .data = buf };
	struct sgl_info sgl = { 0 };
	enum nvme_dir dir = nvmf_sqe_dir(sqe);
	int st = 0;
	if (dir == DIR_BIDI)
		st = ST_INVALID_FIELD;
	else if (dir != DIR_NONE)
		st = nvmf_sgl_parse(sqe, dlen, keyed, &sgl);
	if (st) {
		nvmf_reject(q, &r, (uint16_t)st);
	} else {
		if (sgl.kind == SGLK_INCAP && sgl.addr + sgl.len > dlen)
			abort(); /* the door let a lie through */
		if (sgl.len > NVMF_MAX_DATA)
			abort();
		r.len = dir == DIR_NONE ? 0 : sgl.len;
		memset(buf, 0, sizeof(buf));
		if (sgl.kind == SGLK_INCAP)
			memcpy(buf, d + sgl.addr, sgl.len);
		if (nvmf_exec(t, q, &r) == NVMF_HELD)
			return 0;
	}
	if (r.cqe.cid != sqe->cid || r.xfer > r.len)
		abort();
	return (r.cqe.status >> 1) & 0x7ff;
}

static void setup(struct nvmf_tgt *t, struct nvmf_q *aq, struct nvmf_q *ioq)
{
	struct nvme_sqe s = { .opc = OPC_FABRICS, .flags = 0x40 };
	uint8_t cd[1024] = { 0 };
	struct nvmf_connect_data *d = (void *)cd;
	strcpy(d->subnqn, "nqn.fuzz:a");
	strcpy(d->hostnqn, "nqn.fuzz:host");
	d->cntlid = 0xffff;
	((uint8_t *)&s)[4] = FCT_CONNECT;
	s.sgl.type = SGL_DATA_OFFSET;
	s.sgl.len[1] = 4; /* 1024 bytes in the capsule */
	s.cdw11 = 31;
	if (run(t, aq, &s, cd, sizeof(cd), 0))
		abort();
	struct nvme_sqe p = { .opc = OPC_FABRICS, .flags = 0x40, .cdw11 = PROP_CC,
			      .cdw12 = CC_EN | 6u << 16 | 4u << 20 };
	((uint8_t *)&p)[4] = FCT_PROP_SET;
	if (run(t, aq, &p, NULL, 0, 0))
		abort();
	d->cntlid = (uint16_t)aq->ctrl->cntlid;
	s.cdw10 = 1u << 16;
	s.cdw11 = 15;
	if (run(t, ioq, &s, cd, sizeof(cd), 0))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct nvmf_tgt t;
	static uint8_t ram[1 << 20];
	nvmf_tgt_init(&t);
	struct nvmf_subsys *s = nvmf_subsys_add(&t, "nqn.fuzz:a");
	s->allow_any = true;
	s->nns = 1;
	s->ns[0] = (struct nvmf_ns){ .nsid = 1, .nlb = sizeof(ram) >> NVMF_LBA_SHIFT, .fd = -1,
				     .ram = ram };
	struct nvmf_q q[3];
	memset(q, 0, sizeof(q));
	for (int i = 0; i < 3; i++) {
		q[i].cm_qid = q[i].cm_sqsize = -1;
		q[i].kill = no_kill;
	}
	setup(&t, &q[0], &q[1]);
	while (size >= 65) {
		struct nvme_sqe sqe;
		memcpy(&sqe, data, 64);
		uint8_t f = data[64];
		data += 65;
		size -= 65;
		uint32_t dlen = (uint32_t)(f >> 3) * 256; /* up to 7936 bytes */
		if (dlen > size)
			dlen = (uint32_t)size;
		run(&t, &q[f & 1 ? 1 : (f & 2 ? 2 : 0)], &sqe, data, dlen, (f >> 2) & 1);
		data += dlen;
		size -= dlen;
	}
	for (int i = 0; i < 3; i++)
		nvmf_q_gone(&q[i]);
	for (unsigned i = 0; i < NVMF_MAX_CTRL; i++)
		if (t.ctrls[i])
			abort(); /* a controller outlived every queue */
	return 0;
}
