/*
 * test_wire_robust.c - srn_pkt_parse on 200 000 hostile buffers.
 *
 * Buffers are random bytes, random bytes behind a plausible BTH, and
 * mutated valid packets (bit flips, byte overwrites, truncation, extension,
 * opcode swaps).  Each one lives in a heap block of exactly its length, so
 * under ASan any read past the end is caught.  For every buffer:
 *  - the result is 0, -EBADMSG or -EPROTONOSUPPORT;
 *  - an accepted packet satisfies hdr_len + paylen + pad + 4 == len, its
 *    payload lies inside the buffer, and building its headers again gives
 *    back the input bytes except for reserved bits.
 * The seed is fixed; the loop runs a fixed number of times.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/icrc.h"
#include "wire/opcode.h"
#include "check.h"

/* test_wire_util.c */
uint64_t wt_rand(uint64_t *state);

#define ITERATIONS	200000
#define MAX_LEN		400

static uint8_t known_ops[256];
static int nknown;

/* A valid packet of a random known opcode, random fields and payload. */
static size_t make_valid(uint8_t *buf, uint64_t *s)
{
	struct srn_pkt p = { 0 };
	const struct srn_opcode_info *in;
	uint64_t bits = wt_rand(s);
	size_t len;
	int hl;

	p.opcode = known_ops[wt_rand(s) % nknown];
	p.se = bits & 1;
	p.mig = bits & 2;
	p.fecn = bits & 4;
	p.becn = bits & 8;
	p.ackreq = bits & 16;
	p.pkey = (uint16_t)wt_rand(s);
	p.dqpn = (uint32_t)wt_rand(s);
	p.psn = (uint32_t)wt_rand(s);
	p.reth_va = wt_rand(s);
	p.reth_rkey = (uint32_t)wt_rand(s);
	p.reth_len = (uint32_t)wt_rand(s);
	p.aeth_syndrome = (uint8_t)wt_rand(s);
	p.aeth_msn = (uint32_t)wt_rand(s);
	p.imm_be = (uint32_t)wt_rand(s);
	p.ieth_rkey = (uint32_t)wt_rand(s);
	p.deth_qkey = (uint32_t)wt_rand(s);
	p.deth_sqpn = (uint32_t)wt_rand(s);
	p.atm_va = wt_rand(s);
	p.atm_rkey = (uint32_t)wt_rand(s);
	p.atm_swap_add = wt_rand(s);
	p.atm_compare = wt_rand(s);
	p.atm_orig = wt_rand(s);
	p.feth = (uint32_t)wt_rand(s);
	in = srn_opcode_info(p.opcode);
	p.paylen = (in->hdr_mask & SRN_HDR_PAYLOAD) ?
		   (uint32_t)(wt_rand(s) % 200) : 0;

	hl = srn_pkt_build_hdr(buf, &p);
	if (hl < 0)
		abort();
	len = srn_pkt_wire_len(in, p.paylen);
	for (size_t i = (size_t)hl; i < len; i++)
		buf[i] = (uint8_t)wt_rand(s);
	return len;
}

static size_t make_random(uint8_t *buf, uint64_t *s, int plausible)
{
	size_t len = wt_rand(s) % (plausible ? 80 : MAX_LEN);

	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)wt_rand(s);
	if (plausible && len >= 2) {
		buf[0] = known_ops[wt_rand(s) % nknown];
		buf[1] &= (uint8_t)~SRN_BTH_TVER_MASK;
	}
	return len;
}

static size_t mutate(uint8_t *buf, size_t len, uint64_t *s)
{
	int n = 1 + (int)(wt_rand(s) % 4);

	for (int k = 0; k < n; k++) {
		switch (wt_rand(s) % 6) {
		case 0:		/* bit flip */
			if (len)
				buf[wt_rand(s) % len] ^= (uint8_t)(1u << (wt_rand(s) % 8));
			break;
		case 1:		/* byte overwrite */
			if (len)
				buf[wt_rand(s) % len] = (uint8_t)wt_rand(s);
			break;
		case 2:		/* truncate */
			len = len ? wt_rand(s) % len : 0;
			break;
		case 3: {	/* extend with junk */
			size_t add = wt_rand(s) % 9;

			for (size_t i = 0; i < add && len < MAX_LEN; i++)
				buf[len++] = (uint8_t)wt_rand(s);
			break;
		}
		case 4:		/* another layout over the same bytes */
			if (len)
				buf[0] = known_ops[wt_rand(s) % nknown];
			break;
		default:	/* pad count */
			if (len > 1)
				buf[1] = (uint8_t)((buf[1] & ~SRN_BTH_PAD_MASK) |
						   (wt_rand(s) & SRN_BTH_PAD_MASK));
			break;
		}
	}
	return len;
}

/* The header bytes with reserved bits cleared, as build writes them. */
static void normalise(uint8_t *h, const struct srn_opcode_info *in)
{
	h[4] &= 0xc0;		/* Resv6 */
	h[8] &= 0xc0;		/* Resv7 but its top bit (SRN_BTH_PLACED, round-trips) */
	if (in->hdr_mask & SRN_HDR_DETH)
		h[in->off_deth + 4] = 0;	/* DETH reserved byte */
	if (in->hdr_mask & SRN_HDR_FETH) {
		memset(h + in->off_feth, 0, 3);
		h[in->off_feth + 3] &= SRN_FETH_PLT_MASK | SRN_FETH_SEL_MASK;
	}
	if (in->hdr_mask & SRN_HDR_CNP_RSVD)
		memset(h + SRN_BTH_LEN, 0, SRN_CNP_RSVD_LEN);
	if (in->hdr_mask & SRN_HDR_XRCETH)
		h[in->off_xrceth] = 0;		/* XRCETH reserved byte */
}

/* Returns parse's result after checking what it claims. */
static int check_one(const uint8_t *buf, size_t len)
{
	struct srn_pkt p;
	int rc = srn_pkt_parse(buf, len, &p);
	uint8_t want[SRN_MAX_HDR_LEN], got[SRN_MAX_HDR_LEN];
	const struct srn_opcode_info *in;

	CHECK(rc == 0 || rc == -EBADMSG || rc == -EPROTONOSUPPORT, "rc %d", rc);
	if (rc)
		return rc;
	in = p.info;
	CHECK(in && in == srn_opcode_info(buf[0]) && p.opcode == buf[0],
	      "info");
	if (!in)
		return rc;
	CHECK((size_t)in->hdr_len + p.paylen + p.pad + SRN_ICRC_LEN == len,
	      "length identity: %u + %u + %u + 4 != %zu", in->hdr_len,
	      p.paylen, p.pad, len);
	CHECK(p.payload == buf + in->hdr_len && p.pad <= 3 &&
	      (p.paylen + p.pad) % 4 == 0, "payload/pad");
	CHECK(p.dqpn <= SRN_QPN_MASK && p.psn <= SRN_PSN_MASK &&
	      p.aeth_msn <= SRN_MSN_MASK && p.deth_sqpn <= SRN_QPN_MASK,
	      "24-bit fields");
	CHECK(p.icrc == srn_icrc_get(buf + len - SRN_ICRC_LEN), "icrc");

	/* Parse and build are inverses on everything but reserved bits. */
	memcpy(want, buf, in->hdr_len);
	normalise(want, in);
	CHECK(srn_pkt_build_hdr(got, &p) == in->hdr_len &&
	      !memcmp(got, want, in->hdr_len), "%s: rebuild differs", in->name);
	return rc;
}

int main(void)
{
	static uint8_t work[MAX_LEN + 16];
	uint64_t s = 0x5eed;
	int accepted = 0, accepted_mut = 0, mutated = 0;

	for (unsigned op = 0; op < 256; op++)
		if (srn_opcode_info((uint8_t)op))
			known_ops[nknown++] = (uint8_t)op;

	for (int it = 0; it < ITERATIONS; it++) {
		int kind = (int)(wt_rand(&s) % 4), rc;
		size_t len;
		uint8_t *buf;

		switch (kind) {
		case 0:		/* noise */
			len = make_random(work, &s, 0);
			break;
		case 1:		/* noise behind a plausible BTH */
			len = make_random(work, &s, 1);
			break;
		case 2:		/* valid */
			len = make_valid(work, &s);
			break;
		default:	/* valid, then damaged */
			len = mutate(work, make_valid(work, &s), &s);
			mutated++;
			break;
		}
		/* Exactly len bytes, so any overread is an ASan error; an
		 * empty buffer is passed as a pointer one past its block. */
		buf = malloc(len ? len : 1);
		if (!buf)
			abort();
		memcpy(buf, work, len);
		rc = check_one(len ? buf : buf + 1, len);
		free(buf);

		accepted += rc == 0;
		accepted_mut += kind == 3 && rc == 0;
		CHECK(kind != 2 || rc == 0, "valid packet %d rejected: %d", it, rc);
	}

	/* Not vacuous: some mutations must survive and many must not. */
	CHECK(accepted_mut > mutated / 50 && accepted_mut < mutated / 2,
	      "%d of %d mutated accepted", accepted_mut, mutated);
	printf("test_wire_robust: %d buffers, %d accepted, %d of %d mutated "
	       "accepted\n", ITERATIONS, accepted, accepted_mut, mutated);
	if (srn_check_failures)
		fprintf(stderr, "test_wire_robust: %d check(s) failed\n", srn_check_failures);
	return srn_check_failures ? 1 : 0;
}
