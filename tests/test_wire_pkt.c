/*
 * test_wire_pkt.c - opcode table, header build/parse, PSN arithmetic.
 *
 * Checks:
 *  - the opcode table: which opcodes exist, flag consistency, and the
 *    header offsets that follow from docs/wire.md §3 (typed in here
 *    independently of the offset macros in opcode.c);
 *  - the segmentation helpers;
 *  - build -> parse round trip of every field of every opcode with random
 *    values (24-bit masking of PSN/QPN/MSN/source QP, pad derived from
 *    paylen, build writes exactly hdr_len bytes);
 *  - PSN compare/add/diff across the 2^24 wrap;
 *  - decoding the tsv vectors gives the documented fields (G01-G18, plus
 *    E1, E2, E4, E5);
 *  - rejection of malformed input: every truncation, TVer != 0, unknown
 *    opcodes, pad > payload, stray bytes after header-only packets;
 *  - the UDP source port and RNR timer facts of docs/wire.md §1 and §7.1.
 *
 * Usage: test_wire_pkt [roce-frames.tsv]
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/icrc.h"
#include "wire/opcode.h"
#include "wire/roce_hdr.h"
#include "check.h"

/* test_wire_util.c */
int wt_load_vectors(const char *path);
const char *wt_vec_id(int i);
const uint8_t *wt_vec_frame(int i, size_t *len);
int wt_vec_find(const char *id);
uint64_t wt_rand(uint64_t *state);

/* Every scalar field of struct srn_pkt, for field-by-field comparison. */
#define PKT_FIELDS(X)							\
	X(opcode) X(se) X(mig) X(pad) X(pkey) X(fecn) X(becn) X(dqpn)	\
	X(ackreq) X(psn) X(reth_va) X(reth_rkey) X(reth_len)		\
	X(aeth_syndrome) X(aeth_msn) X(imm_be) X(ieth_rkey) X(deth_qkey) \
	X(deth_sqpn) X(atm_va) X(atm_rkey) X(atm_swap_add) X(atm_compare) \
	X(atm_orig) X(paylen) X(icrc) X(feth)

static void compare_pkt(const char *what, const struct srn_pkt *got,
			const struct srn_pkt *exp)
{
#define CMP(f)								\
	CHECK(got->f == exp->f, "%s: " #f " = %#llx, want %#llx", what,	\
	      (unsigned long long)got->f, (unsigned long long)exp->f);
	PKT_FIELDS(CMP)
#undef CMP
}

static const uint8_t rc_ops[] = {
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a,
	0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x16,
	0x17, 0x1c, 0x1d,
};

static int expected_opcode(unsigned op)
{
	for (size_t i = 0; i < sizeof(rc_ops); i++)
		if (op == rc_ops[i])
			return 1;
	/* XRC (0xa0..): RC's opcodes moved up by 0xa0, minus FLUSH and
	 * ATOMIC_WRITE. */
	if (op >= 0xa0 && op <= 0xb7)
		return op != 0xb5 && expected_opcode(op - 0xa0);
	return (op >= 0x20 && op <= 0x2b) || op == 0x64 || op == 0x65 ||
	       op == 0x81;
}

static void test_table(void)
{
	static const struct {
		uint8_t op, hdr_len, reth, aeth, immdt, ieth, deth, atmeth,
			atmack, feth, payload;
	} doc[] = {
		/* op  len reth aeth imm ieth deth atm ack feth P   (wire.md §3) */
		{ 0x00, 12,  0,  0,  0,  0,  0,  0,  0,  0, 1 },
		{ 0x03, 16,  0,  0, 12,  0,  0,  0,  0,  0, 1 },
		{ 0x06, 28, 12,  0,  0,  0,  0,  0,  0,  0, 1 },
		{ 0x09, 16,  0,  0, 12,  0,  0,  0,  0,  0, 1 },
		{ 0x0b, 32, 12,  0, 28,  0,  0,  0,  0,  0, 1 },
		{ 0x0c, 28, 12,  0,  0,  0,  0,  0,  0,  0, 0 },
		{ 0x0d, 16,  0, 12,  0,  0,  0,  0,  0,  0, 1 },
		{ 0x0e, 12,  0,  0,  0,  0,  0,  0,  0,  0, 1 },
		{ 0x0f, 16,  0, 12,  0,  0,  0,  0,  0,  0, 1 },
		{ 0x10, 16,  0, 12,  0,  0,  0,  0,  0,  0, 1 },
		{ 0x11, 16,  0, 12,  0,  0,  0,  0,  0,  0, 0 },
		{ 0x12, 24,  0, 12,  0,  0,  0,  0, 16,  0, 0 },
		{ 0x13, 40,  0,  0,  0,  0,  0, 12,  0,  0, 0 },
		{ 0x14, 40,  0,  0,  0,  0,  0, 12,  0,  0, 0 },
		{ 0x16, 16,  0,  0,  0, 12,  0,  0,  0,  0, 1 },
		{ 0x17, 16,  0,  0,  0, 12,  0,  0,  0,  0, 1 },
		{ 0x1c, 32, 16,  0,  0,  0,  0,  0,  0, 12, 0 },
		{ 0x1d, 28, 12,  0,  0,  0,  0,  0,  0,  0, 1 },
		{ 0x2b, 32, 12,  0, 28,  0,  0,  0,  0,  0, 1 },
		{ 0x64, 20,  0,  0,  0,  0, 12,  0,  0,  0, 1 },
		{ 0x65, 24,  0,  0, 20,  0, 12,  0,  0,  0, 1 },
		{ 0x81, 28,  0,  0,  0,  0,  0,  0,  0,  0, 0 },
	};
	int count = 0;

	for (unsigned op = 0; op < 256; op++) {
		const struct srn_opcode_info *in = srn_opcode_info((uint8_t)op);
		unsigned seg, kind, dir;

		CHECK(!!in == expected_opcode(op), "opcode %#x presence", op);
		CHECK(srn_opcode_name((uint8_t)op) != NULL, "name %#x", op);
		if (!in) {
			CHECK(!strcmp(srn_opcode_name((uint8_t)op), "UNKNOWN"),
			      "name of %#x", op);
			continue;
		}
		count++;
		CHECK(in->hdr_len <= SRN_MAX_HDR_LEN && in->hdr_len % 4 == 0,
		      "%s hdr_len %u", in->name, in->hdr_len);
		if (op == SRN_OP_CNP) {
			CHECK(in->flags == 0, "CNP flags");
			continue;
		}
		CHECK(!strncmp(in->name, op < 0x20 ? "RC_" : op < 0x40 ? "UC_" :
			       op < 0xa0 ? "UD_" : "XRC", 3), "%s prefix", in->name);
		/* XRC requests carry an XRCETH right after the BTH. */
		CHECK(!(in->hdr_mask & SRN_HDR_XRCETH) ==
		      !(op >= 0xa0 && (in->flags & SRN_OPF_REQ)), "%s: XRCETH", in->name);
		if (in->hdr_mask & SRN_HDR_XRCETH)
			CHECK(in->off_xrceth == SRN_BTH_LEN, "%s: XRCETH offset", in->name);
		seg = in->flags & (SRN_OPF_FIRST | SRN_OPF_MIDDLE |
				   SRN_OPF_LAST | SRN_OPF_ONLY);
		kind = in->flags & (SRN_OPF_SEND | SRN_OPF_WRITE |
				    SRN_OPF_READ_REQ | SRN_OPF_READ_RESP |
				    SRN_OPF_ACK | SRN_OPF_ATOMIC |
				    SRN_OPF_FLUSH | SRN_OPF_ATOMIC_WRITE);
		dir = in->flags & (SRN_OPF_REQ | SRN_OPF_RESP);
		CHECK(seg && !(seg & (seg - 1)), "%s: one position", in->name);
		CHECK(kind && !(kind & (kind - 1)), "%s: one kind", in->name);
		CHECK(dir && !(dir & (dir - 1)), "%s: one direction", in->name);
		CHECK(!(in->flags & SRN_OPF_IMM) == !(in->hdr_mask & SRN_HDR_IMMDT),
		      "%s: IMM flag vs ImmDt", in->name);
		CHECK(!(in->flags & SRN_OPF_INV) == !(in->hdr_mask & SRN_HDR_IETH),
		      "%s: INV flag vs IETH", in->name);
		CHECK(!(in->flags & (SRN_OPF_READ_RESP | SRN_OPF_ACK)) ==
		      !(in->flags & SRN_OPF_RESP), "%s: responses", in->name);
		CHECK(!(in->hdr_mask & SRN_HDR_DETH) == (op < 0x60 || op >= 0xa0),
		      "%s: DETH iff UD", in->name);
	}
	CHECK(count == 25 + 12 + 2 + 1 + 23, "%d opcodes", count);

	for (size_t i = 0; i < sizeof(doc) / sizeof(doc[0]); i++) {
		const struct srn_opcode_info *in = srn_opcode_info(doc[i].op);

		if (!in) {
			CHECK(0, "opcode %#x missing", doc[i].op);
			continue;
		}
		CHECK(in->hdr_len == doc[i].hdr_len && in->off_reth == doc[i].reth &&
		      in->off_aeth == doc[i].aeth && in->off_immdt == doc[i].immdt &&
		      in->off_ieth == doc[i].ieth && in->off_deth == doc[i].deth &&
		      in->off_atmeth == doc[i].atmeth &&
		      in->off_atmack == doc[i].atmack && in->off_feth == doc[i].feth &&
		      !(in->hdr_mask & SRN_HDR_PAYLOAD) == !doc[i].payload,
		      "%s: layout differs from the doc", in->name);
	}
}

static void test_segmentation(void)
{
	static const uint8_t tr[] = { SRN_TRANSPORT_RC, SRN_TRANSPORT_UC,
				      SRN_TRANSPORT_UD };

	CHECK(srn_seg_of(0, 1) == SRN_SEG_ONLY, "only");
	CHECK(srn_seg_of(0, 3) == SRN_SEG_FIRST, "first");
	CHECK(srn_seg_of(1, 3) == SRN_SEG_MIDDLE, "middle");
	CHECK(srn_seg_of(2, 3) == SRN_SEG_LAST, "last");
	CHECK(srn_seg_of(1, 2) == SRN_SEG_LAST, "last of 2");
	CHECK(srn_opcode_send(SRN_TRANSPORT_RC, SRN_SEG_ONLY, false, false) ==
	      SRN_OP_RC_SEND_ONLY, "rc send only");
	CHECK(srn_opcode_send(SRN_TRANSPORT_RC, SRN_SEG_LAST, false, true) ==
	      SRN_OP_RC_SEND_LAST_WITH_INVALIDATE, "rc send last inv");
	CHECK(srn_opcode_send(SRN_TRANSPORT_UD, SRN_SEG_ONLY, true, false) ==
	      SRN_OP_UD_SEND_ONLY_WITH_IMMEDIATE, "ud send imm");
	CHECK(srn_opcode_write(SRN_TRANSPORT_UC, SRN_SEG_LAST, true) ==
	      SRN_OP_UC_RDMA_WRITE_LAST_WITH_IMMEDIATE, "uc write last imm");
	CHECK(srn_opcode_read_resp(SRN_SEG_MIDDLE) ==
	      SRN_OP_RC_RDMA_READ_RESPONSE_MIDDLE, "read resp middle");
	CHECK(srn_opcode_send(SRN_TRANSPORT_UD, SRN_SEG_FIRST, false, false) ==
	      -EINVAL, "ud first");
	CHECK(srn_opcode_send(SRN_TRANSPORT_UC, SRN_SEG_ONLY, false, true) ==
	      -EINVAL, "uc inv");
	CHECK(srn_opcode_write(SRN_TRANSPORT_UD, SRN_SEG_ONLY, false) == -EINVAL,
	      "ud write");
	CHECK(srn_opcode_send(SRN_TRANSPORT_RD, SRN_SEG_ONLY, false, false) ==
	      -EINVAL, "rd");

	/* Whatever they return must carry the asked-for properties. */
	for (size_t t = 0; t < sizeof(tr); t++) {
		for (int seg = SRN_SEG_ONLY; seg <= SRN_SEG_LAST; seg++) {
			static const uint16_t segf[] = {
				SRN_OPF_ONLY, SRN_OPF_FIRST, SRN_OPF_MIDDLE,
				SRN_OPF_LAST };
			int ends = seg == SRN_SEG_ONLY || seg == SRN_SEG_LAST;

			for (int v = 0; v < 8; v++) {
				bool imm = v & 1, inv = v & 2, wr = v & 4;
				int op = wr ? srn_opcode_write(tr[t], seg, imm) :
					      srn_opcode_send(tr[t], seg, imm, inv);
				const struct srn_opcode_info *in;

				if (op < 0)
					continue;
				in = srn_opcode_info((uint8_t)op);
				CHECK(in && srn_opcode_transport((uint8_t)op) == tr[t] &&
				      (in->flags & segf[seg]) &&
				      (in->flags & (wr ? SRN_OPF_WRITE : SRN_OPF_SEND)) &&
				      !!(in->flags & SRN_OPF_IMM) == (imm && ends) &&
				      (wr || !!(in->flags & SRN_OPF_INV) == (inv && ends)),
				      "pick t=%#x seg=%d v=%d -> %#x", tr[t], seg, v, op);
			}
		}
	}
}

/* What parse must return for p built with info: masked, absent zeroed. */
static struct srn_pkt expected_of(const struct srn_pkt *p,
				  const struct srn_opcode_info *in)
{
	struct srn_pkt e = *p;
	uint16_t m = in->hdr_mask;

	e.pad = srn_pad_of(p->paylen);
	e.dqpn &= SRN_QPN_MASK;
	e.psn &= SRN_PSN_MASK;
	e.aeth_msn &= SRN_MSN_MASK;
	e.deth_sqpn &= SRN_QPN_MASK;
	e.feth &= SRN_FETH_PLT_MASK | SRN_FETH_SEL_MASK;
	if (!(m & SRN_HDR_RETH))
		e.reth_va = e.reth_rkey = e.reth_len = 0;
	if (!(m & SRN_HDR_AETH))
		e.aeth_syndrome = 0, e.aeth_msn = 0;
	if (!(m & SRN_HDR_IMMDT))
		e.imm_be = 0;
	if (!(m & SRN_HDR_IETH))
		e.ieth_rkey = 0;
	if (!(m & SRN_HDR_DETH))
		e.deth_qkey = e.deth_sqpn = 0;
	if (!(m & SRN_HDR_ATMETH))
		e.atm_va = e.atm_swap_add = e.atm_compare = 0, e.atm_rkey = 0;
	if (!(m & SRN_HDR_ATMACK))
		e.atm_orig = 0;
	if (!(m & SRN_HDR_FETH))
		e.feth = 0;
	return e;
}

static void test_round_trip(void)
{
	uint64_t s = 7;

	for (unsigned op = 0; op < 256; op++) {
		const struct srn_opcode_info *in = srn_opcode_info((uint8_t)op);

		for (int it = 0; in && it < 300; it++) {
			struct srn_pkt p = { 0 }, got, e;
			uint8_t out[SRN_MAX_HDR_LEN + 16], *pkt;
			size_t len;
			int rc;

			p.opcode = (uint8_t)op;
			p.se = wt_rand(&s) & 1;
			p.mig = wt_rand(&s) & 1;
			p.fecn = wt_rand(&s) & 1;
			p.becn = wt_rand(&s) & 1;
			p.ackreq = wt_rand(&s) & 1;
			p.pad = (uint8_t)wt_rand(&s);	/* ignored by build */
			p.pkey = (uint16_t)wt_rand(&s);
			p.dqpn = (uint32_t)wt_rand(&s);
			p.psn = (uint32_t)wt_rand(&s);
			p.reth_va = wt_rand(&s);
			p.reth_rkey = (uint32_t)wt_rand(&s);
			p.reth_len = (uint32_t)wt_rand(&s);
			p.aeth_syndrome = (uint8_t)wt_rand(&s);
			p.aeth_msn = (uint32_t)wt_rand(&s);
			p.imm_be = (uint32_t)wt_rand(&s);
			p.ieth_rkey = (uint32_t)wt_rand(&s);
			p.deth_qkey = (uint32_t)wt_rand(&s);
			p.deth_sqpn = (uint32_t)wt_rand(&s);
			p.atm_va = wt_rand(&s);
			p.atm_rkey = (uint32_t)wt_rand(&s);
			p.atm_swap_add = wt_rand(&s);
			p.atm_compare = wt_rand(&s);
			p.atm_orig = wt_rand(&s);
			p.feth = (uint32_t)wt_rand(&s);
			p.icrc = (uint32_t)wt_rand(&s);
			if (in->hdr_mask & SRN_HDR_PAYLOAD)
				p.paylen = it < 8 ? (uint32_t)it :
					   (uint32_t)(wt_rand(&s) % 300);

			memset(out, 0xaa, sizeof(out));
			rc = srn_pkt_build_hdr(out, &p);
			CHECK(rc == in->hdr_len, "%s: build %d", in->name, rc);
			for (size_t k = in->hdr_len; k < sizeof(out); k++)
				CHECK(out[k] == 0xaa, "%s: wrote byte %zu", in->name, k);
			CHECK((out[1] & SRN_BTH_TVER_MASK) == 0 &&
			      (out[8] & 0x7f) == 0 && (out[4] & 0x3f) == 0,
			      "%s: reserved bits", in->name);

			len = srn_pkt_wire_len(in, p.paylen);
			pkt = malloc(len);	/* exact size: ASan sees overreads */
			if (!pkt)
				abort();
			memcpy(pkt, out, in->hdr_len);
			for (uint32_t k = 0; k < p.paylen; k++)
				pkt[in->hdr_len + k] = (uint8_t)wt_rand(&s);
			memset(pkt + in->hdr_len + p.paylen, 0, srn_pad_of(p.paylen));
			srn_icrc_put(pkt + len - SRN_ICRC_LEN, p.icrc);

			rc = srn_pkt_parse(pkt, len, &got);
			CHECK(rc == 0, "%s: parse %d", in->name, rc);
			e = expected_of(&p, in);
			compare_pkt(in->name, &got, &e);
			CHECK(got.info == in && got.payload == pkt + in->hdr_len,
			      "%s: info/payload", in->name);
			free(pkt);
		}
	}

	/* Build refuses what has no layout. */
	{
		struct srn_pkt p = { .opcode = 0x15 };
		uint8_t out[SRN_MAX_HDR_LEN];

		CHECK(srn_pkt_build_hdr(out, &p) == -EINVAL, "reserved 0x15");
		p.opcode = SRN_OP_RC_ACKNOWLEDGE;
		p.paylen = 4;
		CHECK(srn_pkt_build_hdr(out, &p) == -EINVAL, "ACK with payload");
	}
}

static void test_psn(void)
{
	uint64_t s = 3;

	CHECK(srn_psn_cmp(5, 5) == 0, "eq");
	CHECK(srn_psn_cmp(6, 5) > 0 && srn_psn_cmp(5, 6) < 0, "simple");
	CHECK(srn_psn_cmp(0, 0xffffff) > 0, "0 follows 0xffffff");
	CHECK(srn_psn_cmp(0xffffff, 0) < 0, "0xffffff precedes 0");
	CHECK(srn_psn_cmp(0x7fffff, 0) > 0, "2^23-1 ahead");
	CHECK(srn_psn_cmp(0x800001, 0) < 0, "2^23+1 ahead is behind");
	CHECK(srn_psn_add(0xffffff, 1) == 0, "add wrap");
	CHECK(srn_psn_add(0xfffffe, 3) == 1, "add wrap 3");
	CHECK(srn_psn_add(0x10, 0x1000000) == 0x10, "add 2^24");
	CHECK(srn_psn_diff(1, 0xffffff) == 2, "diff wrap");
	for (int i = 0; i < 100000; i++) {
		uint32_t a = (uint32_t)wt_rand(&s) & SRN_PSN_MASK;
		uint32_t d = (uint32_t)wt_rand(&s) & SRN_PSN_MASK;
		uint32_t b = srn_psn_add(a, d);
		int c = srn_psn_cmp(b, a);

		CHECK(b <= SRN_PSN_MASK, "add masks");
		CHECK(srn_psn_diff(b, a) == d, "diff");
		if (d == 0)
			CHECK(c == 0, "d=0");
		else if (d < 0x800000)
			CHECK(c > 0 && srn_psn_cmp(a, b) < 0, "a=%x d=%x", a, d);
		else if (d > 0x800000)
			CHECK(c < 0 && srn_psn_cmp(a, b) > 0, "a=%x d=%x", a, d);
		/* Bits above 24 must not matter. */
		CHECK(srn_psn_cmp(b | 0xab000000u, a | 0x5c000000u) == c,
		      "high bits");
	}
}

struct vec_expect {
	const char *id;
	struct srn_pkt p;	/* every field not listed must parse as 0 */
	const char *payload;	/* NULL: not compared */
};

#define V(_id, pl, ...)	{ .id = _id, .payload = pl, \
			  .p = { .pkey = 0xffff, __VA_ARGS__ } }

/* The UDP (or GRH) payload of vector i, copied to an exact-size buffer. */
static uint8_t *vector_payload(int i, size_t *len)
{
	struct srn_frame f;
	size_t flen;
	const uint8_t *fr = wt_vec_frame(i, &flen);
	uint8_t *b;

	if (srn_frame_decode(fr, flen, &f) != 0)
		return NULL;
	b = malloc(f.bth_len);
	if (!b)
		abort();
	memcpy(b, f.bth, f.bth_len);
	*len = f.bth_len;
	return b;
}

static void test_vectors(void)
{
	/* Not static: htobe32() is not a constant expression. */
	const struct vec_expect vec_expect[] = {
		V("G01", "hello RoCEv2!", .opcode = 0x04, .ackreq = 1, .psn = 0x100,
		  .dqpn = 0x11, .pad = 3, .paylen = 13),
		V("G02", "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d"
		  "\x0e\x0f", .opcode = 0x0a, .ackreq = 1, .psn = 0x101, .dqpn = 0x11,
		  .reth_va = 0x7f0000001000, .reth_rkey = 0x1234, .reth_len = 16,
		  .paylen = 16),
		V("G03", "ABCDEFGH", .opcode = 0x0b, .se = 1, .ackreq = 1,
		  .psn = 0x102, .dqpn = 0x11, .reth_va = 0x7f0000002000,
		  .reth_rkey = 0x1234, .reth_len = 8,
		  .imm_be = htobe32(0xdeadbeef), .paylen = 8),
		V("G04", "", .opcode = 0x0c, .ackreq = 1, .psn = 0x103, .dqpn = 0x11,
		  .reth_va = 0x7f0000003000, .reth_rkey = 0x1234, .reth_len = 4096),
		V("G05", "01234567", .opcode = 0x10, .psn = 0x103, .dqpn = 0x22,
		  .aeth_syndrome = 0x1f, .aeth_msn = 3, .paylen = 8),
		V("G06", "", .opcode = 0x11, .psn = 0x104, .dqpn = 0x22,
		  .aeth_syndrome = SRN_AETH_ACK_UNLIMITED, .aeth_msn = 4),
		V("G07", "", .opcode = 0x11, .psn = 0x105, .dqpn = 0x22,
		  .aeth_syndrome = SRN_AETH_NAK_PSN_SEQ, .aeth_msn = 4),
		V("G08", "", .opcode = 0x11, .psn = 0x105, .dqpn = 0x22,
		  .aeth_syndrome = SRN_AETH_RNR_NAK | 14, .aeth_msn = 4),
		V("G09", "", .opcode = 0x13, .ackreq = 1, .psn = 0x106, .dqpn = 0x11,
		  .atm_va = 0x7f0000004000, .atm_rkey = 0x1234,
		  .atm_swap_add = 0x1111111111111111, .atm_compare = 0x2222222222222222),
		V("G10", "", .opcode = 0x14, .ackreq = 1, .psn = 0x107, .dqpn = 0x11,
		  .atm_va = 0x7f0000004008, .atm_rkey = 0x1234, .atm_swap_add = 1),
		V("G11", "", .opcode = 0x12, .psn = 0x106, .dqpn = 0x22,
		  .aeth_syndrome = 0x1f, .aeth_msn = 5, .atm_orig = 0x2222222222222222),
		V("G12", "WXYZ", .opcode = 0x05, .ackreq = 1, .psn = 0x108,
		  .dqpn = 0x11, .imm_be = htobe32(0x01020304), .paylen = 4),
		V("G13", "inv!", .opcode = 0x17, .ackreq = 1, .psn = 0x109,
		  .dqpn = 0x11, .ieth_rkey = 0x5678, .paylen = 4),
		V("G14", "ud!!", .opcode = 0x64, .dqpn = 0x33, .deth_qkey = 0x11111111,
		  .deth_sqpn = 0x12, .paylen = 4),
		V("G15", "", .opcode = 0x65, .psn = 1, .dqpn = 0x33,
		  .deth_qkey = 0x11111111, .deth_sqpn = 0x12,
		  .imm_be = htobe32(0xcafef00d)),
		V("G16", "uc!!", .opcode = 0x2a, .psn = 0x200, .dqpn = 0x44,
		  .reth_va = 0x1000, .reth_rkey = 0x99, .reth_len = 4, .paylen = 4),
		V("G17", "", .opcode = SRN_OP_CNP, .becn = 1, .dqpn = 0x11),
		V("G18", "v6v6", .opcode = 0x04, .ackreq = 1, .psn = 0x100,
		  .dqpn = 0x11, .paylen = 4),
		/* External: the CX-4 Lx CNP, scapy's UC packet (M=1, pad 2) and the
		 * two Mellanox RoCEv1 captures (M=1). */
		V("E1", "", .opcode = SRN_OP_CNP, .becn = 1, .dqpn = 0x118),
		V("E2", NULL, .opcode = 0x24, .mig = 1, .pad = 2, .dqpn = 0xd3,
		  .psn = 0xcf1710, .paylen = 18),
		V("E4", "\x00\x00\x00\x00\x01", .opcode = 0x0a, .mig = 1, .pad = 3,
		  .dqpn = 0x10a, .ackreq = 1, .psn = 0xa788bc,
		  .reth_va = 0x55d4c0726000, .reth_rkey = 0x47b3, .reth_len = 5,
		  .paylen = 5),
		V("E5", "", .opcode = 0x11, .mig = 1, .dqpn = 0x109, .psn = 0xa788c0,
		  .aeth_syndrome = 0, .aeth_msn = 5),
	};

	for (size_t k = 0; k < sizeof(vec_expect) / sizeof(vec_expect[0]); k++) {
		const struct vec_expect *ve = &vec_expect[k];
		int i = wt_vec_find(ve->id);
		struct srn_pkt got, exp = ve->p;
		uint8_t *b;
		size_t len = 0;

		CHECK(i >= 0, "%s missing", ve->id);
		b = i >= 0 ? vector_payload(i, &len) : NULL;
		if (!b) {
			CHECK(i < 0, "%s: frame decode", ve->id);
			continue;
		}
		CHECK(srn_pkt_parse(b, len, &got) == 0, "%s: parse", ve->id);
		exp.icrc = srn_icrc_get(b + len - SRN_ICRC_LEN);
		compare_pkt(ve->id, &got, &exp);
		if (ve->payload && got.paylen == exp.paylen)
			CHECK(got.payload && !memcmp(got.payload, ve->payload,
						     got.paylen),
			      "%s: payload bytes", ve->id);
		free(b);
	}
	CHECK(srn_rnr_timer_usec(14) == 1280, "G08 timer code 14 = 1.28 ms");
}

/* Malformed input derived from every valid vector. */
static void test_rejects(int nvec)
{
	uint64_t s = 11;

	for (int i = 0; i < nvec; i++) {
		struct srn_pkt ok, p;
		size_t len;
		uint8_t *b = vector_payload(i, &len), *t;
		const char *id = wt_vec_id(i);

		if (!b || srn_pkt_parse(b, len, &ok) != 0) {
			CHECK(0, "%s: baseline", id);
			free(b);
			continue;
		}

		/* Truncations: fatal unless only whole 4-byte words of
		 * payload+pad are cut, which no length field can reveal (the
		 * ICRC does).  Then the headers must be unchanged. */
		for (size_t n = 0; n < len; n++) {
			size_t cut = len - n;
			int rc;

			t = malloc(n ? n : 1);
			if (!t)
				abort();
			memcpy(t, b, n);
			rc = srn_pkt_parse(t, n, &p);
			if (cut % 4 == 0 && (ok.info->hdr_mask & SRN_HDR_PAYLOAD) &&
			    n >= (size_t)ok.info->hdr_len + SRN_ICRC_LEN + ok.pad) {
				CHECK(rc == 0 && p.info == ok.info &&
				      p.paylen + p.pad + cut == ok.paylen + ok.pad &&
				      p.psn == ok.psn && p.reth_va == ok.reth_va,
				      "%s: cut %zu words", id, cut);
			} else {
				CHECK(rc < 0, "%s: truncated to %zu accepted", id, n);
			}
			free(t);
		}

		/* TVer != 0: a future header format. */
		for (uint8_t v = 1; v < 16; v++) {
			b[1] ^= v;
			CHECK(srn_pkt_parse(b, len, &p) == -EPROTONOSUPPORT,
			      "%s: TVer %u", id, v);
			b[1] ^= v;
		}

		/* Every opcode without an entry. */
		for (unsigned op = 0; op < 256; op++) {
			uint8_t keep = b[0];

			if (srn_opcode_info((uint8_t)op))
				continue;
			b[0] = (uint8_t)op;
			CHECK(srn_pkt_parse(b, len, &p) == -EPROTONOSUPPORT,
			      "%s: opcode %#x", id, op);
			b[0] = keep;
		}

		/* Pad counts that do not fit: more pad than bytes after the
		 * headers, or any pad/stray byte on a header-only opcode. */
		for (uint8_t pad = 0; pad < 4; pad++) {
			size_t rem = len - SRN_ICRC_LEN - ok.info->hdr_len;
			int want_ok = (ok.info->hdr_mask & SRN_HDR_PAYLOAD) ?
				      pad <= rem : pad == 0;

			b[1] = (uint8_t)((b[1] & ~SRN_BTH_PAD_MASK) |
					 pad << SRN_BTH_PAD_SHIFT);
			CHECK((srn_pkt_parse(b, len, &p) == 0) == want_ok,
			      "%s: pad %u", id, pad);
			CHECK(want_ok || srn_pkt_parse(b, len, &p) == -EBADMSG,
			      "%s: pad %u errno", id, pad);
		}
		free(b);

		/* Extra bytes: 1..7 more, random contents. */
		{
			size_t flen;
			const uint8_t *fr = wt_vec_frame(i, &flen);
			uint8_t *x;
			struct srn_frame f;

			if (srn_frame_decode(fr, flen, &f) != 0)
				continue;
			for (size_t extra = 1; extra < 8; extra++) {
				int want_ok = (ok.info->hdr_mask & SRN_HDR_PAYLOAD) &&
					      extra % 4 == 0;

				x = malloc(len + extra);
				if (!x)
					abort();
				memcpy(x, f.bth, len);
				for (size_t k = 0; k < extra; k++)
					x[len + k] = (uint8_t)wt_rand(&s);
				CHECK((srn_pkt_parse(x, len + extra, &p) == 0) == want_ok,
				      "%s: %zu extra bytes", id, extra);
				free(x);
			}
		}
	}

	{
		struct srn_pkt p;

		CHECK(srn_pkt_parse((const uint8_t *)"", 0, &p) == -EBADMSG,
		      "empty");
	}
}

static void test_udp_sport(void)
{
	/* docs/wire.md §1, worked values. */
	CHECK(srn_udp_sport(0, 0x11, 0x12) == 0xc132, "11/12");
	CHECK(srn_udp_sport(0, 0x12, 0x11) == 0xc132, "symmetric");
	CHECK(srn_udp_sport(0, 0xd3, 0x118) == 0xe6cb, "d3/118");
	CHECK(srn_udp_sport(0, 0x1234, 0x5678) == 0xc01a, "1234/5678");
	CHECK(srn_udp_sport(0x12345, 0x11, 0x12) == 0xe341, "flow label");
	CHECK(srn_rnr_timer_usec(0) == 655360 && srn_rnr_timer_usec(1) == 10 &&
	      srn_rnr_timer_usec(25) == 61440 && srn_rnr_timer_usec(31) == 491520,
	      "RNR table");
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : SRN_FRAMES_TSV;
	int n = wt_load_vectors(path);

	if (n < 0)
		return 1;
	test_table();
	test_segmentation();
	test_round_trip();
	test_psn();
	test_vectors();
	test_rejects(n);
	test_udp_sport();

	if (srn_check_failures)
		fprintf(stderr, "test_wire_pkt: %d check(s) failed\n", srn_check_failures);
	return srn_check_failures ? 1 : 0;
}
