/*
 * wire.c - the doors: every byte a peer sends is decoded here first.
 *
 * Three parsers, each pure (no state, no I/O) so a fuzzer drives them
 * directly: a command's SGL data pointer, the NVMe/RDMA rdma_cm REQUEST
 * private data, and the fixed part of an NVMe/TCP PDU.  Each reject says
 * which lie it catches; what passes has every length bounded by the
 * limits in nvme.h, so callers index buffers with the result unchecked.
 */
#include "nvme.h"

#include <string.h>

enum nvme_dir nvmf_sqe_dir(const struct nvme_sqe *sqe)
{
	/* Fabrics commands carry their direction in FCTYPE (NVMe-oF 3.1). */
	uint8_t code = sqe->opc == OPC_FABRICS ? SQE_FCTYPE(sqe) : sqe->opc;
	return (enum nvme_dir)(code & 3);
}

static uint32_t get_le24(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
}

int nvmf_sgl_parse(const struct nvme_sqe *sqe, uint32_t incap_len, int keyed_ok,
		   struct sgl_info *out)
{
	const struct nvme_sgl *d = &sqe->sgl;
	uint32_t len32;
	memcpy(&len32, d->len, 4); /* unkeyed: 32-bit length over len[] and key[0] */
	memset(out, 0, sizeof(*out));
	/* PRPs do not exist on fabrics (NVMe-oF 2.3: PSDT is 01b or 10b). */
	if (SQE_PSDT(sqe) != 1 && SQE_PSDT(sqe) != 2)
		return ST_INVALID_FIELD;
	switch (d->type) {
	case SGL_DATA_OFFSET:
		/* In-capsule data: the offset and length must stay inside what
		 * actually arrived with the capsule (ICDOFF is 0). */
		if (d->addr > incap_len)
			return ST_SGL_OFFSET_INVALID;
		if (len32 > incap_len - d->addr)
			return ST_SGL_LEN_INVALID;
		out->kind = SGLK_INCAP;
		out->len = len32;
		out->addr = d->addr;
		return 0;
	case SGL_KEYED_ADDR:
	case SGL_KEYED_INV:
		/* Keyed descriptors are an RDMA thing; on TCP they lie. */
		if (!keyed_ok)
			return ST_SGL_TYPE_INVALID;
		out->kind = SGLK_KEYED;
		out->len = get_le24(d->len);
		out->addr = d->addr;
		memcpy(&out->key, d->key, 4);
		out->invalidate = d->type == SGL_KEYED_INV;
		break;
	case SGL_TRANSPORT:
		/* NVMe/TCP's "data comes by R2T or C2HData"; RDMA has none. */
		if (keyed_ok)
			return ST_SGL_TYPE_INVALID;
		out->kind = SGLK_TRANSPORT;
		out->len = len32;
		break;
	default:
		return ST_SGL_TYPE_INVALID;
	}
	/* MDTS bounds every transfer (NVMe Base 5.15.2.1: Invalid Field). */
	if (out->len > NVMF_MAX_DATA)
		return ST_INVALID_FIELD;
	return 0;
}

int nvmf_cm_req_parse(const void *pdata, size_t len, uint16_t max_qid,
		      struct nvme_rdma_cm_req *out)
{
	if (!pdata || len < sizeof(*out))
		return CM_REJ_INVALID_LEN; /* shorter than the 32 bytes of 7.3.2 */
	memcpy(out, pdata, sizeof(*out));
	if (out->recfmt != 0)
		return CM_REJ_INVALID_RECFMT;
	if (out->qid > max_qid)
		return CM_REJ_INVALID_QID;
	/* HSQSIZE is 0's based: 0 (one entry) cannot carry a command and
	 * its successor, and the admin queue is at least 32 deep. */
	if (out->hsqsize == 0 || out->hsqsize > NVMF_MQES ||
	    (out->qid == 0 && out->hsqsize + 1 < NVMF_AQ_MIN))
		return CM_REJ_INVALID_HSQSIZE;
	/* The host must take a completion for every command it may send. */
	if (out->hrqsize < out->hsqsize + 1 || out->hrqsize > NVMF_MQES + 1)
		return CM_REJ_INVALID_HRQSIZE;
	return 0;
}

/* Header length of each PDU type, and in which direction it travels:
 * 1 = host to controller, 2 = controller to host. */
static const struct {
	uint8_t hlen, dir, has_data, has_hdgst;
} pdu_facts[] = {
	[TCP_ICREQ] = { 128, 1, 0, 0 },    [TCP_ICRESP] = { 128, 2, 0, 0 },
	[TCP_H2C_TERM] = { 24, 1, 1, 0 },  [TCP_C2H_TERM] = { 24, 2, 1, 0 },
	[TCP_CMD] = { 72, 1, 1, 1 },       [TCP_RSP] = { 24, 2, 0, 1 },
	[TCP_H2C_DATA] = { 24, 1, 1, 1 },  [TCP_C2H_DATA] = { 24, 2, 1, 1 },
	[8] = { 0, 0, 0, 0 },              [TCP_R2T] = { 24, 2, 0, 1 },
};

int nvmf_tcp_pdu_check(const struct nvme_tcp_hdr *h, int host_side, int hdgst, int ddgst,
		       struct tcp_pdu_shape *out)
{
	memset(out, 0, sizeof(*out));
	if (h->type >= sizeof(pdu_facts) / sizeof(pdu_facts[0]) || !pdu_facts[h->type].hlen ||
	    pdu_facts[h->type].dir != (host_side ? 2 : 1))
		return TCP_FES_HDR_FIELD; /* a type that does not travel this way */
	if (h->hlen != pdu_facts[h->type].hlen)
		return TCP_FES_HDR_FIELD;
	int hd = pdu_facts[h->type].has_hdgst && hdgst;
	/* The digest flags must say what was negotiated (NVMe/TCP 3.6.1). */
	if (pdu_facts[h->type].has_hdgst && !!(h->flags & TCP_F_HDGST) != hd)
		return TCP_FES_HDR_FIELD;
	out->hlen = h->hlen + (hd ? TCP_DGST_LEN : 0);
	out->plen = h->plen;
	if (h->plen < out->hlen)
		return TCP_FES_HDR_FIELD;
	if (h->type == TCP_H2C_TERM || h->type == TCP_C2H_TERM) {
		/* The offending header rides along, at most 128 bytes of it. */
		if (h->plen > out->hlen + 128u)
			return TCP_FES_HDR_FIELD;
		out->pdo = out->hlen;
		out->dlen = h->plen - out->hlen;
		return 0;
	}
	if (h->plen == out->hlen)
		return (h->flags & TCP_F_DDGST) ? TCP_FES_HDR_FIELD : 0;
	if (!pdu_facts[h->type].has_data)
		return TCP_FES_HDR_FIELD; /* data on a PDU that has none */
	out->ddgst = ddgst;
	if (!!(h->flags & TCP_F_DDGST) != !!ddgst)
		return TCP_FES_HDR_FIELD;
	/* PDO: data begins after the header (and its digest), CPDA 0. */
	if (h->pdo < out->hlen || h->pdo >= h->plen)
		return TCP_FES_HDR_FIELD;
	uint32_t tail = ddgst ? TCP_DGST_LEN : 0;
	if (h->plen - h->pdo <= tail)
		return TCP_FES_HDR_FIELD;
	out->pdo = h->pdo;
	out->dlen = h->plen - h->pdo - tail;
	uint32_t max = h->type == TCP_CMD ? NVMF_INCAP : NVMF_MAX_DATA;
	if (out->dlen > max)
		return TCP_FES_RANGE;
	return 0;
}
