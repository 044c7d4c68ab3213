/*
 * rx.h - everything that enters the NIC, validated at the door (rx.c)
 * and handed to the responder (requests from a peer's requester,
 * responder.h) or the completer (ACKs and responses to our own requests,
 * completer.h).  All functions must be called with nic->lock held.
 */
#ifndef SRN_TRANSPORT_RX_H
#define SRN_TRANSPORT_RX_H

#include <stdint.h>
#include <sys/socket.h>

struct srn_nic;

/* id_hint: the IPv4 ID the packet probably carries (its index in a
 * GRO-coalesced datagram, which is its index in the sender's GSO send).
 * tos: its IPv4 TOS / IPv6 traffic class (link/udp_ecn.h); a CE mark in
 * it is answered with a CNP (transport/cc.h). */
void srn_rx_packet(struct srn_nic *nic, const uint8_t *data, uint32_t len,
		   const struct sockaddr *src, uint16_t id_hint, uint8_t tos);
/* A packet from a same-host ring (link/shm.h): no ICRC to check. */
void srn_rx_packet_local(struct srn_nic *nic, const uint8_t *data, uint32_t len,
			 const struct sockaddr *src, uint8_t tos);
/* A datagram that arrived on a multicast group's socket. */
struct srn_mcast_group;
void srn_rx_mcast_packet(struct srn_nic *nic, const struct srn_mcast_group *g,
			 const uint8_t *data, uint32_t len, const struct sockaddr *src);

#endif
