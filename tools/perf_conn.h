/*
 * perf_conn.h - out-of-band connection setup shared by the `softrnic`
 * subcommands that connect two processes (perf, and later pingpong):
 *
 *   - a TCP control channel (listen/accept/connect, every wait bounded)
 *     carrying framed messages: magic, type, length, then a payload that
 *     the caller encodes with the big-endian writer/reader below;
 *   - the address of one QP as its peer needs it (QPN, PSN, LID, GID) and
 *     its wire encoding;
 *   - bringing an RC, UC or UD QP from RESET to RTS towards such a peer,
 *     and the address handle a UD QP sends through.
 *
 * The reader never reads past what was received: a short or overlong
 * payload sets `bad`, and srn_conn_rd_done() accepts a message only when it
 * was consumed exactly, so each message is validated once, at the door.
 * Functions return 0 or -errno; the QP helper also names the failed step.
 */
#ifndef SRN_TOOLS_PERF_CONN_H
#define SRN_TOOLS_PERF_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#define SRN_CONN_DEFAULT_PORT "18515" /* perftest's default, so habits carry over */
#define SRN_CONN_MAX_PAYLOAD 65535u   /* the frame's 16-bit length field */

/* ---- big-endian payload writer and bounds-checked reader ---- */

struct srn_conn_wr {
	uint8_t *buf;
	size_t cap, len;
	bool overflow; /* a put did not fit; srn_conn_send refuses the message */
};

struct srn_conn_rd {
	const uint8_t *buf;
	size_t len, off;
	bool bad; /* a get ran past the end */
};

void srn_conn_wr_init(struct srn_conn_wr *w, void *buf, size_t cap);
void srn_conn_put_u8(struct srn_conn_wr *w, uint8_t v);
void srn_conn_put_u16(struct srn_conn_wr *w, uint16_t v);
void srn_conn_put_u32(struct srn_conn_wr *w, uint32_t v);
void srn_conn_put_u64(struct srn_conn_wr *w, uint64_t v);
void srn_conn_put_bytes(struct srn_conn_wr *w, const void *p, size_t n);
/* A string as u16 length + bytes (no NUL), truncated to `max` bytes. */
void srn_conn_put_str(struct srn_conn_wr *w, const char *s, size_t max);

uint8_t srn_conn_get_u8(struct srn_conn_rd *r);
uint16_t srn_conn_get_u16(struct srn_conn_rd *r);
uint32_t srn_conn_get_u32(struct srn_conn_rd *r);
uint64_t srn_conn_get_u64(struct srn_conn_rd *r);
void srn_conn_get_bytes(struct srn_conn_rd *r, void *p, size_t n);
/* Reads a string written by srn_conn_put_str into out[cap], NUL-terminated;
 * longer strings are truncated, control characters become '?'. */
void srn_conn_get_str(struct srn_conn_rd *r, char *out, size_t cap);
/* True when the payload was consumed exactly and no get overran. */
bool srn_conn_rd_done(const struct srn_conn_rd *r);

/* ---- TCP control channel ---- */

/* Listen on host:port (host NULL = every address, dual-stack when IPv6 is
 * available; port "0" = an ephemeral port). */
int srn_conn_listen(const char *host, const char *port, int *lfd);
/* The local port a socket is bound to, or -errno. */
int srn_conn_bound_port(int fd);
/* Accept one peer within timeout_ms; returns the socket or -ETIMEDOUT. */
int srn_conn_accept(int lfd, int timeout_ms);
/* Connect to host:port, retrying while nothing listens yet, for up to
 * timeout_ms; returns the socket or -errno. */
int srn_conn_connect(const char *host, const char *port, int timeout_ms);
/* Send one framed message; -EMSGSIZE when the writer overflowed. */
int srn_conn_send(int fd, uint16_t type, const struct srn_conn_wr *payload);
/* Receive one framed message within timeout_ms into buf[cap]; sets *type
 * and a reader over the payload. -ECONNRESET when the peer closed,
 * -EPROTO for a bad magic or a payload larger than cap, -ETIMEDOUT. */
int srn_conn_recv(int fd, uint16_t *type, struct srn_conn_rd *r, void *buf,
		  size_t cap, int timeout_ms);
/* 1 when bytes (or EOF) wait on fd, 0 when not, -errno on error. */
int srn_conn_readable(int fd);
/* The peer's address as text ("127.0.0.1", "::1"), for messages. */
const char *srn_conn_peer_name(int fd, char *buf, size_t len);

/* ---- QP addresses and bring-up ---- */

struct srn_conn_qp {
	uint32_t qpn;
	uint32_t psn; /* 24 bits */
	uint16_t lid;
	union ibv_gid gid;
};

#define SRN_CONN_QP_WIRE_LEN (4 + 4 + 2 + 16)
void srn_conn_put_qp(struct srn_conn_wr *w, const struct srn_conn_qp *qp);
/* Reads and validates one QP address (24-bit QPN and PSN). */
void srn_conn_get_qp(struct srn_conn_rd *r, struct srn_conn_qp *qp);

/* A random 24-bit starting PSN, different in every process. */
uint32_t srn_conn_random_psn(void);
/* Fills `out` with this QP's address on port/gid_index, starting at psn. */
int srn_conn_local_qp(struct ibv_qp *qp, uint8_t port, int gid_index,
		      uint32_t psn, struct srn_conn_qp *out);

/* The Q_Key of UD QPs: perftest's, fixed, so neither side has to tell the
 * other (a UD receiver drops datagrams whose Q_Key differs, IBTA 10.2.4). */
#define SRN_CONN_UD_QKEY 0x11111111u

struct srn_conn_qp_attr {
	uint8_t port;
	int gid_index;
	enum ibv_mtu mtu;
	uint8_t max_rd_atomic;  /* RC: reads/atomics in flight, both ways */
	unsigned access;        /* remote access flags granted to the peer */
};

/* RESET -> INIT -> RTR -> RTS towards `remote` for RC and UC QPs; a UD QP
 * gets port, P_Key index 0 and SRN_CONN_UD_QKEY instead (remote unused: its
 * peers are named per send, see srn_conn_ud_ah).  On failure *step names
 * the transition that failed ("INIT", "RTR", "RTS"). */
int srn_conn_qp_up(struct ibv_qp *qp, const struct srn_conn_qp_attr *a,
		   const struct srn_conn_qp *local,
		   const struct srn_conn_qp *remote, const char **step);
/* An address handle towards `remote` for UD sends, from its GID (RoCE
 * routes by the GRH); NULL with errno set on failure. */
struct ibv_ah *srn_conn_ud_ah(struct ibv_pd *pd, const struct srn_conn_qp_attr *a,
			      const struct srn_conn_qp *remote);

/* A GID as text: dotted IPv4 for IPv4-mapped GIDs, IPv6 otherwise. */
const char *srn_conn_gid_str(const union ibv_gid *gid, char *buf, size_t len);

#endif /* SRN_TOOLS_PERF_CONN_H */
