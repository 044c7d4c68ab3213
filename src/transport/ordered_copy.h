/*
 * ordered_copy.h - placing a Write's bytes so that its last bytes land
 * last.
 *
 * A NIC places a message in order, and programs rely on it: perftest's
 * ib_write_lat and many eager protocols spin on the last byte (or word)
 * of a buffer and then read the rest.  memcpy gives no such order (for
 * 64-128 bytes glibc stores the last vector before the one ahead of it).
 * So the last (up to 8) bytes go after everything else, behind a full
 * fence (which also orders non-temporal stores), in ascending order and
 * in naturally aligned pieces (one store for an aligned 8-byte word), so
 * a poller of an aligned flag there never sees it torn.
 */
#ifndef SRN_TRANSPORT_ORDERED_COPY_H
#define SRN_TRANSPORT_ORDERED_COPY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#define SRN_ORDERED_TAIL 8u

/* A full fence.  ThreadSanitizer does not model fences (gcc refuses
 * them with -fsanitize=thread); there a sequentially consistent
 * read-modify-write stands in, which it does model. */
static inline void srn_full_fence(void)
{
#if defined(__SANITIZE_THREAD__)
	static _Thread_local atomic_uint dummy;
	atomic_fetch_add_explicit(&dummy, 0, memory_order_seq_cst);
#else
	atomic_thread_fence(memory_order_seq_cst);
#endif
}

/* A release fence: the stores after it stay after every store before
 * it (on x86 only the compiler's order; no instruction).  Under
 * ThreadSanitizer as srn_full_fence. */
static inline void srn_release_fence(void)
{
#if defined(__SANITIZE_THREAD__)
	srn_full_fence();
#else
	atomic_thread_fence(memory_order_release);
#endif
}

/* The tail's bytes (from `last`, `tail` <= 8 of them) to d, after every
 * store before this call.  full: behind a full fence, which also orders
 * non-temporal stores (memcpy's for large copies); else behind a release
 * fence, enough when the caller made no such store since the last full
 * one (each message's tail is behind one). */
static inline void srn_store_tail(uint8_t *d, const uint8_t *last, size_t tail, bool full)
{
	if (full)
		srn_full_fence();
	else
		srn_release_fence();
	if (tail == 8 && !((uintptr_t)d & 7)) {
		uint64_t v;
		memcpy(&v, last, sizeof(v));
		__atomic_store_n((uint64_t *)(void *)d, v, __ATOMIC_RELAXED);
		return;
	}
	/* Ascending, each piece as wide as its alignment allows: a polled
	 * 2- or 4-byte flag at the end is then one store, never torn. */
	for (size_t k = 0; k < tail;) {
		uintptr_t a = (uintptr_t)(d + k);
		if (!(a & 3) && tail - k >= 4) {
			uint32_t v;
			memcpy(&v, last + k, sizeof(v));
			__atomic_store_n((uint32_t *)(void *)(d + k), v, __ATOMIC_RELAXED);
			k += 4;
		} else if (!(a & 1) && tail - k >= 2) {
			uint16_t v;
			memcpy(&v, last + k, sizeof(v));
			__atomic_store_n((uint16_t *)(void *)(d + k), v, __ATOMIC_RELAXED);
			k += 2;
		} else {
			__atomic_store_n(d + k, last[k], __ATOMIC_RELAXED);
			k++;
		}
	}
}

/* Gather len bytes from iov[0..niov) to dst, the last bytes stored
 * last (they may straddle iovecs: gathered first, stored after the
 * fence). */
static inline void srn_copy_ordered_iov(uint8_t *dst, const struct iovec *iov, int niov,
					size_t len)
{
	size_t tail = len < SRN_ORDERED_TAIL ? len : SRN_ORDERED_TAIL, head = len - tail, off = 0;
	uint8_t last[SRN_ORDERED_TAIL];
	for (int i = 0; i < niov && off < len; i++) {
		const uint8_t *src = iov[i].iov_base;
		size_t l = iov[i].iov_len < len - off ? iov[i].iov_len : len - off;
		size_t to_head = off < head ? head - off : 0;
		if (to_head > l)
			to_head = l;
		memcpy(dst + off, src, to_head);
		if (l > to_head)
			memcpy(last + (off + to_head - head), src + to_head, l - to_head);
		off += l;
	}
	/* A message of 8 bytes or less is all tail: none of its own stores
	 * to order before it, so no mfence on the small Write's path. */
	srn_store_tail(dst + head, last, tail, head != 0);
}

/* memcpy, with the last bytes stored last. */
static inline void srn_copy_ordered(void *dst, const void *src, size_t len)
{
	struct iovec one = { (void *)src, len };
	srn_copy_ordered_iov(dst, &one, 1, len);
}

#endif
