/*
 * udp_ports.h - flow entropy for ECMP: each RC/UC QP's packets leave from
 * its own UDP source port, as RoCE NICs and the kernel's rxe send them,
 * so a fabric that hashes the 5-tuple spreads a host's QPs over its
 * equal-cost paths.  Packets are still received on the device's port
 * (4791), and the destination port of every packet stays the peer's
 * device port: only the source varies.
 *
 * The port of QP n is rxe's: 0xC000 + hash_32(n, 14) (rxe_qp.c,
 * rxe_qp_init_req; hash_32 is the multiplicative hash of linux/hash.h).
 * A port is a send-only socket bound to the device's address, opened the
 * first time a QP needs it and kept until the device closes; at most
 * SOFTRNIC_SRC_PORTS of them (default SRN_SRC_PORTS_DEFAULT; 0 turns the
 * feature off and every packet leaves from the device port, as before).
 * A port another program holds is skipped for the next free one in
 * 0xC000-0xFFFF (the ICRC is computed with the port actually bound, so
 * any port works; only the rxe formula is lost for that QP).  Once the
 * budget of sockets is spent, a new QP shares the socket of an earlier
 * one (chosen by the same hash), so there are never more than the budget.
 *
 * The socket carries the device's TOS (ECN) and IP options (DF, so IPv4
 * ID 0 the ICRC assumes; IPv6 zero checksums).  Nobody sends to these
 * ports; their receive buffer is the minimum.  With the fault injector
 * (SOFTRNIC_FAULTS) the feature is off: held packets leave from the
 * device socket.  Same-host rings are not concerned.
 *
 * Callers serialise every call (the device's nic->lock).
 */
#ifndef SRN_LINK_UDP_PORTS_H
#define SRN_LINK_UDP_PORTS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct srn_udp;

#define SRN_SRC_PORTS_ENV "SOFTRNIC_SRC_PORTS"
#define SRN_SRC_PORTS_DEFAULT 64u      /* sockets a device may open */
#define SRN_SRC_PORTS_MAX 255u
#define SRN_SRC_PORT_BASE 0xC000u      /* RXE_ROCE_V2_SPORT */
#define SRN_SRC_PORT_SPAN 0x4000u      /* 14 bits of hash */

/* rxe's source port for QP number qpn. */
static inline uint16_t srn_rxe_src_port(uint32_t qpn)
{
	/* hash_32(qpn, 14): multiply by GOLDEN_RATIO_32, keep the top 14 bits. */
	return (uint16_t)(SRN_SRC_PORT_BASE + ((qpn * 0x61C88647u) >> (32 - 14)));
}

/* Read SOFTRNIC_SRC_PORTS and set up an empty set of ports on u (after
 * the device socket is bound and its TOS set).  0, or -EINVAL with a
 * message in err for a bad value, or -ENOMEM. */
int srn_udp_ports_open(struct srn_udp *u, const char *name, char *err, size_t errlen);
/* Close every source socket. */
void srn_udp_ports_close(struct srn_udp *u);

/* The UDP source port for QP qpn's packets: its own port (opened now if
 * needed), or the device port when the feature is off or no socket could
 * be had.  Never fails. */
uint16_t srn_udp_port_for_qp(struct srn_udp *u, uint32_t qpn);
/* The socket that sends from sport: the device socket for its own port
 * and for any port not ours. */
int srn_udp_port_fd(const struct srn_udp *u, uint16_t sport);
/* The device's address with UDP port `port` (for traces). */
void srn_udp_port_addr(const struct srn_udp *u, uint16_t port, struct sockaddr_storage *out);

#endif
