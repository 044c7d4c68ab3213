/*
 * names.c - names for what the diagnostics print: completion
 * statuses, AETH syndromes, and what a QP's peer said last (from its slot).
 * Pure functions of their arguments and the slot; no object is read.
 */
#include "diag/names.h"

#include <stdio.h>

#include "diag/clock.h"
#include "wire/roce_hdr.h"

static const char *const wc_status_names[] = {
	[IBV_WC_SUCCESS] = "SUCCESS",
	[IBV_WC_LOC_LEN_ERR] = "LOC_LEN_ERR",
	[IBV_WC_LOC_QP_OP_ERR] = "LOC_QP_OP_ERR",
	[IBV_WC_LOC_EEC_OP_ERR] = "LOC_EEC_OP_ERR",
	[IBV_WC_LOC_PROT_ERR] = "LOC_PROT_ERR",
	[IBV_WC_WR_FLUSH_ERR] = "WR_FLUSH_ERR",
	[IBV_WC_MW_BIND_ERR] = "MW_BIND_ERR",
	[IBV_WC_BAD_RESP_ERR] = "BAD_RESP_ERR",
	[IBV_WC_LOC_ACCESS_ERR] = "LOC_ACCESS_ERR",
	[IBV_WC_REM_INV_REQ_ERR] = "REM_INV_REQ_ERR",
	[IBV_WC_REM_ACCESS_ERR] = "REM_ACCESS_ERR",
	[IBV_WC_REM_OP_ERR] = "REM_OP_ERR",
	[IBV_WC_RETRY_EXC_ERR] = "RETRY_EXC_ERR",
	[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR_RETRY_EXC_ERR",
	[IBV_WC_LOC_RDD_VIOL_ERR] = "LOC_RDD_VIOL_ERR",
	[IBV_WC_REM_INV_RD_REQ_ERR] = "REM_INV_RD_REQ_ERR",
	[IBV_WC_REM_ABORT_ERR] = "REM_ABORT_ERR",
	[IBV_WC_INV_EECN_ERR] = "INV_EECN_ERR",
	[IBV_WC_INV_EEC_STATE_ERR] = "INV_EEC_STATE_ERR",
	[IBV_WC_FATAL_ERR] = "FATAL_ERR",
	[IBV_WC_RESP_TIMEOUT_ERR] = "RESP_TIMEOUT_ERR",
	[IBV_WC_GENERAL_ERR] = "GENERAL_ERR",
	[IBV_WC_TM_ERR] = "TM_ERR",
	[IBV_WC_TM_RNDV_INCOMPLETE] = "TM_RNDV_INCOMPLETE",
};

const char *srn_diag_wc_status_name(enum ibv_wc_status st)
{
	if ((unsigned)st < sizeof(wc_status_names) / sizeof(wc_status_names[0]) &&
	    wc_status_names[st])
		return wc_status_names[st];
	return "UNKNOWN_STATUS";
}

/* AETH syndrome (IBTA 9.7.5.2.1, table 45): type in bits 6..5, value in 4..0. */
const char *srn_diag_syndrome_str(uint8_t syn, char *buf, size_t len)
{
	static const char *const nak[] = {
		"NAK PSN sequence error", "NAK invalid request", "NAK remote access error",
		"NAK remote operational error", "NAK invalid RD request",
	};
	uint8_t v = syn & SRN_AETH_VALUE_MASK;
	switch (srn_aeth_type(syn)) {
	case SRN_AETH_TYPE_ACK:
		snprintf(buf, len, "ACK");
		break;
	case SRN_AETH_TYPE_RNR:
		snprintf(buf, len, "RNR NAK (timer %u: %.2f ms)", v, srn_rnr_timer_usec(v) / 1000.0);
		break;
	case SRN_AETH_TYPE_NAK:
		if (v < sizeof(nak) / sizeof(nak[0]))
			snprintf(buf, len, "%s", nak[v]);
		else
			snprintf(buf, len, "NAK code %u (reserved)", v);
		break;
	default:
		snprintf(buf, len, "reserved syndrome 0x%02x", syn);
	}
	return buf;
}

void srn_diag_last_peer_str(struct srn_diag_obj *o, char *buf, size_t len)
{
	uint32_t syn = SRN_DIAG_GET(o->s->qp.last_peer_syndrome);
	if (syn == SRN_DIAG_PEER_NONE) {
		snprintf(buf, len, "nothing");
		return;
	}
	char s[48];
	uint64_t ago = srn_now_ns() - SRN_DIAG_GET(o->s->qp.last_peer_ns);
	snprintf(buf, len, "%s PSN 0x%06x %.1f ms ago", srn_diag_syndrome_str((uint8_t)syn, s, sizeof(s)),
		 SRN_DIAG_GET(o->s->qp.last_peer_psn), (double)ago / 1e6);
}
