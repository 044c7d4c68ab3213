/*
 * fuzz_cm_mad.c - libFuzzer harness for srn_cm_mad_parse (src/cm/mad.c),
 * the one door CM MADs from the wire come through.
 *
 * Random bytes almost never make a CM header, so an input whose first byte
 * is 0xAA gets a valid header (attribute from its second byte) over the
 * rest: the message parsers then see the mutations.  An accepted MAD must
 * rebuild and parse back to the same message (no field lost or widened).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cm/mad.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t buf[SRN_MAD_LEN + 8];
	struct srn_cm_msg m, m2;
	if (size > sizeof(buf))
		size = sizeof(buf);
	memcpy(buf, data, size);
	if (size >= 2 && data[0] == 0xAA) {
		if (size < SRN_MAD_LEN) {
			memset(buf + size, 0, SRN_MAD_LEN - size);
			size = SRN_MAD_LEN;
		}
		uint16_t attr = (uint16_t)(SRN_CM_ATTR_REQ + data[1] % 12);
		buf[0] = SRN_MAD_BASE_VERSION;
		buf[1] = SRN_MAD_CLASS_CM;
		buf[2] = SRN_MAD_CM_CLASS_VERSION;
		buf[3] = SRN_MAD_METHOD_SEND;
		buf[4] = buf[5] = 0;
		buf[16] = (uint8_t)(attr >> 8);
		buf[17] = (uint8_t)attr;
	}
	if (srn_cm_mad_parse(buf, size, &m) != 0)
		return 0;
	uint8_t out[SRN_MAD_LEN];
	if (srn_cm_mad_build(&m, out) != 0)
		abort();
	if (srn_cm_mad_parse(out, sizeof(out), &m2) != 0 || memcmp(&m, &m2, sizeof(m)) != 0)
		abort();
	if (m.attr == SRN_CM_ATTR_REQ) {
		struct srn_cma_hdr h;
		(void)srn_cma_hdr_parse(m.req.pdata, sizeof(m.req.pdata), (uint16_t)m.req.service_id, &h);
	}
	if (m.attr == SRN_CM_ATTR_SIDR_REQ) {
		struct srn_cma_hdr h;
		(void)srn_cma_hdr_parse(m.sidr_req.pdata, sizeof(m.sidr_req.pdata),
					(uint16_t)m.sidr_req.service_id, &h);
	}
	return 0;
}
