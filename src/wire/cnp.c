/*
 * cnp.c - pack and parse the RoCEv2 CNP (cnp.h).
 */
#include <errno.h>

#include "wire/cnp.h"
#include "wire/opcode.h"

int srn_cnp_build(uint8_t out[SRN_CNP_LEN], uint32_t dqpn, uint16_t pkey,
		  const struct srn_ip_meta *ip)
{
	struct srn_pkt p = {
		.opcode = SRN_OP_CNP,
		.pkey = pkey,
		/* Annex A17: a CNP carries BECN (it is the backward
		 * notification); ConnectX sends byte 4 = 0x40. */
		.becn = true,
		.dqpn = dqpn,
		.psn = 0,
	};
	int n = srn_pkt_build_hdr(out, &p);	/* zeroes the 16 reserved bytes */
	struct iovec iov = { out, (size_t)n };

	srn_icrc_put(out + n, srn_icrc_calc(ip, &iov, 1));
	return n + SRN_ICRC_LEN;
}

int srn_cnp_parse(const uint8_t *buf, size_t len, uint32_t *dqpn)
{
	struct srn_pkt p;
	int err = srn_pkt_parse(buf, len, &p);

	if (err)
		return err;
	if (p.opcode != SRN_OP_CNP)
		return -EPROTO;
	*dqpn = p.dqpn;
	return 0;
}
