/*
 * cnp.h - the RoCEv2 Congestion Notification Packet (IBTA Annex A17,
 * docs/wire.md §3.3): BTH with opcode 0x81, BECN set, DestQP = the QP
 * that must slow down, P_Key, PSN 0; then 16 reserved zero bytes; then
 * the ICRC.  No payload, no AckReq.  32 bytes of UDP payload.
 *
 * Pure functions.  A real ConnectX-4 Lx CNP (tests/data/roce-frames.tsv
 * vector E1) is what srn_cnp_build() must reproduce byte for byte.
 */
#ifndef SRN_WIRE_CNP_H
#define SRN_WIRE_CNP_H

#include <stddef.h>
#include <stdint.h>

#include "wire/icrc.h"
#include "wire/roce_hdr.h"

#define SRN_CNP_LEN	(SRN_BTH_LEN + SRN_CNP_RSVD_LEN + SRN_ICRC_LEN)	/* 32 */

_Static_assert(SRN_CNP_LEN == 32, "CNP UDP payload length");

/* Write a CNP for dqpn into out, its ICRC computed for the IP/UDP
 * headers described by ip (the ones the CNP will travel in).  Returns
 * SRN_CNP_LEN. */
int srn_cnp_build(uint8_t out[SRN_CNP_LEN], uint32_t dqpn, uint16_t pkey,
		  const struct srn_ip_meta *ip);

/* 0 and *dqpn when buf[0..len) is a well-formed CNP (length, opcode,
 * TVer, no pad); -EBADMSG or -EPROTONOSUPPORT otherwise, as
 * srn_pkt_parse says, and -EPROTO for a valid packet that is not a CNP.
 * Reserved bytes are not checked (receivers ignore reserved fields) and
 * neither is the ICRC (the link checks it, wire/icrc.h). */
int srn_cnp_parse(const uint8_t *buf, size_t len, uint32_t *dqpn);

#endif /* SRN_WIRE_CNP_H */
