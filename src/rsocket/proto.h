/*
 * proto.h - the rsockets wire protocol (SOCK_STREAM over RC), as rdma-core's
 * librdmacm speaks it, so a softrnic rsocket talks to rdma-core's on a
 * kernel RDMA stack.  docs/rsocket.md describes it in prose.
 *
 * Three things cross the wire:
 *   - the connect private data (REQ and REP): 40 bytes, big-endian, naming
 *     where the peer may write (its SGL slots, its iomap table, the first
 *     half of its receive buffer) and how many messages it may send;
 *   - RDMA Writes with immediate: the immediate (big-endian on the wire)
 *     says what the Write was: data of N bytes into the receive buffer, a
 *     credit update (optionally with a new buffer SGE), an iomap entry, or
 *     a control message (disconnect, shutdown of the write side);
 *   - the SGE and iomap records those Writes carry, which are in the
 *     *reader's* byte order: the writer swaps them when the connect data's
 *     NET flag says the peer is big-endian and we are not (or the reverse).
 * Pure functions: no state, no I/O (tests/test_rsocket_proto.c).
 */
#ifndef SRN_RSOCKET_PROTO_H
#define SRN_RSOCKET_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SRN_RS_VERSION 1
#define SRN_RS_CONN_FLAG_NET 0x01    /* the sender's host is big-endian */
#define SRN_RS_CONN_FLAG_IOMAP 0x02  /* the sender has an iomap table after its SGL slots */
#define SRN_RS_CONN_LEN 40
#define SRN_RS_SGL_SLOTS 2           /* buffer SGEs a receiver keeps granted at most */
#define SRN_RS_SGE_LEN 16            /* addr u64, key u32, length u32 */
#define SRN_RS_IOMAP_LEN 24          /* offset u64, then an SGE */
#define SRN_RS_MAX_SGL_SLOTS 16      /* more from a peer is a lie: refuse the connection */

/* Immediate data: bits 31..29 the operation, 28..0 its argument. */
enum srn_rs_op {
	SRN_RS_OP_DATA = 0,          /* argument: bytes written into the receive buffer */
	SRN_RS_OP_DATA_MORE = 1,     /* reserved by rdma-core, never sent */
	SRN_RS_OP_WRITE = 2,         /* riowrite: plain Write, no immediate; local bookkeeping only */
	SRN_RS_OP_DIRECT_MORE = 3,   /* reserved */
	SRN_RS_OP_SGL = 4,           /* argument: sequence number the sender may send up to */
	SRN_RS_OP_RSVD = 5,
	SRN_RS_OP_IOMAP_SGL = 6,     /* argument: iomap table index written */
	SRN_RS_OP_CTRL = 7,          /* argument: enum srn_rs_ctrl */
};

enum srn_rs_ctrl {
	SRN_RS_CTRL_DISCONNECT = 0,  /* the sender neither sends nor receives any more */
	SRN_RS_CTRL_KEEPALIVE = 1,
	SRN_RS_CTRL_SHUTDOWN = 2,    /* the sender's write side is closed (SHUT_WR) */
};

#define SRN_RS_ARG_MASK 0x1fffffffu

static inline uint32_t srn_rs_imm(enum srn_rs_op op, uint32_t arg)
{
	return ((uint32_t)op << 29) | (arg & SRN_RS_ARG_MASK);
}
static inline enum srn_rs_op srn_rs_imm_op(uint32_t imm) { return (enum srn_rs_op)(imm >> 29); }
static inline uint32_t srn_rs_imm_arg(uint32_t imm) { return imm & SRN_RS_ARG_MASK; }

/* Host-order views of the records. */
struct srn_rs_sge {
	uint64_t addr;
	uint32_t key;
	uint32_t length;
};
_Static_assert(sizeof(struct srn_rs_sge) == SRN_RS_SGE_LEN, "rs_sge is 16 bytes on the wire");

struct srn_rs_iomap {
	uint64_t offset;
	struct srn_rs_sge sge;
};
_Static_assert(sizeof(struct srn_rs_iomap) == SRN_RS_IOMAP_LEN, "rs_iomap is 24 bytes on the wire");

struct srn_rs_conn {
	uint8_t version;
	uint8_t flags;
	uint16_t credits;            /* receive queue depth: messages the peer may send */
	uint8_t iomap_scaled;        /* table size, 8-bit scaled (srn_rs_scale_*) */
	struct srn_rs_sge target_sgl;   /* length: number of SGL slots, not bytes */
	struct srn_rs_sge data_buf;     /* the first receive-buffer half granted */
};

/* Byte offsets of the 40-byte connect data (rdma-core's rs_conn_data). */
enum {
	SRN_RS_CONN_OFF_VERSION = 0,
	SRN_RS_CONN_OFF_FLAGS = 1,
	SRN_RS_CONN_OFF_CREDITS = 2,     /* be16 */
	SRN_RS_CONN_OFF_RSVD = 4,        /* 3 bytes, zero */
	SRN_RS_CONN_OFF_IOMAP = 7,
	SRN_RS_CONN_OFF_TSGL = 8,        /* addr be64, key be32, length be32 */
	SRN_RS_CONN_OFF_DATA = 24,
};
_Static_assert(SRN_RS_CONN_OFF_DATA + SRN_RS_SGE_LEN == SRN_RS_CONN_LEN, "conn data layout");

void srn_rs_conn_pack(const struct srn_rs_conn *c, uint8_t out[SRN_RS_CONN_LEN]);
/* 0, or -EPROTO when len is short, the version unknown or a field a lie. */
int srn_rs_conn_parse(const uint8_t *in, size_t len, struct srn_rs_conn *c);

/* The iomap table size travels in 8 bits: up to 128 exactly, above that
 * as (128 | value >> 8), so only multiples of 256 survive the trip. */
uint8_t srn_rs_scale_to_u8(unsigned value);
unsigned srn_rs_scale_from_u8(uint8_t scaled);

/* A record for the peer, in its byte order (swap: orders differ). */
void srn_rs_sge_for_peer(struct srn_rs_sge *s, bool swap);
void srn_rs_iomap_for_peer(struct srn_rs_iomap *m, bool swap);
bool srn_rs_host_is_be(void);

#endif
