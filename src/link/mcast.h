/*
 * mcast.h - IP multicast sockets for RoCEv2 UD multicast.
 *
 * A RoCEv2 multicast GID is an IPv4-mapped 224.0.0.0/4 address or an
 * IPv6 ff00::/8 address; packets go to that IP group on the RoCE port.
 * Each joined group gets its own socket bound to group:port with
 * SO_REUSEPORT (several processes on one host can join one group) and the
 * membership on the device's own address's interface.  The device socket
 * sends multicast out of its own interface only (IP_MULTICAST_IF) and
 * loops it back to local members, never through a default route.
 */
#ifndef SRN_LINK_MCAST_H
#define SRN_LINK_MCAST_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "link/udp.h"

bool srn_gid_is_mcast(const uint8_t gid[16]);
/* Make the device socket send multicast on its own interface, TTL 1,
 * looped back to local members.  0 or -errno. */
int srn_udp_mcast_sender(struct srn_udp *dev);
/* Open a socket receiving group:dev->port on dev's interface. */
int srn_udp_mcast_join(struct srn_udp *out, const struct srn_udp *dev, const uint8_t gid[16]);

#endif
