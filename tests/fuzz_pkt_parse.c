/*
 * fuzz_pkt_parse.c - libFuzzer harness for srn_pkt_parse.
 *
 * CTest runs it through tests/helpers/fuzz_driver.c; by hand with libFuzzer:
 *   clang -g -fsanitize=fuzzer,address,undefined -Isrc \
 *         tests/fuzz_pkt_parse.c src/wire/pkt.c src/wire/opcode.c
 * Run: ./fuzz_pkt_parse -max_len=512 [corpus_dir]
 *
 * Besides memory safety (the sanitizers), it asserts what an accepted
 * packet promises the transport: the length identity, the payload inside
 * the input, and that rebuilding the headers succeeds with the same length.
 */
#include <stdint.h>
#include <stdlib.h>

#include "wire/icrc.h"
#include "wire/opcode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t hdr[SRN_MAX_HDR_LEN];
	struct srn_pkt p;

	if (srn_pkt_parse(data, size, &p) != 0)
		return 0;
	if (!p.info || p.info != srn_opcode_info(data[0]))
		abort();
	if ((size_t)p.info->hdr_len + p.paylen + p.pad + SRN_ICRC_LEN != size)
		abort();
	if (p.payload != data + p.info->hdr_len || p.pad > 3 ||
	    (p.paylen + p.pad) % 4 != 0)
		abort();
	if (p.icrc != srn_icrc_get(data + size - SRN_ICRC_LEN))
		abort();
	if (srn_pkt_build_hdr(hdr, &p) != p.info->hdr_len)
		abort();
	return 0;
}
