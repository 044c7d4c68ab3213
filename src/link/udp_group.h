/*
 * udp_group.h - many processes behind one device address, as on a NIC.
 *
 * On a real host every RDMA process shares the NIC's address and peers
 * reach each one's QPs by QP number.  Here each process has its own UDP
 * socket, so processes given the same address and port join one
 * SO_REUSEPORT group (the kernel lets only sockets of one effective uid
 * join) and the kernel steers each datagram to one member.  Which one:
 *
 * - QP numbers are partitioned: the top SRN_GRP_MEMBER_BITS of every QPN
 *   a device hands out are its member number (core/nic.c), 0 for a device
 *   that shares nothing.  A member number is a slot taken by flock on a
 *   file in a per-user directory (0700) named after the network
 *   namespace, so it is released when its holder dies.
 * - A classic BPF program on the group (SO_ATTACH_REUSEPORT_CBPF) reads
 *   the BTH's destination QPN and returns the socket index of its member.
 *   The kernel numbers a group's sockets in join order and, when one
 *   closes, moves the last into the hole; members keep that order in a
 *   shared file under a lock and re-attach the program at every join and
 *   leave.  A member that dies changes the order unseen by that file, so
 *   members watch the group directory for slot files closed (a death)
 *   and then ask the kernel itself: probes the program steers to each
 *   index, answered by whoever receives them (udp_group_probe.c).
 * - So steering is a fast path, never the rule of correctness: a member
 *   that receives a packet for another member's QPN forwards it, with its
 *   original source address (the ICRC covers it), to the owner's
 *   forwarding socket (UDP on 127.0.0.1, its port in the owner's slot
 *   file; each packet carries the group's secret from the 0600 order
 *   file, so other users' datagrams are dropped), and the owner's receive
 *   path takes it as if from the wire.  A packet whose owner has no
 *   forwarding socket is kept (a MAD for a member that is gone: the
 *   local CM answers).  A member leaving passes on what its socket still holds.
 * - Same-host rings stay: each member has its own inbox, named with its
 *   member number (link/shm_file.h), and senders pick it from the
 *   destination QPN.  Doorbells for a member k > 0 go to its forwarding
 *   socket: an empty datagram carries no QPN to steer by (the program
 *   gives those to member 0).
 * - QP1 belongs to no member: every member's CM has its own, and a CM MAD
 *   goes to the CM it is for (wire/gsi_route.h).  The program reads the
 *   receiver's communication ID, whose top byte our CMs make their member
 *   number; a REQ or SIDR_REQ goes by hash to any member, which asks its
 *   CM who listens on the service ID (srn_udp_group_set_gsi) and forwards
 *   it there.  A member without a CM forwards it to one that has one,
 *   marked to be routed once more.
 */
#ifndef SRN_LINK_UDP_GROUP_H
#define SRN_LINK_UDP_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "link/config.h"

struct srn_udp;
struct srn_rx_batch;

#define SRN_GRP_MEMBER_BITS 8
#define SRN_GRP_MEMBERS (1u << SRN_GRP_MEMBER_BITS)   /* processes per address */
#define SRN_QPN_MEMBER_SHIFT (24 - SRN_GRP_MEMBER_BITS)
#define SRN_QPN_MCAST 0xffffffu                        /* IBTA: multicast destination QP */

/* The member whose QP this is (0 for unshared devices, QP0/QP1 and
 * anything that is not a real QPN of a group). */
static inline unsigned srn_qpn_member(uint32_t qpn)
{
	if ((qpn & SRN_QPN_MCAST) == SRN_QPN_MCAST)
		return 0;
	return (qpn >> SRN_QPN_MEMBER_SHIFT) & (SRN_GRP_MEMBERS - 1);
}

struct srn_udp_group;

/* Bind u->fd (options set, not bound yet) to ss as a member of the
 * address's group: SO_REUSEPORT, a member slot, the steering program, the
 * forwarding socket.  Returns 0 or -errno with one line in err. */
int srn_udp_group_bind(struct srn_udp *u, const struct srn_dev_cfg *cfg,
		       const struct sockaddr *ss, socklen_t sl, char *err, size_t errlen);
/* Leave: re-steer the group for the others, then the caller closes fd. */
void srn_udp_group_leave(struct srn_udp *u);
/* This device's member number, 0 when it shares nothing. */
unsigned srn_udp_member(const struct srn_udp *u);
/* The forwarding socket to watch besides u->fd, or -1. */
int srn_udp_group_fd(const struct srn_udp *u);
/* A waiting thread's poll just looked at the forwarding socket: if it
 * is readable the next receive asks it at once, else it counts as just
 * asked (no system call that would find nothing). */
void srn_udp_group_fwd_seen(struct srn_udp *u, bool readable);

/* After a receive into b (n packets): forward the packets another member
 * owns and drop them from b, then append packets forwarded to us.
 * Returns the new count. */
int srn_udp_group_rx(struct srn_udp *u, struct srn_rx_batch *b, int n);

/* The same for a GRO receive (link/gso.h): forwarded packets take the
 * message buffers the receive left unused. */
struct srn_gro_batch;
int srn_udp_group_gro(struct srn_udp *u, struct srn_gro_batch *b);

/* Wake member `member` of the group at dst through its forwarding
 * socket: 0, or -ENOENT (no such member: ring the UDP doorbell). */
int srn_udp_group_doorbell(struct srn_udp *u, const struct sockaddr *dst, socklen_t dstlen,
			   unsigned member);

/* The probe of the group's real socket order (udp_group_probe.c): when
 * its next step is due (0: none), and that step, which the engine runs
 * through srn_udp_fault_flush when it wakes for it.  Must hold the nic's
 * lock for the tick; the time is read without it. */
uint64_t srn_udp_group_next_ns(const struct srn_udp *u);
void srn_udp_group_tick(struct srn_udp *u, uint64_t now);

/* Steering on or off for this member (SOFTRNIC_GROUP_STEER=0 turns it
 * off at bind): off, it attaches no program at a join, leave or resteer.
 * For tests that detach the group's program to exercise forwarding. */
void srn_udp_group_set_steer(struct srn_udp *u, bool on);

struct srn_udp_group_stats {
	uint64_t forwarded;            /* packets passed to their owner */
	uint64_t fwd_rcvd;             /* packets other members passed to us */
	uint64_t fwd_failed;           /* owner gone or its socket full: kept or dropped */
	uint64_t resteers;             /* programs attached */
};
const struct srn_udp_group_stats *srn_udp_group_stats(const struct srn_udp *u);

/* This process's CM serves QP1 on this device: fn names the pid of the
 * process that listens for a REQ or SIDR_REQ (the MAD, len bytes), or 0
 * when none is known.  NULL: no CM any more.  fn runs in the receiving
 * thread, under the nic's lock. */
typedef long srn_gsi_listener_fn(const uint8_t *mad, size_t len);
void srn_udp_group_set_gsi(struct srn_udp *u, srn_gsi_listener_fn *fn);

/* A REQ that reached our CM when nobody listened for it (the CM holds
 * it) now has a listener in process pid: pass the packet on to pid's
 * member as it came off the wire.  The REQ is named by its source GID
 * and the requester's communication ID.  0: passed on, and the CM
 * forgets its copy; -ENOENT: not kept here (or too old); -ESRCH: pid is
 * no member of this group; -EAGAIN: its socket is full. */
int srn_udp_group_reroute(struct srn_udp *u, const uint8_t sgid[16], uint32_t comm_id, long pid);

/* The classic BPF program (udp_group_prog.c) for a group whose kernel
 * socket order is order[0..n) (member numbers).  prog holds at least
 * SRN_GRP_PROG_MAX instructions; returns their number.  Exposed for the
 * unit test. */
#define SRN_GRP_PROG_MAX (48 + 4 * SRN_GRP_MEMBERS)
struct sock_filter;
int srn_udp_group_prog(const uint8_t *order, unsigned n, struct sock_filter *prog);

/* The program a member leaving from kernel index `self` attaches before
 * it closes its socket: no packet for another member goes to `self`
 * (steer: steering as srn_udp_group_prog, else spread by PSN).  0 when
 * no other socket is left.  Exposed for the unit test. */
int srn_udp_group_prog_leave(const uint8_t *order, unsigned n, unsigned self, bool steer,
			     struct sock_filter *prog);

/* Is this datagram a shared address's probe (udp_group_probe.c)?  Not
 * RoCE: the link's own control, kept out of a packet trace. */
bool srn_grp_is_probe(const uint8_t *d, uint32_t len);

#endif
