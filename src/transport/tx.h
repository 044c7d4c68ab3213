/*
 * tx.h - everything that leaves the NIC: the packet builder the stages
 * share, ACK/NAK generation and deferral on a full link (tx.c); what a
 * requester sends is requester.h.  All functions must be called with
 * nic->lock held.
 */
#ifndef SRN_TRANSPORT_TX_H
#define SRN_TRANSPORT_TX_H

#include <stdbool.h>
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

/* Record p (headers built as srn_xmit builds them) and its payload on
 * the device's packet trace as the UDP link would have carried it
 * between us and the QP's peer (from_peer: as received from it), without
 * sending anything: for operations executed without packets
 * (direct_trace.c).  Needs a trace (nic->link.udp.pcap). */
void srn_xmit_record(struct srn_qp *qp, struct srn_pkt *p, const struct iovec *pay, int npay,
		     bool from_peer);

/* What every response takes from the QP that answers. */
struct srn_resp_src {
	uint8_t transport;      /* its srn_qp_transport (RC, XRC) */
	uint32_t dqpn;          /* the requester's QPN */
	uint32_t msn;           /* its responder's MSN */
};
struct srn_resp_src srn_resp_src_of(const struct srn_qp *qp);
/* The responses, as field values for srn_xmit (or srn_xmit_record): an
 * ACK or NAK for psn; an ATOMIC ACKNOWLEDGE with the original value; READ
 * RESPONSE packet idx of npkts (FIRST/MIDDLE/LAST/ONLY) of len bytes,
 * whose PSN is first_psn + idx. */
void srn_ack_pkt(const struct srn_resp_src *s, uint8_t syndrome, uint32_t psn, struct srn_pkt *p);
void srn_atomic_ack_pkt(const struct srn_resp_src *s, uint32_t psn, uint64_t orig,
			struct srn_pkt *p);
void srn_read_resp_pkt(const struct srn_resp_src *s, uint32_t first_psn, uint32_t idx,
		       uint32_t npkts, uint32_t len, struct srn_pkt *p);

/* Owe the peer an ACK/NAK with this syndrome and PSN; sent by
 * srn_ack_flush at the end of the receive batch, so ACKs coalesce. */
void srn_ack_schedule(struct srn_qp *qp, uint8_t syndrome, uint32_t psn);
void srn_ack_flush(struct srn_nic *nic);
/* A post is about to transmit: ACKs held for it go first, ahead of its
 * packets (a peer may act on its request only once its own earlier send
 * is acknowledged: tgt's login does).  Must hold nic->lock. */
void srn_ack_flush_held(struct srn_nic *nic);
/* ...but only the ACKs the posting QP itself owes need to: ACKs other
 * QPs owe (a program that round-robins its requests over two
 * connections answers the reply of one with a request on the other)
 * leave right after its packets, in the same burst: take them off the
 * list before the post (returned) and put them back and flush them
 * after it.  Queued first, they cost their own sendmmsg (another QP,
 * another source port, another socket) and a trip through the peer's
 * stack ahead of the request on the latency path, a third of the block
 * store's polled 4 KiB write across two namespaces.  Nothing orders
 * two QPs' packets (IBTA); one QP's ACK still precedes its own
 * requests.  Must hold nic->lock. */
struct srn_qp *srn_ack_take_others(struct srn_nic *nic, struct srn_qp *qp);
void srn_ack_put_back(struct srn_nic *nic, struct srn_qp *others);

/* A same-host ring filled while this QP had more to send: retry it from
 * the progress loop. */
void srn_tx_defer(struct srn_qp *qp);
/* Retry QPs whose transmission stopped on a full ring. */
void srn_tx_resume(struct srn_nic *nic);

#endif
