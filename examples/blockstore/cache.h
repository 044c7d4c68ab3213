/*
 * cache.h - the server's block cache: BS_SLOT_STRIDE-byte slots in one
 * region (registered with the NIC once), the LBA index, slot allocation,
 * and the write-back thread that drains dirty slots into the store.
 *
 * Threads: every call below is made by the server's one I/O thread; the
 * write-back thread is internal.  The lock inside guards slot states.
 */
#ifndef BS_CACHE_H
#define BS_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

struct bs_cache;
struct bs_tag;

int bs_cache_create(struct bs_store *st, uint32_t nslots, struct bs_cache **out);
/* Flush every dirty slot, stop the write-back thread, free the memory. */
int bs_cache_destroy(struct bs_cache *c);

uint8_t *bs_cache_mem(const struct bs_cache *c);
size_t bs_cache_len(const struct bs_cache *c);
uint32_t bs_cache_nslots(const struct bs_cache *c);
/* nslots tags, outside the region and never moved: entry S is slot S's
 * tag as it was when the slot got its current block.  It does not change
 * while S is pinned (the tag in the region does: a superseded slot's dies
 * at once), so a send from a pinned slot takes its block from the region
 * and its tag from here.  Register it once, for local access. */
struct bs_tag *bs_cache_sent_tags(const struct bs_cache *c);

/* A free slot for a client to write into (FREE -> LANDING).  Evicts a
 * clean slot or waits (bounded) for write-back when none is free. */
int bs_cache_alloc(struct bs_cache *c, uint32_t *slot);
/* A landing slot whose connection is gone (LANDING -> FREE). */
void bs_cache_release(struct bs_cache *c, uint32_t slot);
/* The landing SLOT now holds LBA's new contents with checksum CSUM:
 * verify it, make it the cached copy (LANDING -> DIRTY), retire the
 * previous copy.  -EBADMSG when the block does not match CSUM (the slot
 * stays LANDING).  *seq: the version given to the block. */
int bs_cache_commit(struct bs_cache *c, uint32_t slot, uint64_t lba, uint32_t csum,
		    uint64_t *seq);
/* The slot holding LBA, loading it from the store on a miss; pinned (not
 * recycled, its block and sent tag unchanged) until bs_cache_unpin.  *hit
 * says whether it was cached. */
int bs_cache_get(struct bs_cache *c, uint64_t lba, uint32_t *slot, int *hit);
void bs_cache_unpin(struct bs_cache *c, uint32_t slot);
/* Wait until no dirty slot is left (bounded). */
int bs_cache_flush(struct bs_cache *c);

/* Moving the region (re-registration): begin pauses write-back and
 * returns a copy of the region at a new address; end switches to it and
 * unmaps the old one.  The caller deregisters the old region in between,
 * after it has made sure no peer can still reach it. */
uint8_t *bs_cache_move_begin(struct bs_cache *c);
void bs_cache_move_end(struct bs_cache *c, uint8_t *mem);

#endif
