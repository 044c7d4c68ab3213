/*
 * store.c - the backing file and its crash consistency.
 *
 * File layout (PATH):
 *   [superblock, 4 KiB][CRC32C per block, rounded up to 4 KiB][blocks]
 * Journal (PATH.journal): one batch at a time,
 *   [header, 4 KiB: seq, count, lba[], csum[], header CRC][count blocks]
 *
 * Write-back of a batch: write the batch to the journal, fdatasync it,
 * then write the blocks and their checksum entries in place, fdatasync
 * the file.  The next batch overwrites the journal only after that.
 *
 * Guarantee after a crash (process or machine) at any point: every block
 * in the file is a whole version the server once acknowledged, and its
 * checksum entry matches it.  A batch whose journal copy is complete (the
 * header CRC and every block's CRC check) is replayed at open; a torn
 * journal batch was never applied in place, so it is dropped.  Replaying
 * the last batch again is harmless: a newer version of any of its blocks
 * can only be in a later batch.  What is lost: blocks acknowledged but
 * not yet written back (a write-back cache, like a disk's volatile cache);
 * BS_OP_FLUSH waits for them.
 */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "crc32c.h"
#include "proto.h"

#define SB_MAGIC 0x42534456u /* "BSDV" */
#define JR_MAGIC 0x42534a52u /* "BSJR" */

struct superblock {
	uint32_t magic;
	uint32_t block_size;
	uint64_t nblocks;
	uint32_t crc; /* of the fields above */
};

struct jr_header {
	uint32_t magic;
	uint32_t count;
	uint64_t seq;
	uint64_t lba[BS_WB_MAX];
	uint32_t csum[BS_WB_MAX];
	uint32_t crc; /* of everything above */
};
_Static_assert(sizeof(struct jr_header) <= BS_BLOCK, "journal header fits a block");

struct bs_store {
	int fd, jfd;
	uint64_t nblocks;
	uint64_t seq;
	off_t table_off, data_off;
	uint32_t *csums; /* in-memory copy of the checksum table */
	void *jbuf;      /* the journal header block */
};

static int pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, buf, len, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		buf = (const char *)buf + n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

static int pread_all(int fd, void *buf, size_t len, off_t off)
{
	while (len) {
		ssize_t n = pread(fd, buf, len, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO; /* short file: treat as damage */
		buf = (char *)buf + n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

static void layout(struct bs_store *st)
{
	uint64_t table = (st->nblocks * 4 + BS_BLOCK - 1) / BS_BLOCK * BS_BLOCK;
	st->table_off = BS_BLOCK;
	st->data_off = (off_t)(BS_BLOCK + table);
}

static int format(struct bs_store *st)
{
	static const uint8_t zero[BS_BLOCK];
	uint32_t zcrc = bs_crc32c(0, zero, BS_BLOCK);
	for (uint64_t i = 0; i < st->nblocks; i++)
		st->csums[i] = zcrc;
	if (ftruncate(st->fd, st->data_off + (off_t)(st->nblocks * BS_BLOCK)))
		return -errno;
	int ret = pwrite_all(st->fd, st->csums, st->nblocks * 4, st->table_off);
	if (ret)
		return ret;
	struct superblock sb = { SB_MAGIC, BS_BLOCK, st->nblocks, 0 };
	sb.crc = bs_crc32c(0, &sb, offsetof(struct superblock, crc));
	/* The superblock last: a file without one is formatted again. */
	if (fdatasync(st->fd))
		return -errno;
	ret = pwrite_all(st->fd, &sb, sizeof(sb), 0);
	if (!ret && fdatasync(st->fd))
		ret = -errno;
	return ret;
}

static int apply(struct bs_store *st, const struct bs_wb_item *it, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		int ret = pwrite_all(st->fd, it[i].data, BS_BLOCK,
				     st->data_off + (off_t)(it[i].lba * BS_BLOCK));
		if (!ret)
			ret = pwrite_all(st->fd, &it[i].csum, 4, st->table_off + (off_t)(it[i].lba * 4));
		if (ret)
			return ret;
		st->csums[it[i].lba] = it[i].csum;
	}
	return fdatasync(st->fd) ? -errno : 0;
}

/* Replay the journal's batch if it is whole; drop it otherwise. */
static int replay(struct bs_store *st)
{
	struct jr_header *h = st->jbuf;
	if (pread_all(st->jfd, h, BS_BLOCK, 0))
		return 0; /* empty or short: nothing was committed */
	if (h->magic != JR_MAGIC || h->count > BS_WB_MAX ||
	    h->crc != bs_crc32c(0, h, offsetof(struct jr_header, crc)))
		return 0;
	st->seq = h->seq;
	uint8_t *data = malloc((size_t)h->count * BS_BLOCK);
	struct bs_wb_item *it = calloc(h->count ? h->count : 1, sizeof(*it));
	int ret = data && it ? 0 : -ENOMEM;
	for (unsigned i = 0; !ret && i < h->count; i++) {
		uint8_t *b = data + (size_t)i * BS_BLOCK;
		if (h->lba[i] >= st->nblocks ||
		    pread_all(st->jfd, b, BS_BLOCK, (off_t)(i + 1) * BS_BLOCK) ||
		    bs_crc32c(0, b, BS_BLOCK) != h->csum[i]) {
			fprintf(stderr, "blockstore: journal batch %llu torn, dropped\n",
				(unsigned long long)h->seq);
			free(data);
			free(it);
			return 0;
		}
		it[i] = (struct bs_wb_item){ h->lba[i], h->csum[i], b };
	}
	if (!ret) {
		ret = apply(st, it, h->count);
		if (!ret && h->count)
			fprintf(stderr, "blockstore: journal batch %llu replayed (%u blocks)\n",
				(unsigned long long)h->seq, h->count);
	}
	free(data);
	free(it);
	return ret;
}

int bs_store_open(const char *path, uint64_t nblocks, struct bs_store **out)
{
	struct bs_store *st = calloc(1, sizeof(*st));
	char jpath[4096];
	if (!st)
		return -ENOMEM;
	snprintf(jpath, sizeof(jpath), "%s.journal", path);
	int ret = 0;
	st->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	st->jfd = open(jpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	st->jbuf = aligned_alloc(BS_BLOCK, BS_BLOCK);
	if (st->fd < 0 || st->jfd < 0 || !st->jbuf) {
		ret = st->jbuf ? -errno : -ENOMEM;
		goto fail;
	}
	struct superblock sb;
	bool fresh = pread_all(st->fd, &sb, sizeof(sb), 0) || sb.magic != SB_MAGIC ||
		     sb.crc != bs_crc32c(0, &sb, offsetof(struct superblock, crc));
	if (fresh) {
		st->nblocks = nblocks ? nblocks : BS_DEFAULT_BLOCKS;
	} else {
		if (sb.block_size != BS_BLOCK || (nblocks && nblocks != sb.nblocks)) {
			fprintf(stderr, "blockstore: %s has %llu blocks of %u bytes\n", path,
				(unsigned long long)sb.nblocks, sb.block_size);
			ret = -EINVAL;
			goto fail;
		}
		st->nblocks = sb.nblocks;
	}
	layout(st);
	st->csums = calloc(st->nblocks, 4);
	if (!st->csums) {
		ret = -ENOMEM;
		goto fail;
	}
	if (fresh) {
		/* A journal left from another device must not be replayed here. */
		if (ftruncate(st->jfd, 0) || fsync(st->jfd)) {
			ret = -errno;
			goto fail;
		}
		ret = format(st);
	} else {
		ret = pread_all(st->fd, st->csums, st->nblocks * 4, st->table_off);
		if (!ret)
			ret = replay(st);
	}
	if (ret)
		goto fail;
	*out = st;
	return 0;
fail:
	bs_store_close(st);
	return ret;
}

uint64_t bs_store_nblocks(const struct bs_store *st)
{
	return st->nblocks;
}

int bs_store_read(struct bs_store *st, uint64_t lba, void *dst, uint32_t *csum)
{
	int ret = pread_all(st->fd, dst, BS_BLOCK, st->data_off + (off_t)(lba * BS_BLOCK));
	if (ret)
		return ret;
	uint32_t c = bs_crc32c(0, dst, BS_BLOCK);
	if (c != st->csums[lba])
		return -EIO; /* damaged on disk: never hand it out */
	*csum = c;
	return 0;
}

int bs_store_writeback(struct bs_store *st, const struct bs_wb_item *it, unsigned n)
{
	if (!n)
		return 0;
	if (n > BS_WB_MAX)
		return -EINVAL;
	struct jr_header *h = st->jbuf;
	memset(h, 0, BS_BLOCK);
	h->magic = JR_MAGIC;
	h->count = n;
	h->seq = ++st->seq;
	for (unsigned i = 0; i < n; i++) {
		h->lba[i] = it[i].lba;
		h->csum[i] = it[i].csum;
	}
	h->crc = bs_crc32c(0, h, offsetof(struct jr_header, crc));
	/* One pwritev of header + blocks (at most IOV_MAX = 1024 pieces). */
	struct iovec iov[BS_WB_MAX + 1];
	iov[0] = (struct iovec){ h, BS_BLOCK };
	for (unsigned i = 0; i < n; i++)
		iov[i + 1] = (struct iovec){ (void *)it[i].data, BS_BLOCK };
	size_t want = (size_t)(n + 1) * BS_BLOCK;
	ssize_t got = pwritev(st->jfd, iov, (int)n + 1, 0);
	if (got != (ssize_t)want)
		return got < 0 ? -errno : -EIO;
	if (fdatasync(st->jfd))
		return -errno;
	return apply(st, it, n);
}

void bs_store_close(struct bs_store *st)
{
	if (!st)
		return;
	if (st->fd >= 0)
		close(st->fd);
	if (st->jfd >= 0)
		close(st->jfd);
	free(st->csums);
	free(st->jbuf);
	free(st);
}
