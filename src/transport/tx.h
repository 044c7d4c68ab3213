/*
 * tx.h - everything that leaves the NIC: the packet builder the stages
 * share, ACK/NAK generation and deferral on a full link (tx.c); what a
 * requester sends is requester.h.  All functions must be called with
 * nic->lock held.
 */
#ifndef SRN_TRANSPORT_TX_H
#define SRN_TRANSPORT_TX_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "wire/icrc.h"
#include "wire/opcode.h"

struct srn_nic;
struct srn_qp;

/* Build headers, pad and ICRC around payload pieces and send to the QP's
 * peer.  Returns 0, -EAGAIN (the peer's same-host ring is full; nothing
 * sent) or -errno.  A full socket buffer is not -EAGAIN: the link drops
 * at the flush what it cannot send (link/egress.h). */
int srn_xmit(struct srn_qp *qp, struct srn_pkt *p, const struct iovec *pay, int npay);
/* The same to an explicit destination (UD: the address handle's). */
int srn_xmit_to(struct srn_qp *qp, const struct sockaddr *dst, socklen_t dstlen,
		const struct srn_ip_meta *meta, struct srn_pkt *p, const struct iovec *pay,
		int npay);

/* Owe the peer an ACK/NAK with this syndrome and PSN; sent by
 * srn_ack_flush at the end of the receive batch, so ACKs coalesce. */
void srn_ack_schedule(struct srn_qp *qp, uint8_t syndrome, uint32_t psn);
void srn_ack_flush(struct srn_nic *nic);

/* A same-host ring filled while this QP had more to send: retry it from
 * the progress loop. */
void srn_tx_defer(struct srn_qp *qp);
/* Retry QPs whose transmission stopped on a full ring. */
void srn_tx_resume(struct srn_nic *nic);

#endif
