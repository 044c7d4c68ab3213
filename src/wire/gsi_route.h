/*
 * gsi_route.h - which process behind a shared address a CM MAD is for.
 *
 * Several processes may share one device address (link/udp_group.h), each
 * with its own CM, but the wire has one QP1 per address.  A CM MAD names
 * its receiver in one of two ways, and both can be read off the packet:
 *
 * - A REQ or SIDR_REQ is for whoever listens on its service ID (the RDMA
 *   IP CM service ID carries the port space and port): a table lookup.
 * - Every other CM message carries the receiver's own communication ID
 *   (REP, REJ, MRA, RTU, DREQ, DREP, LAP, APR: bytes 4..7 of the message,
 *   the "remote communication ID"; SIDR_REP: bytes 0..3, the request ID
 *   the receiver chose).  Our CMs put their member number in its top
 *   byte, so these route with no lookup at all, by the link's steering
 *   program as by its forwarding code.
 *
 * A packet to QP1 is BTH, DETH, then the 256-byte MAD (RoCEv2 carries no
 * GRH).  Offsets are from the start of the UDP payload.  Pure functions.
 */
#ifndef SRN_WIRE_GSI_ROUTE_H
#define SRN_WIRE_GSI_ROUTE_H

#include <stdint.h>

#include "wire/roce_hdr.h"

#define SRN_GSI_QPN 1u                                    /* QP1, the GSI */
#define SRN_GSI_MAD_OFF (SRN_BTH_LEN + SRN_DETH_LEN)      /* 20 */
#define SRN_GSI_CLASS_OFF (SRN_GSI_MAD_OFF + 1)           /* management class */
#define SRN_GSI_ATTR_OFF (SRN_GSI_MAD_OFF + 16)           /* attribute ID, 16 bits */
#define SRN_GSI_DATA_OFF (SRN_GSI_MAD_OFF + 24)           /* the CM message */
#define SRN_GSI_SID_OFF (SRN_GSI_DATA_OFF + 8)            /* REQ and SIDR_REQ: service ID */
#define SRN_GSI_RCV_ID_OFF (SRN_GSI_DATA_OFF + 4)         /* the receiver's comm ID */
#define SRN_GSI_SIDR_ID_OFF SRN_GSI_DATA_OFF              /* SIDR_REP: the request ID */
#define SRN_GSI_ROUTE_MIN (SRN_GSI_SID_OFF + 8)           /* bytes a route reads */

#define SRN_GSI_CLASS_CM 0x07
#define SRN_GSI_ATTR_REQ 0x0010
#define SRN_GSI_ATTR_SIDR_REQ 0x0017
#define SRN_GSI_ATTR_SIDR_REP 0x0018

/* Our comm IDs and SIDR request IDs: member number in the top byte. */
#define SRN_GSI_ID_MEMBER_SHIFT 24

enum srn_gsi_route_kind {
	SRN_GSI_ROUTE_NONE,     /* not a CM MAD (or too short): whoever gets it */
	SRN_GSI_ROUTE_MEMBER,   /* to the member in .member */
	SRN_GSI_ROUTE_SID,      /* to the listener of .sid */
};

struct srn_gsi_route {
	enum srn_gsi_route_kind kind;
	unsigned member;
	uint64_t sid;
};

static inline uint32_t srn_gsi_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* pkt is the UDP payload of a packet to QP1. */
static inline struct srn_gsi_route srn_gsi_route(const uint8_t *pkt, uint32_t len)
{
	struct srn_gsi_route r = { .kind = SRN_GSI_ROUTE_NONE };
	if (len < SRN_GSI_ROUTE_MIN || pkt[SRN_GSI_CLASS_OFF] != SRN_GSI_CLASS_CM)
		return r;
	unsigned attr = (unsigned)pkt[SRN_GSI_ATTR_OFF] << 8 | pkt[SRN_GSI_ATTR_OFF + 1];
	if (attr == SRN_GSI_ATTR_REQ || attr == SRN_GSI_ATTR_SIDR_REQ) {
		r.kind = SRN_GSI_ROUTE_SID;
		r.sid = (uint64_t)srn_gsi_be32(pkt + SRN_GSI_SID_OFF) << 32 |
			srn_gsi_be32(pkt + SRN_GSI_SID_OFF + 4);
		return r;
	}
	r.kind = SRN_GSI_ROUTE_MEMBER;
	r.member = pkt[attr == SRN_GSI_ATTR_SIDR_REP ? SRN_GSI_SIDR_ID_OFF : SRN_GSI_RCV_ID_OFF];
	return r;
}

#endif
