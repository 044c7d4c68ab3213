/* The fault injector: drops, duplicates, reorders, delays and corrupts
 * RoCEv2 datagrams at the UDP link, so people can watch the transport
 * recover (retransmission, NAK-sequence, ICRC drops) on purpose.
 *
 * Configured once per socket at srn_udp_open from SOFTRNIC_FAULTS:
 *
 *     seed=N                  PRNG seed (default 1)
 *     drop=P dup=P reorder=P delay=P corrupt=P
 *                             probability in percent (0..100, e.g. 5 or 0.5)
 *     delay_us=U              hold time of a delayed packet (default 1000)
 *     opcode=0x0a|0x04        only packets with one of these BTH opcodes
 *     qp=0x12345|0x11         only packets to one of these destination QPs
 *
 * comma-separated. Every key but seed takes a direction prefix "tx." or
 * "rx."; without one it applies to both directions.
 *
 * What each fault does to an eligible datagram (independent rolls, in this
 * order): drop (gone; a dropped TX packet still reports success), corrupt
 * (one random bit after the 12-byte BTH flipped, so the ICRC fails; TX
 * corrupts a private copy, never the caller's memory), delay (held until
 * now + delay_us), reorder (held until the next datagram of that direction
 * has gone through, then delivered right after it; if none comes within
 * delay_us it is delivered on its deadline, not reordered), dup (delivered
 * twice).
 *
 * Invariants: the link layer reads only the BTH opcode (byte 0) and the
 * destination QP (bytes 5-7). Decisions come from one xoshiro256** stream
 * per direction seeded from seed, drawn a fixed number of times per
 * eligible datagram, so a given seed and packet sequence always give the
 * same decisions. At most SRN_FAULT_MAX_HELD packets are held per
 * direction; past that a delay or reorder is not applied. Held packets are
 * private copies, freed at close. Everything is under the injector's own
 * mutex, so any thread may call in.
 */
#ifndef SRN_LINK_FAULT_H
#define SRN_LINK_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

struct srn_udp;
struct srn_rx_batch;

#define SRN_FAULT_ENV "SOFTRNIC_FAULTS"
#define SRN_FAULT_MAX_HELD 256          /* per direction: delayed + reorder-held */
#define SRN_FAULT_MAX_QPS 16            /* qp=a|b|... entries per direction */
#define SRN_FAULT_DEFAULT_DELAY_US 1000
#define SRN_FAULT_MAX_DELAY_US 10000000u /* 10 s: longer is a typo, not a test */

enum srn_fault_dir { SRN_FAULT_TX, SRN_FAULT_RX, SRN_FAULT_NDIRS };

/* Also the order in which the rolls are drawn. */
enum srn_fault_kind {
	SRN_FAULT_DROP,
	SRN_FAULT_CORRUPT,
	SRN_FAULT_DELAY,
	SRN_FAULT_REORDER,
	SRN_FAULT_DUP,
	SRN_FAULT_NKINDS
};

struct srn_fault_stats {
	uint64_t tx_dropped, tx_duplicated, tx_reordered, tx_delayed, tx_corrupted;
	uint64_t rx_dropped, rx_duplicated, rx_reordered, rx_delayed, rx_corrupted;
};

/* Rolls are 53-bit uniform numbers; a fault fires when roll < threshold,
 * so 0 never fires and SRN_FAULT_ALWAYS (2^53, 100 %) always does. */
#define SRN_FAULT_ALWAYS (1ull << 53)

struct srn_fault_rule {
	uint64_t threshold[SRN_FAULT_NKINDS];
	uint32_t delay_us;
	bool by_opcode;                     /* restrict to opcodes[] */
	uint64_t opcodes[4];                /* 256-bit set */
	int nqps;                           /* 0: any destination QP */
	uint32_t qps[SRN_FAULT_MAX_QPS];
};

struct srn_fault_cfg {
	uint64_t seed;
	struct srn_fault_rule dir[SRN_FAULT_NDIRS];
};

/* Parse a SOFTRNIC_FAULTS value. Returns 0, or -EINVAL with one line in err
 * naming the offending item. Empty items are ignored. */
int srn_fault_parse(const char *spec, struct srn_fault_cfg *cfg, char *err, size_t errlen);

struct srn_fault;

/* 0 or -ENOMEM. */
int srn_fault_create(const struct srn_fault_cfg *cfg, struct srn_fault **out);
/* Frees every held packet; nothing is sent. NULL is a no-op. */
void srn_fault_destroy(struct srn_fault *f);
const struct srn_fault_stats *srn_fault_stats_of(const struct srn_fault *f);

/* One datagram's fate. bit: random bits that pick the corrupted bit. */
struct srn_fault_decision {
	bool fire[SRN_FAULT_NKINDS];
	uint64_t bit;
};

/* Draw the decision for a datagram of len bytes whose first hdrlen bytes
 * (at most the BTH) are in hdr. Returns false, with nothing drawn, when the
 * datagram does not pass the direction's opcode/QP filter. Exposed for
 * tests; the send and receive paths call it themselves. */
bool srn_fault_decide(struct srn_fault *f, enum srn_fault_dir dir, const uint8_t *hdr,
					  size_t hdrlen, struct srn_fault_decision *d);

/* The hooks udp.c calls when an injector exists. now_ns: CLOCK_MONOTONIC. */
int srn_fault_tx(struct srn_udp *u, const struct sockaddr *dst, socklen_t dstlen,
				 const struct iovec *iov, int iovcnt, uint64_t now_ns);
/* Send the held TX packets whose deadline has passed; returns how many.
 * udp.c also calls it from every receive, so held packets leave on time
 * whenever some thread drives progress. */
int srn_fault_tx_flush(struct srn_udp *u, uint64_t now_ns);
/* A whole srn_udp_recv_batch: due held packets first, then what the socket
 * has, with RX faults applied. Data of held packets stays valid until the
 * next receive call on this socket. */
int srn_fault_rx(struct srn_udp *u, struct srn_rx_batch *b, int *truncated, uint64_t now_ns);
/* Earliest deadline of a held packet (either direction), 0 if none. Safe
 * without the lock (an atomic updated whenever the held set changes). */
uint64_t srn_fault_next_ns(const struct srn_fault *f);

#endif
