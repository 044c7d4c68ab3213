/*
 * dgram.h - datagram rsockets (SOCK_DGRAM over UD QPs), the calls between
 * dgram.c (the socket, its QPs, destinations and address handles) and
 * dgram_xfer.c (sending, receiving, progress, waiting); rs.h's calls
 * hand a socket with rs->ds set to them.
 *
 * A datagram rsocket is a kernel UDP socket (its fd is the socket number)
 * plus one UD QP per local address it sends from, each an rdma_cm id in
 * the UDP port space bound to that address and the UDP socket's port.
 * Destinations map a peer's address to the QP that reaches it and, once
 * the peer told us its QPN, an address handle.  Until then datagrams go
 * over the UDP socket with the UDP header (dgram_proto.h), and the peer's
 * CTRL reply gives us its QPN.  No service thread: the UDP socket is read
 * whenever the socket makes progress (any call on it, rpoll, a blocked
 * wait, which sleeps on the UDP socket too).
 *
 * Locking: everything below is under rs->lock, as the stream side.
 */
#ifndef SRN_RSOCKET_DGRAM_H
#define SRN_RSOCKET_DGRAM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "rsocket/dgram_proto.h"

struct srn_rs;

#define SRN_DS_MAX_DESTS 4096        /* a flood of new peers stops here (dropped, counted) */
#define SRN_DS_UDP_BATCH 64          /* UDP datagrams read per progress pass */

struct srn_ds_qp {
	struct srn_ds_qp *next;
	struct rdma_cm_id *id;       /* RDMA_PS_UDP, bound to addr */
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	bool armed;
	struct sockaddr_storage addr;   /* local address and the UDP socket's port */
	uint8_t hdr[SRN_DS_HDR_MAX];    /* our source header on every message */
	uint8_t hdr_len;
	uint32_t mtu;                /* the port's active MTU in bytes */
	uint8_t *rbuf;               /* rq_size buffers of SRN_DS_MSG_MAX, then one GRH */
	struct ibv_mr *rmr, *smr;    /* smr: the socket's sbuf, registered for this QP */
};

struct srn_ds_dest {
	struct srn_ds_dest *next;
	struct sockaddr_storage addr;   /* the peer: its UDP socket's address */
	struct srn_ds_qp *qp;        /* ours that reaches it */
	struct ibv_ah *ah;           /* NULL until the peer's QPN is known */
	uint32_t qpn;
};

struct srn_ds_msg {                  /* a received message, header first */
	struct srn_ds_qp *qp;        /* UD: the receive buffer at off, reposted when read */
	uint32_t off;
	uint32_t len;                /* header and payload */
	uint8_t *copy;               /* came over UDP: a copy we free */
};

struct srn_ds {
	int epfd;                    /* every QP's completion channel */
	bool ep;                     /* buffers exist (first bind, connect or send) */
	bool wildcard;               /* the UDP socket is bound to the any address */
	struct srn_ds_qp *qps;
	struct srn_ds_dest *dests, *conn;   /* conn: rconnect's peer */
	unsigned ndests;
	uint8_t *sbuf;               /* sq_size slots of SRN_DS_MSG_MAX */
	uint16_t *sfree;             /* free send slots, a stack */
	int nsfree;
	struct srn_ds_msg *rmsg;     /* received, not yet read: a ring of rq_size + 1 */
	unsigned head, tail, size;
	int rqe_avail;               /* messages the ring still takes */
	uint64_t malformed;          /* datagrams dropped for their header */
};

/* dgram.c */
int srn_ds_socket(struct srn_rs *rs, int domain, int type_flags);
int srn_ds_bind(struct srn_rs *rs, const struct sockaddr *addr, socklen_t len);
int srn_ds_connect(struct srn_rs *rs, const struct sockaddr *addr, socklen_t len);
void srn_ds_free(struct srn_rs *rs);
int srn_ds_init_ep(struct srn_rs *rs);
/* The destination for addr, made (with the QP that reaches it) if new. */
int srn_ds_get_dest(struct srn_rs *rs, const struct sockaddr *addr, socklen_t len,
		    struct srn_ds_dest **out);
/* Resolve a route to dest and make its address handle for QPN qpn. */
int srn_ds_make_ah(struct srn_ds_dest *dest, uint32_t qpn);
socklen_t srn_ds_addrlen(const struct sockaddr *a);
bool srn_ds_same_addr(const struct sockaddr *a, const struct sockaddr *b);
/* Count a refused datagram in the socket and in the device counters. */
void srn_ds_count_malformed(struct srn_rs *rs, struct srn_ds_qp *qp);

/* dgram_xfer.c */
ssize_t srn_ds_send(struct srn_rs *rs, const struct iovec *iov, int iovcnt, int flags,
		    const struct sockaddr *to, socklen_t tolen);
ssize_t srn_ds_recv(struct srn_rs *rs, const struct iovec *iov, int iovcnt, int flags,
		    struct sockaddr *from, socklen_t *fromlen);
void srn_ds_progress(struct srn_rs *rs);
bool srn_ds_arm(struct srn_rs *rs);
void srn_ds_take_events(struct srn_rs *rs);
short srn_ds_revents(const struct srn_rs *rs, short events);
bool srn_ds_all_sent(const struct srn_rs *rs);
void srn_ds_repost(struct srn_rs *rs, struct srn_ds_qp *qp, uint32_t off);

#endif
