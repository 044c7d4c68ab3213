/*
 * proto.c - packing and checking the rsockets connect data, and the byte
 * order of the records a peer reads (proto.h).
 */
#include <byteswap.h>
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "rsocket/proto.h"

static void put_be16(uint8_t *p, uint16_t v) { v = htobe16(v); memcpy(p, &v, 2); }
static void put_be32(uint8_t *p, uint32_t v) { v = htobe32(v); memcpy(p, &v, 4); }
static void put_be64(uint8_t *p, uint64_t v) { v = htobe64(v); memcpy(p, &v, 8); }
static uint16_t get_be16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return be16toh(v); }
static uint32_t get_be32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return be32toh(v); }
static uint64_t get_be64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return be64toh(v); }

static void put_sge(uint8_t *p, const struct srn_rs_sge *s)
{
	put_be64(p, s->addr);
	put_be32(p + 8, s->key);
	put_be32(p + 12, s->length);
}

static void get_sge(const uint8_t *p, struct srn_rs_sge *s)
{
	s->addr = get_be64(p);
	s->key = get_be32(p + 8);
	s->length = get_be32(p + 12);
}

void srn_rs_conn_pack(const struct srn_rs_conn *c, uint8_t out[SRN_RS_CONN_LEN])
{
	memset(out, 0, SRN_RS_CONN_LEN);
	out[SRN_RS_CONN_OFF_VERSION] = c->version;
	out[SRN_RS_CONN_OFF_FLAGS] = c->flags;
	put_be16(out + SRN_RS_CONN_OFF_CREDITS, c->credits);
	out[SRN_RS_CONN_OFF_IOMAP] = c->iomap_scaled;
	put_sge(out + SRN_RS_CONN_OFF_TSGL, &c->target_sgl);
	put_sge(out + SRN_RS_CONN_OFF_DATA, &c->data_buf);
}

int srn_rs_conn_parse(const uint8_t *in, size_t len, struct srn_rs_conn *c)
{
	/* Too short: not an rsocket, or a truncated REQ/REP. */
	if (!in || len < SRN_RS_CONN_LEN)
		return -EPROTO;
	memset(c, 0, sizeof(*c));
	c->version = in[SRN_RS_CONN_OFF_VERSION];
	c->flags = in[SRN_RS_CONN_OFF_FLAGS];
	c->credits = get_be16(in + SRN_RS_CONN_OFF_CREDITS);
	c->iomap_scaled = in[SRN_RS_CONN_OFF_IOMAP];
	get_sge(in + SRN_RS_CONN_OFF_TSGL, &c->target_sgl);
	get_sge(in + SRN_RS_CONN_OFF_DATA, &c->data_buf);
	/* rdma-core checks only the version; the rest are lies we would act
	 * on: no credits means we could never send, no SGL slots means the
	 * receiver could never grant buffer again, and more slots than any
	 * rsocket has would have us write past the peer's table. */
	if (c->version != SRN_RS_VERSION)
		return -EPROTO;
	if (c->credits == 0)
		return -EPROTO;
	if (c->target_sgl.length == 0 || c->target_sgl.length > SRN_RS_MAX_SGL_SLOTS)
		return -EPROTO;
	if (c->data_buf.length == 0 || c->data_buf.length > SRN_RS_ARG_MASK)
		return -EPROTO;
	return 0;
}

uint8_t srn_rs_scale_to_u8(unsigned value)
{
	if (value <= 128)
		return (uint8_t)value;
	unsigned hi = value >> 8;
	if (hi > 127)
		hi = 127;
	return (uint8_t)(128 | hi);
}

unsigned srn_rs_scale_from_u8(uint8_t scaled)
{
	if (scaled <= 128)
		return scaled;
	return (unsigned)(scaled & 127) << 8;
}

bool srn_rs_host_is_be(void)
{
	return __BYTE_ORDER == __BIG_ENDIAN;
}

void srn_rs_sge_for_peer(struct srn_rs_sge *s, bool swap)
{
	if (!swap)
		return;
	s->addr = bswap_64(s->addr);
	s->key = bswap_32(s->key);
	s->length = bswap_32(s->length);
}

void srn_rs_iomap_for_peer(struct srn_rs_iomap *m, bool swap)
{
	if (!swap)
		return;
	m->offset = bswap_64(m->offset);
	srn_rs_sge_for_peer(&m->sge, true);
}
