/*
 * udp_ecn.c - ECN on the device's socket (udp_ecn.h).
 *
 * Invariants: u->tos is what the socket sends with (DSCP << 2 | ECT(0),
 * or the DSCP alone with ECN off); u->ecn_rx says the socket hands up
 * each datagram's TOS; u->ce_every is 0 unless SOFTRNIC_ECN_MARK asked
 * for marks.  The socket-wide TOS costs nothing per packet; the receive
 * control message costs the kernel a few stores per datagram and us one
 * loop over the (one or two) control messages.
 */
#include "link/udp_ecn.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "link/udp.h"

/* An unsigned decimal setting no larger than max; def when unset. */
static int env_uint(const char *name, uint32_t max, uint32_t def, uint32_t *out, char *err,
		    size_t errlen)
{
	const char *v = getenv(name);
	*out = def;
	if (!v || !*v)
		return 0;
	char *end;
	errno = 0;
	unsigned long x = strtoul(v, &end, 10);
	if (errno || *end || x > max || v[0] == '-') {
		snprintf(err, errlen, "%s=%s: expected a whole number from 0 to %u", name, v, max);
		return -EINVAL;
	}
	*out = (uint32_t)x;
	return 0;
}

int srn_udp_ecn_setup(struct srn_udp *u, const char *name, char *err, size_t errlen)
{
	uint32_t ecn, dscp, every;
	char msg[160];
	int rc = env_uint(SRN_ECN_ENV, 1, 1, &ecn, msg, sizeof(msg));
	if (!rc)
		rc = env_uint(SRN_DSCP_ENV, 63, 0, &dscp, msg, sizeof(msg));
	if (!rc)
		rc = env_uint(SRN_ECN_MARK_ENV, 1u << 30, 0, &every, msg, sizeof(msg));
	if (rc) {
		snprintf(err, errlen, "%s: %s", name, msg);
		return rc;
	}
	u->tos = (uint8_t)(dscp << 2 | (ecn ? SRN_ECN_ECT0 : SRN_ECN_NOT_ECT));
	u->ecn_rx = ecn;
	u->ce_every = ecn ? every : 0; /* Not-ECT packets are never marked (RFC 3168) */
	u->ce_count = 0;
	int v4 = u->family == AF_INET;
	int level = v4 ? IPPROTO_IP : IPPROTO_IPV6;
	int tos = u->tos, one = 1;
	const char *what = v4 ? "IP_TOS" : "IPV6_TCLASS";
	/* A TOS of 0 is the socket's default: leave it alone. */
	if (tos && setsockopt(u->fd, level, v4 ? IP_TOS : IPV6_TCLASS, &tos, sizeof(tos)))
		goto fail;
	what = v4 ? "IP_RECVTOS" : "IPV6_RECVTCLASS";
	if (ecn && setsockopt(u->fd, level, v4 ? IP_RECVTOS : IPV6_RECVTCLASS, &one, sizeof(one)))
		goto fail;
	return 0;
fail:
	rc = -errno;
	snprintf(err, errlen, "%s: cannot set %s on the UDP socket: %s", name, what, strerror(-rc));
	return rc;
}

uint8_t srn_udp_cmsg_tos(const struct msghdr *h)
{
	if (!h->msg_controllen)
		return 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)h); c;
	     c = CMSG_NXTHDR((struct msghdr *)h, c)) {
		/* IPv4 hands up one byte, IPv6 an int. */
		if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS &&
		    c->cmsg_len >= CMSG_LEN(1))
			return *(const uint8_t *)CMSG_DATA(c);
		if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS &&
		    c->cmsg_len >= CMSG_LEN(sizeof(int))) {
			int v;
			memcpy(&v, CMSG_DATA(c), sizeof(v));
			return (uint8_t)v;
		}
	}
	return 0;
}

size_t srn_udp_ecn_mark_cmsg(struct srn_udp *u, void *buf)
{
	if (!u->ce_every || ++u->ce_count < u->ce_every)
		return 0;
	u->ce_count = 0;
	memset(buf, 0, SRN_ECN_TX_CMSG_SPACE);
	struct cmsghdr *c = buf;
	int v4 = u->family == AF_INET;
	c->cmsg_level = v4 ? IPPROTO_IP : IPPROTO_IPV6;
	c->cmsg_type = v4 ? IP_TOS : IPV6_TCLASS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	int tos = u->tos | SRN_ECN_CE;
	memcpy(CMSG_DATA(c), &tos, sizeof(tos));
	return SRN_ECN_TX_CMSG_SPACE;
}
