/*
 * ecn.h - the two ECN bits of the IP header (RFC 3168) and the IPv4
 * header checksum fix-up that changing them needs (RFC 1624).
 *
 * RoCEv2's ICRC masks the IPv4 TOS (and the IPv6 traffic class), TTL
 * and header checksum (docs/wire.md §5), so a switch may set CE without
 * breaking the packet; it must then correct the IPv4 header checksum.
 * Pure inline functions over a pointer to the IP header.
 */
#ifndef SRN_WIRE_ECN_H
#define SRN_WIRE_ECN_H

#include <stdbool.h>
#include <stdint.h>

enum srn_ecn {
	SRN_ECN_NOT_ECT = 0,	/* the sender does not do ECN: never mark */
	SRN_ECN_ECT1 = 1,
	SRN_ECN_ECT0 = 2,	/* what RoCE NICs send */
	SRN_ECN_CE = 3,		/* congestion experienced */
	SRN_ECN_MASK = 3,
};

/* IPv4: TOS is byte 1; IPv6: the traffic class straddles bytes 0 and 1,
 * its ECN bits are bits 5..4 of byte 1. */
static inline enum srn_ecn srn_ecn_of_ipv4(const uint8_t *ip)
{
	return (enum srn_ecn)(ip[1] & SRN_ECN_MASK);
}

static inline enum srn_ecn srn_ecn_of_ipv6(const uint8_t *ip)
{
	return (enum srn_ecn)((ip[1] >> 4) & SRN_ECN_MASK);
}

/* Ones' complement sum fix-up for one changed 16-bit word (RFC 1624
 * eqn. 3: HC' = ~(~HC + ~m + m')). */
static inline uint16_t srn_csum16_update(uint16_t hc, uint16_t old_word, uint16_t new_word)
{
	uint32_t s = (uint16_t)~hc + (uint16_t)~old_word + (uint32_t)new_word;

	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* Set CE on an ECN-capable IPv4 packet and fix its header checksum.
 * Returns false (and changes nothing) when the packet is Not-ECT: RFC
 * 3168 says such a packet is dropped, never marked. */
static inline bool srn_ecn_mark_ipv4(uint8_t *ip)
{
	uint16_t old_word, new_word, hc;

	if (srn_ecn_of_ipv4(ip) == SRN_ECN_NOT_ECT)
		return false;
	old_word = (uint16_t)(ip[0] << 8 | ip[1]);
	ip[1] |= SRN_ECN_CE;
	new_word = (uint16_t)(ip[0] << 8 | ip[1]);
	hc = (uint16_t)(ip[10] << 8 | ip[11]);
	hc = srn_csum16_update(hc, old_word, new_word);
	ip[10] = (uint8_t)(hc >> 8);
	ip[11] = (uint8_t)hc;
	return true;
}

/* IPv6 has no header checksum. */
static inline bool srn_ecn_mark_ipv6(uint8_t *ip)
{
	if (srn_ecn_of_ipv6(ip) == SRN_ECN_NOT_ECT)
		return false;
	ip[1] |= SRN_ECN_CE << 4;
	return true;
}

#endif /* SRN_WIRE_ECN_H */
