/*
 * cm_req_craft.h - CM REQs as a remote attacker writes them: a whole
 * RoCEv2 UDP payload (BTH, DETH, the 256-byte MAD, ICRC) to QP1, built
 * with the project's pure codecs (cm/mad.h, wire/opcode.h, wire/icrc.h)
 * and sent from a plain UDP socket; no device, no verbs.  The ICRC is
 * computed for IPv4 ID 0 with DF, what Linux sends from an unconnected
 * socket with IP_PMTUDISC_DO (docs/DESIGN.md, ICRC and the IPv4 ID).
 */
#ifndef SRN_TESTS_CM_REQ_CRAFT_H
#define SRN_TESTS_CM_REQ_CRAFT_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "cm/mad.h"
#include "wire/gsi_route.h"

/* BTH + DETH + MAD + ICRC: 280 bytes. */
#define CRAFT_PKT_LEN (SRN_GSI_MAD_OFF + SRN_MAD_LEN + 4)

/* Write a REQ to dst, from src (the packet's UDP addresses: the ICRC
 * covers them) with this comm ID and transaction ID, for TCP-space port
 * `port` at the address the IP CM header names: cm_dst if not NULL, else
 * dst's.  0, or -1 if a codec refused. */
int craft_req(uint8_t out[CRAFT_PKT_LEN], const struct sockaddr_in *src,
	      const struct sockaddr_in *dst, const struct sockaddr_in *cm_dst, uint16_t port,
	      uint32_t comm_id, uint64_t tid);

/* Compute the ICRC again over pkt[0 .. len - 4) into its last 4 bytes,
 * after a field was changed on purpose. */
void craft_icrc(uint8_t *pkt, size_t len, const struct sockaddr_in *src,
		const struct sockaddr_in *dst);

/* What came back to the attacker, read off a received UDP payload. */
struct craft_answer {
	uint16_t attr;          /* CM attribute ID; 0 if not a CM MAD to QP1 */
	uint32_t remote_comm_id;   /* a REJ's: the comm ID of the REQ it answers */
	uint16_t reason;        /* a REJ's reason */
};
void craft_parse_answer(const uint8_t *pkt, size_t len, struct craft_answer *a);

#endif
