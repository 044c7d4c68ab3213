/*
 * rx.h - everything that enters the NIC: validation at the door
 * (rx.c), the responder (requests from a peer's requester) and the
 * completer (ACKs and responses to our own requests).  All functions must
 * be called with nic->lock held.
 */
#ifndef SRN_TRANSPORT_RX_H
#define SRN_TRANSPORT_RX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "wire/opcode.h"

struct srn_nic;
struct srn_qp;

/* id_hint: the IPv4 ID the packet probably carries (its index in a
 * GRO-coalesced datagram, which is its index in the sender's GSO send). */
void srn_rx_packet(struct srn_nic *nic, const uint8_t *data, uint32_t len,
		   const struct sockaddr *src, uint16_t id_hint);
/* A packet from a same-host ring (link/shm.h): no ICRC to check. */
void srn_rx_packet_local(struct srn_nic *nic, const uint8_t *data, uint32_t len,
			 const struct sockaddr *src);
/* A datagram that arrived on a multicast group's socket. */
struct srn_mcast_group;
void srn_rx_mcast_packet(struct srn_nic *nic, const struct srn_mcast_group *g,
			 const uint8_t *data, uint32_t len, const struct sockaddr *src);
void srn_resp_packet(struct srn_qp *qp, const struct srn_pkt *p, const struct sockaddr *src);
void srn_comp_packet(struct srn_qp *qp, const struct srn_pkt *p);
/* Send READ responses still owed; false if the socket filled first. */
bool srn_resp_push(struct srn_qp *qp);

#endif
