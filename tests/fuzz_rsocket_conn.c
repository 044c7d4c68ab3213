/*
 * fuzz_rsocket_conn.c - libFuzzer harness for srn_rs_conn_parse
 * (src/rsocket/proto.c), the door an rsocket peer's connect data (REQ or
 * REP private data) comes through.  An input whose first byte is 0xAA
 * gets version 1 and a credit count, so the checks after the version see
 * the mutations.  Accepted data must pack back to the same 40 bytes (the
 * three reserved bytes aside) and satisfy every bound the parser promises.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rsocket/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t buf[SRN_RS_CONN_LEN + 16];
	struct srn_rs_conn c;
	if (size > sizeof(buf))
		size = sizeof(buf);
	memcpy(buf, data, size);
	if (size >= 4 && data[0] == 0xAA) {
		buf[0] = SRN_RS_VERSION;
		buf[2] |= 1;
	}
	if (srn_rs_conn_parse(buf, size, &c) != 0)
		return 0;
	if (size < SRN_RS_CONN_LEN || c.version != SRN_RS_VERSION || c.credits == 0 ||
	    c.target_sgl.length == 0 || c.target_sgl.length > SRN_RS_MAX_SGL_SLOTS ||
	    c.data_buf.length == 0)
		abort();
	uint8_t out[SRN_RS_CONN_LEN];
	srn_rs_conn_pack(&c, out);
	memset(buf + 4, 0, 3);
	if (memcmp(out, buf, SRN_RS_CONN_LEN))
		abort();
	return 0;
}
