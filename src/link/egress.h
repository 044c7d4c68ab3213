/*
 * egress.h - the link's transmit side: the transport hands it finished
 * packets (headers, payload pieces in registered memory, the facts the
 * ICRC covers) with their destination, and the link decides how each one
 * leaves: copied into a same-host peer's ring at once (link/shm.h), or
 * queued for the socket until the burst ends and then sent in as few
 * system calls as possible (sendmmsg; UDP GSO for runs of equal-sized
 * packets to one peer, link/gso.h).  The packet trace records ring
 * packets here as the UDP link would have carried them.
 *
 * The caller serialises every call (the device's nic->lock).  A queued
 * packet points at the caller's destination and ICRC facts and at payload
 * in registered memory: the caller must flush before any of that may
 * change or go away.
 */
#ifndef SRN_LINK_EGRESS_H
#define SRN_LINK_EGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "diag/counters.h"
#include "link/pause.h"
#include "link/shm.h"
#include "link/udp.h"
#include "wire/icrc.h"
#include "wire/roce_hdr.h"

#define SRN_EGRESS_PKTS 64             /* packets queued before a forced flush */
#define SRN_EGRESS_MAX_PAY 32          /* payload pieces per packet (SRN_MAX_SGE) */
#define SRN_EGRESS_IOVS (SRN_EGRESS_PKTS * (SRN_EGRESS_MAX_PAY + 2))

struct srn_egress_pkt {
	const struct sockaddr *dst;
	socklen_t dstlen;
	const struct srn_ip_meta *meta;
	uint32_t len;                  /* UDP payload bytes incl. ICRC */
	uint16_t iov_first, niov;      /* in e->iov; the last iov is pad + ICRC */
	uint8_t hdr[SRN_MAX_HDR_LEN];
	uint8_t tail[3 + SRN_ICRC_LEN];
	uint8_t pad;
};

struct srn_egress {
	struct srn_udp *udp;           /* the device's socket */
	struct srn_shm *shm;           /* its same-host rings */
	struct srn_counters *cnt;      /* the device counters (sent, ring full, ...) */
	bool gso_ok;                   /* send runs with UDP GSO */
	/* The -errno with which the path refused a GSO run (GSO is off
	 * from then on), for the caller's device log; the caller clears it. */
	int gso_refused;
	struct srn_pause_view pause;   /* the emulated switch's pause, as seen (link/pause.h) */
	int n, niov;
	struct srn_egress_pkt pkt[SRN_EGRESS_PKTS];
	struct iovec iov[SRN_EGRESS_IOVS];
};

/* A transmit side over udp and shm counting into cnt; gso: may send UDP
 * GSO runs (not with a fault injector or trace: they act per datagram).
 * NULL on -ENOMEM. */
struct srn_egress *srn_egress_create(struct srn_udp *udp, struct srn_shm *shm,
				     struct srn_counters *cnt, bool gso);
void srn_egress_destroy(struct srn_egress *e);

/* One packet for dst: hdr (hl bytes) + payload pieces (paylen bytes) +
 * pad; the ICRC is computed here (meta: the addresses it covers).  Into
 * dst's same-host ring if it has one, else queued for the socket
 * (flushing first when the queue is full).  0; -EAGAIN when dst's ring
 * has no room now, or when the emulated switch paused the UDP link
 * (link/pause.h; nothing was sent: defer and try again after a poll);
 * -EINVAL for more than SRN_EGRESS_MAX_PAY pieces or a header too long. */
int srn_egress_add(struct srn_egress *e, const struct sockaddr *dst, socklen_t dstlen,
		   const struct srn_ip_meta *meta, const uint8_t *hdr, int hl,
		   const struct iovec *pay, int npay, uint32_t paylen);
/* Send everything queued and publish the rings written.  A packet the
 * kernel will not take now (full socket buffer) is dropped and counted:
 * RC recovers it like a loss on the wire, UC/UD lose it as the network
 * may. */
void srn_egress_flush(struct srn_egress *e);
/* Packets queued for the socket, not yet sent. */
static inline int srn_egress_queued(const struct srn_egress *e)
{
	return e->n;
}
/* Anything for srn_egress_flush to do: queued packets or unpublished
 * ring records. */
static inline bool srn_egress_pending(const struct srn_egress *e)
{
	return e->n || e->shm->ndirty;
}

#endif
