/*
 * test_rsocket_proto - the rsockets connect data and record byte order
 * (src/rsocket/proto.c): a hand-made 40-byte vector laid out as rdma-core
 * lays out its rs_conn_data (big-endian fields at fixed offsets) parses to
 * the fields, packing gives the same bytes back, every field round-trips,
 * each lie is refused, and the iomap size scale matches rdma-core's
 * (exact to 128, then multiples of 256).  Exit 0 pass, 1 fail.
 */
#include <byteswap.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rsocket/proto.h"

int main(void)
{
	/* version 1, flags IOMAP, credits 384, iomap 1, slots at
	 * 0x1122334455667788 key 0xaabbccdd, 2 slots; buffer at 0x1000
	 * key 0x01020304, 65536 bytes. */
	const uint8_t v[SRN_RS_CONN_LEN] = {
		1, 2, 0x01, 0x80, 0, 0, 0, 1,
		0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0xaa, 0xbb, 0xcc, 0xdd, 0, 0, 0, 2,
		0, 0, 0, 0, 0, 0, 0x10, 0x00, 0x01, 0x02, 0x03, 0x04, 0, 1, 0, 0,
	};
	struct srn_rs_conn c;
	CHECK(srn_rs_conn_parse(v, sizeof(v), &c) == 0);
	CHECK(c.version == 1 && c.flags == SRN_RS_CONN_FLAG_IOMAP && c.credits == 384);
	CHECK(c.iomap_scaled == 1);
	CHECK(c.target_sgl.addr == 0x1122334455667788ull && c.target_sgl.key == 0xaabbccdd &&
	      c.target_sgl.length == 2);
	CHECK(c.data_buf.addr == 0x1000 && c.data_buf.key == 0x01020304 && c.data_buf.length == 65536);
	uint8_t out[SRN_RS_CONN_LEN];
	srn_rs_conn_pack(&c, out);
	CHECK(memcmp(out, v, sizeof(v)) == 0);

	/* Random round trips of every field. */
	srand(12);
	for (int i = 0; i < 10000; i++) {
		struct srn_rs_conn a = {
			.version = 1, .flags = (uint8_t)rand(), .credits = (uint16_t)(rand() % 65535 + 1),
			.iomap_scaled = (uint8_t)rand(),
			.target_sgl = { ((uint64_t)rand() << 33) ^ (uint64_t)rand(), (uint32_t)rand(),
					(uint32_t)(rand() % SRN_RS_MAX_SGL_SLOTS + 1) },
			.data_buf = { ((uint64_t)rand() << 31) ^ (uint64_t)rand(), (uint32_t)rand(),
				      (uint32_t)(rand() % SRN_RS_ARG_MASK + 1) },
		}, b;
		srn_rs_conn_pack(&a, out);
		CHECK(out[4] == 0 && out[5] == 0 && out[6] == 0);
		CHECK(srn_rs_conn_parse(out, sizeof(out), &b) == 0);
		CHECK(memcmp(&a.target_sgl, &b.target_sgl, sizeof(a.target_sgl)) == 0);
		CHECK(memcmp(&a.data_buf, &b.data_buf, sizeof(a.data_buf)) == 0);
		CHECK(a.flags == b.flags && a.credits == b.credits && a.iomap_scaled == b.iomap_scaled);
		if (srn_check_failures)
			break;
	}

	/* Lies and strangers are refused. */
	uint8_t bad[SRN_RS_CONN_LEN];
	CHECK(srn_rs_conn_parse(v, sizeof(v) - 1, &c) == -EPROTO);
	CHECK(srn_rs_conn_parse(NULL, 0, &c) == -EPROTO);
	memcpy(bad, v, sizeof(v)); bad[0] = 2;
	CHECK(srn_rs_conn_parse(bad, sizeof(bad), &c) == -EPROTO);
	memcpy(bad, v, sizeof(v)); bad[2] = bad[3] = 0;
	CHECK(srn_rs_conn_parse(bad, sizeof(bad), &c) == -EPROTO);
	memcpy(bad, v, sizeof(v)); bad[23] = 0;
	CHECK(srn_rs_conn_parse(bad, sizeof(bad), &c) == -EPROTO);
	memcpy(bad, v, sizeof(v)); bad[23] = SRN_RS_MAX_SGL_SLOTS + 1;
	CHECK(srn_rs_conn_parse(bad, sizeof(bad), &c) == -EPROTO);
	memcpy(bad, v, sizeof(v)); memset(bad + 36, 0, 4);
	CHECK(srn_rs_conn_parse(bad, sizeof(bad), &c) == -EPROTO);

	/* The iomap scale: rdma-core's rs_value_to_scale / rs_scale_to_value. */
	for (unsigned x = 0; x <= 128; x++)
		CHECK(srn_rs_scale_from_u8(srn_rs_scale_to_u8(x)) == x);
	CHECK(srn_rs_scale_to_u8(256) == (128 | 1) && srn_rs_scale_from_u8(128 | 1) == 256);
	CHECK(srn_rs_scale_from_u8(srn_rs_scale_to_u8(1000)) == 768);

	/* Immediates: op in the top 3 bits. */
	CHECK(srn_rs_imm(SRN_RS_OP_SGL, 400) == 0x80000190u);
	CHECK(srn_rs_imm(SRN_RS_OP_CTRL, SRN_RS_CTRL_DISCONNECT) == 0xe0000000u);
	CHECK(srn_rs_imm_op(0x40001000u) == SRN_RS_OP_WRITE && srn_rs_imm_arg(0x40001000u) == 0x1000);

	/* Records go out in the reader's order. */
	struct srn_rs_sge s = { 0x0102030405060708ull, 0x11223344, 0x55667788 }, t = s;
	srn_rs_sge_for_peer(&t, false);
	CHECK(memcmp(&s, &t, sizeof(s)) == 0);
	srn_rs_sge_for_peer(&t, true);
	CHECK(t.addr == bswap_64(s.addr) && t.key == bswap_32(s.key) && t.length == bswap_32(s.length));
	struct srn_rs_iomap m = { 0x10, s };
	srn_rs_iomap_for_peer(&m, true);
	CHECK(m.offset == bswap_64(0x10ull) && m.sge.key == bswap_32(s.key));

	if (srn_check_failures)
		return srn_check_result();
	printf("ok\n");
	return 0;
}
