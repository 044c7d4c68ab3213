/*
 * dgram_proto.h - the wire format of datagram rsockets (SOCK_DGRAM over UD
 * QPs), as rdma-core's librdmacm speaks it; docs/rsocket.md describes it.
 *
 * Two headers cross the wire:
 *   - every UD message starts with the *source* address of the sending
 *     rsocket (the address its kernel UDP socket has): version 4 or 6, the
 *     header length (8 or 24), the port, the address (for IPv6 the flow
 *     info first).  Port and addresses are in network order, as in a
 *     sockaddr.  recvfrom reports this address, not the UD one.
 *   - a datagram sent over the kernel UDP socket, before the sender has an
 *     address handle for its peer, starts with a 16- or 28-byte header: a
 *     tag (0x55555555), version, op (DATA 0 carries a payload and asks for
 *     a reply; CTRL 7 is that reply), length, the sender's UD QPN and the
 *     IP address of that QP.  The UDP source address plus this QPN is all
 *     a peer needs to build an address handle.
 * Pure functions, no I/O (tests/test_rsocket_dgram_proto.c, fuzzed by
 * tests/fuzz_rsocket_dgram.c).
 */
#ifndef SRN_RSOCKET_DGRAM_PROTO_H
#define SRN_RSOCKET_DGRAM_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define SRN_DS_HDR4_LEN 8
#define SRN_DS_HDR6_LEN 24
#define SRN_DS_HDR_MAX SRN_DS_HDR6_LEN
#define SRN_DS_UDP_TAG 0x55555555u
#define SRN_DS_UDP4_LEN 16
#define SRN_DS_UDP6_LEN 28
#define SRN_DS_UDP_MAX SRN_DS_UDP6_LEN
/* One message, header included, fills at most one receive buffer
 * (rdma-core's RS_SNDLOWAT); the GRH of a UD receive comes before it. */
#define SRN_DS_MSG_MAX 2048
#define SRN_DS_GRH_LEN 40

enum srn_ds_udp_op {
	SRN_DS_UDP_DATA = 0,         /* a payload; the receiver replies CTRL */
	SRN_DS_UDP_CTRL = 7,         /* "here is my QPN": no payload */
};

struct srn_ds_udp {
	uint8_t version;             /* 4 or 6 */
	uint8_t op;
	uint8_t len;                 /* header length: the payload starts here */
	uint32_t qpn;                /* the sender's UD QP, 24 bits */
	uint8_t addr[16];            /* the address of that QP: 4 or 16 bytes, network order */
};

/* The UD message header for source address src (AF_INET or AF_INET6);
 * returns its length, 0 for another family. */
size_t srn_ds_hdr_pack(const struct sockaddr *src, uint8_t out[SRN_DS_HDR_MAX]);
/* Parse a UD message header; the source address goes to *src (a
 * sockaddr_in or sockaddr_in6, *srclen its size).  Returns the header
 * length, or -EPROTO when len is short or the version and length do not
 * agree. */
int srn_ds_hdr_parse(const uint8_t *in, size_t len, struct sockaddr_storage *src, socklen_t *srclen);

/* The UDP header of op for QP qpn at address qp_addr; returns its length,
 * 0 for another family. */
size_t srn_ds_udp_pack(enum srn_ds_udp_op op, uint32_t qpn, const struct sockaddr *qp_addr,
		       uint8_t out[SRN_DS_UDP_MAX]);
/* Parse the header of a datagram that came from a peer of family
 * from_family.  Returns its length, or -EPROTO: short, wrong tag, a
 * version other than the family's, a length not the version's, an op we
 * do not know. */
int srn_ds_udp_parse(const uint8_t *in, size_t len, int from_family, struct srn_ds_udp *out);

#endif
