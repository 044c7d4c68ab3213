/* The UDP socket that carries a device's RoCEv2 packets, plus address helpers
 * (sockaddr <-> RoCEv2 GID, printable form).
 *
 * One socket per device, bound to the device's own address and port: every
 * packet arrives there.  Packets leave from it too, except an RC/UC QP's,
 * which leave from the QP's own source port (udp_ports.h) for ECMP; the
 * ICRC covers the source port and the receiver recomputes it from the
 * header it sees, so any port works. The socket is
 * non-blocking and unconnected; IPv4 packets leave with DF set and, because
 * of that, IP ID 0 (Linux's rule for unconnected DF sockets; the ICRC covers
 * the ID and receivers assume 0 — tests/test_link_wire.c checks this).
 * Should UDP GSO (UDP_SEGMENT) be added: segment k of one send leaves with
 * IP ID k, so its ICRC must be computed with ID k (the same test checks it).
 * IPv6 packets leave with UDP checksum 0 and zero-checksum packets are
 * accepted, as rxe and RoCE NICs do.
 *
 * This layer moves opaque bytes. The one exception is the optional fault
 * injector (fault.h), which reads the BTH opcode and destination QP to
 * filter; the optional pcap trace (pcap.h) records what passes. Both sit
 * behind u->hooked, one predictable branch per call when neither is on.
 */
#ifndef SRN_LINK_UDP_H
#define SRN_LINK_UDP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "link/config.h"
#include "link/fault.h"
#include "link/udp_ecn.h"
#include "wire/icrc.h"

struct srn_pcap;
struct srn_udp_group;
struct srn_udp_ports;

#define SRN_UDP_SOCKBUF (8u << 20)   /* 8 MiB each way: a few hundred 4 KiB packets of burst */

struct srn_udp {
	int fd;                          /* -1 when closed */
	int family;
	struct sockaddr_storage local;   /* bound address incl. port */
	socklen_t local_len;
	uint16_t port;                   /* host order */
	int rcvbuf, sndbuf;              /* what the kernel granted (doubled value, as getsockopt reports) */
	bool hooked;                     /* fault or pcap set: take the slow path */
	/* ECN (link/udp_ecn.h): the TOS every packet leaves with, whether
	 * each datagram's TOS is read, and the SOFTRNIC_ECN_MARK test marker. */
	uint8_t tos;
	bool ecn_rx;
	uint32_t ce_every, ce_count;
	struct srn_fault *fault;         /* SOFTRNIC_FAULTS, else NULL */
	struct srn_pcap *pcap;           /* SOFTRNIC_PCAP, else NULL */
	struct srn_udp_group *grp;       /* address shared with other processes (udp_group.h), else NULL */
	const char *dir_note;            /* the group directory is a fallback or none (link/rundir.h): for the device log, else NULL */
	struct srn_udp_ports *ports;     /* per-QP source ports (udp_ports.h), NULL when off */
};

/* Open and bind the device's socket. auto_loopback: bind the first free
 * 127.0.0.N (N = 1..254) on cfg->port and write it back into cfg->addr.
 * Otherwise bind exactly cfg->addr:cfg->port. cfg->port 0 lets the kernel
 * choose (tests) and is written back. cfg->link_mtu is filled if still 0
 * (detected, else SRN_LOOPBACK_MTU for auto, else 1500). Also reads
 * SOFTRNIC_FAULTS (fault.h) and SOFTRNIC_PCAP / SOFTRNIC_PCAP_MAX_MB
 * (pcap.h): a bad value or an unwritable trace file fails the open. Returns
 * 0 or -errno with a one-line explanation in err. */
int srn_udp_open(struct srn_udp *u, struct srn_dev_cfg *cfg, char *err, size_t errlen);
/* Closes the socket, frees held fault packets (unsent), flushes and closes
 * the trace. */
void srn_udp_close(struct srn_udp *u);

/* Send one datagram gathered from iov to dst. Returns 0, -EAGAIN when the
 * socket buffer (or a device queue) is full and the caller should retry
 * later, -EMSGSIZE when it exceeds the path MTU, -EAFNOSUPPORT when dst is
 * not of the socket's family, or another -errno. */
int srn_udp_sendv(struct srn_udp *u, const struct sockaddr *dst, socklen_t dstlen,
				  const struct iovec *iov, int iovcnt);
/* An empty datagram that wakes a same-host peer sleeping in epoll
 * (link/shm.h): not RoCE, so never faulted nor traced.  member: which
 * process behind dst (udp_group.h), 0 if it shares nothing.  0 or -errno. */
int srn_udp_doorbell(struct srn_udp *u, const struct sockaddr *dst, socklen_t dstlen,
		     unsigned member);

/* Send up to n messages in one system call (sendmmsg), all from the
 * source port of the first (a call stops at the first message with
 * another port, and the caller calls again for the rest). A message is one
 * datagram, or with gso_seg set a UDP GSO run (UDP_SEGMENT): the kernel
 * cuts it into datagrams of gso_seg bytes, the last one possibly shorter,
 * so singles and runs of a whole burst leave in one call.  GSO runs are
 * for an unhooked socket only (no fault injector or trace: -EINVAL).
 * Returns how many messages were sent (0..n; the caller retries the rest
 * later), or -errno when the first one failed with anything but a full
 * buffer (-EOPNOTSUPP/-EINVAL/-EIO from a run: no GSO on this path). */
#define SRN_TX_BATCH 32
struct srn_tx_msg {
	const struct sockaddr *dst;
	socklen_t dstlen;
	const struct iovec *iov;
	int iovcnt;
	uint16_t gso_seg;           /* 0: one datagram */
	uint16_t sport;             /* UDP source port (link/udp_ports.h); the device's if not ours */
};
int srn_udp_send_batch(struct srn_udp *u, const struct srn_tx_msg *m, int n);

/* Batched receive into a caller-owned set of fixed buffers. */
#define SRN_RX_BATCH 32
#define SRN_RX_BUFSZ 9216   /* >= 4096 MTU payload + headers; GRO comes later */
struct srn_rx_batch {
	int count;
	struct {
		uint8_t *data;
		uint32_t len;
		struct sockaddr_storage src;
		socklen_t srclen;
		uint8_t tos;            /* its IPv4 TOS / IPv6 traffic class (0 unless read) */
	} pkt[SRN_RX_BATCH];
	/* Owned storage: one allocation of SRN_RX_BATCH * SRN_RX_BUFSZ bytes
	 * and the recvmmsg descriptors that point into it. */
	uint8_t *bufs;
	struct mmsghdr msgs[SRN_RX_BATCH];
	struct iovec iov[SRN_RX_BATCH];
	uint8_t ctrl[SRN_RX_BATCH][SRN_ECN_CMSG_SPACE];   /* each datagram's TOS */
};
int srn_rx_batch_init(struct srn_rx_batch *b);   /* allocates buffers once; 0 or -ENOMEM */
void srn_rx_batch_free(struct srn_rx_batch *b);

/* Receive what is waiting, up to SRN_RX_BATCH datagrams, without blocking.
 * Returns the number of datagrams now in b->pkt[0..count) (0 if none) or
 * -errno. Datagrams longer than SRN_RX_BUFSZ are dropped and their number is
 * stored in *truncated (may be NULL). pkt[i].data stays valid until the next
 * call on the same batch (with a fault injector: until the next call on the
 * same socket). With a fault injector, RX faults are applied, delayed
 * packets whose time has come are returned even when the socket is empty,
 * and held TX packets whose time has come are sent. */
int srn_udp_recv_batch(struct srn_udp *u, struct srn_rx_batch *b, int *truncated);

/* ---- Fault injector and trace, for the progress loop ------------------
 * Times are CLOCK_MONOTONIC nanoseconds (srn_now_ns()).
 *
 * Send the held TX packets whose deadline has passed, and write out trace
 * records buffered for 100 ms. Returns the packets sent; 0 without hooks. */
int srn_udp_fault_flush(struct srn_udp *u, uint64_t now_ns);
/* What the ICRC covers of a packet that came from src to local (an
 * address of this socket): the IP addresses, the UDP ports, the family. */
void srn_udp_rx_meta(const struct srn_udp *u, const struct sockaddr *src,
		     const struct sockaddr_storage *local, struct srn_ip_meta *m);
/* SOFTRNIC_PCAP: record a RoCEv2 packet that did not cross the socket
 * (a same-host ring's, or one a same-host direct operation stands for,
 * transport/direct_trace.c) as the UDP link would have carried it,
 * between our address and peer: sent to it with tx_meta's ICRC facts
 * (from our device port), or from_peer received from it.  v[0..n-2]:
 * headers and payload; v[n-1] is overwritten with the pad (pad zero
 * bytes) and the ICRC, computed here for the record alone.  Needs a
 * trace (u->pcap). */
void srn_udp_trace_synth(struct srn_udp *u, const struct sockaddr *peer,
			 const struct srn_ip_meta *tx_meta, bool from_peer, struct iovec *v, int n,
			 uint32_t pad, uint8_t tos);
/* SOFTRNIC_PCAP: record a packet a same-host ring delivered (data, len,
 * its 4 ICRC bytes zero) as the UDP link would have carried it, its ICRC
 * computed for the record alone (link/egress.c does the same for ring
 * packets sent).  Nothing without a trace. */
void srn_udp_trace_ring_rx(struct srn_udp *u, const struct sockaddr *src, const uint8_t *data,
			   uint32_t len, uint8_t tos);

/* Earliest time at which srn_udp_fault_flush (TX) or srn_udp_recv_batch
 * (RX) has held work, or the trace has records to write out; 0 if none.
 * May be in the past: then call both at once. Lock-free, any thread. */
uint64_t srn_udp_fault_next_ns(const struct srn_udp *u);
/* The injector's counters, NULL when SOFTRNIC_FAULTS is unset. */
const struct srn_fault_stats *srn_udp_fault_stats(const struct srn_udp *u);

/* ---- Link-internal (fault.c) -------------------------------------------
 * Put one datagram on the wire now, past the fault injector, and trace it. */
int srn_udp_xmit(struct srn_udp *u, const struct sockaddr *dst, socklen_t dstlen,
				 const struct iovec *iov, int iovcnt);
/* Receive up to max datagrams into buffer slots first.. of b, describe them
 * in b->pkt[first..first+n) and trace them. Returns n or -errno; does not
 * touch b->count or pkt[0..first). */
int srn_udp_recv_into(struct srn_udp *u, struct srn_rx_batch *b, int first, int max,
					  int *truncated);

/* RoCEv2 GID of an address: IPv4 -> ::ffff:a.b.c.d, IPv6 as is; any other
 * family gives the all-zero GID. */
void srn_sockaddr_to_gid(const struct sockaddr *sa, uint8_t gid[16]);
/* Address to send to for a GID: IPv4-mapped GIDs become AF_INET, others
 * AF_INET6. family_hint (the local socket's family, or AF_UNSPEC) must agree:
 * -EAFNOSUPPORT if it does not, -EINVAL for the all-zero GID. */
int srn_gid_to_sockaddr(const uint8_t gid[16], uint16_t port, int family_hint,
						struct sockaddr_storage *out, socklen_t *len);

/* "127.0.0.2:4791", "[fd00::1]:4791", "[fe80::1%eth0]:4791"; returns buf. */
#define SRN_SOCKADDR_STRLEN 80
const char *srn_sockaddr_str(const struct sockaddr *sa, char *buf, size_t len);

#endif
