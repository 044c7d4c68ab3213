/*
 * cache.c - slots, the LBA index and background write-back.
 *
 * Slot states: FREE -> LANDING (given to a client) -> DIRTY (committed,
 * not on disk) -> CLEAN (on disk) -> FREE (evicted or superseded).
 * A slot also carries flags that delay its reuse: `wb` while the
 * write-back thread writes it, `pins` while the I/O thread sends from it.
 * A superseded or evicted slot with either set becomes RETIRED and is
 * freed when the last one clears.  Its tag is invalidated at once, so a
 * client's RDMA Read of it fails the tag check instead of returning an old
 * version.
 *
 * So the tag in the region changes under a pinned slot, and a send from
 * it must not carry that tag: the NIC reads a send's buffer at any time
 * until the work request completes (a go-back-N resend reads it again),
 * and a served read whose slot was superseded meanwhile would arrive with
 * a dead tag (magic 0).  Each slot therefore has a second copy of its tag,
 * `sent[s]`, outside the region: written when the slot gets its block
 * (commit, load), when it cannot be pinned, and never touched while it
 * is.  A pinned slot's block never changes either, so block + sent[s] is
 * what a served read sends (bs_cache_sent_tags).
 *
 * Dirty slots queue in commit order (each at most once: `queued`); the
 * write-back thread takes up to BS_WB_MAX of them per journal batch and
 * writes them from the cache memory without the lock: a DIRTY slot's
 * block never changes, and bs_cache_move_begin waits for the batch.
 */
#include "cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "crc32c.h"
#include "proto.h"

enum slot_state { S_FREE, S_LANDING, S_DIRTY, S_CLEAN, S_RETIRED };

struct slot {
	uint8_t state;
	bool wb, queued;
	uint16_t pins;
	uint64_t lba;
	uint64_t seq;
	uint32_t csum;
};

struct bs_cache {
	pthread_mutex_t lock;
	pthread_cond_t wb_cond;   /* write-back thread: work or stop */
	pthread_cond_t done_cond; /* a batch finished: slots freed, dirty dropped */
	pthread_t wb_thread;
	struct bs_store *st;
	uint8_t *mem;
	size_t len;
	uint32_t nslots;
	struct slot *slots;
	struct bs_tag *sent; /* per slot: the tag a served read sends (file comment) */
	int32_t *index; /* lba -> slot, -1 when not cached */
	uint32_t *free_stack, nfree;
	uint32_t *fifo, fifo_head, fifo_tail; /* dirty queue, nslots entries */
	uint32_t hand;                        /* eviction clock */
	uint32_t dirty;
	uint64_t seq;
	bool busy, paused, stop, urgent;
	int wb_error;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct bs_tag *tag_of(struct bs_cache *c, uint32_t s)
{
	return (struct bs_tag *)(c->mem + (size_t)s * BS_SLOT_STRIDE + BS_BLOCK);
}

static void timed_wait(pthread_cond_t *cv, pthread_mutex_t *m, unsigned ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += (long)ms * 1000000;
	ts.tv_sec += ts.tv_nsec / 1000000000;
	ts.tv_nsec %= 1000000000;
	pthread_cond_timedwait(cv, m, &ts);
}

/* Must hold c->lock.  The slot's contents are dead: free it now or, if a
 * batch or a send still reads it, when they are done. */
static void retire(struct bs_cache *c, uint32_t s)
{
	struct slot *sl = &c->slots[s];
	tag_of(c, s)->magic = 0; /* readers of this slot now fall back */
	if (sl->state == S_DIRTY)
		c->dirty--;
	if (sl->wb || sl->pins) {
		sl->state = S_RETIRED;
		return;
	}
	sl->state = S_FREE;
	c->free_stack[c->nfree++] = s;
}

/* Must hold c->lock.  A CLEAN, idle slot to reuse, or -1. */
static int evict(struct bs_cache *c)
{
	for (uint32_t n = 0; n < c->nslots; n++) {
		uint32_t s = c->hand;
		c->hand = (c->hand + 1) % c->nslots;
		struct slot *sl = &c->slots[s];
		if (sl->state == S_CLEAN && !sl->pins && !sl->wb) {
			c->index[sl->lba] = -1;
			retire(c, s);
			return 0;
		}
	}
	return -1;
}

/* Must hold c->lock. */
static int take_free(struct bs_cache *c, uint32_t *slot)
{
	uint64_t deadline = now_ns() + 5000000000ull; /* a stuck disk: give up, client retries */
	while (!c->nfree && evict(c) < 0) {
		if (now_ns() > deadline)
			return -ENOSPC;
		c->urgent = true;
		pthread_cond_signal(&c->wb_cond);
		timed_wait(&c->done_cond, &c->lock, 50);
	}
	*slot = c->free_stack[--c->nfree];
	return 0;
}

int bs_cache_alloc(struct bs_cache *c, uint32_t *slot)
{
	pthread_mutex_lock(&c->lock);
	int ret = take_free(c, slot);
	if (!ret) {
		c->slots[*slot].state = S_LANDING;
		tag_of(c, *slot)->magic = 0;
	}
	pthread_mutex_unlock(&c->lock);
	return ret;
}

void bs_cache_release(struct bs_cache *c, uint32_t slot)
{
	pthread_mutex_lock(&c->lock);
	if (c->slots[slot].state == S_LANDING)
		retire(c, slot);
	pthread_mutex_unlock(&c->lock);
}

int bs_cache_commit(struct bs_cache *c, uint32_t slot, uint64_t lba, uint32_t csum,
		    uint64_t *seq)
{
	uint8_t *blk = c->mem + (size_t)slot * BS_SLOT_STRIDE;
	/* The one time the server's CPU reads the data: it must be what the
	 * client meant before anyone else is told it exists. */
	if (bs_crc32c(0, blk, BS_BLOCK) != csum)
		return -EBADMSG;
	pthread_mutex_lock(&c->lock);
	struct slot *sl = &c->slots[slot];
	if (sl->state != S_LANDING) {
		pthread_mutex_unlock(&c->lock);
		return -EINVAL;
	}
	int32_t old = c->index[lba];
	if (old >= 0)
		retire(c, (uint32_t)old);
	/* A slot recycled while still in the queue keeps its one entry there,
	 * so the queue never holds more than nslots entries. */
	bool queued = sl->queued;
	*sl = (struct slot){ .state = S_DIRTY, .lba = lba, .seq = ++c->seq, .csum = csum,
			     .queued = true };
	*seq = sl->seq;
	bs_tag_set(tag_of(c, slot), lba, sl->seq, csum, slot);
	c->sent[slot] = *tag_of(c, slot); /* a LANDING slot: no send reads it */
	c->index[lba] = (int32_t)slot;
	c->dirty++;
	if (!queued)
		c->fifo[c->fifo_tail++ % c->nslots] = slot;
	if (c->dirty >= BS_WB_MAX)
		pthread_cond_signal(&c->wb_cond);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

int bs_cache_get(struct bs_cache *c, uint64_t lba, uint32_t *slot, int *hit)
{
	pthread_mutex_lock(&c->lock);
	int32_t s = c->index[lba];
	if (s >= 0) {
		c->slots[s].pins++;
		*slot = (uint32_t)s;
		*hit = 1;
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	uint32_t f;
	int ret = take_free(c, &f);
	if (ret) {
		pthread_mutex_unlock(&c->lock);
		return ret;
	}
	c->slots[f].state = S_LANDING; /* keeps `queued`: see bs_cache_commit */
	pthread_mutex_unlock(&c->lock);
	/* Only this thread commits or loads, so LBA cannot appear meanwhile. */
	uint32_t csum;
	uint8_t *blk = c->mem + (size_t)f * BS_SLOT_STRIDE;
	ret = bs_store_read(c->st, lba, blk, &csum);
	pthread_mutex_lock(&c->lock);
	if (ret) {
		retire(c, f);
	} else {
		struct slot *sl = &c->slots[f];
		sl->state = S_CLEAN;
		sl->lba = lba;
		sl->seq = 0;
		sl->csum = csum;
		sl->pins = 1;
		bs_tag_set(tag_of(c, f), lba, 0, csum, f);
		c->sent[f] = *tag_of(c, f); /* before the pin is handed out */
		c->index[lba] = (int32_t)f;
		*slot = f;
		*hit = 0;
	}
	pthread_mutex_unlock(&c->lock);
	return ret;
}

void bs_cache_unpin(struct bs_cache *c, uint32_t slot)
{
	pthread_mutex_lock(&c->lock);
	struct slot *sl = &c->slots[slot];
	if (sl->pins && !--sl->pins && sl->state == S_RETIRED && !sl->wb)
		retire(c, slot);
	pthread_mutex_unlock(&c->lock);
}

int bs_cache_flush(struct bs_cache *c)
{
	uint64_t deadline = now_ns() + 30000000000ull;
	pthread_mutex_lock(&c->lock);
	while ((c->dirty || c->busy) && !c->wb_error && now_ns() < deadline) {
		c->urgent = true;
		pthread_cond_signal(&c->wb_cond);
		timed_wait(&c->done_cond, &c->lock, 50);
	}
	int ret = c->wb_error ? c->wb_error : c->dirty ? -ETIMEDOUT : 0;
	pthread_mutex_unlock(&c->lock);
	return ret;
}

static void *wb_main(void *arg)
{
	struct bs_cache *c = arg;
	struct bs_wb_item *items = calloc(BS_WB_MAX, sizeof(*items));
	uint32_t *ss = calloc(BS_WB_MAX, sizeof(*ss));
	pthread_mutex_lock(&c->lock);
	while (items && ss) {
		/* Gather a few ms of writes per journal sync unless someone waits. */
		if (!c->stop && (c->paused || !c->dirty || (!c->urgent && c->dirty < BS_WB_MAX))) {
			timed_wait(&c->wb_cond, &c->lock, c->dirty ? 5 : 50);
			if (!c->stop && (c->paused || !c->dirty))
				continue;
		}
		/* Every dirty slot is queued (once): an empty queue means done. */
		if (c->fifo_head == c->fifo_tail) {
			if (c->stop)
				break;
			timed_wait(&c->wb_cond, &c->lock, 50);
			continue;
		}
		c->urgent = false;
		unsigned n = 0;
		while (n < BS_WB_MAX && c->fifo_head != c->fifo_tail) {
			uint32_t s = c->fifo[c->fifo_head++ % c->nslots];
			struct slot *sl = &c->slots[s];
			sl->queued = false;
			if (sl->state != S_DIRTY)
				continue; /* superseded since: its successor is queued */
			sl->wb = true;
			ss[n] = s;
			items[n++] = (struct bs_wb_item){ sl->lba, sl->csum,
							  c->mem + (size_t)s * BS_SLOT_STRIDE };
		}
		c->busy = true;
		pthread_mutex_unlock(&c->lock);
		int ret = bs_store_writeback(c->st, items, n);
		pthread_mutex_lock(&c->lock);
		c->busy = false;
		if (ret && !c->wb_error) {
			fprintf(stderr, "blockstore: write-back failed: %s\n", strerror(-ret));
			c->wb_error = ret;
		}
		for (unsigned i = 0; i < n; i++) {
			struct slot *sl = &c->slots[ss[i]];
			sl->wb = false;
			if (sl->state == S_RETIRED) {
				if (!sl->pins)
					retire(c, ss[i]);
			} else if (!ret) {
				sl->state = S_CLEAN;
				c->dirty--;
			} else if (!sl->queued) { /* keep it dirty: try again later */
				sl->queued = true;
				c->fifo[c->fifo_tail++ % c->nslots] = ss[i];
			}
		}
		pthread_cond_broadcast(&c->done_cond);
		if (ret && c->stop)
			break;
	}
	pthread_mutex_unlock(&c->lock);
	free(items);
	free(ss);
	return NULL;
}

static uint8_t *map_region(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void cache_free(struct bs_cache *c)
{
	if (c->mem)
		munmap(c->mem, c->len);
	free(c->slots);
	free(c->sent);
	free(c->index);
	free(c->free_stack);
	free(c->fifo);
	free(c);
}

int bs_cache_create(struct bs_store *st, uint32_t nslots, struct bs_cache **out)
{
	struct bs_cache *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	uint64_t nb = bs_store_nblocks(st);
	c->st = st;
	c->nslots = nslots;
	c->len = (size_t)nslots * BS_SLOT_STRIDE;
	c->mem = map_region(c->len);
	c->slots = calloc(nslots, sizeof(*c->slots));
	c->sent = calloc(nslots, sizeof(*c->sent));
	c->index = malloc(nb * sizeof(*c->index));
	c->free_stack = malloc(nslots * sizeof(uint32_t));
	c->fifo = malloc(nslots * sizeof(uint32_t));
	if (!c->mem || !c->slots || !c->sent || !c->index || !c->free_stack || !c->fifo) {
		cache_free(c);
		return -ENOMEM;
	}
	memset(c->index, 0xff, nb * sizeof(*c->index));
	for (uint32_t i = 0; i < nslots; i++)
		c->free_stack[c->nfree++] = nslots - 1 - i;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->wb_cond, NULL);
	pthread_cond_init(&c->done_cond, NULL);
	int ret = pthread_create(&c->wb_thread, NULL, wb_main, c);
	if (!ret)
		pthread_setname_np(c->wb_thread, "bs-writeback");
	if (ret) {
		cache_free(c);
		return -ret;
	}
	*out = c;
	return 0;
}

int bs_cache_destroy(struct bs_cache *c)
{
	pthread_mutex_lock(&c->lock);
	c->stop = true;
	c->paused = false;
	pthread_cond_signal(&c->wb_cond);
	pthread_mutex_unlock(&c->lock);
	pthread_join(c->wb_thread, NULL);
	int ret = c->wb_error ? c->wb_error : c->dirty ? -EIO : 0;
	cache_free(c);
	return ret;
}

uint8_t *bs_cache_mem(const struct bs_cache *c)
{
	return c->mem;
}

size_t bs_cache_len(const struct bs_cache *c)
{
	return c->len;
}

uint32_t bs_cache_nslots(const struct bs_cache *c)
{
	return c->nslots;
}

struct bs_tag *bs_cache_sent_tags(const struct bs_cache *c)
{
	return c->sent;
}

uint8_t *bs_cache_move_begin(struct bs_cache *c)
{
	uint8_t *mem = map_region(c->len);
	if (!mem)
		return NULL;
	pthread_mutex_lock(&c->lock);
	c->paused = true;
	while (c->busy) /* the batch reads the old region: let it finish */
		timed_wait(&c->done_cond, &c->lock, 50);
	memcpy(mem, c->mem, c->len);
	pthread_mutex_unlock(&c->lock);
	return mem;
}

void bs_cache_move_end(struct bs_cache *c, uint8_t *mem)
{
	pthread_mutex_lock(&c->lock);
	if (mem) { /* NULL: the move was called off, the old region stays */
		munmap(c->mem, c->len);
		c->mem = mem;
	}
	c->paused = false;
	pthread_cond_signal(&c->wb_cond);
	pthread_mutex_unlock(&c->lock);
}
