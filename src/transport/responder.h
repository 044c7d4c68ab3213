/*
 * responder.h - the responder stage (responder.c): requests from a
 * peer's requester (SEND, WRITE, READ, atomics), checked, executed and
 * acknowledged.  Must hold nic->lock.
 */
#ifndef SRN_TRANSPORT_RESPONDER_H
#define SRN_TRANSPORT_RESPONDER_H

#include <stdbool.h>
#include <sys/socket.h>

#include "wire/opcode.h"

struct srn_qp;

/* A request packet for qp, validated at the door (rx.c). */
void srn_resp_packet(struct srn_qp *qp, const struct srn_pkt *p, const struct sockaddr *src);
/* Send READ responses still owed; false if the socket filled first. */
bool srn_resp_push(struct srn_qp *qp);

#endif
