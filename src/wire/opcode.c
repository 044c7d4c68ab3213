/*
 * opcode.c - the opcode table: per-opcode header set, offsets and kind.
 *
 * Values: IBTA opcode list as in Linux include/rdma/ib_pack.h; header sets
 * and their order: docs/wire.md §3.2 (read from rxe_opcode.c, not
 * copied).  RC, UC, UD, XRC and the RoCEv2 CNP have entries; RD (0x40..),
 * reserved and vendor opcodes return NULL so the parser drops them.  XRC
 * is RC with an XRCETH on every request (IBTA 9.3.6; responses have none).
 *
 * Offsets are not typed in by hand: every extension header has one fixed
 * place in a single canonical order,
 *
 *	BTH, XRCETH, DETH, FETH, RETH, AETH, AtomicETH, AtomicAckETH, ImmDt, IETH,
 *	CNP reserved bytes
 *
 * which matches every opcode in the IBTA table (UD: DETH before ImmDt;
 * FLUSH: FETH before RETH; WRITE_ONLY_WITH_IMM: RETH before ImmDt;
 * ATOMIC_ACK: AETH before AtomicAckETH), so each offset is the sum of the
 * lengths of the present headers before it.  test_wire_pkt checks the
 * results against the offsets listed in the doc.
 */
#include <errno.h>

#include "wire/opcode.h"

#define HLEN(m, bit, len)	(((m) & (bit)) ? (len) : 0)
#define END_XRCETH(m)	(SRN_BTH_LEN + HLEN(m, SRN_HDR_XRCETH, SRN_XRCETH_LEN))
#define END_DETH(m)	(END_XRCETH(m) + HLEN(m, SRN_HDR_DETH, SRN_DETH_LEN))
#define END_FETH(m)	(END_DETH(m) + HLEN(m, SRN_HDR_FETH, SRN_FETH_LEN))
#define END_RETH(m)	(END_FETH(m) + HLEN(m, SRN_HDR_RETH, SRN_RETH_LEN))
#define END_AETH(m)	(END_RETH(m) + HLEN(m, SRN_HDR_AETH, SRN_AETH_LEN))
#define END_ATMETH(m)	(END_AETH(m) + HLEN(m, SRN_HDR_ATMETH, SRN_ATMETH_LEN))
#define END_ATMACK(m)	(END_ATMETH(m) + HLEN(m, SRN_HDR_ATMACK, SRN_ATMACK_LEN))
#define END_IMMDT(m)	(END_ATMACK(m) + HLEN(m, SRN_HDR_IMMDT, SRN_IMMDT_LEN))
#define END_IETH(m)	(END_IMMDT(m) + HLEN(m, SRN_HDR_IETH, SRN_IETH_LEN))
#define END_ALL(m)	(END_IETH(m) + HLEN(m, SRN_HDR_CNP_RSVD, SRN_CNP_RSVD_LEN))

/* Offset of a header = end of the one before it in the canonical order. */
#define OFF(m, bit, prev_end)	(((m) & (bit)) ? (prev_end) : 0)

#define OP(code, nm, m, f)						\
	[code] = {							\
		.name = nm,						\
		.hdr_mask = (m),					\
		.flags = (f),						\
		.hdr_len = END_ALL(m),					\
		.off_xrceth = OFF(m, SRN_HDR_XRCETH, SRN_BTH_LEN),	\
		.off_deth = OFF(m, SRN_HDR_DETH, END_XRCETH(m)),	\
		.off_feth = OFF(m, SRN_HDR_FETH, END_DETH(m)),		\
		.off_reth = OFF(m, SRN_HDR_RETH, END_FETH(m)),		\
		.off_aeth = OFF(m, SRN_HDR_AETH, END_RETH(m)),		\
		.off_atmeth = OFF(m, SRN_HDR_ATMETH, END_AETH(m)),	\
		.off_atmack = OFF(m, SRN_HDR_ATMACK, END_ATMETH(m)),	\
		.off_immdt = OFF(m, SRN_HDR_IMMDT, END_ATMACK(m)),	\
		.off_ieth = OFF(m, SRN_HDR_IETH, END_IMMDT(m)),		\
	}

#define P	SRN_HDR_PAYLOAD
#define REQ	SRN_OPF_REQ
#define RESP	SRN_OPF_RESP

/* The RC, UC and XRC SEND/WRITE opcodes share header sets and kinds; X
 * is SRN_HDR_XRCETH for XRC, else 0. */
#define SEND_WRITE_OPS(base, pfx) SEND_WRITE_OPS_X(base, pfx, 0)
#define SEND_WRITE_OPS_X(base, pfx, X)					\
	OP(base + 0x00, pfx "SEND_FIRST", X | P,				\
	   SRN_OPF_FIRST | SRN_OPF_SEND | REQ),				\
	OP(base + 0x01, pfx "SEND_MIDDLE", X | P,				\
	   SRN_OPF_MIDDLE | SRN_OPF_SEND | REQ),			\
	OP(base + 0x02, pfx "SEND_LAST", X | P,				\
	   SRN_OPF_LAST | SRN_OPF_SEND | REQ),				\
	OP(base + 0x03, pfx "SEND_LAST_WITH_IMMEDIATE", X | SRN_HDR_IMMDT | P, \
	   SRN_OPF_LAST | SRN_OPF_SEND | SRN_OPF_IMM | REQ),		\
	OP(base + 0x04, pfx "SEND_ONLY", X | P,				\
	   SRN_OPF_ONLY | SRN_OPF_SEND | REQ),				\
	OP(base + 0x05, pfx "SEND_ONLY_WITH_IMMEDIATE", X | SRN_HDR_IMMDT | P, \
	   SRN_OPF_ONLY | SRN_OPF_SEND | SRN_OPF_IMM | REQ),		\
	OP(base + 0x06, pfx "RDMA_WRITE_FIRST", X | SRN_HDR_RETH | P,	\
	   SRN_OPF_FIRST | SRN_OPF_WRITE | REQ),			\
	OP(base + 0x07, pfx "RDMA_WRITE_MIDDLE", X | P,			\
	   SRN_OPF_MIDDLE | SRN_OPF_WRITE | REQ),			\
	OP(base + 0x08, pfx "RDMA_WRITE_LAST", X | P,			\
	   SRN_OPF_LAST | SRN_OPF_WRITE | REQ),				\
	OP(base + 0x09, pfx "RDMA_WRITE_LAST_WITH_IMMEDIATE",		\
	   X | SRN_HDR_IMMDT | P,					\
	   SRN_OPF_LAST | SRN_OPF_WRITE | SRN_OPF_IMM | REQ),		\
	OP(base + 0x0a, pfx "RDMA_WRITE_ONLY", X | SRN_HDR_RETH | P,	\
	   SRN_OPF_ONLY | SRN_OPF_WRITE | REQ),				\
	OP(base + 0x0b, pfx "RDMA_WRITE_ONLY_WITH_IMMEDIATE",		\
	   X | SRN_HDR_RETH | SRN_HDR_IMMDT | P,			\
	   SRN_OPF_ONLY | SRN_OPF_WRITE | SRN_OPF_IMM | REQ)

static const struct srn_opcode_info srn_opcodes[256] = {
	SEND_WRITE_OPS(SRN_TRANSPORT_RC, "RC_"),
	OP(SRN_OP_RC_RDMA_READ_REQUEST, "RC_RDMA_READ_REQUEST", SRN_HDR_RETH,
	   SRN_OPF_ONLY | SRN_OPF_READ_REQ | REQ),
	OP(SRN_OP_RC_RDMA_READ_RESPONSE_FIRST, "RC_RDMA_READ_RESPONSE_FIRST",
	   SRN_HDR_AETH | P, SRN_OPF_FIRST | SRN_OPF_READ_RESP | RESP),
	/* MIDDLE is the one read response without an AETH. */
	OP(SRN_OP_RC_RDMA_READ_RESPONSE_MIDDLE, "RC_RDMA_READ_RESPONSE_MIDDLE",
	   P, SRN_OPF_MIDDLE | SRN_OPF_READ_RESP | RESP),
	OP(SRN_OP_RC_RDMA_READ_RESPONSE_LAST, "RC_RDMA_READ_RESPONSE_LAST",
	   SRN_HDR_AETH | P, SRN_OPF_LAST | SRN_OPF_READ_RESP | RESP),
	OP(SRN_OP_RC_RDMA_READ_RESPONSE_ONLY, "RC_RDMA_READ_RESPONSE_ONLY",
	   SRN_HDR_AETH | P, SRN_OPF_ONLY | SRN_OPF_READ_RESP | RESP),
	OP(SRN_OP_RC_ACKNOWLEDGE, "RC_ACKNOWLEDGE", SRN_HDR_AETH,
	   SRN_OPF_ONLY | SRN_OPF_ACK | RESP),
	OP(SRN_OP_RC_ATOMIC_ACKNOWLEDGE, "RC_ATOMIC_ACKNOWLEDGE",
	   SRN_HDR_AETH | SRN_HDR_ATMACK, SRN_OPF_ONLY | SRN_OPF_ACK | RESP),
	OP(SRN_OP_RC_COMPARE_SWAP, "RC_COMPARE_SWAP", SRN_HDR_ATMETH,
	   SRN_OPF_ONLY | SRN_OPF_ATOMIC | REQ),
	OP(SRN_OP_RC_FETCH_ADD, "RC_FETCH_ADD", SRN_HDR_ATMETH,
	   SRN_OPF_ONLY | SRN_OPF_ATOMIC | REQ),
	OP(SRN_OP_RC_SEND_LAST_WITH_INVALIDATE, "RC_SEND_LAST_WITH_INVALIDATE",
	   SRN_HDR_IETH | P, SRN_OPF_LAST | SRN_OPF_SEND | SRN_OPF_INV | REQ),
	OP(SRN_OP_RC_SEND_ONLY_WITH_INVALIDATE, "RC_SEND_ONLY_WITH_INVALIDATE",
	   SRN_HDR_IETH | P, SRN_OPF_ONLY | SRN_OPF_SEND | SRN_OPF_INV | REQ),
	OP(SRN_OP_RC_FLUSH, "RC_FLUSH", SRN_HDR_FETH | SRN_HDR_RETH,
	   SRN_OPF_ONLY | SRN_OPF_FLUSH | REQ),
	/* The payload is the 8 bytes to write; its size is the responder's
	 * check, the header layout does not fix it. */
	OP(SRN_OP_RC_ATOMIC_WRITE, "RC_ATOMIC_WRITE", SRN_HDR_RETH | P,
	   SRN_OPF_ONLY | SRN_OPF_ATOMIC_WRITE | REQ),

	SEND_WRITE_OPS(SRN_TRANSPORT_UC, "UC_"),

	/* XRC: RC's requests with an XRCETH, RC's responses. */
	SEND_WRITE_OPS_X(SRN_TRANSPORT_XRC, "XRC_", SRN_HDR_XRCETH),
	OP(SRN_TRANSPORT_XRC + 0x0c, "XRC_RDMA_READ_REQUEST", SRN_HDR_XRCETH | SRN_HDR_RETH,
	   SRN_OPF_ONLY | SRN_OPF_READ_REQ | REQ),
	OP(SRN_TRANSPORT_XRC + 0x0d, "XRC_RDMA_READ_RESPONSE_FIRST", SRN_HDR_AETH | P,
	   SRN_OPF_FIRST | SRN_OPF_READ_RESP | RESP),
	OP(SRN_TRANSPORT_XRC + 0x0e, "XRC_RDMA_READ_RESPONSE_MIDDLE", P,
	   SRN_OPF_MIDDLE | SRN_OPF_READ_RESP | RESP),
	OP(SRN_TRANSPORT_XRC + 0x0f, "XRC_RDMA_READ_RESPONSE_LAST", SRN_HDR_AETH | P,
	   SRN_OPF_LAST | SRN_OPF_READ_RESP | RESP),
	OP(SRN_TRANSPORT_XRC + 0x10, "XRC_RDMA_READ_RESPONSE_ONLY", SRN_HDR_AETH | P,
	   SRN_OPF_ONLY | SRN_OPF_READ_RESP | RESP),
	OP(SRN_TRANSPORT_XRC + 0x11, "XRC_ACKNOWLEDGE", SRN_HDR_AETH,
	   SRN_OPF_ONLY | SRN_OPF_ACK | RESP),
	OP(SRN_TRANSPORT_XRC + 0x12, "XRC_ATOMIC_ACKNOWLEDGE", SRN_HDR_AETH | SRN_HDR_ATMACK,
	   SRN_OPF_ONLY | SRN_OPF_ACK | RESP),
	OP(SRN_TRANSPORT_XRC + 0x13, "XRC_COMPARE_SWAP", SRN_HDR_XRCETH | SRN_HDR_ATMETH,
	   SRN_OPF_ONLY | SRN_OPF_ATOMIC | REQ),
	OP(SRN_TRANSPORT_XRC + 0x14, "XRC_FETCH_ADD", SRN_HDR_XRCETH | SRN_HDR_ATMETH,
	   SRN_OPF_ONLY | SRN_OPF_ATOMIC | REQ),
	OP(SRN_TRANSPORT_XRC + 0x16, "XRC_SEND_LAST_WITH_INVALIDATE",
	   SRN_HDR_XRCETH | SRN_HDR_IETH | P,
	   SRN_OPF_LAST | SRN_OPF_SEND | SRN_OPF_INV | REQ),
	OP(SRN_TRANSPORT_XRC + 0x17, "XRC_SEND_ONLY_WITH_INVALIDATE",
	   SRN_HDR_XRCETH | SRN_HDR_IETH | P,
	   SRN_OPF_ONLY | SRN_OPF_SEND | SRN_OPF_INV | REQ),

	OP(SRN_OP_UD_SEND_ONLY, "UD_SEND_ONLY", SRN_HDR_DETH | P,
	   SRN_OPF_ONLY | SRN_OPF_SEND | REQ),
	OP(SRN_OP_UD_SEND_ONLY_WITH_IMMEDIATE, "UD_SEND_ONLY_WITH_IMMEDIATE",
	   SRN_HDR_DETH | SRN_HDR_IMMDT | P,
	   SRN_OPF_ONLY | SRN_OPF_SEND | SRN_OPF_IMM | REQ),

	/* Neither request nor response: a congestion signal to the QP in
	 * DestQP, handled outside the transport state machines. */
	OP(SRN_OP_CNP, "CNP", SRN_HDR_CNP_RSVD, 0),
};

_Static_assert(END_ALL(SRN_HDR_XRCETH | SRN_HDR_ATMETH) == SRN_MAX_HDR_LEN,
	       "XRCETH + AtomicETH is the longest header set");

const struct srn_opcode_info *srn_opcode_info(uint8_t opcode)
{
	const struct srn_opcode_info *info = &srn_opcodes[opcode];

	return info->name ? info : NULL;
}

const char *srn_opcode_name(uint8_t opcode)
{
	const struct srn_opcode_info *info = srn_opcode_info(opcode);

	return info ? info->name : "UNKNOWN";
}

/* Low 5 bits of the SEND opcodes: [seg][imm] (inv handled separately). */
static const uint8_t send_ops[4][2] = {
	[SRN_SEG_ONLY]   = { 0x04, 0x05 },
	[SRN_SEG_FIRST]  = { 0x00, 0x00 },
	[SRN_SEG_MIDDLE] = { 0x01, 0x01 },
	[SRN_SEG_LAST]   = { 0x02, 0x03 },
};

static const uint8_t write_ops[4][2] = {
	[SRN_SEG_ONLY]   = { 0x0a, 0x0b },
	[SRN_SEG_FIRST]  = { 0x06, 0x06 },
	[SRN_SEG_MIDDLE] = { 0x07, 0x07 },
	[SRN_SEG_LAST]   = { 0x08, 0x09 },
};

static int checked(int opcode)
{
	return srn_opcode_info((uint8_t)opcode) ? opcode : -EINVAL;
}

int srn_opcode_send(uint8_t transport, enum srn_seg seg, bool imm, bool inv)
{
	if ((unsigned)seg > SRN_SEG_LAST || (imm && inv))
		return -EINVAL;
	if (transport == SRN_TRANSPORT_UD && seg != SRN_SEG_ONLY)
		return -EINVAL;	/* UD messages are one packet */
	if (transport != SRN_TRANSPORT_RC && transport != SRN_TRANSPORT_UC &&
	    transport != SRN_TRANSPORT_UD && transport != SRN_TRANSPORT_XRC)
		return -EINVAL;
	if (inv) {
		/* Only RC (and XRC) have SEND_*_WITH_INVALIDATE. */
		if (transport != SRN_TRANSPORT_RC && transport != SRN_TRANSPORT_XRC)
			return -EINVAL;
		if (seg == SRN_SEG_ONLY)
			return transport | (SRN_OP_RC_SEND_ONLY_WITH_INVALIDATE & SRN_OPCODE_OP_MASK);
		if (seg == SRN_SEG_LAST)
			return transport | (SRN_OP_RC_SEND_LAST_WITH_INVALIDATE & SRN_OPCODE_OP_MASK);
	}
	return checked(transport | send_ops[seg][imm]);
}

int srn_opcode_write(uint8_t transport, enum srn_seg seg, bool imm)
{
	if ((unsigned)seg > SRN_SEG_LAST)
		return -EINVAL;
	if (transport != SRN_TRANSPORT_RC && transport != SRN_TRANSPORT_UC &&
	    transport != SRN_TRANSPORT_XRC)
		return -EINVAL;
	return checked(transport | write_ops[seg][imm]);
}

int srn_opcode_read_resp(enum srn_seg seg)
{
	static const uint8_t ops[4] = {
		[SRN_SEG_ONLY]   = SRN_OP_RC_RDMA_READ_RESPONSE_ONLY,
		[SRN_SEG_FIRST]  = SRN_OP_RC_RDMA_READ_RESPONSE_FIRST,
		[SRN_SEG_MIDDLE] = SRN_OP_RC_RDMA_READ_RESPONSE_MIDDLE,
		[SRN_SEG_LAST]   = SRN_OP_RC_RDMA_READ_RESPONSE_LAST,
	};

	if ((unsigned)seg > SRN_SEG_LAST)
		return -EINVAL;
	return ops[seg];
}
