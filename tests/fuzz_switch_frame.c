/*
 * fuzz_switch_frame.c - libFuzzer harness for what `softrnic switch` does
 * to a frame from the wire: srn_swf_parse (Ethernet, VLAN, IPv4/IPv6,
 * ports; tools/switch_flow.c) and srn_swq_mark_frame (CE marking with the
 * IPv4 checksum fix-up; tools/switch_queue.c).
 *
 * The input is copied into a buffer of exactly its length (ASan sees a
 * read or write past it).  Asserted: the IP offset is -1 or inside the
 * frame with room for the header the version claims; marking changes at
 * most the ECN bits and the IPv4 checksum, only on ECN-capable packets,
 * and a header whose checksum was valid stays valid.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "switch_flow.h"
#include "switch_queue.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint16_t csum(const uint8_t *h, size_t len)
{
	uint32_t s = 0;

	for (size_t i = 0; i + 1 < len; i += 2)
		s += (uint32_t)(h[i] << 8 | h[i + 1]);
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct srn_swf_key key;
	uint8_t *f;
	int off;

	if (size > 65536)
		return 0;
	f = malloc(size ? size : 1);
	if (!f)
		return 0;
	memcpy(f, data, size);
	off = srn_swf_parse(f, (uint32_t)size, &key);
	if (off >= 0) {
		size_t need = key.family == 4 ? 20 : 40;

		if ((size_t)off + need > size || (key.family != 4 && key.family != 6))
			abort();
		int ipv4_ok = key.family == 4 && csum(f + off, (f[off] & 0xfu) * 4u) == 0;
		uint8_t before[40];

		memcpy(before, f + off, need);
		int m = srn_swq_mark_frame(f, (uint32_t)size, (uint32_t)off);
		if (m < 0)
			abort();	/* a parsed IP header is markable or Not-ECT */
		for (size_t i = 0; i < need; i++) {
			/* The ECN bits: byte 1, bits 1..0 (IPv4) or 5..4 (IPv6). */
			uint8_t may = i == 1 ? (key.family == 4 ? 0x03 : 0x30) : 0;

			if (key.family == 4 && (i == 10 || i == 11))
				may = 0xff;
			if ((f[off + i] ^ before[i]) & ~may)
				abort();
		}
		if (m == 0 && memcmp(before, f + off, need))
			abort();	/* Not-ECT is left alone */
		if (ipv4_ok && csum(f + off, (f[off] & 0xfu) * 4u) != 0)
			abort();
	}
	free(f);
	return 0;
}
