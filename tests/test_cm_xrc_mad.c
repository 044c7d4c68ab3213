/*
 * test_cm_xrc_mad.c - XRC in the CM MAD codec (src/cm/mad.c): a REQ that
 * says XRC (transport service type 3, extended transport type 1: IBTA
 * Annex A14, the kernel's cm_req_set_qp_type) round-trips with its bits
 * where the IBTA puts them; a REP's local EE context number, where an XRC
 * target puts its QPN (the kernel's cm_format_rep), round-trips at message
 * offset 16; and REQs whose two transport fields disagree are refused.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "cm/mad.h"

int main(void)
{
	struct srn_cm_msg m = { .attr = SRN_CM_ATTR_REQ, .tid = 7 }, p;
	uint8_t mad[SRN_MAD_LEN];
	struct srn_cm_req *r = &m.req;
	r->local_comm_id = 0x1234;
	r->service_id = srn_cma_service_id(0x013f, 7471);   /* RDMA_PS_IB */
	r->qpn = 0x432003;
	r->init_depth = 4;
	r->transport = SRN_CM_TRANSPORT_EXT;
	r->ext_transport = SRN_CM_EXT_TRANSPORT_XRC;
	r->mtu = 3;
	r->max_cm_retries = 15;
	r->remote_cm_timeout = 20;
	CHECK(srn_cm_mad_build(&m, mad) == 0);
	/* byte 43: timeout 5 bits, transport 2 bits (3), flow control 1 bit */
	CHECK(mad[24 + 43] == (20 << 3 | 3 << 1), "byte 43 = %#x", mad[24 + 43]);
	/* byte 51: max CM retries 4 bits, SRQ 1 bit, extended transport 3 bits */
	CHECK(mad[24 + 51] == (15 << 4 | 1), "byte 51 = %#x", mad[24 + 51]);
	CHECK(srn_cm_mad_parse(mad, sizeof(mad), &p) == 0 && memcmp(&p, &m, sizeof(m)) == 0);

	uint8_t bad[SRN_MAD_LEN];
	/* Extended type 2..7 names no transport. */
	memcpy(bad, mad, sizeof(bad));
	bad[24 + 51] = 15 << 4 | 2;
	CHECK(srn_cm_mad_parse(bad, sizeof(bad), &p) == -SRN_CM_BAD_FIELD);
	/* An extended type beside UC contradicts the transport. */
	memcpy(bad, mad, sizeof(bad));
	bad[24 + 43] = 20 << 3 | 1 << 1;
	CHECK(srn_cm_mad_parse(bad, sizeof(bad), &p) == -SRN_CM_BAD_FIELD);
	/* Transport 3 without an extended type says nothing. */
	memcpy(bad, mad, sizeof(bad));
	bad[24 + 51] = 15 << 4;
	CHECK(srn_cm_mad_parse(bad, sizeof(bad), &p) == -SRN_CM_BAD_FIELD);
	/* RC with no extended type still parses as RC. */
	memcpy(bad, mad, sizeof(bad));
	bad[24 + 43] = 20 << 3;
	bad[24 + 51] = 15 << 4;
	CHECK(srn_cm_mad_parse(bad, sizeof(bad), &p) == 0 && p.req.transport == SRN_CM_TRANSPORT_RC &&
	      p.req.ext_transport == 0);

	struct srn_cm_msg rep = { .attr = SRN_CM_ATTR_REP, .rep = { .local_comm_id = 5, .remote_comm_id = 6,
		.qpn = 0, .eecn = 0xabcdef, .psn = 0x10, .srq = 1, .rnr_retry = 7 } };
	CHECK(srn_cm_mad_build(&rep, mad) == 0);
	CHECK(mad[24 + 12] == 0 && mad[24 + 13] == 0 && mad[24 + 14] == 0, "local QPN stays 0");
	CHECK(mad[24 + 16] == 0xab && mad[24 + 17] == 0xcd && mad[24 + 18] == 0xef, "EECN at 16");
	CHECK(mad[24 + 19] == 0, "reserved byte after the EECN");
	CHECK(srn_cm_mad_parse(mad, sizeof(mad), &p) == 0 && memcmp(&p, &rep, sizeof(rep)) == 0);
	return srn_check_result();
}
