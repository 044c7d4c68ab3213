/* Packet trace: every datagram a device puts on the wire or takes off it,
 * written as a classic pcap file (LINKTYPE_ETHERNET, microsecond
 * timestamps) that Wireshark/tshark decode as RoCEv2.
 *
 * SOFTRNIC_PCAP=FILE turns it on ("%p" in FILE becomes the pid, "%%" a
 * '%'); the file is created 0600, and a file already there that is not a
 * private regular file of ours is refused (srn_pcap_open).
 * SOFTRNIC_PCAP_MAX_MB bounds the file (default 1024 MiB; records past it
 * are not written). The socket only sees UDP payloads, so each
 * record gets synthesised Ethernet, IP and UDP headers: MACs 02:00 + the
 * IPv4 address (the last 4 bytes of an IPv6 one), IPv4 with TOS 0, ID 0,
 * DF, TTL 64 and a correct header checksum, IPv6 with hop limit 64 and
 * flow label 0, UDP checksum 0. Those are the values the ICRC of a
 * softrnic packet was computed over, so an independent ICRC check of the
 * captured frame passes. A received IPv4 packet whose ICRC fails with ID 0
 * (an rxe or hardware peer, whose kernel picks varying IDs) is written
 * with the ID that makes its ICRC match, if exactly one does.
 *
 * Invariants: one writer per file per process (devices naming the same
 * file share it, reference-counted); records are appended whole under the
 * writer's mutex; buffered records reach the file within 100 ms of being
 * taken as long as the progress loop or the data path calls in (see
 * srn_pcap_next_ns), and at close.
 */
#ifndef SRN_LINK_PCAP_H
#define SRN_LINK_PCAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#define SRN_PCAP_ENV "SOFTRNIC_PCAP"
#define SRN_PCAP_MAX_ENV "SOFTRNIC_PCAP_MAX_MB"
#define SRN_PCAP_DEFAULT_MAX_MB 1024
#define SRN_PCAP_FLUSH_NS 100000000ull     /* 100 ms */
#define SRN_PCAP_SNAPLEN 262144            /* > any UDP datagram + headers */
#define SRN_PCAP_HDRS_MAX (14 + 40 + 8)    /* Ethernet + IPv6 + UDP */

struct srn_pcap;

/* Open the trace named by SOFTRNIC_PCAP. *out = NULL and 0 when the
 * variable is unset or empty; -errno (or -EINVAL for a bad
 * SOFTRNIC_PCAP_MAX_MB) with one line in err otherwise. */
int srn_pcap_open_env(struct srn_pcap **out, char *err, size_t errlen);
/* Create (exclusively, mode 0600) or share the file of template path;
 * max_bytes bounds it. An existing file is truncated and reused only if
 * it is a regular file of ours, mode 0600 or stricter, with one link;
 * anything else (a symlink, a FIFO, another user's or a group/other-
 * accessible file) is refused with -EEXIST and a line in err saying why. */
int srn_pcap_open(const char *path, uint64_t max_bytes, struct srn_pcap **out,
				  char *err, size_t errlen);
/* Drop one reference; the last one writes what is buffered and closes. */
void srn_pcap_close(struct srn_pcap *p);

/* Append one datagram from src to dst. rx: it came off the socket (enables
 * the foreign IPv4 ID recovery). now_ns: CLOCK_MONOTONIC, for the flush
 * deadline. tos: the IPv4 TOS / IPv6 traffic class it travelled with
 * (DSCP and ECN, link/udp_ecn.h). */
void srn_pcap_record(struct srn_pcap *p, const struct sockaddr *src, const struct sockaddr *dst,
					 const struct iovec *iov, int iovcnt, bool rx, uint64_t now_ns,
					 uint8_t tos);
/* Write buffered records out if the oldest is SRN_PCAP_FLUSH_NS old (or
 * always, with now_ns 0). Returns the bytes written or -errno. */
int srn_pcap_flush(struct srn_pcap *p, uint64_t now_ns);
/* When srn_pcap_flush next has work: 0 if nothing is buffered. Lock-free. */
uint64_t srn_pcap_next_ns(const struct srn_pcap *p);
/* Records not written because of the size bound or a write error. */
uint64_t srn_pcap_lost(const struct srn_pcap *p);
const char *srn_pcap_path(const struct srn_pcap *p);

/* Helpers, exposed for tests. */
/* Expand %p and %% in tmpl; -ENAMETOOLONG if out is too small. */
int srn_pcap_expand_path(const char *tmpl, pid_t pid, char *out, size_t outlen);
/* Ethernet + IP + UDP headers for a datagram of dgram_len bytes; returns
 * their length (42 for IPv4, 62 for IPv6) or 0 for another family. */
size_t srn_pcap_headers(uint8_t *out, const struct sockaddr *src, const struct sockaddr *dst,
						size_t dgram_len, uint16_t ipv4_id);

#endif
