/*
 * gso.h - UDP segmentation offload on send (UDP_SEGMENT) and receive
 * coalescing (UDP_GRO): the two socket features that cut the per-packet
 * system-call cost on these machines from ~8 us to ~1 us (see the brief).
 *
 * Send: one gathered buffer of equal-sized datagrams (the last may be
 * shorter) as one message of a sendmmsg (srn_tx_msg.gso_seg, link/udp.h).  Receive: one recvmsg returns several
 * datagrams of one flow back to back with their size in a control message;
 * srn_udp_recv_gro splits them again and says each one's index within its
 * coalesced buffer (IPv4 ID guess, see link/egress.c).
 */
#ifndef SRN_LINK_GSO_H
#define SRN_LINK_GSO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "link/udp.h"

#define SRN_GSO_MAX_SEGS 64            /* UDP_MAX_SEGMENTS in Linux */
#define SRN_GSO_MAX_BYTES 65000        /* under the 64 KiB IP datagram limit (65507 payload) */
#define SRN_GSO_MAX_IOVS 1024          /* UIO_MAXIOV: pieces one sendmsg may gather */

/* Turn on UDP_GRO for the socket; false if the kernel does not have it. */
bool srn_udp_enable_gro(struct srn_udp *u);

#define SRN_GRO_MSGS 8
#define SRN_GRO_BUFSZ 65536
#define SRN_GRO_MAX_PKTS (SRN_GRO_MSGS * SRN_GSO_MAX_SEGS)

struct srn_gro_batch {
	int count;
	int datagrams;                 /* received by the last call (<= SRN_GRO_MSGS) */
	int dirty;                     /* descriptors the kernel wrote back since built */
	struct {
		uint8_t *data;
		uint32_t len;
		uint16_t seg_index;    /* position within its coalesced datagram */
		uint8_t tos;           /* its TOS / traffic class (GRO merges only equal ones) */
		struct sockaddr_storage *src;
	} pkt[SRN_GRO_MAX_PKTS];
	uint8_t *bufs;
	struct sockaddr_storage src[SRN_GRO_MSGS];
	struct mmsghdr msgs[SRN_GRO_MSGS];
	struct iovec iov[SRN_GRO_MSGS];
	uint8_t ctrl[SRN_GRO_MSGS][64];   /* UDP_GRO's segment size and the TOS */
};

int srn_gro_batch_init(struct srn_gro_batch *b);
void srn_gro_batch_free(struct srn_gro_batch *b);
/* Like srn_udp_recv_batch, for a socket with UDP_GRO on. */
int srn_udp_recv_gro(struct srn_udp *u, struct srn_gro_batch *b);

#endif
