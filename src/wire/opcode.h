/*
 * opcode.h - per-opcode facts of the RoCEv2 transport, and the packet
 * view used to build and parse headers.
 *
 * The facts live in ONE table (opcode.c), indexed by the 8-bit BTH opcode:
 * which extension headers follow the BTH, at which offsets, whether a
 * payload may follow, and what kind of packet it is.  Nothing else in the
 * project switches on opcode values to learn a header layout.
 *
 * Invariants:
 *  - srn_opcode_info() returns NULL exactly for opcodes this stack does
 *    not implement (reserved, RD, XRC, vendor); the parser rejects those.
 *  - offsets are from the first byte of the BTH; an absent header has
 *    offset 0 (the BTH itself can never be an extension header).
 *  - hdr_len = BTH + every extension header; for the CNP it includes the
 *    16 reserved bytes (which carry SRN_HDR_CNP_RSVD), so a CNP has no
 *    payload.
 */
#ifndef SRN_WIRE_OPCODE_H
#define SRN_WIRE_OPCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/roce_hdr.h"

/* Transport groups: bits 7..5 of the opcode (docs/wire.md §3.2). */
enum {
	SRN_TRANSPORT_RC = 0x00,
	SRN_TRANSPORT_UC = 0x20,
	SRN_TRANSPORT_RD = 0x40,
	SRN_TRANSPORT_UD = 0x60,
	SRN_TRANSPORT_CC = 0x80,	/* CNP */
	SRN_TRANSPORT_XRC = 0xa0,
	SRN_TRANSPORT_MASK = 0xe0,
	SRN_OPCODE_OP_MASK = 0x1f,
};

/* Values from the IBTA opcode table (Linux include/rdma/ib_pack.h). */
enum srn_opcode {
	SRN_OP_RC_SEND_FIRST				= 0x00,
	SRN_OP_RC_SEND_MIDDLE				= 0x01,
	SRN_OP_RC_SEND_LAST				= 0x02,
	SRN_OP_RC_SEND_LAST_WITH_IMMEDIATE		= 0x03,
	SRN_OP_RC_SEND_ONLY				= 0x04,
	SRN_OP_RC_SEND_ONLY_WITH_IMMEDIATE		= 0x05,
	SRN_OP_RC_RDMA_WRITE_FIRST			= 0x06,
	SRN_OP_RC_RDMA_WRITE_MIDDLE			= 0x07,
	SRN_OP_RC_RDMA_WRITE_LAST			= 0x08,
	SRN_OP_RC_RDMA_WRITE_LAST_WITH_IMMEDIATE	= 0x09,
	SRN_OP_RC_RDMA_WRITE_ONLY			= 0x0a,
	SRN_OP_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE	= 0x0b,
	SRN_OP_RC_RDMA_READ_REQUEST			= 0x0c,
	SRN_OP_RC_RDMA_READ_RESPONSE_FIRST		= 0x0d,
	SRN_OP_RC_RDMA_READ_RESPONSE_MIDDLE		= 0x0e,
	SRN_OP_RC_RDMA_READ_RESPONSE_LAST		= 0x0f,
	SRN_OP_RC_RDMA_READ_RESPONSE_ONLY		= 0x10,
	SRN_OP_RC_ACKNOWLEDGE				= 0x11,
	SRN_OP_RC_ATOMIC_ACKNOWLEDGE			= 0x12,
	SRN_OP_RC_COMPARE_SWAP				= 0x13,
	SRN_OP_RC_FETCH_ADD				= 0x14,
	SRN_OP_RC_SEND_LAST_WITH_INVALIDATE		= 0x16,
	SRN_OP_RC_SEND_ONLY_WITH_INVALIDATE		= 0x17,
	SRN_OP_RC_FLUSH					= 0x1c,	/* IBTA 1.5 */
	SRN_OP_RC_ATOMIC_WRITE				= 0x1d,	/* IBTA 1.5 */

	SRN_OP_UC_SEND_FIRST				= 0x20,
	SRN_OP_UC_SEND_MIDDLE				= 0x21,
	SRN_OP_UC_SEND_LAST				= 0x22,
	SRN_OP_UC_SEND_LAST_WITH_IMMEDIATE		= 0x23,
	SRN_OP_UC_SEND_ONLY				= 0x24,
	SRN_OP_UC_SEND_ONLY_WITH_IMMEDIATE		= 0x25,
	SRN_OP_UC_RDMA_WRITE_FIRST			= 0x26,
	SRN_OP_UC_RDMA_WRITE_MIDDLE			= 0x27,
	SRN_OP_UC_RDMA_WRITE_LAST			= 0x28,
	SRN_OP_UC_RDMA_WRITE_LAST_WITH_IMMEDIATE	= 0x29,
	SRN_OP_UC_RDMA_WRITE_ONLY			= 0x2a,
	SRN_OP_UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE	= 0x2b,

	SRN_OP_UD_SEND_ONLY				= 0x64,
	SRN_OP_UD_SEND_ONLY_WITH_IMMEDIATE		= 0x65,

	/* RoCEv2 CNP (Annex A17).  Linux IB_OPCODE_CNP is 0x80, the native
	 * IB (Annex A10) one; RoCE hardware sends 0x81 (docs/wire.md §3.3). */
	SRN_OP_CNP					= 0x81,

	/* Shorter spellings of the same values. */
	SRN_OP_RC_SEND_LAST_WITH_IMM	= SRN_OP_RC_SEND_LAST_WITH_IMMEDIATE,
	SRN_OP_RC_SEND_ONLY_WITH_IMM	= SRN_OP_RC_SEND_ONLY_WITH_IMMEDIATE,
	SRN_OP_RC_RDMA_WRITE_LAST_WITH_IMM = SRN_OP_RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
	SRN_OP_RC_RDMA_WRITE_ONLY_WITH_IMM = SRN_OP_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
	SRN_OP_RC_RDMA_READ_RESP_FIRST	= SRN_OP_RC_RDMA_READ_RESPONSE_FIRST,
	SRN_OP_RC_RDMA_READ_RESP_MIDDLE	= SRN_OP_RC_RDMA_READ_RESPONSE_MIDDLE,
	SRN_OP_RC_RDMA_READ_RESP_LAST	= SRN_OP_RC_RDMA_READ_RESPONSE_LAST,
	SRN_OP_RC_RDMA_READ_RESP_ONLY	= SRN_OP_RC_RDMA_READ_RESPONSE_ONLY,
	SRN_OP_RC_ACK			= SRN_OP_RC_ACKNOWLEDGE,
	SRN_OP_RC_ATOMIC_ACK		= SRN_OP_RC_ATOMIC_ACKNOWLEDGE,
	SRN_OP_RC_CMP_SWAP		= SRN_OP_RC_COMPARE_SWAP,
	SRN_OP_RC_SEND_LAST_WITH_INV	= SRN_OP_RC_SEND_LAST_WITH_INVALIDATE,
	SRN_OP_RC_SEND_ONLY_WITH_INV	= SRN_OP_RC_SEND_ONLY_WITH_INVALIDATE,
	SRN_OP_UC_SEND_LAST_WITH_IMM	= SRN_OP_UC_SEND_LAST_WITH_IMMEDIATE,
	SRN_OP_UC_SEND_ONLY_WITH_IMM	= SRN_OP_UC_SEND_ONLY_WITH_IMMEDIATE,
	SRN_OP_UC_RDMA_WRITE_LAST_WITH_IMM = SRN_OP_UC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
	SRN_OP_UC_RDMA_WRITE_ONLY_WITH_IMM = SRN_OP_UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
	SRN_OP_UD_SEND_ONLY_WITH_IMM	= SRN_OP_UD_SEND_ONLY_WITH_IMMEDIATE,
};

/* Header presence bits (srn_opcode_info.hdr_mask). */
enum {
	SRN_HDR_RETH	= 1 << 0,
	SRN_HDR_AETH	= 1 << 1,
	SRN_HDR_IMMDT	= 1 << 2,
	SRN_HDR_IETH	= 1 << 3,
	SRN_HDR_DETH	= 1 << 4,
	SRN_HDR_ATMETH	= 1 << 5,
	SRN_HDR_ATMACK	= 1 << 6,
	SRN_HDR_FETH	= 1 << 7,
	SRN_HDR_PAYLOAD	= 1 << 8,	/* a payload (possibly empty) may follow */
	SRN_HDR_CNP_RSVD = 1 << 9,	/* the CNP's 16 reserved bytes */
	SRN_HDR_XRCETH	= 1 << 10,	/* XRC requests */
};

/* Opcode property bits (srn_opcode_info.flags). */
enum {
	SRN_OPF_FIRST	= 1 << 0,
	SRN_OPF_MIDDLE	= 1 << 1,
	SRN_OPF_LAST	= 1 << 2,
	/* A single-packet message: *_ONLY opcodes, and also READ_REQUEST,
	 * the atomics, FLUSH, ATOMIC_WRITE and the two ACK opcodes.  ONLY is
	 * never combined with FIRST or LAST. */
	SRN_OPF_ONLY	= 1 << 3,
	SRN_OPF_SEND	= 1 << 4,
	SRN_OPF_WRITE	= 1 << 5,
	SRN_OPF_READ_REQ = 1 << 6,
	SRN_OPF_READ_RESP = 1 << 7,
	SRN_OPF_ACK	= 1 << 8,	/* ACKNOWLEDGE + ATOMIC_ACKNOWLEDGE */
	SRN_OPF_ATOMIC	= 1 << 9,	/* COMPARE_SWAP, FETCH_ADD */
	SRN_OPF_IMM	= 1 << 10,
	SRN_OPF_INV	= 1 << 11,
	SRN_OPF_REQ	= 1 << 12,	/* requester -> responder packet */
	SRN_OPF_RESP	= 1 << 13,	/* responder -> requester packet */
	SRN_OPF_FLUSH	= 1 << 14,
	SRN_OPF_ATOMIC_WRITE = 1 << 15,
};

struct srn_opcode_info {
	const char *name;
	uint16_t hdr_mask;	/* SRN_HDR_* */
	uint16_t flags;		/* SRN_OPF_* */
	uint8_t hdr_len;	/* BTH + all extension headers */
	uint8_t off_reth, off_aeth, off_immdt, off_ieth, off_deth;
	uint8_t off_atmeth, off_atmack, off_feth;	/* from BTH start */
	uint8_t off_xrceth;
};

/* NULL when the opcode is unknown or reserved. */
const struct srn_opcode_info *srn_opcode_info(uint8_t opcode);
/* Never NULL: "UNKNOWN" for opcodes without an entry. */
const char *srn_opcode_name(uint8_t opcode);

static inline uint8_t srn_opcode_transport(uint8_t opcode)
{
	return opcode & SRN_TRANSPORT_MASK;
}

/* ---- Picking opcodes when segmenting a message ------------------------ */

enum srn_seg { SRN_SEG_ONLY, SRN_SEG_FIRST, SRN_SEG_MIDDLE, SRN_SEG_LAST };

/* Position of packet idx (0-based) in a message of npkts >= 1 packets. */
static inline enum srn_seg srn_seg_of(uint32_t idx, uint32_t npkts)
{
	if (npkts <= 1)
		return SRN_SEG_ONLY;
	if (idx == 0)
		return SRN_SEG_FIRST;
	return idx + 1 >= npkts ? SRN_SEG_LAST : SRN_SEG_MIDDLE;
}

/*
 * The opcode for one packet of a message; transport is SRN_TRANSPORT_RC,
 * _UC or _UD.  imm/inv only matter on the LAST/ONLY packet.  Returns the
 * opcode (0..255) or -EINVAL for a combination that has no opcode (UD
 * multi-packet, invalidate outside RC, imm together with inv, WRITE on UD).
 */
int srn_opcode_send(uint8_t transport, enum srn_seg seg, bool imm, bool inv);
int srn_opcode_write(uint8_t transport, enum srn_seg seg, bool imm);
int srn_opcode_read_resp(enum srn_seg seg);	/* RC only */

/* ---- One packet's headers --------------------------------------------- */

/* One packet, used both to build and as the parse result.  Multi-bit
 * fields hold host-order values, except imm_be. */
struct srn_pkt {
	uint8_t opcode;
	bool se, mig;
	uint8_t pad;		/* parse: PadCnt; build: ignored (derived) */
	uint16_t pkey;
	bool fecn, becn;
	uint32_t dqpn;		/* 24 bits */
	bool ackreq;
	bool placed;		/* SRN_BTH_PLACED (same-host rings only) */
	uint32_t psn;		/* 24 bits */

	uint64_t reth_va;	/* RETH */
	uint32_t reth_rkey, reth_len;

	uint8_t aeth_syndrome;	/* AETH */
	uint32_t aeth_msn;	/* 24 bits */

	/* ImmDt exactly as the 4 wire bytes, i.e. network order: what
	 * wc.imm_data holds. */
	uint32_t imm_be;

	uint32_t ieth_rkey;	/* IETH */

	uint32_t deth_qkey, deth_sqpn;	/* DETH; sqpn 24 bits */

	uint64_t atm_va;	/* AtomicETH */
	uint32_t atm_rkey;
	uint64_t atm_swap_add, atm_compare;

	uint64_t atm_orig;	/* AtomicAckETH */

	const struct srn_opcode_info *info;	/* set by parse */

	/* parse: payload without pad/ICRC; build: paylen gives the pad. */
	const uint8_t *payload;
	uint32_t paylen;

	uint32_t icrc;		/* parse: ICRC from the wire (LSB first) */

	uint32_t feth;		/* FETH, host order (placement, selectivity) */

	uint32_t xrc_srqn;	/* XRCETH, 24 bits */
};

/*
 * Parse a UDP payload (BTH .. ICRC).  Every length is checked before use;
 * never reads outside buf[0..len).  On success
 * info->hdr_len + paylen + pad + SRN_ICRC_LEN == len.
 * Returns 0, -EBADMSG (short, pad inconsistent, header past the end,
 * payload on an opcode that has none) or -EPROTONOSUPPORT (TVer != 0,
 * unknown opcode).  The ICRC is read, not checked (see wire/icrc.h).
 */
int srn_pkt_parse(const uint8_t *buf, size_t len, struct srn_pkt *p);

/*
 * Write BTH + the opcode's extension headers into out (room for
 * >= SRN_MAX_HDR_LEN bytes).  PadCnt = (-paylen) & 3; 24-bit fields are
 * masked; reserved bits and TVer are 0.  Returns info->hdr_len, or -EINVAL
 * for an unknown opcode or a non-zero paylen on an opcode without payload.
 */
int srn_pkt_build_hdr(uint8_t *out, const struct srn_pkt *p);

static inline uint8_t srn_pad_of(uint32_t paylen)
{
	return (uint8_t)(-paylen & 3u);
}

/* UDP payload length of a packet: headers + payload + pad + ICRC. */
static inline size_t srn_pkt_wire_len(const struct srn_opcode_info *info,
				      uint32_t paylen)
{
	return (size_t)info->hdr_len + paylen + srn_pad_of(paylen) +
	       SRN_ICRC_LEN;
}

#endif /* SRN_WIRE_OPCODE_H */
