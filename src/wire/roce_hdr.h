/*
 * roce_hdr.h - RoCEv2 wire constants and header layouts.
 *
 * Every on-wire header of the InfiniBand transport as carried in a RoCEv2
 * UDP payload (port 4791): BTH, then the extended headers, then payload,
 * pad and the 4-byte ICRC.  Facts and their sources are collected in
 * docs/wire.md sections 2 to 4.
 *
 * Invariants:
 *  - every struct here is packed, has alignment 1 and holds big-endian
 *    (network order) fields; the srn_be* typedefs only document that.  Read
 *    them with be*toh() through a pointer into the packet buffer.
 *  - each size and each field offset is pinned by a _Static_assert, so a
 *    layout change cannot go unnoticed.
 *  - 24-bit quantities (PSN, QPN, MSN, source QP) are always masked with
 *    their SRN_*_MASK when written; PSN arithmetic is modulo 2^24.
 */
#ifndef SRN_WIRE_ROCE_HDR_H
#define SRN_WIRE_ROCE_HDR_H

#include <stddef.h>
#include <stdint.h>

typedef uint16_t srn_be16;
typedef uint32_t srn_be32;
typedef uint64_t srn_be64;

#define SRN_ROCE_PORT		4791	/* IANA RoCEv2 UDP destination port */
#define SRN_ROCEV1_ETHERTYPE	0x8915	/* RoCEv1: GRH directly on Ethernet */

/* Header lengths in bytes. */
#define SRN_BTH_LEN	12
#define SRN_RETH_LEN	16
#define SRN_AETH_LEN	4
#define SRN_IMMDT_LEN	4
#define SRN_IETH_LEN	4
#define SRN_DETH_LEN	8
#define SRN_XRCETH_LEN	4
#define SRN_RDETH_LEN	4
#define SRN_FETH_LEN	4
#define SRN_ATMETH_LEN	28
#define SRN_ATMACK_LEN	8
#define SRN_ICRC_LEN	4
#define SRN_CNP_RSVD_LEN 16	/* reserved zero bytes after a CNP's BTH */
#define SRN_GRH_LEN	40	/* RoCEv1 only */

/* Longest BTH + extension headers of any opcode (AtomicETH: 12 + 28). */
#define SRN_MAX_HDR_LEN	44

#define SRN_PSN_MASK	0xffffffu	/* 24 bits */
#define SRN_QPN_MASK	0xffffffu
#define SRN_MSN_MASK	0xffffffu
#define SRN_QPN_GSI	1u		/* QP1 */
#define SRN_QPN_MULTICAST 0xffffffu
#define SRN_DEFAULT_PKEY 0xffffu	/* what rxe always sends */
#define SRN_GSI_QKEY	0x80010000u

/* ---- BTH ---------------------------------------------------------------- */

struct srn_bth {
	uint8_t opcode;
	uint8_t flags;		/* SE | M | PadCnt | TVer */
	srn_be16 pkey;
	srn_be32 qpn;		/* FECN | BECN | Resv6 | DestQP */
	srn_be32 apsn;		/* AckReq | Resv7 | PSN */
} __attribute__((packed));

#define SRN_BTH_SE		0x80u
#define SRN_BTH_MIG		0x40u
#define SRN_BTH_PAD_MASK	0x30u
#define SRN_BTH_PAD_SHIFT	4
#define SRN_BTH_TVER_MASK	0x0fu
#define SRN_BTH_FECN		0x80000000u
#define SRN_BTH_BECN		0x40000000u
#define SRN_BTH_RESV6_MASK	0x3f000000u
#define SRN_BTH_ACKREQ		0x80000000u
#define SRN_BTH_RESV7_MASK	0x7f000000u
/* softrnic's own use of the top Resv7 bit, on same-host rings only: a
 * zero-payload RDMA WRITE ..._WITH_IMMEDIATE whose RETH length of data
 * the requester already placed directly (transport/direct.c).  Never
 * sent on the UDP link; ignored when it arrives there.  A packet trace
 * also shows it on every packet recorded for a direct operation
 * (transport/direct_trace.c), which never crossed a link at all. */
#define SRN_BTH_PLACED		0x40000000u
/* BTH byte 4 (FECN, BECN, Resv6) is replaced by 0xff in the ICRC
 * (docs/wire.md §5.1). */
#define SRN_BTH_ICRC_MASKED_BYTE 4

_Static_assert(sizeof(struct srn_bth) == SRN_BTH_LEN, "BTH size");
_Static_assert(offsetof(struct srn_bth, flags) == 1, "BTH flags");
_Static_assert(offsetof(struct srn_bth, pkey) == 2, "BTH pkey");
_Static_assert(offsetof(struct srn_bth, qpn) == 4, "BTH qpn");
_Static_assert(offsetof(struct srn_bth, apsn) == 8, "BTH apsn");

/* ---- Extended transport headers -------------------------------------- */

struct srn_reth {
	srn_be64 va;
	srn_be32 rkey;
	srn_be32 len;		/* DMA length */
} __attribute__((packed));
_Static_assert(sizeof(struct srn_reth) == SRN_RETH_LEN, "RETH size");
_Static_assert(offsetof(struct srn_reth, rkey) == 8, "RETH rkey");
_Static_assert(offsetof(struct srn_reth, len) == 12, "RETH len");

struct srn_aeth {
	srn_be32 smsn;		/* Syndrome (8) | MSN (24) */
} __attribute__((packed));
_Static_assert(sizeof(struct srn_aeth) == SRN_AETH_LEN, "AETH size");

/* Packed, so the 64-bit data fields sit at 12 and 20 as on the wire. */
struct srn_atmeth {
	srn_be64 va;
	srn_be32 rkey;
	srn_be64 swap_add;
	srn_be64 compare;
} __attribute__((packed));
_Static_assert(sizeof(struct srn_atmeth) == SRN_ATMETH_LEN, "AtomicETH size");
_Static_assert(offsetof(struct srn_atmeth, rkey) == 8, "AtomicETH rkey");
_Static_assert(offsetof(struct srn_atmeth, swap_add) == 12, "AtomicETH swap");
_Static_assert(offsetof(struct srn_atmeth, compare) == 20, "AtomicETH cmp");

struct srn_atmack {
	srn_be64 orig;		/* original remote data */
} __attribute__((packed));
_Static_assert(sizeof(struct srn_atmack) == SRN_ATMACK_LEN, "AtomicAckETH size");

/* Opaque: delivered unchanged in wc.imm_data, which is itself __be32. */
struct srn_immdt {
	srn_be32 imm;
} __attribute__((packed));
_Static_assert(sizeof(struct srn_immdt) == SRN_IMMDT_LEN, "ImmDt size");

struct srn_ieth {
	srn_be32 rkey;		/* R_Key to invalidate */
} __attribute__((packed));
_Static_assert(sizeof(struct srn_ieth) == SRN_IETH_LEN, "IETH size");

struct srn_deth {
	srn_be32 qkey;
	srn_be32 sqpn;		/* reserved (8) | source QP (24) */
} __attribute__((packed));
_Static_assert(sizeof(struct srn_deth) == SRN_DETH_LEN, "DETH size");
_Static_assert(offsetof(struct srn_deth, sqpn) == 4, "DETH sqpn");

/* XRC requests: the SRQ at the target that takes the message (IBTA
 * 9.3.6, XRC Extended Transport Header), right after the BTH. */
struct srn_xrceth {
	srn_be32 srqn;		/* reserved (8) | XRC SRQ number (24) */
} __attribute__((packed));
_Static_assert(sizeof(struct srn_xrceth) == SRN_XRCETH_LEN, "XRCETH size");

/* RD only; RoCE does not use it.  Listed so the layout is on record. */
struct srn_rdeth {
	srn_be32 een;		/* reserved (8) | EE context (24) */
} __attribute__((packed));
_Static_assert(sizeof(struct srn_rdeth) == SRN_RDETH_LEN, "RDETH size");

/* FLUSH (IBTA 1.5): bits 3..0 placement type, 5..4 selectivity level. */
struct srn_feth {
	srn_be32 bits;
} __attribute__((packed));
_Static_assert(sizeof(struct srn_feth) == SRN_FETH_LEN, "FETH size");
#define SRN_FETH_PLT_MASK	0x0fu
#define SRN_FETH_SEL_MASK	0x30u
#define SRN_FETH_SEL_SHIFT	4

/* RoCEv2 CNP (Annex A17): 16 reserved bytes between BTH and ICRC. */
struct srn_cnp_rsvd {
	uint8_t rsvd[SRN_CNP_RSVD_LEN];
} __attribute__((packed));
_Static_assert(sizeof(struct srn_cnp_rsvd) == SRN_CNP_RSVD_LEN, "CNP size");

/* ---- AETH syndrome (docs/wire.md §4) ------------------------------------
 * bit 7 reserved, bits 6..5 type, bits 4..0 value. */
#define SRN_AETH_TYPE_MASK	0x60u
#define SRN_AETH_VALUE_MASK	0x1fu
#define SRN_AETH_TYPE_ACK	0x00u
#define SRN_AETH_TYPE_RNR	0x20u
#define SRN_AETH_TYPE_NAK	0x60u

#define SRN_AETH_ACK_UNLIMITED	0x1fu	/* credit code 0x1f: "invalid" */
#define SRN_AETH_RNR_NAK	0x20u	/* | 5-bit RNR timer code */
#define SRN_AETH_NAK_PSN_SEQ	0x60u
#define SRN_AETH_NAK_INVALID	0x61u
#define SRN_AETH_NAK_REM_ACCESS	0x62u
#define SRN_AETH_NAK_REM_OP	0x63u
#define SRN_AETH_NAK_INV_RD	0x64u	/* RD only */

/* ---- QP retry and timer attributes (docs/wire.md §7) ---------------------
 * Not header fields, but they size the values that end up in them (the RNR
 * timer code in an RNR NAK) or that the CM carries in its MADs. */
#define SRN_RETRY_CNT_MAX	7	/* retry_cnt is a 3-bit count */
#define SRN_RNR_RETRY_MAX	7	/* rnr_retry is a 3-bit count ... */
#define SRN_RNR_RETRY_INFINITE	7	/* ... whose top value means "forever" */
#define SRN_ACK_TIMEOUT_MASK	0x1fu	/* local ACK timeout: 5-bit exponent */

static inline uint8_t srn_aeth_type(uint8_t syndrome)
{
	return syndrome & SRN_AETH_TYPE_MASK;
}

/* ---- PSN arithmetic (24-bit, wrapping) ---------------------------------- */

/* <0, 0, >0 as a is before, equal to, after b: the sign of the 24-bit
 * difference, obtained by moving it into the top of a 32-bit word (rxe's
 * psn_compare does the same).  "After" means a forward distance < 2^23. */
static inline int srn_psn_cmp(uint32_t a, uint32_t b)
{
	int32_t d = (int32_t)((a - b) << 8);

	return (d > 0) - (d < 0);
}

static inline uint32_t srn_psn_add(uint32_t psn, uint32_t n)
{
	return (psn + n) & SRN_PSN_MASK;
}

/* Forward distance from b to a, modulo 2^24. */
static inline uint32_t srn_psn_diff(uint32_t a, uint32_t b)
{
	return (a - b) & SRN_PSN_MASK;
}

/* ---- UDP source port (docs/wire.md §1) -----------------------------------
 * The Linux rdma_calc_flow_label / rdma_flow_label_to_udp_sport helpers,
 * as used by rxe (modify_qp with a GRH) and mlx5.  Symmetric in the two
 * QPNs, so both ends pick the same port. */
static inline uint32_t srn_flow_label_of_qpns(uint32_t lqpn, uint32_t rqpn)
{
	uint64_t v = (uint64_t)lqpn * rqpn;

	v ^= v >> 20;
	v ^= v >> 40;
	return (uint32_t)v & 0xfffffu;
}

static inline uint16_t srn_udp_sport_of_flow_label(uint32_t fl)
{
	uint32_t low = fl & 0x3fffu;

	low ^= (fl & 0xfc000u) >> 14;
	return (uint16_t)(low | 0xc000u);
}

static inline uint16_t srn_udp_sport(uint32_t flow_label, uint32_t lqpn,
				     uint32_t rqpn)
{
	if (flow_label == 0)
		flow_label = srn_flow_label_of_qpns(lqpn, rqpn);
	return srn_udp_sport_of_flow_label(flow_label);
}

/* RNR NAK timer code (5 bits) -> minimum wait in microseconds
 * (docs/wire.md §7.1).
 * Code 25 is 61440 as in the IBTA; rxe's 61410 is a typo. */
uint32_t srn_rnr_timer_usec(uint8_t code);

#endif /* SRN_WIRE_ROCE_HDR_H */
