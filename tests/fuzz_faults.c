/*
 * fuzz_faults.c - libFuzzer harness for the SOFTRNIC_FAULTS parser
 * (srn_fault_parse, link/fault_parse.c).
 *
 * An environment value ends at its first NUL, so the input is cut there
 * and copied into a buffer of exactly that length plus the NUL. Besides
 * memory safety it asserts fault_parse.c's invariants: on success every
 * threshold is at most SRN_FAULT_ALWAYS, delay_us at most
 * SRN_FAULT_MAX_DELAY_US, at most SRN_FAULT_MAX_QPS QP numbers of 24 bits;
 * on failure -EINVAL and a message that names SOFTRNIC_FAULTS.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "link/fault.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t len = nul ? (size_t)(nul - data) : size;
	char *spec = malloc(len + 1);
	struct srn_fault_cfg cfg;
	char err[256];

	if (!spec)
		return 0;
	memcpy(spec, data, len);
	spec[len] = '\0';
	int rc = srn_fault_parse(spec, &cfg, err, sizeof(err));

	free(spec);
	if (rc) {
		if (rc != -EINVAL || strncmp(err, SRN_FAULT_ENV ": ", strlen(SRN_FAULT_ENV) + 2))
			abort();
		return 0;
	}
	for (int d = 0; d < SRN_FAULT_NDIRS; d++) {
		const struct srn_fault_rule *r = &cfg.dir[d];

		for (int k = 0; k < SRN_FAULT_NKINDS; k++)
			if (r->threshold[k] > SRN_FAULT_ALWAYS)
				abort();
		if (r->delay_us > SRN_FAULT_MAX_DELAY_US || r->nqps < 0 ||
		    r->nqps > SRN_FAULT_MAX_QPS)
			abort();
		for (int q = 0; q < r->nqps; q++)
			if (r->qps[q] > 0xffffff)
				abort();
		if (!r->by_opcode && (r->opcodes[0] | r->opcodes[1] | r->opcodes[2] | r->opcodes[3]))
			abort();
	}
	return 0;
}
