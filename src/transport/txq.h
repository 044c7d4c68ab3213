/*
 * txq.h - the transmit queue: packets built by the transport wait here
 * until the end of the current burst, then leave in as few system calls
 * as possible (sendmmsg; UDP GSO for runs of equal-sized packets to one
 * peer).  Must hold nic->lock for everything.
 *
 * A queued packet points at the QP's (or address handle's) destination
 * and ICRC facts and at payload in registered memory: the queue must be
 * flushed before nic->lock is released (srn_txq_flush), so none of that
 * can change or go away meanwhile.
 */
#ifndef SRN_TRANSPORT_TXQ_H
#define SRN_TRANSPORT_TXQ_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "core/limits.h"
#include "wire/icrc.h"
#include "wire/roce_hdr.h"

#define SRN_TXQ_PKTS 64
#define SRN_TXQ_IOVS (SRN_TXQ_PKTS * (SRN_MAX_SGE + 2))

struct srn_txq_pkt {
	const struct sockaddr *dst;
	socklen_t dstlen;
	const struct srn_ip_meta *meta;
	uint32_t len;                  /* UDP payload bytes incl. ICRC */
	uint16_t iov_first, niov;      /* in txq->iov; the last iov is pad + ICRC */
	uint8_t hdr[SRN_MAX_HDR_LEN];
	uint8_t tail[3 + SRN_ICRC_LEN];
	uint8_t pad;
};

struct srn_txq {
	int n, niov;
	struct srn_txq_pkt pkt[SRN_TXQ_PKTS];
	struct iovec iov[SRN_TXQ_IOVS];
};

struct srn_nic;

/* Queue one packet: hdr (hl bytes) + payload pieces + pad; the ICRC is
 * added at flush.  Flushes first when full.  0 or -EINVAL. */
int srn_txq_add(struct srn_nic *nic, const struct sockaddr *dst, socklen_t dstlen,
		const struct srn_ip_meta *meta, const uint8_t *hdr, int hl,
		const struct iovec *pay, int npay, uint32_t paylen);
/* Send everything queued.  A packet the kernel will not take now (full
 * socket buffer) is dropped and counted: RC recovers it like a loss on the
 * wire, UC/UD lose it as the network may. */
void srn_txq_flush(struct srn_nic *nic);

#endif
