/*
 * test_rsocket_dgram_proto - the two datagram rsocket headers
 * (src/rsocket/dgram_proto.c) against hand-made vectors laid out as
 * rdma-core lays out its ds_header and ds_udp_header: they parse to the
 * fields, packing gives the same bytes back, and every lie is refused
 * (short, wrong tag, version and family or length disagreeing, unknown
 * op).  Exit 0 pass, 1 fail.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>

#include "check.h"
#include "rsocket/dgram_proto.h"

static void ud_header(void)
{
	/* 10.1.2.3 port 7174 (0x1c06) */
	const uint8_t v4[SRN_DS_HDR4_LEN] = { 4, 8, 0x1c, 0x06, 10, 1, 2, 3 };
	struct sockaddr_storage ss;
	socklen_t sl;
	CHECK(srn_ds_hdr_parse(v4, sizeof(v4), &ss, &sl) == SRN_DS_HDR4_LEN);
	struct sockaddr_in *s = (struct sockaddr_in *)&ss;
	CHECK(sl == sizeof(*s) && s->sin_family == AF_INET && ntohs(s->sin_port) == 7174 &&
	      ntohl(s->sin_addr.s_addr) == 0x0a010203);
	uint8_t out[SRN_DS_HDR_MAX];
	CHECK(srn_ds_hdr_pack((struct sockaddr *)&ss, out) == SRN_DS_HDR4_LEN && !memcmp(out, v4, 8));

	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons(4791),
				   .sin6_flowinfo = htonl(0x12345) };
	inet_pton(AF_INET6, "fd77::2", &a6.sin6_addr);
	CHECK(srn_ds_hdr_pack((struct sockaddr *)&a6, out) == SRN_DS_HDR6_LEN);
	CHECK(out[0] == 6 && out[1] == 24 && out[2] == 0x12 && out[3] == 0xb7 && out[6] == 0x23 &&
	      out[8] == 0xfd && out[23] == 2);
	CHECK(srn_ds_hdr_parse(out, SRN_DS_HDR6_LEN, &ss, &sl) == SRN_DS_HDR6_LEN);
	CHECK(sl == sizeof(a6) && !memcmp(&ss, &a6, sizeof(a6)));

	/* Lies: short, version and length disagreeing, unknown version. */
	CHECK(srn_ds_hdr_parse(v4, 7, &ss, &sl) == -EPROTO);
	CHECK(srn_ds_hdr_parse(out, 23, &ss, &sl) == -EPROTO);
	uint8_t bad[SRN_DS_HDR6_LEN];
	memcpy(bad, v4, 8);
	bad[1] = 24;
	CHECK(srn_ds_hdr_parse(bad, 8, &ss, &sl) == -EPROTO);
	bad[0] = 5;
	bad[1] = 8;
	CHECK(srn_ds_hdr_parse(bad, 8, &ss, &sl) == -EPROTO);
	struct sockaddr unix_like = { .sa_family = AF_UNIX };
	CHECK(srn_ds_hdr_pack(&unix_like, out) == 0);
}

static void udp_header(void)
{
	/* tag, version 4, op DATA, length 16, reserved, QPN 0x000123 (top
	 * byte set: rdma-core reserves it), 10.77.0.1, then a payload. */
	const uint8_t v4[SRN_DS_UDP4_LEN + 3] = {
		0x55, 0x55, 0x55, 0x55, 4, 0, 16, 0, 0xff, 0x00, 0x01, 0x23, 10, 77, 0, 1, 'a', 'b', 'c',
	};
	struct srn_ds_udp h;
	CHECK(srn_ds_udp_parse(v4, sizeof(v4), AF_INET, &h) == SRN_DS_UDP4_LEN);
	CHECK(h.version == 4 && h.op == SRN_DS_UDP_DATA && h.len == 16 && h.qpn == 0x123 &&
	      h.addr[0] == 10 && h.addr[1] == 77 && h.addr[3] == 1);
	struct sockaddr_in a = { .sin_family = AF_INET };
	inet_pton(AF_INET, "10.77.0.1", &a.sin_addr);
	uint8_t out[SRN_DS_UDP_MAX];
	CHECK(srn_ds_udp_pack(SRN_DS_UDP_DATA, 0xff000123, (struct sockaddr *)&a, out) == 16);
	uint8_t want[16];
	memcpy(want, v4, 16);
	want[8] = 0;         /* we send the reserved byte as zero */
	CHECK(!memcmp(out, want, 16));

	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };
	inet_pton(AF_INET6, "fd77::1", &a6.sin6_addr);
	CHECK(srn_ds_udp_pack(SRN_DS_UDP_CTRL, 0xabcdef, (struct sockaddr *)&a6, out) == 28);
	CHECK(srn_ds_udp_parse(out, 28, AF_INET6, &h) == 28 && h.op == SRN_DS_UDP_CTRL &&
	      h.qpn == 0xabcdef && !memcmp(h.addr, &a6.sin6_addr, 16));

	/* Lies. */
	CHECK(srn_ds_udp_parse(out, 28, AF_INET, &h) == -EPROTO);   /* v6 header from a v4 peer */
	CHECK(srn_ds_udp_parse(out, 27, AF_INET6, &h) == -EPROTO);  /* short */
	uint8_t bad[SRN_DS_UDP4_LEN];
	memcpy(bad, v4, sizeof(bad));
	bad[0] = 0x54;
	CHECK(srn_ds_udp_parse(bad, 16, AF_INET, &h) == -EPROTO);   /* tag */
	memcpy(bad, v4, sizeof(bad));
	bad[5] = 3;
	CHECK(srn_ds_udp_parse(bad, 16, AF_INET, &h) == -EPROTO);   /* unknown op */
	memcpy(bad, v4, sizeof(bad));
	bad[6] = 28;
	CHECK(srn_ds_udp_parse(bad, 16, AF_INET, &h) == -EPROTO);   /* length not the version's */
	CHECK(srn_ds_udp_parse(bad, 15, AF_INET, &h) == -EPROTO);
}

int main(void)
{
	ud_header();
	udp_header();
	if (srn_check_failures)
		return srn_check_result();
	printf("test_rsocket_dgram_proto: ok\n");
	return 0;
}
