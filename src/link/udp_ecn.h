/*
 * udp_ecn.h - the two ECN bits (RFC 3168) on the device's UDP socket.
 *
 * Send: every RoCE packet leaves ECN-capable, ECT(0), as RoCE NICs send
 * them, in the IPv4 TOS / IPv6 traffic class whose upper six bits are the
 * configured DSCP.  Set once on the socket (IP_TOS / IPV6_TCLASS): no
 * per-packet cost.  Receive: IP_RECVTOS / IPV6_RECVTCLASS make the kernel
 * hand each datagram's TOS up as a control message with the recvmmsg
 * that reads it (a few bytes per datagram, no system call), so the
 * transport sees CE marks a switch set.
 *
 * Settings, read at every socket open:
 *   SOFTRNIC_ECN=0        packets leave Not-ECT and the TOS is not read
 *                         (default 1)
 *   SOFTRNIC_DSCP=N       DSCP of the packets sent, 0..63 (default 0)
 *   SOFTRNIC_ECN_MARK=N   testing: every Nth RoCE datagram this device
 *                         sends leaves CE-marked, as a congested switch
 *                         would have marked it (0: never, the default).
 *                         The kernel carries the mark; receivers see it
 *                         exactly as a switch's.
 */
#ifndef SRN_LINK_UDP_ECN_H
#define SRN_LINK_UDP_ECN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "wire/ecn.h"

struct srn_udp;

#define SRN_ECN_ENV "SOFTRNIC_ECN"
#define SRN_DSCP_ENV "SOFTRNIC_DSCP"
#define SRN_ECN_MARK_ENV "SOFTRNIC_ECN_MARK"

/* Room one datagram's receive control messages need: the TOS (1 byte on
 * IPv4, an int on IPv6) next to UDP_GRO's int. */
#define SRN_ECN_CMSG_SPACE (CMSG_SPACE(sizeof(int)))
/* Room for the send-side mark: IP_TOS / IPV6_TCLASS, an int. */
#define SRN_ECN_TX_CMSG_SPACE (CMSG_SPACE(sizeof(int)))

/* Read the settings and set the socket's TOS and TOS reception.  0, or
 * -EINVAL (a bad setting) / -errno (the kernel refused) with one line in
 * err. */
int srn_udp_ecn_setup(struct srn_udp *u, const char *name, char *err, size_t errlen);

/* The TOS byte (DSCP << 2 | ECN) a received datagram came with, from its
 * control messages; 0 when there is none. */
uint8_t srn_udp_cmsg_tos(const struct msghdr *h);

/* SOFTRNIC_ECN_MARK: should the next RoCE datagram leave CE-marked?  If
 * so, writes the IP_TOS / IPV6_TCLASS control message into buf (room
 * SRN_ECN_TX_CMSG_SPACE) and returns its length; 0 otherwise.  Must be
 * called once per datagram sent (a GSO run counts as one). */
size_t srn_udp_ecn_mark_cmsg(struct srn_udp *u, void *buf);

#endif
