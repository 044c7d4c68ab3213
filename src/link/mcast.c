/*
 * mcast.c - multicast sockets (see mcast.h).
 */
#include "link/mcast.h"

#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

bool srn_gid_is_mcast(const uint8_t gid[16])
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	if (memcmp(gid, v4mapped, 12) == 0)
		return (gid[12] & 0xf0) == 0xe0;    /* 224.0.0.0/4 */
	return gid[0] == 0xff;
}

/* Index of the interface that holds the socket's local IPv6 address. */
static unsigned ifindex_of6(const struct sockaddr_in6 *a)
{
	if (a->sin6_scope_id)
		return a->sin6_scope_id;
	struct ifaddrs *ifs, *i;
	unsigned idx = 0;
	if (getifaddrs(&ifs))
		return 0;
	for (i = ifs; i && !idx; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET6 &&
		    memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, &a->sin6_addr, 16) == 0)
			idx = if_nametoindex(i->ifa_name);
	freeifaddrs(ifs);
	return idx;
}

int srn_udp_mcast_sender(struct srn_udp *dev)
{
	int one = 1;
	if (dev->family == AF_INET) {
		struct in_addr a = ((const struct sockaddr_in *)&dev->local)->sin_addr;
		if (setsockopt(dev->fd, IPPROTO_IP, IP_MULTICAST_IF, &a, sizeof(a)) ||
		    setsockopt(dev->fd, IPPROTO_IP, IP_MULTICAST_LOOP, &one, sizeof(one)) ||
		    setsockopt(dev->fd, IPPROTO_IP, IP_MULTICAST_TTL, &one, sizeof(one)))
			return -errno;
		return 0;
	}
	unsigned idx = ifindex_of6((const struct sockaddr_in6 *)&dev->local);
	if (setsockopt(dev->fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, &idx, sizeof(idx)) ||
	    setsockopt(dev->fd, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, &one, sizeof(one)) ||
	    setsockopt(dev->fd, IPPROTO_IPV6, IPV6_MULTICAST_HOPS, &one, sizeof(one)))
		return -errno;
	return 0;
}

int srn_udp_mcast_join(struct srn_udp *out, const struct srn_udp *dev, const uint8_t gid[16])
{
	memset(out, 0, sizeof(*out));
	out->fd = -1;
	out->family = dev->family;
	out->port = dev->port;
	struct sockaddr_storage ss;
	socklen_t len;
	int ret = srn_gid_to_sockaddr(gid, dev->port, dev->family, &ss, &len);
	if (ret)
		return ret;
	int fd = socket(dev->family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int one = 1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)))
		goto fail;
	if (dev->family == AF_INET6) {
		/* RoCE senders use UDP checksum 0 (see udp.c). */
		setsockopt(fd, IPPROTO_UDP, 102 /* UDP_NO_CHECK6_RX */, &one, sizeof(one));
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	}
	if (bind(fd, (struct sockaddr *)&ss, len))
		goto fail;
	if (dev->family == AF_INET) {
		struct ip_mreq m = {
			.imr_multiaddr = ((struct sockaddr_in *)&ss)->sin_addr,
			.imr_interface = ((const struct sockaddr_in *)&dev->local)->sin_addr,
		};
		if (setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m)))
			goto fail;
	} else {
		struct ipv6_mreq m = {
			.ipv6mr_multiaddr = ((struct sockaddr_in6 *)&ss)->sin6_addr,
			.ipv6mr_interface = ifindex_of6((const struct sockaddr_in6 *)&dev->local),
		};
		if (setsockopt(fd, IPPROTO_IPV6, IPV6_JOIN_GROUP, &m, sizeof(m)))
			goto fail;
	}
	out->fd = fd;
	memcpy(&out->local, &ss, len);
	out->local_len = len;
	return 0;
fail:;
	int err = errno;
	close(fd);
	return -err;
}
