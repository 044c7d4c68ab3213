/*
 * proto.h - the block store's messages, shared by the RDMA and TCP twins.
 *
 * Every message is 64 bytes.  Both ends run the same binary on hosts of
 * the same byte order (this is an example, not a wire standard), so the
 * fields are in host order; the sizes and offsets are pinned below.
 *
 * A cache slot is BS_SLOT_STRIDE bytes: the 4 KiB block followed by its
 * tag.  A client that RDMA-Reads a slot gets both, and the tag tells it
 * whether the slot still holds the block it wanted (see bs_tag_check).
 */
#ifndef BS_PROTO_H
#define BS_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crc32c.h"

#define BS_BLOCK 4096u
#define BS_TAG_LEN 64u
#define BS_SLOT_STRIDE (BS_BLOCK + BS_TAG_LEN)
#define BS_MAGIC 0x42534b31u /* "BSK1" */
#define BS_MAX_QP_DEPTH 32u  /* landing slots per connection: fits the REP private data */
#define BS_NO_SLOT 0xffffffffu

enum bs_op {
	BS_OP_WRITE = 1, /* block already in landing slot (RDMA) or follows (TCP) */
	BS_OP_READ = 2,  /* server puts slot+tag into the client's buffer */
	BS_OP_FLUSH = 3, /* answered once every block acknowledged before is on disk */
	BS_OP_STATS = 4, /* the server's CPU time and I/O count */
	BS_OP_REPLY = 5,
	BS_OP_WINDOW = 6, /* as req_op of a reply nobody asked for: this connection's
			   * memory window is bound, the hello's rkey works from now on */
};

/* The tag after each cached block: which LBA this slot holds, which
 * version, the block's CRC32C, and a CRC of the tag itself so a torn read
 * of the tag (an RDMA Read racing a server update) is seen. */
struct bs_tag {
	uint64_t lba;
	uint64_t seq;
	uint32_t csum;  /* CRC32C of the 4 KiB block */
	uint32_t slot;  /* where it lives: a reader learns the slot for next time */
	uint32_t magic; /* BS_MAGIC while valid; 0 once the slot is recycled */
	uint32_t tag_csum;
	uint8_t pad[32];
};
_Static_assert(sizeof(struct bs_tag) == BS_TAG_LEN, "tag fills its 64 bytes");

struct bs_req {
	uint32_t magic;
	uint8_t op;
	uint8_t pad0[3];
	uint32_t id;   /* the client's tag for this request, echoed */
	uint32_t slot; /* WRITE over RDMA: the landing slot the block is in */
	uint64_t lba;
	uint32_t len;  /* BS_BLOCK */
	uint32_t csum; /* WRITE: CRC32C of the block */
	uint64_t addr; /* READ over RDMA: where the server writes slot+tag */
	uint32_t rkey;
	uint8_t pad1[20];
};
_Static_assert(sizeof(struct bs_req) == 64, "request is 64 bytes");
_Static_assert(offsetof(struct bs_req, addr) == 32, "addr offset");

struct bs_rep {
	uint32_t magic;
	uint8_t op;     /* BS_OP_REPLY */
	uint8_t req_op; /* what it answers */
	int16_t status; /* 0 or -errno */
	uint32_t id;
	uint32_t new_slot; /* WRITE over RDMA: the landing slot that replaces the one used */
	uint32_t slot;     /* WRITE: the cache slot now holding the block */
	uint32_t pad0;
	uint64_t seq;
	uint64_t v[4]; /* STATS: process CPU us, I/O thread CPU us, I/Os, remaps */
};
_Static_assert(sizeof(struct bs_rep) == 64, "reply is 64 bytes");

/* What the server tells a new connection: over RDMA in the REP's private
 * data (196 bytes at most), over TCP as the first bytes of the stream. */
struct bs_hello {
	uint32_t magic;
	uint32_t epoch; /* bumped by each cache re-registration */
	uint64_t addr;  /* cache base (RDMA) */
	uint64_t nblocks;
	uint32_t rkey;
	uint32_t nslots; /* cache slots */
	uint16_t nlanding;
	uint16_t flags; /* BS_HELLO_WINDOW */
	uint32_t landing[BS_MAX_QP_DEPTH];
};
_Static_assert(sizeof(struct bs_hello) <= 196, "fits the CM REP private data");

/* The rkey is a type-2 memory window of this connection alone (server
 * --mw), bound once the connection is established: wait for the
 * BS_OP_WINDOW message before using it. */
#define BS_HELLO_WINDOW 1u

/* What a client asks for in its connect private data. */
struct bs_conn_req {
	uint32_t magic;
	uint32_t depth; /* requests this connection keeps in flight */
};

/* The tag's own CRC covers the fields before it. */
#define BS_TAG_CRC_LEN offsetof(struct bs_tag, tag_csum)

static inline void bs_tag_set(struct bs_tag *t, uint64_t lba, uint64_t seq, uint32_t csum,
			      uint32_t slot)
{
	*t = (struct bs_tag){ .lba = lba, .seq = seq, .csum = csum, .slot = slot,
			      .magic = BS_MAGIC };
	t->tag_csum = bs_crc32c(0, t, BS_TAG_CRC_LEN);
}

/* Does SLOT (block + tag, as read from the cache) hold a whole, current
 * copy of LBA?  A recycled slot has magic 0; a read that raced an update
 * fails one of the two CRCs. */
static inline bool bs_tag_ok(const void *slot, uint64_t lba)
{
	const struct bs_tag *t = (const void *)((const uint8_t *)slot + BS_BLOCK);
	return t->magic == BS_MAGIC && t->lba == lba &&
	       t->tag_csum == bs_crc32c(0, t, BS_TAG_CRC_LEN) &&
	       t->csum == bs_crc32c(0, slot, BS_BLOCK);
}

#endif
