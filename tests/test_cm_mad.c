/*
 * test_cm_mad.c - the CM MAD codec (src/cm/mad.c): every field of every
 * message round-trips at its IBTA offset, and malformed MADs (truncated,
 * long, wrong base/class version, class, method, status, attribute, and
 * out-of-range fields) are refused with the reason that names them.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "cm/mad.h"
#include "check.h"

int main(void)
{
	struct srn_cm_msg m = { .attr = SRN_CM_ATTR_REQ, .tid = 0x1122334455667788ull }, p;
	uint8_t mad[SRN_MAD_LEN];
	struct srn_cm_req *r = &m.req;
	r->local_comm_id = 0xdeadbeef;
	r->service_id = srn_cma_service_id(0x0106, 7471);
	r->qpn = 0xabcdef; r->resp_res = 3; r->init_depth = 4;
	r->remote_cm_timeout = 20; r->transport = 0; r->flow_ctrl = 1;
	r->psn = 0x123456; r->local_cm_timeout = 19; r->retry_count = 7;
	r->pkey = 0xffff; r->mtu = 5; r->rnr_retry = 6; r->max_cm_retries = 15;
	r->flow_label = 0xabcde; r->packet_rate = 0x2a; r->traffic_class = 0x20;
	r->hop_limit = 64; r->sl = 9; r->subnet_local = 1; r->ack_timeout = 18;
	r->local_lid = r->remote_lid = 0xffff;
	memset(r->pdata, 0x5a, sizeof(r->pdata));
	CHECK(srn_cm_mad_build(&m, mad) == 0);
	/* IBTA offsets (MAD header 24 + message offset). */
	CHECK(mad[1] == 0x07 && mad[2] == 2 && mad[3] == 3 && mad[16] == 0 && mad[17] == 0x10);
	CHECK(mad[24 + 8 + 4] == 0x01 && mad[24 + 8 + 5] == 0x06 && mad[24 + 14] == 7471 >> 8 && mad[24 + 15] == (7471 & 0xff));
	CHECK(mad[24 + 32] == 0xab && mad[24 + 35] == 3 && mad[24 + 39] == 4);
	CHECK(mad[24 + 43] == (20 << 3 | 1) && mad[24 + 47] == (19 << 3 | 7));
	CHECK(mad[24 + 50] == (5 << 4 | 6) && mad[24 + 51] == (15 << 4));
	CHECK(mad[24 + 95] == 18 << 3 && mad[24 + 140] == 0x5a);
	CHECK(srn_cm_mad_parse(mad, sizeof(mad), &p) == 0 && memcmp(&p, &m, sizeof(m)) == 0);

	struct srn_cm_msg rep = { .attr = SRN_CM_ATTR_REP, .rep = { .local_comm_id = 5, .remote_comm_id = 6,
		.qpn = 0x000111, .psn = 0xfffffe, .resp_res = 1, .init_depth = 2, .target_ack_delay = 15,
		.failover = 1, .flow_ctrl = 1, .rnr_retry = 7, .srq = 1, .ca_guid = 42 } };
	CHECK(srn_cm_mad_build(&rep, mad) == 0);
	CHECK(mad[24 + 27] == (7 << 5 | 1 << 4) && mad[24 + 26] == (15 << 3 | 1 << 1 | 1));
	CHECK(srn_cm_mad_parse(mad, sizeof(mad), &p) == 0 && memcmp(&p, &rep, sizeof(rep)) == 0);

	struct srn_cm_msg rej = { .attr = SRN_CM_ATTR_REJ, .rej = { .local_comm_id = 0, .remote_comm_id = 9,
		.msg_rejected = SRN_CM_MSG_REQ, .reason = SRN_CM_REJ_INVALID_SERVICE_ID } };
	CHECK(srn_cm_mad_build(&rej, mad) == 0);
	CHECK(mad[24 + 11] == 8 && srn_cm_mad_parse(mad, sizeof(mad), &p) == 0 && p.rej.reason == 8);
	mad[24 + 9] = 73 << 1;           /* ARI longer than its field */
	CHECK(srn_cm_mad_parse(mad, sizeof(mad), &p) == -SRN_CM_BAD_FIELD);

	struct srn_cm_msg dreq = { .attr = SRN_CM_ATTR_DREQ, .ids = { .local_comm_id = 1, .remote_comm_id = 2, .qpn = 0x345678 } };
	CHECK(srn_cm_mad_build(&dreq, mad) == 0);
	CHECK(srn_cm_mad_parse(mad, sizeof(mad), &p) == 0 && p.ids.qpn == 0x345678);

	/* Malformed: each refused with its reason. */
	CHECK(srn_cm_mad_build(&m, mad) == 0);
	CHECK(srn_cm_mad_parse(mad, 255, &p) == -SRN_CM_BAD_LEN);
	CHECK(srn_cm_mad_parse(mad, 0, &p) == -SRN_CM_BAD_LEN);
	uint8_t bad[SRN_MAD_LEN];
	struct { int off; uint8_t v; int why; } cases[] = {
		{ 0, 2, SRN_CM_BAD_VERSION }, { 1, 0x81, SRN_CM_BAD_CLASS }, { 2, 1, SRN_CM_BAD_VERSION },
		{ 3, 0x81, SRN_CM_BAD_METHOD }, { 5, 1, SRN_CM_BAD_STATUS }, { 17, 0x20, SRN_CM_BAD_ATTR },
		{ 17, 0x19, SRN_CM_BAD_ATTR },                    /* LAP: not served */
		{ 24 + 43, 2 << 1, SRN_CM_BAD_FIELD },            /* transport RD */
		{ 24 + 50, 7 << 4, SRN_CM_BAD_FIELD },            /* MTU code 7 */
		{ 24 + 51, 1, SRN_CM_BAD_FIELD },                 /* extended transport */
	};
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(bad, mad, sizeof(bad));
		bad[cases[i].off] = cases[i].v;
		int got = srn_cm_mad_parse(bad, sizeof(bad), &p);
		if (got != -cases[i].why) {
			printf("FAIL case %u: got %d want %d\n", i, got, -cases[i].why);
			srn_check_failures++;
		}
	}

	/* RDMA IP CM header: IPv4 in the last 4 of 16 bytes, IPv6 whole. */
	struct sockaddr_in s4 = { .sin_family = AF_INET, .sin_port = htons(33000) }, d4 = { .sin_family = AF_INET };
	inet_pton(AF_INET, "127.0.0.5", &s4.sin_addr);
	inet_pton(AF_INET, "127.0.0.9", &d4.sin_addr);
	uint8_t h[SRN_CMA_HDR_LEN];
	struct srn_cma_hdr ch;
	CHECK(srn_cma_hdr_build(h, (struct sockaddr *)&s4, (struct sockaddr *)&d4) == 0);
	CHECK(h[0] == 0 && h[1] == 0x40 && h[2] == 33000 >> 8 && h[19] == 5 && h[35] == 9);
	CHECK(srn_cma_hdr_parse(h, sizeof(h), 7471, &ch) == 0 && ch.src_port == 33000 &&
	      ((struct sockaddr_in *)&ch.dst)->sin_port == htons(7471));
	h[1] = 0x50;
	CHECK(srn_cma_hdr_parse(h, sizeof(h), 7471, &ch) == -22);
	printf(srn_check_failures ? "FAILED\n" : "ok\n");
	return srn_check_failures ? 1 : 0;
}
