/*
 * fuzz_shm_ring.c - libFuzzer harness for the same-host ring reader
 * (srn_shm_ring_read, link/shm.c): whatever a same-user peer writes into
 * its ring and its producer index, the reader reads inside the ring only.
 *
 * The ring is malloc'ed at exactly its size, so under ASan any byte read
 * past it (the item-9 bug read 4) is a report.  The input chooses the
 * ring size (64 B .. 4 KiB, multiples of 64 as the reader requires), the
 * reader's index, the producer's (lying backwards, unaligned, too far),
 * and the contents: raw bytes, or a list of records laid out as a writer
 * would, with kinds and lengths the fuzzer picks and, if it likes, the
 * index that writer would publish (so valid records, WRAPs and near
 * misses are common, not one in 2^32).
 *
 * Asserts what a delivery promises: the packet, with its length, lies
 * inside the ring, after a record header; the count is within max; the
 * index moved forward only within what was published, or to prod.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "link/shm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct ctx {
	const uint8_t *ring;
	uint64_t rb;
	unsigned sum;
};

static void deliver(void *c, const uint8_t *pkt, uint32_t len, const struct sockaddr *src, uint8_t tos)
{
	struct ctx *x = c;
	(void)src;
	(void)tos;
	if (pkt < x->ring + 16 || len > x->rb || pkt + len > x->ring + x->rb)
		abort();
	for (uint32_t i = 0; i < len; i++)     /* every byte, so ASan sees it */
		x->sum += pkt[i];
}

static uint8_t at(const uint8_t *d, size_t n, size_t i)
{
	return i < n ? d[i] : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t rb = 64u * (1u + (at(data, size, 0) & 63u));
	uint8_t flags = at(data, size, 3);
	uint64_t cons = (uint64_t)at(data, size, 1) | (uint64_t)at(data, size, 2) << 8;
	uint64_t delta = (uint64_t)at(data, size, 4) | (uint64_t)at(data, size, 5) << 8;
	if (!(flags & 1))
		cons *= 64;                          /* aligned, as the reader's own */
	if (flags & 2)
		cons += 0xffffffffffff0000ull;       /* indices near the wrap of 64 bits */
	uint64_t prod = flags & 4 ? cons - delta : cons + delta;
	int max = 1 + at(data, size, 6) % 64;
	const uint8_t *rest = size > 8 ? data + 8 : data;
	size_t nrest = size > 8 ? size - 8 : 0;

	uint8_t *ring = malloc(rb);
	if (!ring)
		return 0;
	memset(ring, 0, rb);
	if (flags & 8) {
		for (size_t i = 0; i < nrest && i < rb; i++)
			ring[i] = rest[i];
	} else {
		/* Records where a writer would put them: 3 input bytes each,
		 * a kind (1 packet, 2 wrap, else junk) and a length. */
		uint64_t off = (cons % rb) & ~(uint64_t)63, wrote = 0;
		for (size_t i = 0; i + 3 <= nrest && off + 16 <= rb; i += 3) {
			uint32_t kind = rest[i] % 4, len = (uint32_t)rest[i + 1] | (uint32_t)rest[i + 2] << 8;
			if (rest[i] & 0x80)
				len %= (uint32_t)rb;       /* mostly lengths that fit */
			uint64_t step = kind == 2 ? rb - off : ((uint64_t)16 + len + 63) & ~(uint64_t)63;
			if (wrote + step > rb)
				break;           /* the writer's ring is full */
			memcpy(ring + off, &len, 4);
			memcpy(ring + off + 4, &kind, 4);
			wrote += step;
			off = (off + step) % rb;
		}
		/* The producer index a writer would publish: valid rings. */
		if (!(flags & 16))
			prod = cons + wrote;
	}
	struct ctx x = { ring, rb, 0 };
	uint64_t c = cons;
	int n = srn_shm_ring_read(ring, rb, &c, prod, max, deliver, &x, NULL);
	/* Forward within what was published, or dropped up to prod. */
	if (n < 0 || n > max || (c != prod && (c - cons > prod - cons || prod - cons > rb)))
		abort();
	free(ring);
	return 0;
}
