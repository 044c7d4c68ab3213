/*
 * test_ack_coalesce - the responder's owed ACK (transport/tx.c
 * srn_ack_schedule): a later ACK or NAK replaces an earlier one, since
 * each acknowledges everything before its PSN; but a plain ACK that
 * acknowledges nothing new, such as a duplicate request's (PSN ePSN-1),
 * must leave an owed NAK sequence error or RNR NAK in place: the NAK
 * acknowledges as much and asks for the resend now.  Without this a
 * duplicate arriving in the same batch as a gap cost the requester an
 * ACK timeout (a retry) per occurrence.  No sockets: the owed ACK is
 * only recorded until the flush.
 */
#include <string.h>

#include "check.h"
#include "core/nic.h"
#include "core/qp.h"
#include "transport/tx.h"
#include "wire/roce_hdr.h"

static struct srn_nic nic;
static struct srn_qp qp;

static void owe_nothing(void)
{
	memset(&nic, 0, sizeof(nic));
	memset(&qp, 0, sizeof(qp));
	qp.nic = &nic;
}

int main(void)
{
	/* A gap at ePSN 100, then a duplicate's ACK for 99: the NAK stays. */
	owe_nothing();
	srn_ack_schedule(&qp, SRN_AETH_NAK_PSN_SEQ, 100);
	srn_ack_schedule(&qp, SRN_AETH_ACK_UNLIMITED, 99);
	CHECK(qp.resp.ack_syndrome == SRN_AETH_NAK_PSN_SEQ && qp.resp.ack_psn == 100,
	      "NAK replaced by a duplicate's ACK: syndrome 0x%x psn %u", qp.resp.ack_syndrome,
	      qp.resp.ack_psn);
	CHECK(nic.lists.ack == &qp && qp.resp.ack_pending, "owed once");

	/* The resent packet 100 arrives and executes: its ACK replaces it. */
	srn_ack_schedule(&qp, SRN_AETH_ACK_UNLIMITED, 100);
	CHECK(qp.resp.ack_syndrome == SRN_AETH_ACK_UNLIMITED && qp.resp.ack_psn == 100);

	/* An RNR NAK for 7, then a duplicate's ACK for 6: the RNR stays. */
	owe_nothing();
	srn_ack_schedule(&qp, SRN_AETH_RNR_NAK | 1, 7);
	srn_ack_schedule(&qp, SRN_AETH_ACK_UNLIMITED, 6);
	CHECK(qp.resp.ack_syndrome == (SRN_AETH_RNR_NAK | 1) && qp.resp.ack_psn == 7);

	/* Across the PSN wrap: NAK at 0, duplicate's ACK for 0xffffff. */
	owe_nothing();
	srn_ack_schedule(&qp, SRN_AETH_NAK_PSN_SEQ, 0);
	srn_ack_schedule(&qp, SRN_AETH_ACK_UNLIMITED, SRN_PSN_MASK);
	CHECK(qp.resp.ack_syndrome == SRN_AETH_NAK_PSN_SEQ && qp.resp.ack_psn == 0);

	/* ACKs coalesce as before: the later one is owed. */
	owe_nothing();
	srn_ack_schedule(&qp, SRN_AETH_ACK_UNLIMITED, 5);
	srn_ack_schedule(&qp, SRN_AETH_ACK_UNLIMITED, 9);
	CHECK(qp.resp.ack_psn == 9);
	/* A NAK after an ACK replaces it (it acknowledges as much). */
	srn_ack_schedule(&qp, SRN_AETH_NAK_PSN_SEQ, 10);
	CHECK(qp.resp.ack_syndrome == SRN_AETH_NAK_PSN_SEQ && qp.resp.ack_psn == 10);
	return srn_check_result();
}
