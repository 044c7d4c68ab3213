/*
 * icrc.h - the RoCE Invariant CRC (docs/wire.md §5).
 *
 * ICRC = standard CRC-32 (zlib/Ethernet) over 8 bytes of 0xff, the IP
 * header, the UDP header, the BTH and everything up to (not including) the
 * ICRC, with the variant fields set to all ones: IPv4 TOS, TTL, header
 * checksum; IPv6 traffic class, flow label, hop limit; UDP checksum; BTH
 * byte 4 (FECN, BECN, Resv6).  The value goes on the wire least significant
 * byte first.
 *
 * Invariants: pure functions, no state; the CRC itself is ISA-L's
 * (never a byte-at-a-time loop on packet data).
 */
#ifndef SRN_WIRE_ICRC_H
#define SRN_WIRE_ICRC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

/*
 * crc32_gzip_refl() (zlib's crc32()) value after the 8 x 0xff prefix.  The
 * raw (not yet inverted) CRC register after those bytes is 0xdebb20e3, the
 * seed rxe hands to crc32_le; these return the inverted register, so their
 * running value is ~0xdebb20e3.  test_wire_icrc recomputes it.
 */
#define SRN_ICRC_SEED	0x2144df1cu

struct srn_ip_meta {
	int family;			/* AF_INET or AF_INET6 */
	uint8_t src[16], dst[16];	/* IPv4: first 4 bytes, network order */
	uint16_t sport, dport;		/* UDP ports, host order */
	uint16_t ipv4_id;		/* host order */
	uint16_t ipv4_frag;		/* host order flags|offset; 0x4000 = DF */
};

#define SRN_IPV4_DF	0x4000u

/*
 * ICRC of a RoCEv2 packet.  iov covers the UDP payload from the BTH through
 * the pad (not the ICRC); it may be split anywhere, even inside the BTH.
 * The masked IP and UDP headers are synthesised from ip: IPv4 is a 20-byte
 * header with total length 20 + 8 + transport + 4; IPv6 has payload length
 * = UDP length = 8 + transport + 4.  Any family other than AF_INET is
 * treated as AF_INET6.
 */
uint32_t srn_icrc_calc(const struct srn_ip_meta *ip, const struct iovec *iov,
		       int iovcnt);

static inline void srn_icrc_put(uint8_t *p, uint32_t crc)
{
	p[0] = (uint8_t)crc;
	p[1] = (uint8_t)(crc >> 8);
	p[2] = (uint8_t)(crc >> 16);
	p[3] = (uint8_t)(crc >> 24);
}

static inline uint32_t srn_icrc_get(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/*
 * Peers (rxe, RoCE NICs) send varying IPv4 IDs, which a UDP socket cannot
 * see but the ICRC covers.  The CRC is affine over GF(2), so the ID that
 * makes the ICRC match is solved for: 16 unknown bits against 32 CRC bits,
 * leaving 16 bits of check.  ip->ipv4_id is ignored.  Returns 0 and *id
 * when exactly one ID fits, -ENOENT when none does, -EINVAL for a non-IPv4
 * meta.
 */
int srn_icrc_solve_ipv4_id(const struct srn_ip_meta *ip,
			   const struct iovec *iov, int iovcnt,
			   uint32_t wire_icrc, uint16_t *id);

/*
 * crc32_gzip_refl(crc, <n zero bytes>, n) without touching n bytes:
 * O(log n) multiplications by powers of x modulo the CRC polynomial.
 */
uint32_t srn_crc32_zeros(uint32_t crc, uint64_t n);

/* ---- Whole Ethernet frames (tests, traces) ---------------------------- */

enum srn_frame_kind {
	SRN_FRAME_ROCEV2 = 2,	/* IPv4 or IPv6 (see ip.family), UDP */
	SRN_FRAME_ROCEV1 = 1,	/* ethertype 0x8915, GRH, BTH */
};

struct srn_frame {
	enum srn_frame_kind kind;
	struct srn_ip_meta ip;	/* RoCEv2: addresses, ports, ID, frag */
	const uint8_t *l3;	/* IP header (v2) or GRH (v1) */
	size_t l3_len;		/* 20, 40 (+ 8 UDP bytes follow for v2) */
	const uint8_t *bth;	/* UDP payload / GRH payload */
	size_t bth_len;		/* BTH .. ICRC inclusive */
};

/*
 * Locate the RoCE packet in an Ethernet frame without FCS: RoCEv2 over
 * IPv4 (no options, not fragmented) or IPv6 (no extension headers), or
 * RoCEv1; up to two VLAN tags.  Lengths come from the IP/GRH length fields
 * and must fit in len (trailing Ethernet padding is ignored).  0 or
 * -EBADMSG.
 */
int srn_frame_decode(const uint8_t *frame, size_t len, struct srn_frame *f);

/*
 * Test helper: compute the ICRC of a whole frame from its own header bytes
 * (masked per docs/wire.md §5.1), and return the one on the wire.
 * 0 or -EBADMSG.
 */
int srn_icrc_of_frame(const uint8_t *frame, size_t len, uint32_t *computed,
		      uint32_t *on_wire);

#endif /* SRN_WIRE_ICRC_H */
