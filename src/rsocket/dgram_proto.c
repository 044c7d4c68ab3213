/*
 * dgram_proto.c - pack and parse the two datagram rsocket headers
 * (dgram_proto.h).  Untrusted input: every length is checked before a
 * byte is read.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <netinet/in.h>

#include "rsocket/dgram_proto.h"

size_t srn_ds_hdr_pack(const struct sockaddr *src, uint8_t out[SRN_DS_HDR_MAX])
{
	if (src->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)src;
		out[0] = 4;
		out[1] = SRN_DS_HDR4_LEN;
		memcpy(out + 2, &s->sin_port, 2);
		memcpy(out + 4, &s->sin_addr, 4);
		return SRN_DS_HDR4_LEN;
	}
	if (src->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)src;
		out[0] = 6;
		out[1] = SRN_DS_HDR6_LEN;
		memcpy(out + 2, &s->sin6_port, 2);
		memcpy(out + 4, &s->sin6_flowinfo, 4);
		memcpy(out + 8, &s->sin6_addr, 16);
		return SRN_DS_HDR6_LEN;
	}
	return 0;
}

int srn_ds_hdr_parse(const uint8_t *in, size_t len, struct sockaddr_storage *src, socklen_t *srclen)
{
	if (len < SRN_DS_HDR4_LEN)
		return -EPROTO;
	memset(src, 0, sizeof(*src));
	if (in[0] == 4 && in[1] == SRN_DS_HDR4_LEN) {
		struct sockaddr_in *s = (struct sockaddr_in *)src;
		s->sin_family = AF_INET;
		memcpy(&s->sin_port, in + 2, 2);
		memcpy(&s->sin_addr, in + 4, 4);
		*srclen = sizeof(*s);
		return SRN_DS_HDR4_LEN;
	}
	if (in[0] == 6 && in[1] == SRN_DS_HDR6_LEN && len >= SRN_DS_HDR6_LEN) {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)src;
		s->sin6_family = AF_INET6;
		memcpy(&s->sin6_port, in + 2, 2);
		memcpy(&s->sin6_flowinfo, in + 4, 4);
		memcpy(&s->sin6_addr, in + 8, 16);
		*srclen = sizeof(*s);
		return SRN_DS_HDR6_LEN;
	}
	return -EPROTO;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

size_t srn_ds_udp_pack(enum srn_ds_udp_op op, uint32_t qpn, const struct sockaddr *qp_addr,
		       uint8_t out[SRN_DS_UDP_MAX])
{
	size_t len;
	put_be32(out, SRN_DS_UDP_TAG);
	out[5] = (uint8_t)op;
	out[7] = 0;
	put_be32(out + 8, qpn & 0xffffff);
	if (qp_addr->sa_family == AF_INET) {
		out[4] = 4;
		len = SRN_DS_UDP4_LEN;
		memcpy(out + 12, &((const struct sockaddr_in *)qp_addr)->sin_addr, 4);
	} else if (qp_addr->sa_family == AF_INET6) {
		out[4] = 6;
		len = SRN_DS_UDP6_LEN;
		memcpy(out + 12, &((const struct sockaddr_in6 *)qp_addr)->sin6_addr, 16);
	} else {
		return 0;
	}
	out[6] = (uint8_t)len;
	return len;
}

int srn_ds_udp_parse(const uint8_t *in, size_t len, int from_family, struct srn_ds_udp *out)
{
	if (len < SRN_DS_UDP4_LEN || get_be32(in) != SRN_DS_UDP_TAG)
		return -EPROTO;
	uint8_t version = in[4], op = in[5], hlen = in[6];
	bool v4 = version == 4 && from_family == AF_INET && hlen == SRN_DS_UDP4_LEN;
	bool v6 = version == 6 && from_family == AF_INET6 && hlen == SRN_DS_UDP6_LEN;
	if ((!v4 && !v6) || len < hlen)
		return -EPROTO;
	if (op != SRN_DS_UDP_DATA && op != SRN_DS_UDP_CTRL)
		return -EPROTO;
	memset(out, 0, sizeof(*out));
	out->version = version;
	out->op = op;
	out->len = hlen;
	/* The low 24 bits: rdma-core reserves the top byte. */
	out->qpn = get_be32(in + 8) & 0xffffff;
	memcpy(out->addr, in + 12, v4 ? 4 : 16);
	return hlen;
}
