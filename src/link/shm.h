/*
 * shm.h - the same-host link: RoCEv2 packets through shared-memory rings.
 *
 * Two softrnic devices on one host and in one network namespace need not
 * hand their packets to the kernel: each device that can receive this way
 * publishes an inbox, a sealed memfd found through a locator file named
 * after its network namespace, address and UDP port (the same identity
 * its socket binds, so exactly one live device owns a name; see
 * shm_file.h for the files and who may open them).  A sender that finds a
 * live inbox of its own user for a destination claims one of its slots
 * and from then on copies each packet into that slot's ring; the
 * receiver's poll reads the rings.  Each ring has one producer and one
 * consumer, both under their nic's lock, so a packet costs a copy and two
 * cache lines, and no system call.
 *
 * What travels is the packet exactly as the UDP link would carry it (BTH
 * and all, the 4 ICRC bytes present but zero: shared memory does not
 * corrupt, so neither side computes a CRC).  The transport above does not
 * know which link a packet took.
 *
 * Flow control: a packet that does not fit in the ring is refused at once
 * (-EAGAIN) and its sender defers, as on a full socket buffer; nothing is
 * dropped.  Wake-up: the receiver's progress thread raises `sleeping`
 * before it blocks in epoll; a sender that sees it after publishing sends
 * an empty UDP datagram (a doorbell) to the receiver's socket.  While
 * either side polls, no system call is made at all.
 *
 * A receiver that closes marks its inbox closed and removes its locator;
 * senders then go back to UDP.  One that crashed leaves a ring nobody
 * drains: its senders notice (they watch the owner's pidfd) and look for
 * a successor's inbox, else take UDP, where nobody answers.
 */
#ifndef SRN_LINK_SHM_H
#define SRN_LINK_SHM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define SRN_SHM_SLOTS 16                    /* senders per inbox */
#define SRN_SHM_RING_BYTES (4u << 20)       /* per sender: about 1000 4 KiB packets */
/* SOFTRNIC_SHM_RING_KB sets a device's ring size (its senders follow),
 * between these bounds, in whole pages. */
#define SRN_SHM_RING_MIN (128u << 10)
#define SRN_SHM_RING_MAX (64u << 20)
#define SRN_SHM_MAX_PKT 65536u              /* longest record accepted */
#define SRN_SHM_PEERS 16                    /* destinations a device remembers */
#define SRN_SHM_RETRY_NS 1000000000ull      /* look again for an inbox after 1 s */
#define SRN_SHM_OWNER_CHECK_NS 10000000ull  /* a full ring's owner: alive? every 10 ms */
#define SRN_SHM_OWNER_POLL_NS 100000000ull  /* any ring's owner: every 100 ms */
/* A long burst is published every this many bytes, so the receiver copies
 * the first packets out while the sender still copies the last ones in. */
#define SRN_SHM_PUBLISH_BYTES (32u << 10)

struct srn_shm_seg;

/* One destination as a sender sees it: a claimed slot in its inbox, or
 * (seg NULL) the knowledge that it has none, until retry_ns. */
struct srn_shm_peer {
	uint32_t gen;                  /* turns whenever the ring or the destination
					* changes: a pointer kept with its gen routes
					* to the same receiver while equal */
	struct sockaddr_storage addr;
	socklen_t addrlen;
	struct srn_shm_seg *seg;
	unsigned member;               /* which process behind addr (link/udp_group.h) */
	uint32_t slot;
	uint64_t ring;                 /* its ring size, from its inbox */
	uint64_t prod;                 /* next byte to write (published or not) */
	uint64_t published;            /* what the receiver may read */
	uint64_t cons_seen;            /* the consumer's index when last read */
	bool dirty;                    /* records written and not yet published */
	bool fresh;                    /* just attached: earlier packets may wait for UDP */
	uint64_t retry_ns;
	uint64_t full_check_ns;        /* when a full ring last had its owner checked */
	uint64_t owner_check_ns;       /* when the owner was last looked at */
	int32_t owner_pid;             /* the receiver, from its locator */
	int32_t direct_fd;             /* its direct-placement table's descriptor, -1: none */
	uint64_t cookie;               /* its inbox's cookie (the table carries it too) */
	int owner_fd;                  /* its pidfd (readable once it exited), -1: none */
	int bell;                      /* our copy of its bell eventfd, -1: ring by datagram */
	int32_t bell_tried;            /* the header's bell word we last tried to take (0: none) */
};

struct srn_shm {
	bool enabled;                  /* SOFTRNIC_SHM not 0, and no link hooks */
	struct srn_shm_seg *in;        /* this device's inbox (NULL: none) */
	int in_fd;                     /* its memfd, kept open: peers open /proc/PID/fd/N */
	int direct_fd;                 /* the direct-placement table the locator names, -1: none */
	uint64_t in_ring;              /* its ring size */
	uint64_t in_cookie;            /* in its header and its locator */
	char in_name[256];             /* the locator's path (SRN_SHM_NAME_MAX) */
	char note[200];                /* for the device log: a name taken, no inbox */
	uint64_t cons[SRN_SHM_SLOTS];  /* how far each slot was read */
	uint32_t next_slot;            /* where the next poll starts */
	uint64_t netns;                /* inode of this process's network namespace */
	struct sockaddr_storage local; /* this device's address, the source senders name */
	socklen_t local_len;
	unsigned member;               /* this device's member number of a shared address, else 0 */
	struct srn_shm_peer peer[SRN_SHM_PEERS];
	int npeers;
	int ndirty;                    /* peers with unpublished records */
	int pid;                       /* the process that mapped all this */
};

/* Create the inbox of a device bound to `local` (replacing a stale one of
 * a dead owner), with rings of SOFTRNIC_SHM_RING_KB (default 4096).  With
 * enabled false, or on any failure, the device simply has no inbox and
 * receives over UDP; returns 0 or -errno.  direct_fd (-1: none) is the
 * device's direct-placement table, which the locator names for peers.  s->note then says what the
 * device log should (a name held by another user, or why no inbox). */
int srn_shm_open(struct srn_shm *s, const struct sockaddr *local, socklen_t len, unsigned member,
		 bool enabled, int direct_fd);
/* Mark the inbox closed, unlink it, release claimed slots, unmap all. */
void srn_shm_close(struct srn_shm *s);
/* The process exits with the device open: mark the inbox closed and
 * unlink it (mappings go with the process). */
void srn_shm_exit(struct srn_shm *s);

/* The shared-memory route to dst's process `member` (the member number
 * of the destination QPN, link/udp_group.h), or NULL: take UDP. */
struct srn_shm_peer *srn_shm_route(struct srn_shm *s, const struct sockaddr *dst,
				   socklen_t dstlen, unsigned member);
/* p's receiver is known dead (the direct-placement table's liveness
 * word, link/direct.h): forget its ring now rather than at the next
 * owner check, so the transport's retries run on UDP, where nobody
 * answers, and its ACK timeouts are not taken for a slow peer. */
void srn_shm_peer_gone(struct srn_shm *s, struct srn_shm_peer *p);
/* Do packets this device published to the ring of dst's process `member`
 * still wait there, unread by a live owner?  The ring loses nothing, so
 * an ACK timeout while they wait means the receiver has not run yet, not
 * that a packet was lost. */
bool srn_shm_unread(struct srn_shm *s, const struct sockaddr *dst, socklen_t dstlen,
		    unsigned member);
/* Does dst already take a ring?  No side effects (for diagnostics). */
bool srn_shm_has_ring(const struct srn_shm *s, const struct sockaddr *dst, socklen_t dstlen);
/* Copy one packet of `len` bytes gathered from iov into the peer's ring,
 * unpublished, with the TOS byte it would carry on the wire.  0, -EAGAIN when the ring has no room for it now, or -EPIPE
 * when it stays full because its owner died: the peer is forgotten (UDP
 * from now on, which tells the transport the truth: nobody answers). */
int srn_shm_put(struct srn_shm *s, struct srn_shm_peer *p, const struct iovec *iov, int iovcnt,
		uint32_t len, uint8_t tos);
/* Publish every ring written since the last call.  Calls ring(ctx, addr,
 * member, bell) for each receiver that sleeps and must get a doorbell:
 * bell is our copy of its eventfd (link/shm_bell.h), -1 when it must be
 * a datagram. */
void srn_shm_publish(struct srn_shm *s,
		     void (*ring)(void *ctx, const struct sockaddr *dst, socklen_t len,
				  unsigned member, int bell),
		     void *ctx);

/* Hand up to max waiting packets to deliver(ctx, data, len, src, tos),
 * then release their ring space.  Returns how many.  tos: the TOS byte
 * the sender put in the record (its ECN bits, link/udp_ecn.h). */
typedef void (*srn_shm_deliver_fn)(void *ctx, const uint8_t *data, uint32_t len,
				   const struct sockaddr *src, uint8_t tos);
int srn_shm_poll(struct srn_shm *s, int max, srn_shm_deliver_fn deliver, void *ctx);
/* The reader of one ring of rb bytes (a multiple of 64) that a peer
 * writes: deliver up to max records between *cons (the reader's own
 * index) and prod (the producer's, read once by the caller), each one
 * checked against the ring before any of it is used, and advance *cons.
 * A record that is not valid drops everything up to prod.  Returns the
 * packets delivered.  Every data pointer handed to deliver lies, with its
 * length, inside the ring (tests/fuzz_shm_ring.c). */
int srn_shm_ring_read(const uint8_t *ring, uint64_t rb, uint64_t *cons, uint64_t prod, int max,
		      srn_shm_deliver_fn deliver, void *ctx, const struct sockaddr *src);
/* Before the progress thread blocks: announce it, then look once more.
 * False if packets are waiting (announcement withdrawn: poll instead). */
bool srn_shm_sleep_begin(struct srn_shm *s);
void srn_shm_sleep_end(struct srn_shm *s);
/* Name fd (an eventfd the sleeping receiver also waits on) as this
 * inbox's bell: same-host senders write it instead of sending an empty
 * datagram (link/shm_bell.h).  -1: none. */
void srn_shm_set_bell(struct srn_shm *s, int fd);

#endif
