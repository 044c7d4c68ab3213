/*
 * fuzz_nvmf_wire.c - libFuzzer harness for the two stateless doors of
 * examples/nvmf/wire.c: the NVMe/TCP PDU header check (both directions,
 * every digest setting) and the NVMe/RDMA rdma_cm REQUEST private data.
 *
 * What passes must keep the promises the transports index buffers by:
 * a PDU's header, data and digests add up to PLEN, and PLEN fits the
 * receive buffer (PDO is one byte, so 256 + MDTS + a digest); a REQUEST
 * that passes names a queue and sizes the target can honour.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nvme.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_pdu(const uint8_t *data, size_t size, int host_side, int hd, int dd)
{
	struct nvme_tcp_hdr h;
	struct tcp_pdu_shape sh;
	if (size < sizeof(h))
		return;
	memcpy(&h, data, sizeof(h));
	if (nvmf_tcp_pdu_check(&h, host_side, hd, dd, &sh))
		return;
	if (sh.plen != h.plen || sh.hlen < h.hlen || sh.hlen > sh.plen)
		abort();
	if (sh.plen > 256 + NVMF_MAX_DATA + TCP_DGST_LEN)
		abort(); /* would overrun the receive buffer */
	if (sh.dlen) {
		if (sh.pdo < sh.hlen || (uint64_t)sh.pdo + sh.dlen + (sh.ddgst ? 4 : 0) != sh.plen)
			abort();
		if (sh.dlen > NVMF_MAX_DATA)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	for (int i = 0; i < 8; i++)
		check_pdu(data, size, i & 1, (i >> 1) & 1, (i >> 2) & 1);
	struct nvme_rdma_cm_req r;
	if (!nvmf_cm_req_parse(data, size, NVMF_MAX_QUEUES, &r)) {
		if (r.recfmt || r.qid > NVMF_MAX_QUEUES || !r.hsqsize || r.hsqsize > NVMF_MQES ||
		    r.hrqsize < r.hsqsize + 1 || r.hrqsize > NVMF_MQES + 1)
			abort();
		if (size < sizeof(r))
			abort();
	}
	return 0;
}
