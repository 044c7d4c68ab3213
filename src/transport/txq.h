/*
 * txq.h - the transport's door to the link: a packet the transport built
 * (headers, payload pieces in registered memory, the ICRC facts of its
 * path) goes to link/egress.h, which picks the same-host ring or the
 * socket, plans GSO runs and traces; the transport never learns which.
 * Must hold nic->lock for everything.
 *
 * A queued packet points at the QP's (or address handle's) destination
 * and ICRC facts and at payload in registered memory: the queue must be
 * flushed before nic->lock is released (srn_txq_flush; srn_nic_unlock
 * does it), so none of that can change or go away meanwhile.
 */
#ifndef SRN_TRANSPORT_TXQ_H
#define SRN_TRANSPORT_TXQ_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "core/limits.h"
#include "link/egress.h"
#include "wire/icrc.h"

_Static_assert(SRN_MAX_SGE <= SRN_EGRESS_MAX_PAY, "the link takes a packet of every SGE");

struct srn_nic;

/* Queue one packet: hdr (hl bytes) + payload pieces + pad; the ICRC is
 * added by the link.  0, -EAGAIN when a same-host ring is full (nothing
 * sent: the sender defers, tx.c), or -EINVAL. */
int srn_txq_add(struct srn_nic *nic, const struct sockaddr *dst, socklen_t dstlen,
		const struct srn_ip_meta *meta, const uint8_t *hdr, int hl,
		const struct iovec *pay, int npay, uint32_t paylen);
/* Send everything queued (link/egress.h: what is lost and counted when
 * the kernel will not take it). */
void srn_txq_flush(struct srn_nic *nic);

#endif
