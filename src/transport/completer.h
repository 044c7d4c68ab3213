/*
 * completer.h - the completer stage (completer.c): ACKs, NAKs and
 * responses to our own requests, which retire send WQEs as completions.
 * Must hold nic->lock.
 */
#ifndef SRN_TRANSPORT_COMPLETER_H
#define SRN_TRANSPORT_COMPLETER_H

#include "wire/opcode.h"

struct srn_qp;

/* A response packet for qp, validated at the door (rx.c). */
void srn_comp_packet(struct srn_qp *qp, const struct srn_pkt *p);

#endif
