/*
 * fuzz_rsocket_dgram.c - libFuzzer harness for the two doors a datagram
 * rsocket's peer comes through (src/rsocket/dgram_proto.c): the source
 * header of a UD message and the header of a UDP datagram.  The first
 * byte picks the door and the peer's family; an input whose second byte
 * is 0xAA gets a valid tag, version and length first, so the checks
 * after them see the mutations.  Accepted headers must lie inside the
 * input and pack back to the same bytes.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>

#include "rsocket/dgram_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t buf[SRN_DS_MSG_MAX];
	if (size < 2)
		return 0;
	uint8_t sel = data[0];
	bool seed = data[1] == 0xAA;
	data += 2;
	size -= 2;
	if (size > sizeof(buf))
		size = sizeof(buf);
	memcpy(buf, data, size);
	int family = sel & 2 ? AF_INET6 : AF_INET;
	if (sel & 1) {
		if (seed && size >= SRN_DS_UDP4_LEN) {
			memset(buf, 0x55, 4);
			buf[4] = family == AF_INET ? 4 : 6;
			buf[6] = family == AF_INET ? SRN_DS_UDP4_LEN : SRN_DS_UDP6_LEN;
		}
		struct srn_ds_udp h;
		int n = srn_ds_udp_parse(buf, size, family, &h);
		if (n < 0)
			return 0;
		if ((size_t)n > size || (h.op != SRN_DS_UDP_DATA && h.op != SRN_DS_UDP_CTRL) ||
		    h.qpn > 0xffffff)
			abort();
		struct sockaddr_storage a = { .ss_family = (sa_family_t)family };
		if (family == AF_INET)
			memcpy(&((struct sockaddr_in *)&a)->sin_addr, h.addr, 4);
		else
			memcpy(&((struct sockaddr_in6 *)&a)->sin6_addr, h.addr, 16);
		uint8_t out[SRN_DS_UDP_MAX];
		if (srn_ds_udp_pack((enum srn_ds_udp_op)h.op, h.qpn, (struct sockaddr *)&a, out) != (size_t)n)
			abort();
		buf[7] = 0;          /* reserved, and the QPN's reserved byte */
		buf[8] = 0;
		if (memcmp(out, buf, (size_t)n))
			abort();
	} else {
		if (seed && size >= SRN_DS_HDR6_LEN) {
			buf[0] = family == AF_INET ? 4 : 6;
			buf[1] = family == AF_INET ? SRN_DS_HDR4_LEN : SRN_DS_HDR6_LEN;
		}
		struct sockaddr_storage src;
		socklen_t sl;
		int n = srn_ds_hdr_parse(buf, size, &src, &sl);
		if (n < 0)
			return 0;
		if ((size_t)n > size || sl > sizeof(src))
			abort();
		uint8_t out[SRN_DS_HDR_MAX];
		if (srn_ds_hdr_pack((struct sockaddr *)&src, out) != (size_t)n || memcmp(out, buf, (size_t)n))
			abort();
	}
	return 0;
}
