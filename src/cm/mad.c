/*
 * mad.c - pack and validate CM MADs and the RDMA IP CM header.
 *
 * Layouts: IBTA vol 1 Tables 106-115 (offsets below are from the start of
 * the message, i.e. after the 24-byte MAD header).  Every reader checks
 * the whole datagram length once (a CM MAD is exactly 256 bytes), so no
 * field read can run past the buffer; fields with a bounded range are
 * checked and the message is refused when they are out of it.
 */
#include "cm/mad.h"

#include <errno.h>
#include <string.h>
#include <netinet/in.h>

_Static_assert(SRN_MAD_HDR_LEN + 140 + SRN_CM_REQ_PDATA == SRN_MAD_LEN, "REQ fills the MAD");
_Static_assert(SRN_MAD_HDR_LEN + 36 + SRN_CM_REP_PDATA == SRN_MAD_LEN, "REP fills the MAD");
_Static_assert(SRN_MAD_HDR_LEN + 84 + SRN_CM_REJ_PDATA == SRN_MAD_LEN, "REJ fills the MAD");
_Static_assert(SRN_MAD_HDR_LEN + 12 + SRN_CM_REJ_ARI == SRN_MAD_HDR_LEN + 84, "REJ ARI");
_Static_assert(SRN_MAD_HDR_LEN + 10 + SRN_CM_MRA_PDATA == SRN_MAD_LEN, "MRA fills the MAD");
_Static_assert(SRN_MAD_HDR_LEN + 8 + SRN_CM_RTU_PDATA == SRN_MAD_LEN, "RTU fills the MAD");
_Static_assert(SRN_MAD_HDR_LEN + 12 + SRN_CM_DREQ_PDATA == SRN_MAD_LEN, "DREQ fills the MAD");
_Static_assert(SRN_CM_DREP_PDATA == SRN_CM_RTU_PDATA, "DREP = RTU layout");
_Static_assert(SRN_MAD_HDR_LEN + 16 + SRN_CM_SIDR_REQ_PDATA == SRN_MAD_LEN, "SIDR_REQ fills the MAD");
_Static_assert(SRN_MAD_HDR_LEN + 24 + SRN_CM_SIDR_REP_INFO + SRN_CM_SIDR_REP_PDATA == SRN_MAD_LEN,
	       "SIDR_REP fills the MAD");

static uint16_t g16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t g24(const uint8_t *p) { return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2]; }
static uint32_t g32(const uint8_t *p) { return (uint32_t)g16(p) << 16 | g16(p + 2); }
static uint64_t g64(const uint8_t *p) { return (uint64_t)g32(p) << 32 | g32(p + 4); }
static void p16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void p24(uint8_t *p, uint32_t v) { p[0] = (uint8_t)(v >> 16); p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)v; }
static void p32(uint8_t *p, uint32_t v) { p16(p, (uint16_t)(v >> 16)); p16(p + 2, (uint16_t)v); }
static void p64(uint8_t *p, uint64_t v) { p32(p, (uint32_t)(v >> 32)); p32(p + 4, (uint32_t)v); }
/* Bits [msb, msb+width) of a byte, counted from its most significant bit. */
static uint8_t gbits(uint8_t b, int msb, int width) { return (uint8_t)((b >> (8 - msb - width)) & ((1u << width) - 1)); }
static uint8_t pbits(uint8_t v, int msb, int width) { return (uint8_t)((v & ((1u << width) - 1)) << (8 - msb - width)); }

size_t srn_cm_pdata_len(uint16_t attr)
{
	switch (attr) {
	case SRN_CM_ATTR_REQ: return SRN_CM_REQ_PDATA;
	case SRN_CM_ATTR_MRA: return SRN_CM_MRA_PDATA;
	case SRN_CM_ATTR_REJ: return SRN_CM_REJ_PDATA;
	case SRN_CM_ATTR_REP: return SRN_CM_REP_PDATA;
	case SRN_CM_ATTR_RTU: return SRN_CM_RTU_PDATA;
	case SRN_CM_ATTR_DREQ: return SRN_CM_DREQ_PDATA;
	case SRN_CM_ATTR_DREP: return SRN_CM_DREP_PDATA;
	case SRN_CM_ATTR_SIDR_REQ: return SRN_CM_SIDR_REQ_PDATA;
	case SRN_CM_ATTR_SIDR_REP: return SRN_CM_SIDR_REP_PDATA;
	}
	return 0;
}

const char *srn_cm_attr_name(uint16_t attr)
{
	static const char *const names[] = { "REQ", "MRA", "REJ", "REP", "RTU", "DREQ", "DREP",
					     "SIDR_REQ", "SIDR_REP", "LAP", "APR" };
	if (attr >= SRN_CM_ATTR_REQ && attr <= SRN_CM_ATTR_APR)
		return names[attr - SRN_CM_ATTR_REQ];
	return "?";
}

static int parse_req(const uint8_t *d, struct srn_cm_req *r)
{
	r->local_comm_id = g32(d + 0);
	r->service_id = g64(d + 8);
	r->ca_guid = g64(d + 16);
	r->qkey = g32(d + 28);
	r->qpn = g24(d + 32);
	r->resp_res = d[35];
	/* d[36..38]: local EECN, RD only */
	r->init_depth = d[39];
	r->remote_cm_timeout = gbits(d[43], 0, 5);
	r->transport = gbits(d[43], 5, 2);
	r->flow_ctrl = gbits(d[43], 7, 1);
	r->psn = g24(d + 44);
	r->local_cm_timeout = gbits(d[47], 0, 5);
	r->retry_count = gbits(d[47], 5, 3);
	r->pkey = g16(d + 48);
	r->mtu = gbits(d[50], 0, 4);
	r->rnr_retry = gbits(d[50], 5, 3);
	r->max_cm_retries = gbits(d[51], 0, 4);
	r->srq = gbits(d[51], 4, 1);
	r->ext_transport = gbits(d[51], 5, 3);
	r->local_lid = g16(d + 52);
	r->remote_lid = g16(d + 54);
	memcpy(r->local_gid, d + 56, 16);
	memcpy(r->remote_gid, d + 72, 16);
	r->flow_label = g32(d + 88) >> 12;
	r->packet_rate = gbits(d[91], 2, 6);
	r->traffic_class = d[92];
	r->hop_limit = d[93];
	r->sl = gbits(d[94], 0, 4);
	r->subnet_local = gbits(d[94], 4, 1);
	r->ack_timeout = gbits(d[95], 0, 5);
	memcpy(r->pdata, d + 140, SRN_CM_REQ_PDATA);
	/* C12-6: RC, UC and XRC connect through REQ/REP here; RD is built
	 * by nobody.  XRC is transport 3 with extended type 1 (Annex A14);
	 * other extended types do not exist, and one named beside RC or UC
	 * contradicts the transport. */
	if (r->transport == SRN_CM_TRANSPORT_RD)
		return -SRN_CM_BAD_FIELD;
	if (r->transport == SRN_CM_TRANSPORT_EXT ? r->ext_transport != SRN_CM_EXT_TRANSPORT_XRC
						  : r->ext_transport != 0)
		return -SRN_CM_BAD_FIELD;
	if (r->mtu < 1 || r->mtu > 5)
		return -SRN_CM_BAD_FIELD;    /* 256..4096 are the only MTUs */
	if (r->local_comm_id == 0)
		return -SRN_CM_BAD_FIELD;    /* comm ID 0 names nobody */
	return 0;
}

static void build_req(uint8_t *d, const struct srn_cm_req *r)
{
	p32(d + 0, r->local_comm_id);
	p64(d + 8, r->service_id);
	p64(d + 16, r->ca_guid);
	p32(d + 28, r->qkey);
	p24(d + 32, r->qpn);
	d[35] = r->resp_res;
	d[39] = r->init_depth;
	d[43] = pbits(r->remote_cm_timeout, 0, 5) | pbits(r->transport, 5, 2) | pbits(r->flow_ctrl, 7, 1);
	p24(d + 44, r->psn);
	d[47] = pbits(r->local_cm_timeout, 0, 5) | pbits(r->retry_count, 5, 3);
	p16(d + 48, r->pkey);
	d[50] = pbits(r->mtu, 0, 4) | pbits(r->rnr_retry, 5, 3);
	d[51] = pbits(r->max_cm_retries, 0, 4) | pbits(r->srq, 4, 1) | pbits(r->ext_transport, 5, 3);
	p16(d + 52, r->local_lid);
	p16(d + 54, r->remote_lid);
	memcpy(d + 56, r->local_gid, 16);
	memcpy(d + 72, r->remote_gid, 16);
	p32(d + 88, (r->flow_label & 0xfffff) << 12);
	d[91] |= pbits(r->packet_rate, 2, 6);
	d[92] = r->traffic_class;
	d[93] = r->hop_limit;
	d[94] = pbits(r->sl, 0, 4) | pbits(r->subnet_local, 4, 1);
	d[95] = pbits(r->ack_timeout, 0, 5);
	memcpy(d + 140, r->pdata, SRN_CM_REQ_PDATA);
}

static int parse_rep(const uint8_t *d, struct srn_cm_rep *r)
{
	r->local_comm_id = g32(d + 0);
	r->remote_comm_id = g32(d + 4);
	r->qkey = g32(d + 8);
	r->qpn = g24(d + 12);
	r->eecn = g24(d + 16);
	r->psn = g24(d + 20);
	r->resp_res = d[24];
	r->init_depth = d[25];
	r->target_ack_delay = gbits(d[26], 0, 5);
	r->failover = gbits(d[26], 5, 2);
	r->flow_ctrl = gbits(d[26], 7, 1);
	r->rnr_retry = gbits(d[27], 0, 3);
	r->srq = gbits(d[27], 3, 1);
	r->ca_guid = g64(d + 28);
	memcpy(r->pdata, d + 36, SRN_CM_REP_PDATA);
	if (r->local_comm_id == 0 || r->remote_comm_id == 0)
		return -SRN_CM_BAD_FIELD;
	return 0;
}

static void build_rep(uint8_t *d, const struct srn_cm_rep *r)
{
	p32(d + 0, r->local_comm_id);
	p32(d + 4, r->remote_comm_id);
	p32(d + 8, r->qkey);
	p24(d + 12, r->qpn);
	p24(d + 16, r->eecn);
	p24(d + 20, r->psn);
	d[24] = r->resp_res;
	d[25] = r->init_depth;
	d[26] = pbits(r->target_ack_delay, 0, 5) | pbits(r->failover, 5, 2) | pbits(r->flow_ctrl, 7, 1);
	d[27] = pbits(r->rnr_retry, 0, 3) | pbits(r->srq, 3, 1);
	p64(d + 28, r->ca_guid);
	memcpy(d + 36, r->pdata, SRN_CM_REP_PDATA);
}

static int parse_rej(const uint8_t *d, struct srn_cm_rej *r)
{
	r->local_comm_id = g32(d + 0);
	r->remote_comm_id = g32(d + 4);
	r->msg_rejected = gbits(d[8], 0, 2);
	r->ari_len = gbits(d[9], 0, 7);
	r->reason = g16(d + 10);
	memcpy(r->ari, d + 12, SRN_CM_REJ_ARI);
	memcpy(r->pdata, d + 84, SRN_CM_REJ_PDATA);
	if (r->msg_rejected > SRN_CM_MSG_OTHER || r->ari_len > SRN_CM_REJ_ARI)
		return -SRN_CM_BAD_FIELD;
	if (r->local_comm_id == 0 && r->remote_comm_id == 0)
		return -SRN_CM_BAD_FIELD;    /* rejects nothing */
	return 0;
}

static void build_rej(uint8_t *d, const struct srn_cm_rej *r)
{
	p32(d + 0, r->local_comm_id);
	p32(d + 4, r->remote_comm_id);
	d[8] = pbits(r->msg_rejected, 0, 2);
	d[9] = pbits(r->ari_len, 0, 7);
	p16(d + 10, r->reason);
	memcpy(d + 12, r->ari, SRN_CM_REJ_ARI);
	memcpy(d + 84, r->pdata, SRN_CM_REJ_PDATA);
}

static int parse_mra(const uint8_t *d, struct srn_cm_mra *r)
{
	r->local_comm_id = g32(d + 0);
	r->remote_comm_id = g32(d + 4);
	r->msg_mraed = gbits(d[8], 0, 2);
	r->service_timeout = gbits(d[9], 0, 5);
	memcpy(r->pdata, d + 10, SRN_CM_MRA_PDATA);
	if (r->msg_mraed > SRN_CM_MSG_OTHER || r->remote_comm_id == 0)
		return -SRN_CM_BAD_FIELD;
	return 0;
}

static void build_mra(uint8_t *d, const struct srn_cm_mra *r)
{
	p32(d + 0, r->local_comm_id);
	p32(d + 4, r->remote_comm_id);
	d[8] = pbits(r->msg_mraed, 0, 2);
	d[9] = pbits(r->service_timeout, 0, 5);
	memcpy(d + 10, r->pdata, SRN_CM_MRA_PDATA);
}

/* RTU, DREQ, DREP: comm IDs, the DREQ's QPN, private data. */
static int parse_ids(const uint8_t *d, uint16_t attr, struct srn_cm_ids *r)
{
	size_t off = attr == SRN_CM_ATTR_DREQ ? 12 : 8;
	r->local_comm_id = g32(d + 0);
	r->remote_comm_id = g32(d + 4);
	r->qpn = attr == SRN_CM_ATTR_DREQ ? g24(d + 8) : 0;
	memset(r->pdata, 0, sizeof(r->pdata));
	memcpy(r->pdata, d + off, srn_cm_pdata_len(attr));
	if (r->local_comm_id == 0 || r->remote_comm_id == 0)
		return -SRN_CM_BAD_FIELD;
	return 0;
}

static void build_ids(uint8_t *d, uint16_t attr, const struct srn_cm_ids *r)
{
	size_t off = attr == SRN_CM_ATTR_DREQ ? 12 : 8;
	p32(d + 0, r->local_comm_id);
	p32(d + 4, r->remote_comm_id);
	if (attr == SRN_CM_ATTR_DREQ)
		p24(d + 8, r->qpn);
	memcpy(d + off, r->pdata, srn_cm_pdata_len(attr));
}

/* SIDR_REQ (Table 114): request ID, P_Key, 2 reserved, service ID, data.
 * Nothing in it has a range to check: any request ID names the sender's
 * request, the service ID is looked up and may simply be unknown. */
static int parse_sidr_req(const uint8_t *d, struct srn_cm_sidr_req *r)
{
	r->request_id = g32(d + 0);
	r->pkey = g16(d + 4);
	r->service_id = g64(d + 8);
	memcpy(r->pdata, d + 16, SRN_CM_SIDR_REQ_PDATA);
	return 0;
}

static void build_sidr_req(uint8_t *d, const struct srn_cm_sidr_req *r)
{
	p32(d + 0, r->request_id);
	p16(d + 4, r->pkey);
	p64(d + 8, r->service_id);
	memcpy(d + 16, r->pdata, SRN_CM_SIDR_REQ_PDATA);
}

/* SIDR_REP (Table 115): request ID, status, info length, 2 reserved,
 * QPN (24 bits) + 8 reserved, service ID, Q_Key, 72 bytes of additional
 * information, data. */
static int parse_sidr_rep(const uint8_t *d, struct srn_cm_sidr_rep *r)
{
	r->request_id = g32(d + 0);
	r->status = d[4];
	r->info_len = d[5];
	r->qpn = g24(d + 8);
	r->service_id = g64(d + 12);
	r->qkey = g32(d + 20);
	memcpy(r->info, d + 24, SRN_CM_SIDR_REP_INFO);
	memcpy(r->pdata, d + 24 + SRN_CM_SIDR_REP_INFO, SRN_CM_SIDR_REP_PDATA);
	if (r->status > SRN_SIDR_UNSUPPORTED_VERSION)
		return -SRN_CM_BAD_FIELD;    /* Table 116 ends at 5 */
	if (r->info_len > SRN_CM_SIDR_REP_INFO)
		return -SRN_CM_BAD_FIELD;    /* more information than its field holds */
	return 0;
}

static void build_sidr_rep(uint8_t *d, const struct srn_cm_sidr_rep *r)
{
	p32(d + 0, r->request_id);
	d[4] = r->status;
	d[5] = r->info_len;
	p24(d + 8, r->qpn);
	p64(d + 12, r->service_id);
	p32(d + 20, r->qkey);
	memcpy(d + 24, r->info, SRN_CM_SIDR_REP_INFO);
	memcpy(d + 24 + SRN_CM_SIDR_REP_INFO, r->pdata, SRN_CM_SIDR_REP_PDATA);
}

int srn_cm_mad_parse(const uint8_t *mad, size_t len, struct srn_cm_msg *m)
{
	if (len != SRN_MAD_LEN)
		return -SRN_CM_BAD_LEN;       /* 13.4.2: every MAD is 256 bytes */
	if (mad[0] != SRN_MAD_BASE_VERSION)
		return -SRN_CM_BAD_VERSION;
	if (mad[1] != SRN_MAD_CLASS_CM)
		return -SRN_CM_BAD_CLASS;     /* QP1 takes other classes; we serve only CM */
	if (mad[2] != SRN_MAD_CM_CLASS_VERSION)
		return -SRN_CM_BAD_VERSION;
	if (mad[3] != SRN_MAD_METHOD_SEND)
		return -SRN_CM_BAD_METHOD;    /* CM messages are all Send (Table 104) */
	if (g16(mad + 4) != 0)
		return -SRN_CM_BAD_STATUS;    /* a Send carries no status */
	memset(m, 0, sizeof(*m));
	m->tid = g64(mad + 8);
	m->attr = g16(mad + 16);
	const uint8_t *d = mad + SRN_MAD_HDR_LEN;
	switch (m->attr) {
	case SRN_CM_ATTR_REQ: return parse_req(d, &m->req);
	case SRN_CM_ATTR_REP: return parse_rep(d, &m->rep);
	case SRN_CM_ATTR_REJ: return parse_rej(d, &m->rej);
	case SRN_CM_ATTR_MRA: return parse_mra(d, &m->mra);
	case SRN_CM_ATTR_RTU:
	case SRN_CM_ATTR_DREQ:
	case SRN_CM_ATTR_DREP: return parse_ids(d, m->attr, &m->ids);
	case SRN_CM_ATTR_SIDR_REQ: return parse_sidr_req(d, &m->sidr_req);
	case SRN_CM_ATTR_SIDR_REP: return parse_sidr_rep(d, &m->sidr_rep);
	}
	return -SRN_CM_BAD_ATTR;              /* LAP, APR, ClassPortInfo: not served */
}

int srn_cm_mad_build(const struct srn_cm_msg *m, uint8_t mad[SRN_MAD_LEN])
{
	memset(mad, 0, SRN_MAD_LEN);
	mad[0] = SRN_MAD_BASE_VERSION;
	mad[1] = SRN_MAD_CLASS_CM;
	mad[2] = SRN_MAD_CM_CLASS_VERSION;
	mad[3] = SRN_MAD_METHOD_SEND;
	p64(mad + 8, m->tid);
	p16(mad + 16, m->attr);
	uint8_t *d = mad + SRN_MAD_HDR_LEN;
	switch (m->attr) {
	case SRN_CM_ATTR_REQ: build_req(d, &m->req); return 0;
	case SRN_CM_ATTR_REP: build_rep(d, &m->rep); return 0;
	case SRN_CM_ATTR_REJ: build_rej(d, &m->rej); return 0;
	case SRN_CM_ATTR_MRA: build_mra(d, &m->mra); return 0;
	case SRN_CM_ATTR_RTU:
	case SRN_CM_ATTR_DREQ:
	case SRN_CM_ATTR_DREP: build_ids(d, m->attr, &m->ids); return 0;
	case SRN_CM_ATTR_SIDR_REQ: build_sidr_req(d, &m->sidr_req); return 0;
	case SRN_CM_ATTR_SIDR_REP: build_sidr_rep(d, &m->sidr_rep); return 0;
	}
	return -EINVAL;
}

/* The header (kernel cma.c's layout): version, IP version in the high
 * nibble, the active side's port, then source and destination as 16
 * bytes each, an IPv4 address in the last 4 of them. */
int srn_cma_hdr_parse(const uint8_t *pd, size_t len, uint16_t dst_port, struct srn_cma_hdr *h)
{
	if (len < SRN_CMA_HDR_LEN || pd[0] != SRN_CMA_VERSION)
		return -EINVAL;
	memset(h, 0, sizeof(*h));
	h->src_port = g16(pd + 2);
	switch (pd[1] >> 4) {
	case 4: {
		struct sockaddr_in *s = (void *)&h->src, *d = (void *)&h->dst;
		s->sin_family = d->sin_family = AF_INET;
		memcpy(&s->sin_addr, pd + 4 + 12, 4);
		memcpy(&d->sin_addr, pd + 20 + 12, 4);
		s->sin_port = htons(h->src_port);
		d->sin_port = htons(dst_port);
		return 0;
	}
	case 6: {
		struct sockaddr_in6 *s = (void *)&h->src, *d = (void *)&h->dst;
		s->sin6_family = d->sin6_family = AF_INET6;
		memcpy(&s->sin6_addr, pd + 4, 16);
		memcpy(&d->sin6_addr, pd + 20, 16);
		s->sin6_port = htons(h->src_port);
		d->sin6_port = htons(dst_port);
		return 0;
	}
	}
	return -EINVAL;
}

int srn_cma_hdr_build(uint8_t out[SRN_CMA_HDR_LEN], const struct sockaddr *src,
		      const struct sockaddr *dst)
{
	memset(out, 0, SRN_CMA_HDR_LEN);
	out[0] = SRN_CMA_VERSION;
	if (src->sa_family != dst->sa_family)
		return -EINVAL;
	if (src->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)src, *d = (const void *)dst;
		out[1] = 4 << 4;
		memcpy(out + 2, &s->sin_port, 2);
		memcpy(out + 4 + 12, &s->sin_addr, 4);
		memcpy(out + 20 + 12, &d->sin_addr, 4);
		return 0;
	}
	if (src->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)src, *d = (const void *)dst;
		out[1] = 6 << 4;
		memcpy(out + 2, &s->sin6_port, 2);
		memcpy(out + 4, &s->sin6_addr, 16);
		memcpy(out + 20, &d->sin6_addr, 16);
		return 0;
	}
	return -EINVAL;
}
