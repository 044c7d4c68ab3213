/*
 * test_blockstore_cache.c - the block store's cache and store
 * (examples/blockstore) against a naive model: an array holding what
 * every LBA must contain.
 *
 *   1. random commits (some with a wrong CRC, refused), reads through the
 *      cache, flushes and two region moves over a cache much smaller than
 *      the device (eviction, write-back and reload all run); every read
 *      equals the model;
 *   2. destroy (final write-back), reopen the file: every block equals
 *      the model and passes its stored checksum;
 *   3. crash consistency: a block damaged in place after its batch was
 *      journaled is repaired by the replay at open; a torn journal batch
 *      is dropped and the blocks in place stay as they were;
 *   4. what a served read sends (block from the region + the sent tag)
 *      does not change while its slot is pinned, though newer writes of
 *      its LBA are committed and the cache churns around it; the
 *      region's tag of the superseded slot dies at once (RDMA Readers).
 *      (An RDMA Write from a pinned slot is read by the NIC until it
 *      completes, resends included: blockstore_race_udp's "Bad message".)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "crc32c.h"
#include "proto.h"
#include "store.h"

#define NBLOCKS 256
#define NSLOTS 80
#define OPS 8000

static uint8_t model[NBLOCKS][BS_BLOCK];
static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A failed check ends the test at once (tests/lib/check.h). */
#define SRN_CHECK_FATAL
#include "check.h"

static uint8_t *slot_mem(struct bs_cache *c, uint32_t s)
{
	return bs_cache_mem(c) + (size_t)s * BS_SLOT_STRIDE;
}

static void random_ops(struct bs_cache *c)
{
	for (int op = 0; op < OPS; op++) {
		uint64_t lba = rnd() % NBLOCKS;
		unsigned what = (unsigned)(rnd() % 100);
		if (what < 45) { /* a client's write: land, commit */
			uint32_t s;
			CHECK(!bs_cache_alloc(c, &s), "alloc");
			uint8_t *b = slot_mem(c, s);
			for (unsigned i = 0; i < BS_BLOCK; i += 8) {
				uint64_t v = rnd();
				memcpy(b + i, &v, 8);
			}
			uint32_t csum = bs_crc32c(0, b, BS_BLOCK);
			uint64_t seq;
			if (what < 5) { /* damaged on the way: refused, slot stays landing */
				CHECK(bs_cache_commit(c, s, lba, csum ^ 1, &seq) == -EBADMSG, "bad crc taken");
				bs_cache_release(c, s);
				continue;
			}
			CHECK(!bs_cache_commit(c, s, lba, csum, &seq), "commit");
			memcpy(model[lba], b, BS_BLOCK);
		} else if (what < 98) { /* a read: hit or load */
			uint32_t s;
			int hit;
			CHECK(!bs_cache_get(c, lba, &s, &hit), "get %llu", (unsigned long long)lba);
			CHECK(!memcmp(slot_mem(c, s), model[lba], BS_BLOCK), "lba %llu differs (hit %d)",
			      (unsigned long long)lba, hit);
			CHECK(bs_tag_ok(slot_mem(c, s), lba), "tag of lba %llu", (unsigned long long)lba);
			CHECK(!memcmp(&bs_cache_sent_tags(c)[s], slot_mem(c, s) + BS_BLOCK, BS_TAG_LEN),
			      "sent tag of lba %llu", (unsigned long long)lba);
			bs_cache_unpin(c, s);
		} else if (what < 99) {
			CHECK(!bs_cache_flush(c), "flush");
		} else {
			uint8_t *m = bs_cache_move_begin(c);
			CHECK(m, "move");
			bs_cache_move_end(c, m);
		}
	}
}

/* A client's write of LBA: land random bytes, commit, update the model. */
static void write_lba(struct bs_cache *c, uint64_t lba)
{
	uint32_t s;
	CHECK(!bs_cache_alloc(c, &s), "alloc");
	uint8_t *b = slot_mem(c, s);
	for (unsigned i = 0; i < BS_BLOCK; i += 8) {
		uint64_t v = rnd();
		memcpy(b + i, &v, 8);
	}
	uint64_t seq;
	CHECK(!bs_cache_commit(c, s, lba, bs_crc32c(0, b, BS_BLOCK), &seq), "commit");
	memcpy(model[lba], b, BS_BLOCK);
}

/* Case 4: pin LBA's slot (a hit, then a load), keep a copy of what a
 * served read sends from it, supersede it and churn the cache, check. */
static void pinned_sends(struct bs_cache *c)
{
	static uint8_t sent[2][BS_SLOT_STRIDE];
	uint32_t s[2];
	uint64_t lba[2] = { 7, 0 };
	int hit;
	write_lba(c, lba[0]);
	CHECK(!bs_cache_get(c, lba[0], &s[0], &hit) && hit, "hit");
	/* An LBA that is not cached: flush, then fill the cache with others. */
	CHECK(!bs_cache_flush(c), "flush");
	for (uint64_t l = NBLOCKS - NSLOTS; l < NBLOCKS; l++) {
		uint32_t x;
		CHECK(!bs_cache_get(c, l, &x, &hit), "get %llu", (unsigned long long)l);
		bs_cache_unpin(c, x);
	}
	for (lba[1] = 1; lba[1] < NBLOCKS - NSLOTS; lba[1]++) {
		CHECK(!bs_cache_get(c, lba[1], &s[1], &hit), "get");
		if (!hit)
			break;
		bs_cache_unpin(c, s[1]);
	}
	CHECK(!hit, "an LBA loaded from the file");
	for (int i = 0; i < 2; i++) {
		memcpy(sent[i], slot_mem(c, s[i]), BS_BLOCK);
		memcpy(sent[i] + BS_BLOCK, &bs_cache_sent_tags(c)[s[i]], BS_TAG_LEN);
		CHECK(bs_tag_ok(sent[i], lba[i]), "sent tag of lba %llu", (unsigned long long)lba[i]);
		CHECK(!memcmp(sent[i], model[lba[i]], BS_BLOCK), "pinned block");
	}
	/* Newer writes of both LBAs, then many others: eviction, write-back. */
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < 2; i++)
			write_lba(c, lba[i]);
	for (int n = 0; n < 4 * NSLOTS; n++) {
		uint64_t l = rnd() % NBLOCKS;
		if (l == lba[0] || l == lba[1])
			continue;
		if (n & 1) {
			write_lba(c, l);
		} else {
			uint32_t x;
			CHECK(!bs_cache_get(c, l, &x, &hit), "churn get");
			bs_cache_unpin(c, x);
		}
	}
	CHECK(!bs_cache_flush(c), "flush");
	for (int i = 0; i < 2; i++) {
		CHECK(!memcmp(slot_mem(c, s[i]), sent[i], BS_BLOCK),
		      "block of pinned slot %u changed", s[i]);
		CHECK(!memcmp(&bs_cache_sent_tags(c)[s[i]], sent[i] + BS_BLOCK, BS_TAG_LEN),
		      "sent tag of pinned slot %u changed", s[i]);
		CHECK(!bs_tag_ok(slot_mem(c, s[i]), lba[i]),
		      "superseded slot %u still has a live tag in the region", s[i]);
		bs_cache_unpin(c, s[i]);
		uint32_t x;
		CHECK(!bs_cache_get(c, lba[i], &x, &hit), "the newest copy");
		CHECK(!memcmp(slot_mem(c, x), model[lba[i]], BS_BLOCK), "newest block");
		bs_cache_unpin(c, x);
	}
}

static void check_file(const char *path)
{
	struct bs_store *st;
	CHECK(!bs_store_open(path, 0, &st), "reopen");
	static uint8_t b[BS_BLOCK];
	for (uint64_t lba = 0; lba < NBLOCKS; lba++) {
		uint32_t csum;
		CHECK(!bs_store_read(st, lba, b, &csum), "read lba %llu", (unsigned long long)lba);
		CHECK(!memcmp(b, model[lba], BS_BLOCK), "file lba %llu differs", (unsigned long long)lba);
	}
	bs_store_close(st);
}

/* Damage 4 KiB of FILE at OFF. */
static void scribble(const char *file, off_t off)
{
	int fd = open(file, O_WRONLY);
	static uint8_t junk[BS_BLOCK];
	memset(junk, 0xa5, sizeof(junk));
	CHECK(fd >= 0 && pwrite(fd, junk, sizeof(junk), off) == (ssize_t)sizeof(junk), "scribble");
	close(fd);
}

static void crash_cases(const char *path, const char *jpath)
{
	struct bs_store *st;
	CHECK(!bs_store_open(path, 0, &st), "open");
	/* One batch of three blocks goes through journal and file. */
	static uint8_t blk[3][BS_BLOCK];
	struct bs_wb_item it[3];
	for (int i = 0; i < 3; i++) {
		memset(blk[i], 0x30 + i, BS_BLOCK);
		it[i] = (struct bs_wb_item){ 10 + (uint64_t)i, bs_crc32c(0, blk[i], BS_BLOCK), blk[i] };
		memcpy(model[10 + i], blk[i], BS_BLOCK);
	}
	CHECK(!bs_store_writeback(st, it, 3), "writeback");
	bs_store_close(st);
	/* A crash tore the in-place write of block 11 (the journal was synced
	 * first): the data area starts after superblock + checksum table. */
	off_t data = BS_BLOCK + (NBLOCKS * 4 + BS_BLOCK - 1) / BS_BLOCK * BS_BLOCK;
	scribble(path, data + 11 * BS_BLOCK);
	check_file(path); /* replayed at open */
	/* A torn journal (its second block damaged): dropped, the file stays. */
	scribble(jpath, 2 * BS_BLOCK);
	check_file(path);
}

int main(void)
{
	char dir[] = "/tmp/srn-bs-cache-XXXXXX";
	CHECK(mkdtemp(dir), "mkdtemp");
	char path[256], jpath[300];
	snprintf(path, sizeof(path), "%s/dev.img", dir);
	snprintf(jpath, sizeof(jpath), "%s.journal", path);

	struct bs_store *st;
	struct bs_cache *c;
	CHECK(!bs_store_open(path, NBLOCKS, &st), "create");
	CHECK(!bs_cache_create(st, NSLOTS, &c), "cache");
	random_ops(c);
	pinned_sends(c);
	CHECK(!bs_cache_destroy(c), "final write-back");
	bs_store_close(st);
	check_file(path);
	crash_cases(path, jpath);

	unlink(path);
	unlink(jpath);
	rmdir(dir);
	printf("ok: %d cache operations against the model, pinned sends, reopen, replay, "
	       "torn journal\n", OPS);
	return 0;
}
