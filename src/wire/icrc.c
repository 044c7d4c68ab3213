/*
 * icrc.c - RoCE ICRC: compute it, solve for an unseen IPv4 ID, and check
 * whole frames (docs/wire.md §5).
 *
 * The pseudo-packet is  8 x 0xff | IP header | UDP header | BTH | rest,
 * with the variant fields set to all ones.  The 8-byte prefix is folded into
 * SRN_ICRC_SEED; the IP+UDP headers are masked in a small scratch buffer;
 * the BTH is gathered into a 12-byte copy so its byte 4 can be masked
 * without writing to the caller's packet; everything after the BTH is CRCed
 * in place by ISA-L's crc32_gzip_refl (AVX-512/VPCLMULQDQ where the CPU
 * has it: about 3x libdeflate 1.14 on 4 KiB packets here, see DESIGN).
 *
 * The IPv4-ID solver relies on CRC-32 being affine over GF(2): for a fixed
 * length, crc(m ^ e) = crc(m) ^ L(e) with L linear.  The contribution of ID
 * bit i is the raw CRC of that single bit moved to the end of the message
 * by "shift by n zero bytes", i.e. a multiplication by x^(8n) mod P.
 *
 * Invariants: no state; the caller's buffers are never written.  Polynomial
 * values use the reflected representation of zlib/Ethernet CRC-32, where
 * bit 31 holds the coefficient of x^0 and bit 0 that of x^31.
 */
#include <endian.h>
#include <errno.h>
#include <isa-l/crc.h>
#include <string.h>

#include "wire/icrc.h"
#include "wire/roce_hdr.h"

#define CRC32_POLY	0xedb88320u	/* reflected 0x04c11db7 */
#define GF2_ONE		0x80000000u	/* x^0 */

#define IPV4_HDR_LEN	20
#define IPV6_HDR_LEN	40
#define UDP_HDR_LEN	8
#define IPPROTO_UDP_NUM	17
#define GRH_NEXT_BTH	0x1b	/* GRH next header: IBA transport (BTH) */

/* Offset of the IPv4 Identification field in the pseudo-packet. */
#define PSEUDO_ID_OFF	(8 + 4)

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* The variant fields, set to all ones (docs/wire.md §5.1). */
static void mask_ipv4(uint8_t *h)
{
	h[1] = 0xff;		/* TOS (DSCP + ECN) */
	h[8] = 0xff;		/* TTL */
	h[10] = h[11] = 0xff;	/* header checksum */
}

/* IPv6 header and RoCEv1 GRH share the layout of these fields. */
static void mask_ipv6(uint8_t *h)
{
	h[0] |= 0x0f;		/* traffic class, high nibble */
	h[1] = h[2] = h[3] = 0xff; /* traffic class low nibble, flow label */
	h[7] = 0xff;		/* hop limit */
}

static void mask_udp(uint8_t *u)
{
	u[6] = u[7] = 0xff;	/* checksum */
}

static size_t iov_total(const struct iovec *iov, int iovcnt)
{
	size_t n = 0;

	for (int i = 0; i < iovcnt; i++)
		n += iov[i].iov_len;
	return n;
}

/* CRC the transport part (BTH onwards) with BTH byte 4 masked. */
static uint32_t crc_transport(uint32_t crc, const struct iovec *iov,
			      int iovcnt)
{
	uint8_t bth[SRN_BTH_LEN] = { 0 };
	size_t got = 0, off = 0;
	int i = 0;

	while (i < iovcnt && got < sizeof(bth)) {
		size_t n = iov[i].iov_len - off;

		if (n > sizeof(bth) - got)
			n = sizeof(bth) - got;
		if (n)
			memcpy(bth + got, (const uint8_t *)iov[i].iov_base + off, n);
		got += n;
		off += n;
		if (off == iov[i].iov_len) {
			i++;
			off = 0;
		}
	}
	if (got > SRN_BTH_ICRC_MASKED_BYTE)
		bth[SRN_BTH_ICRC_MASKED_BYTE] = 0xff;	/* FECN, BECN, Resv6 */
	crc = crc32_gzip_refl(crc, bth, got);

	for (; i < iovcnt; i++, off = 0) {
		if (iov[i].iov_len > off)
			crc = crc32_gzip_refl(crc,
				(const uint8_t *)iov[i].iov_base + off,
				iov[i].iov_len - off);
	}
	return crc;
}

/* Masked IP + UDP headers as the sender put them on the wire. */
static size_t synth_headers(uint8_t *h, const struct srn_ip_meta *ip,
			    size_t tlen)
{
	size_t ulen = UDP_HDR_LEN + tlen + SRN_ICRC_LEN;
	uint8_t *udp;

	if (ip->family == AF_INET) {
		memset(h, 0, IPV4_HDR_LEN + UDP_HDR_LEN);
		h[0] = 0x45;	/* version 4, IHL 5: no options */
		put16(h + 2, (uint16_t)(IPV4_HDR_LEN + ulen));
		put16(h + 4, ip->ipv4_id);
		put16(h + 6, ip->ipv4_frag);
		h[9] = IPPROTO_UDP_NUM;
		memcpy(h + 12, ip->src, 4);
		memcpy(h + 16, ip->dst, 4);
		mask_ipv4(h);
		udp = h + IPV4_HDR_LEN;
	} else {
		memset(h, 0, IPV6_HDR_LEN + UDP_HDR_LEN);
		h[0] = 0x60;	/* version 6 */
		put16(h + 4, (uint16_t)ulen);	/* payload length = UDP length */
		h[6] = IPPROTO_UDP_NUM;
		memcpy(h + 8, ip->src, 16);
		memcpy(h + 24, ip->dst, 16);
		mask_ipv6(h);
		udp = h + IPV6_HDR_LEN;
	}
	put16(udp, ip->sport);
	put16(udp + 2, ip->dport);
	put16(udp + 4, (uint16_t)ulen);
	mask_udp(udp);
	return (size_t)(udp - h) + UDP_HDR_LEN;
}

uint32_t srn_icrc_calc(const struct srn_ip_meta *ip, const struct iovec *iov,
		       int iovcnt)
{
	uint8_t h[IPV6_HDR_LEN + UDP_HDR_LEN];
	size_t n = synth_headers(h, ip, iov_total(iov, iovcnt));

	return crc_transport(crc32_gzip_refl(SRN_ICRC_SEED, h, n), iov, iovcnt);
}

/* ---- GF(2) polynomial arithmetic modulo the CRC-32 polynomial -------- */

/* b * x mod P: a right shift in the reflected form, reducing when the
 * x^31 term overflows. */
static uint32_t gf2_mul_x(uint32_t b)
{
	return (b & 1) ? (b >> 1) ^ CRC32_POLY : b >> 1;
}

/* a * b mod P, one term of a at a time. */
static uint32_t gf2_mulmod(uint32_t a, uint32_t b)
{
	uint32_t r = 0;

	for (int i = 0; i < 32; i++) {
		if (a & (GF2_ONE >> i))
			r ^= b;
		b = gf2_mul_x(b);
	}
	return r;
}

/*
 * x^(8 * 2^k) mod P for k = 0..31, i.e. the effect of 2^k zero bytes.
 * Entry 0 is x^8; each next one is the square of the previous (computed
 * offline with gf2_mulmod; test_wire_icrc checks the squaring relation
 * and the result against zlib on real zero bytes).
 */
static const uint32_t x8_pow2[32] = {
	0x00800000, 0x00008000, 0xedb88320, 0xb1e6b092,
	0xa06a2517, 0xed627dae, 0x88d14467, 0xd7bbfe6a,
	0xec447f11, 0x8e7ea170, 0x6427800e, 0x4d47bae0,
	0x09fe548f, 0x83852d0f, 0x30362f1a, 0x7b5a9cc3,
	0x31fec169, 0x9fec022a, 0x6c8dedc4, 0x15d6874d,
	0x5fde7a4e, 0xbad90e37, 0x2e4e5eef, 0x4eaba214,
	0xa8a472c0, 0x429a969e, 0x148d302a, 0xc40ba6d0,
	0xc4e22c3c, 0x40000000, 0x20000000, 0x08000000,
};

/* x^(8n) mod P: the effect of n zero bytes on the raw CRC register.
 * One multiplication per set bit of n (about log2(n) / 2 for packets). */
static uint32_t gf2_x8n(uint64_t n)
{
	uint32_t r = GF2_ONE, sq = 0;

	for (int k = 0; n; k++, n >>= 1) {	/* at most 64 rounds */
		sq = k < 32 ? x8_pow2[k] : gf2_mulmod(sq, sq);
		if (n & 1)
			r = gf2_mulmod(r, sq);
	}
	return r;
}

uint32_t srn_crc32_zeros(uint32_t crc, uint64_t n)
{
	/* ISA-L's running value is the inverted register. */
	return ~gf2_mulmod(~crc, gf2_x8n(n));
}

/* Raw register after one byte, starting from a zero register. */
static uint32_t crc_byte_raw(uint8_t b)
{
	uint32_t r = b;

	for (int k = 0; k < 8; k++)
		r = gf2_mul_x(r);
	return r;
}

/*
 * Solve  XOR_{i : x_i = 1} col[i] == rhs  for the 16-bit x by Gaussian
 * elimination.  Each basis vector keeps the set of columns it is made of.
 * Reducing in insertion order is enough: vector j has every earlier pivot
 * bit cleared, so clearing pivot j never sets an earlier pivot again.
 */
static int solve16(const uint32_t col[16], uint32_t rhs, uint16_t *x)
{
	uint32_t vec[16], piv[16];
	uint16_t comb[16], sol = 0;
	int n = 0;

	for (int i = 0; i < 16; i++) {
		uint32_t v = col[i];
		uint16_t c = (uint16_t)(1u << i);

		for (int j = 0; j < n; j++) {
			if (v & piv[j]) {
				v ^= vec[j];
				c ^= comb[j];
			}
		}
		/* Cannot happen: the 16 ID bits are one burst of <= 32 bits,
		 * and CRC-32 detects every such burst, so the columns are
		 * independent.  Kept so a wrong column shows up as an error
		 * rather than as a wrong ID. */
		if (!v)
			return -ENOTUNIQ;
		piv[n] = 1u << (31 - __builtin_clz(v));
		vec[n] = v;
		comb[n] = c;
		n++;
	}
	for (int j = 0; j < n; j++) {
		if (rhs & piv[j]) {
			rhs ^= vec[j];
			sol ^= comb[j];
		}
	}
	if (rhs)
		return -ENOENT;
	*x = sol;
	return 0;
}

int srn_icrc_solve_ipv4_id(const struct srn_ip_meta *ip,
			   const struct iovec *iov, int iovcnt,
			   uint32_t wire_icrc, uint16_t *id)
{
	struct srn_ip_meta m;
	uint64_t plen;
	uint32_t delta, c, col[16];

	if (ip->family != AF_INET)
		return -EINVAL;
	m = *ip;
	m.ipv4_id = 0;
	delta = wire_icrc ^ srn_icrc_calc(&m, iov, iovcnt);

	/*
	 * Reflected CRC-32 takes each byte least significant bit first, so
	 * the 16 ID bits enter in the order 8..15 (high byte), then 0..7.
	 * The last one, bit 7, is followed by k = plen - (PSEUDO_ID_OFF + 2)
	 * bytes: its contribution is crc_byte_raw(0x80) * x^(8k).  Every bit
	 * entering one step earlier contributes that times x.
	 */
	plen = 8 + IPV4_HDR_LEN + UDP_HDR_LEN + iov_total(iov, iovcnt);
	c = gf2_mulmod(crc_byte_raw(0x80), gf2_x8n(plen - (PSEUDO_ID_OFF + 2)));
	for (int step = 0; step < 16; step++) {
		col[(7 - step) & 15] = c;	/* 7, 6, .., 0, 15, .., 8 */
		c = gf2_mul_x(c);
	}
	return solve16(col, delta, id);
}

/* ---- Frames ----------------------------------------------------------- */

static int decode_ipv4(const uint8_t *h, size_t avail, struct srn_frame *f)
{
	const uint8_t *udp = h + IPV4_HDR_LEN;
	uint16_t total, ulen, frag;

	if (avail < IPV4_HDR_LEN + UDP_HDR_LEN)
		return -EBADMSG;
	/* Options would be covered by the ICRC in a way rxe does not
	 * implement (it assumes 20 bytes); treat them as unsupported. */
	if (h[0] != 0x45 || h[9] != IPPROTO_UDP_NUM)
		return -EBADMSG;
	total = get16(h + 2);
	frag = get16(h + 6);
	if (total > avail ||
	    total < IPV4_HDR_LEN + UDP_HDR_LEN + SRN_BTH_LEN + SRN_ICRC_LEN)
		return -EBADMSG;
	if (frag & 0x3fff)	/* MF or an offset: only part of a packet */
		return -EBADMSG;
	ulen = get16(udp + 4);
	if (ulen != total - IPV4_HDR_LEN)
		return -EBADMSG;

	f->kind = SRN_FRAME_ROCEV2;
	f->ip.family = AF_INET;
	memcpy(f->ip.src, h + 12, 4);
	memcpy(f->ip.dst, h + 16, 4);
	f->ip.ipv4_id = get16(h + 4);
	f->ip.ipv4_frag = frag;
	f->ip.sport = get16(udp);
	f->ip.dport = get16(udp + 2);
	f->l3 = h;
	f->l3_len = IPV4_HDR_LEN;
	f->bth = udp + UDP_HDR_LEN;
	f->bth_len = ulen - UDP_HDR_LEN;
	return 0;
}

static int decode_ipv6(const uint8_t *h, size_t avail, struct srn_frame *f)
{
	const uint8_t *udp = h + IPV6_HDR_LEN;
	uint16_t plen;

	if (avail < IPV6_HDR_LEN + UDP_HDR_LEN)
		return -EBADMSG;
	/* Extension headers: rxe's ICRC assumes a bare 40-byte header. */
	if ((h[0] >> 4) != 6 || h[6] != IPPROTO_UDP_NUM)
		return -EBADMSG;
	plen = get16(h + 4);
	if ((size_t)IPV6_HDR_LEN + plen > avail ||
	    plen < UDP_HDR_LEN + SRN_BTH_LEN + SRN_ICRC_LEN ||
	    get16(udp + 4) != plen)
		return -EBADMSG;

	f->kind = SRN_FRAME_ROCEV2;
	f->ip.family = AF_INET6;
	memcpy(f->ip.src, h + 8, 16);
	memcpy(f->ip.dst, h + 24, 16);
	f->ip.sport = get16(udp);
	f->ip.dport = get16(udp + 2);
	f->l3 = h;
	f->l3_len = IPV6_HDR_LEN;
	f->bth = udp + UDP_HDR_LEN;
	f->bth_len = plen - UDP_HDR_LEN;
	return 0;
}

static int decode_grh(const uint8_t *h, size_t avail, struct srn_frame *f)
{
	uint16_t plen;

	if (avail < SRN_GRH_LEN || (h[0] >> 4) != 6 || h[6] != GRH_NEXT_BTH)
		return -EBADMSG;
	plen = get16(h + 4);	/* BTH .. ICRC */
	if ((size_t)SRN_GRH_LEN + plen > avail ||
	    plen < SRN_BTH_LEN + SRN_ICRC_LEN)
		return -EBADMSG;

	f->kind = SRN_FRAME_ROCEV1;
	f->l3 = h;
	f->l3_len = SRN_GRH_LEN;
	f->bth = h + SRN_GRH_LEN;
	f->bth_len = plen;
	return 0;
}

int srn_frame_decode(const uint8_t *frame, size_t len, struct srn_frame *f)
{
	size_t off = 14;
	uint16_t et;

	memset(f, 0, sizeof(*f));
	if (len < off)
		return -EBADMSG;
	et = get16(frame + 12);
	for (int tags = 0; (et == 0x8100 || et == 0x88a8) && tags < 2; tags++) {
		if (len < off + 4)
			return -EBADMSG;
		et = get16(frame + off + 2);
		off += 4;
	}
	switch (et) {
	case 0x0800:
		return decode_ipv4(frame + off, len - off, f);
	case 0x86dd:
		return decode_ipv6(frame + off, len - off, f);
	case SRN_ROCEV1_ETHERTYPE:
		return decode_grh(frame + off, len - off, f);
	default:
		return -EBADMSG;
	}
}

int srn_icrc_of_frame(const uint8_t *frame, size_t len, uint32_t *computed,
		      uint32_t *on_wire)
{
	uint8_t h[IPV6_HDR_LEN + UDP_HDR_LEN];
	struct srn_frame f;
	struct iovec iov;
	size_t n;
	int rc;

	rc = srn_frame_decode(frame, len, &f);
	if (rc)
		return rc;

	/* The headers exactly as received, then masked: independent of the
	 * synthesis in srn_icrc_calc, which the tests compare against. */
	if (f.kind == SRN_FRAME_ROCEV1) {
		n = SRN_GRH_LEN;
		memcpy(h, f.l3, n);
		mask_ipv6(h);
	} else {
		n = f.l3_len + UDP_HDR_LEN;
		memcpy(h, f.l3, n);
		if (f.ip.family == AF_INET)
			mask_ipv4(h);
		else
			mask_ipv6(h);
		mask_udp(h + f.l3_len);
	}
	iov.iov_base = (void *)f.bth;
	iov.iov_len = f.bth_len - SRN_ICRC_LEN;
	*computed = crc_transport(crc32_gzip_refl(SRN_ICRC_SEED, h, n), &iov, 1);
	*on_wire = srn_icrc_get(f.bth + f.bth_len - SRN_ICRC_LEN);
	return 0;
}
