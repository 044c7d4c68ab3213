/*
 * pkt.c - parse and build the transport headers of one RoCEv2 packet.
 *
 * srn_pkt_parse is the single door through which a UDP payload from the
 * wire enters the stack.  It proves, before reading anything past the BTH,
 * that the opcode's headers, the pad and the ICRC all fit, so nothing
 * downstream needs to bounds-check header fields again.  It does not check
 * the ICRC (that needs the IP/UDP meta, see wire/icrc.h) nor anything that
 * depends on QP state (PSN window, P_Key, DestQP lookup): those belong to
 * the transport.
 *
 * srn_pkt_build_hdr is its inverse for the header part; the caller appends
 * payload, pad (zero bytes) and ICRC.  The AETH RNR timer table lives here
 * too, next to the AETH decoding.
 *
 * Invariants: pure functions, no state.  A successful parse satisfies
 * info->hdr_len + paylen + pad + SRN_ICRC_LEN == len, and payload points
 * inside buf.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "wire/opcode.h"
#include "wire/icrc.h"

/* Field views over the packet.  The structs are packed (alignment 1), so
 * these are valid at any address. */
#define HDR(type, base, off)	((type *)((base) + (off)))

/* The extension headers the opcode's table entry promises, at its
 * offsets; srn_pkt_parse checked that the packet holds them. */
static void parse_ext_headers(const uint8_t *buf, const struct srn_opcode_info *info,
			      struct srn_pkt *p)
{
	if (info->hdr_mask & SRN_HDR_RETH) {
		const struct srn_reth *h =
			HDR(const struct srn_reth, buf, info->off_reth);

		p->reth_va = be64toh(h->va);
		p->reth_rkey = be32toh(h->rkey);
		p->reth_len = be32toh(h->len);
	}
	if (info->hdr_mask & SRN_HDR_AETH) {
		uint32_t w = be32toh(HDR(const struct srn_aeth, buf, info->off_aeth)->smsn);

		p->aeth_syndrome = w >> 24;
		p->aeth_msn = w & SRN_MSN_MASK;
	}
	if (info->hdr_mask & SRN_HDR_IMMDT)
		p->imm_be = HDR(const struct srn_immdt, buf, info->off_immdt)->imm;
	if (info->hdr_mask & SRN_HDR_IETH)
		p->ieth_rkey =
			be32toh(HDR(const struct srn_ieth, buf, info->off_ieth)->rkey);
	if (info->hdr_mask & SRN_HDR_XRCETH)
		p->xrc_srqn = be32toh(HDR(const struct srn_xrceth, buf, info->off_xrceth)->srqn) &
			      SRN_QPN_MASK;
	if (info->hdr_mask & SRN_HDR_DETH) {
		const struct srn_deth *h =
			HDR(const struct srn_deth, buf, info->off_deth);

		p->deth_qkey = be32toh(h->qkey);
		p->deth_sqpn = be32toh(h->sqpn) & SRN_QPN_MASK;
	}
	if (info->hdr_mask & SRN_HDR_ATMETH) {
		const struct srn_atmeth *h =
			HDR(const struct srn_atmeth, buf, info->off_atmeth);

		p->atm_va = be64toh(h->va);
		p->atm_rkey = be32toh(h->rkey);
		p->atm_swap_add = be64toh(h->swap_add);
		p->atm_compare = be64toh(h->compare);
	}
	if (info->hdr_mask & SRN_HDR_ATMACK)
		p->atm_orig =
			be64toh(HDR(const struct srn_atmack, buf, info->off_atmack)->orig);
	if (info->hdr_mask & SRN_HDR_FETH)
		p->feth = be32toh(HDR(const struct srn_feth, buf, info->off_feth)->bits);
}

int srn_pkt_parse(const uint8_t *buf, size_t len, struct srn_pkt *p)
{
	const struct srn_opcode_info *info;
	struct srn_bth bth;
	size_t rem;
	uint32_t w;

	memset(p, 0, sizeof(*p));

	/* Shorter than BTH + ICRC: not a transport packet at all. */
	if (len < SRN_BTH_LEN + SRN_ICRC_LEN)
		return -EBADMSG;
	/* One private copy of the BTH: a same-host ring packet is parsed in
	 * place in memory a peer process can write, so every decision below
	 * (layout, pad, fields) must come from the same read. */
	memcpy(&bth, buf, sizeof(bth));

	/* A future transport version whose layout we cannot know; rxe drops
	 * these too (rxe_recv.c hdr_check). */
	if (bth.flags & SRN_BTH_TVER_MASK)
		return -EPROTONOSUPPORT;

	/* RD, XRC, reserved or vendor opcode: no layout to trust. */
	info = srn_opcode_info(bth.opcode);
	if (!info)
		return -EPROTONOSUPPORT;

	/* The opcode promises extension headers that are not there. */
	if (len - SRN_ICRC_LEN < info->hdr_len)
		return -EBADMSG;
	rem = len - SRN_ICRC_LEN - info->hdr_len;	/* payload + pad */
	p->pad = (bth.flags & SRN_BTH_PAD_MASK) >> SRN_BTH_PAD_SHIFT;

	if (!(info->hdr_mask & SRN_HDR_PAYLOAD)) {
		/* Bytes after a header-only packet (ACK, READ request,
		 * atomic, FLUSH, CNP) would be data nobody asked for. */
		if (rem != 0 || p->pad != 0)
			return -EBADMSG;
	} else if ((rem & 3) != 0 || p->pad > rem) {
		/* PadCnt pads the payload to a multiple of 4 bytes, and all
		 * header lengths are multiples of 4, so payload+pad is too;
		 * a pad longer than what follows the headers is a lie. */
		return -EBADMSG;
	}

	p->info = info;
	p->opcode = bth.opcode;
	p->se = bth.flags & SRN_BTH_SE;
	p->mig = bth.flags & SRN_BTH_MIG;
	p->pkey = be16toh(bth.pkey);
	w = be32toh(bth.qpn);
	p->fecn = w & SRN_BTH_FECN;
	p->becn = w & SRN_BTH_BECN;
	p->dqpn = w & SRN_QPN_MASK;
	w = be32toh(bth.apsn);
	p->ackreq = w & SRN_BTH_ACKREQ;
	p->placed = w & SRN_BTH_PLACED;
	p->psn = w & SRN_PSN_MASK;

	parse_ext_headers(buf, info, p);

	p->payload = buf + info->hdr_len;
	p->paylen = (uint32_t)(rem - p->pad);
	p->icrc = srn_icrc_get(buf + len - SRN_ICRC_LEN);
	return 0;
}

int srn_pkt_build_hdr(uint8_t *out, const struct srn_pkt *p)
{
	const struct srn_opcode_info *info = srn_opcode_info(p->opcode);
	struct srn_bth *bth;
	uint32_t w;

	if (!info)
		return -EINVAL;
	if (!(info->hdr_mask & SRN_HDR_PAYLOAD) && p->paylen != 0)
		return -EINVAL;

	/* Reserved fields, TVer and the CNP's reserved bytes are zero. */
	memset(out, 0, info->hdr_len);

	bth = HDR(struct srn_bth, out, 0);
	bth->opcode = p->opcode;
	bth->flags = (p->se ? SRN_BTH_SE : 0) | (p->mig ? SRN_BTH_MIG : 0) |
		     srn_pad_of(p->paylen) << SRN_BTH_PAD_SHIFT;
	bth->pkey = htobe16(p->pkey);
	w = (p->fecn ? SRN_BTH_FECN : 0) | (p->becn ? SRN_BTH_BECN : 0) |
	    (p->dqpn & SRN_QPN_MASK);
	bth->qpn = htobe32(w);
	w = (p->ackreq ? SRN_BTH_ACKREQ : 0) | (p->placed ? SRN_BTH_PLACED : 0) |
	    (p->psn & SRN_PSN_MASK);
	bth->apsn = htobe32(w);

	if (info->hdr_mask & SRN_HDR_RETH) {
		struct srn_reth *h = HDR(struct srn_reth, out, info->off_reth);

		h->va = htobe64(p->reth_va);
		h->rkey = htobe32(p->reth_rkey);
		h->len = htobe32(p->reth_len);
	}
	if (info->hdr_mask & SRN_HDR_AETH)
		HDR(struct srn_aeth, out, info->off_aeth)->smsn =
			htobe32((uint32_t)p->aeth_syndrome << 24 |
				(p->aeth_msn & SRN_MSN_MASK));
	if (info->hdr_mask & SRN_HDR_IMMDT)
		HDR(struct srn_immdt, out, info->off_immdt)->imm = p->imm_be;
	if (info->hdr_mask & SRN_HDR_IETH)
		HDR(struct srn_ieth, out, info->off_ieth)->rkey =
			htobe32(p->ieth_rkey);
	if (info->hdr_mask & SRN_HDR_XRCETH)
		HDR(struct srn_xrceth, out, info->off_xrceth)->srqn =
			htobe32(p->xrc_srqn & SRN_QPN_MASK);
	if (info->hdr_mask & SRN_HDR_DETH) {
		struct srn_deth *h = HDR(struct srn_deth, out, info->off_deth);

		h->qkey = htobe32(p->deth_qkey);
		h->sqpn = htobe32(p->deth_sqpn & SRN_QPN_MASK);
	}
	if (info->hdr_mask & SRN_HDR_ATMETH) {
		struct srn_atmeth *h = HDR(struct srn_atmeth, out, info->off_atmeth);

		h->va = htobe64(p->atm_va);
		h->rkey = htobe32(p->atm_rkey);
		h->swap_add = htobe64(p->atm_swap_add);
		h->compare = htobe64(p->atm_compare);
	}
	if (info->hdr_mask & SRN_HDR_ATMACK)
		HDR(struct srn_atmack, out, info->off_atmack)->orig =
			htobe64(p->atm_orig);
	if (info->hdr_mask & SRN_HDR_FETH)
		HDR(struct srn_feth, out, info->off_feth)->bits =
			htobe32(p->feth & (SRN_FETH_PLT_MASK | SRN_FETH_SEL_MASK));

	return info->hdr_len;
}

/* docs/wire.md §7.1 (Linux enum ib_rnr_timeout; Wireshark agrees). */
static const uint32_t rnr_usec[32] = {
	655360, 10, 20, 30, 40, 60, 80, 120,
	160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
	40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
};

uint32_t srn_rnr_timer_usec(uint8_t code)
{
	return rnr_usec[code & SRN_AETH_VALUE_MASK];
}
