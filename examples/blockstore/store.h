/*
 * store.h - the block device behind the cache: a file of 4 KiB blocks with
 * a checksum per block, written back through a redo journal.
 */
#ifndef BS_STORE_H
#define BS_STORE_H

#include <stdint.h>

#define BS_WB_MAX 256u /* blocks per journal batch (1 MiB) */

struct bs_store;

struct bs_wb_item {
	uint64_t lba;
	uint32_t csum;
	const void *data; /* BS_BLOCK bytes, stable until bs_store_writeback returns */
};

#define BS_DEFAULT_BLOCKS 8192u /* 32 MiB */

/* Open PATH (create it with NBLOCKS blocks, 0: the default, if it does not
 * exist; if it does, NBLOCKS 0 or its size) and replay a committed journal
 * batch, if any. */
int bs_store_open(const char *path, uint64_t nblocks, struct bs_store **out);
uint64_t bs_store_nblocks(const struct bs_store *st);
/* Read block LBA into DST; -EIO if it does not match its stored checksum. */
int bs_store_read(struct bs_store *st, uint64_t lba, void *dst, uint32_t *csum);
/* Journal N blocks, sync, write them in place, sync.  One thread only. */
int bs_store_writeback(struct bs_store *st, const struct bs_wb_item *it, unsigned n);
void bs_store_close(struct bs_store *st);

#endif
