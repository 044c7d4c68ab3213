/*
 * test_cm_sidr_mad.c - SIDR_REQ and SIDR_REP in the CM MAD codec
 * (src/cm/mad.c): every field round-trips at its IBTA offset (Tables 114
 * and 115, after the 24-byte MAD header), the RDMA IP CM header rides at
 * the start of a SIDR_REQ's private data as in a REQ, and a reply with a
 * status past Table 116 or more additional information than its field
 * holds is refused.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "cm/mad.h"
#include "check.h"

static void sidr_req(void)
{
	struct srn_cm_msg m = { .attr = SRN_CM_ATTR_SIDR_REQ, .tid = 0x0102030405060708ull }, p;
	struct srn_cm_sidr_req *r = &m.sidr_req;
	uint8_t mad[SRN_MAD_LEN];
	r->request_id = 0xcafef00d;
	r->pkey = 0xffff;
	r->service_id = srn_cma_service_id(0x0111, 7174);   /* RDMA_PS_UDP, udaddy's port */
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(40000) };
	struct sockaddr_in d = { .sin_family = AF_INET, .sin_port = htons(7174) };
	inet_pton(AF_INET, "127.0.0.2", &s.sin_addr);
	inet_pton(AF_INET, "127.0.0.1", &d.sin_addr);
	CHECK(srn_cma_hdr_build(r->pdata, (struct sockaddr *)&s, (struct sockaddr *)&d) == 0);
	memset(r->pdata + SRN_CMA_HDR_LEN, 0x77, sizeof(r->pdata) - SRN_CMA_HDR_LEN);
	CHECK(srn_cm_mad_build(&m, mad) == 0);
	CHECK(mad[1] == 0x07 && mad[3] == 0x03 && mad[16] == 0 && mad[17] == 0x17);
	CHECK(mad[8] == 0x01 && mad[15] == 0x08);                          /* tid */
	CHECK(mad[24] == 0xca && mad[27] == 0x0d);                         /* request ID */
	CHECK(mad[24 + 4] == 0xff && mad[24 + 5] == 0xff);                 /* P_Key */
	CHECK(mad[24 + 8 + 4] == 0x01 && mad[24 + 8 + 5] == 0x11 &&       /* service ID */
	      mad[24 + 14] == 7174 >> 8 && mad[24 + 15] == (7174 & 0xff));
	CHECK(mad[24 + 16] == SRN_CMA_VERSION && mad[24 + 17] == 4 << 4);  /* CM header */
	CHECK(mad[24 + 16 + 2] == 40000 >> 8 && mad[24 + 16 + 16 + 3] == 2);
	CHECK(mad[255] == 0x77);
	CHECK(srn_cm_mad_parse(mad, sizeof(mad), &p) == 0 && memcmp(&p, &m, sizeof(m)) == 0);
	struct srn_cma_hdr h;
	CHECK(srn_cma_hdr_parse(p.sidr_req.pdata, sizeof(p.sidr_req.pdata), 7174, &h) == 0);
	CHECK(h.src_port == 40000 && ((struct sockaddr_in *)&h.dst)->sin_port == htons(7174));
	CHECK(srn_cm_pdata_len(SRN_CM_ATTR_SIDR_REQ) == 216);
	CHECK(strcmp(srn_cm_attr_name(SRN_CM_ATTR_SIDR_REQ), "SIDR_REQ") == 0);
	/* Truncated or long: refused before any field is read. */
	CHECK(srn_cm_mad_parse(mad, 255, &p) == -SRN_CM_BAD_LEN);
	CHECK(srn_cm_mad_parse(mad, 40, &p) == -SRN_CM_BAD_LEN);
}

static void sidr_rep(void)
{
	struct srn_cm_msg m = { .attr = SRN_CM_ATTR_SIDR_REP, .tid = 42 }, p;
	struct srn_cm_sidr_rep *r = &m.sidr_rep;
	uint8_t mad[SRN_MAD_LEN], bad[SRN_MAD_LEN];
	r->request_id = 0x11223344;
	r->status = SRN_SIDR_SUCCESS;
	r->info_len = 0;
	r->qpn = 0xabcdef;
	r->service_id = srn_cma_service_id(0x0111, 7174);
	r->qkey = 0x01234567;                                 /* RDMA_UDP_QKEY */
	memset(r->info, 0x11, sizeof(r->info));
	memset(r->pdata, 0x22, sizeof(r->pdata));
	CHECK(srn_cm_mad_build(&m, mad) == 0);
	CHECK(mad[17] == 0x18);
	CHECK(mad[24] == 0x11 && mad[27] == 0x44 && mad[24 + 4] == 0 && mad[24 + 5] == 0);
	CHECK(mad[24 + 8] == 0xab && mad[24 + 10] == 0xef && mad[24 + 11] == 0);   /* QPN, reserved */
	CHECK(mad[24 + 12 + 5] == 0x11 && mad[24 + 19] == (7174 & 0xff));          /* service ID */
	CHECK(mad[24 + 20] == 0x01 && mad[24 + 23] == 0x67);                       /* Q_Key */
	CHECK(mad[24 + 24] == 0x11 && mad[24 + 95] == 0x11 && mad[24 + 96] == 0x22 && mad[255] == 0x22);
	CHECK(srn_cm_mad_parse(mad, sizeof(mad), &p) == 0 && memcmp(&p, &m, sizeof(m)) == 0);
	CHECK(srn_cm_pdata_len(SRN_CM_ATTR_SIDR_REP) == 136);

	/* Every status of Table 116 parses; 6 and up are refused. */
	for (int st = 0; st < 256; st++) {
		memcpy(bad, mad, sizeof(bad));
		bad[24 + 4] = (uint8_t)st;
		int want = st <= SRN_SIDR_UNSUPPORTED_VERSION ? 0 : -SRN_CM_BAD_FIELD;
		if (srn_cm_mad_parse(bad, sizeof(bad), &p) != want) {
			printf("FAIL status %d\n", st);
			srn_check_failures++;
		}
	}
	/* Additional information: up to its 72 bytes. */
	memcpy(bad, mad, sizeof(bad));
	bad[24 + 5] = 72;
	CHECK(srn_cm_mad_parse(bad, sizeof(bad), &p) == 0 && p.sidr_rep.info_len == 72);
	bad[24 + 5] = 73;
	CHECK(srn_cm_mad_parse(bad, sizeof(bad), &p) == -SRN_CM_BAD_FIELD);
	bad[24 + 5] = 255;
	CHECK(srn_cm_mad_parse(bad, sizeof(bad), &p) == -SRN_CM_BAD_FIELD);
	/* A reply with a status in a Send MAD's status field: refused. */
	memcpy(bad, mad, sizeof(bad));
	bad[5] = 1;
	CHECK(srn_cm_mad_parse(bad, sizeof(bad), &p) == -SRN_CM_BAD_STATUS);
}

int main(void)
{
	sidr_req();
	sidr_rep();
	if (srn_check_failures)
		return 1;
	printf("ok\n");
	return 0;
}
