/*
 * mr.c - memory keys: allocation, lookup and the access check every byte
 * movement goes through.
 */
#include "core/mr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "core/direct_pub.h"
#include "core/limits.h"
#include "core/nic.h"

/* Access bits a region may carry.  IBV_ACCESS_OPTIONAL_RANGE bits (relaxed
 * ordering and future hints) are accepted and ignored, as rdma-core
 * allows a provider to. */
#define SRN_MR_ACCESS_KNOWN (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |        \
			     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |       \
			     IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |              \
			     IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB |               \
			     IBV_ACCESS_OPTIONAL_RANGE)

int srn_mr_check_access(unsigned access)
{
	if (access & ~(unsigned)SRN_MR_ACCESS_KNOWN)
		return -EINVAL;
	/* The kernel (ib_check_mr_access) requires local write whenever the
	 * peer may write: remote write or remote atomic. */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	if (access & (IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND))
		return -EOPNOTSUPP;
	return 0;
}

/* Key layout: tag high byte << 24 | slot << 8 | key byte.  The slot finds
 * the entry; both tag bytes are unpredictable, so an rkey cannot be guessed
 * from the order of registrations (issue 10: every process's first region
 * used to be 0x126).  The low byte moves by a random non-zero step on each
 * reuse of a slot, so a stale key never matches the slot's next region (as
 * rxe's rxe_get_next_key); a memory window keeps slot and high byte and
 * lets the application choose the low byte (ibv_inc_rkey). */
#define SRN_KEY_SLOT(key) (((key) >> 8) & 0xffffu)
_Static_assert(SRN_MAX_MR <= 0x10000, "a slot must fit the key's 16 slot bits");

/* n random bytes from the kernel; should getrandom() ever fail (a kernel
 * without it, or no entropy yet) a mix of time, pid and a counter, which
 * is weaker but still differs between processes and calls. */
static void random_bytes(void *buf, size_t n)
{
	uint8_t *b = buf;
	while (n) {
		ssize_t got = getrandom(b, n, GRND_NONBLOCK);
		if (got <= 0)
			break;
		b += got;
		n -= (size_t)got;
	}
	if (!n)
		return;
	static _Atomic uint64_t ctr;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t x = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 30 ^ (uint64_t)getpid() << 40 ^
		     ++ctr * 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < n; i++) {
		x ^= x >> 33;
		x *= 0xff51afd7ed558ccdull;
		x ^= x >> 29;
		b[i] = (uint8_t)x;
	}
}

static int grow(struct srn_nic *nic)
{
	uint32_t cap = nic->tables.mr_cap ? nic->tables.mr_cap * 2 : 64;
	if (cap > SRN_MAX_MR + 1)
		return -ENOMEM;
	struct srn_mr **m = realloc(nic->tables.mrs, cap * sizeof(*m));
	if (!m)
		return -ENOMEM;
	nic->tables.mrs = m;
	uint8_t *k = realloc(nic->tables.mr_keybyte, cap);
	if (!k)
		return -ENOMEM;
	nic->tables.mr_keybyte = k;
	memset(&nic->tables.mrs[nic->tables.mr_cap], 0, (cap - nic->tables.mr_cap) * sizeof(*m));
	/* Fresh slots start from random key bytes, not from a function of
	 * the slot: the first key of a process must not be guessable. */
	random_bytes(&nic->tables.mr_keybyte[nic->tables.mr_cap], cap - nic->tables.mr_cap);
	nic->tables.mr_cap = cap;
	return 0;
}

/* A fresh key for slot: a random high byte and the slot's next key byte. */
static uint32_t next_key(struct srn_nic *nic, uint32_t slot)
{
	uint8_t r[2];
	random_bytes(r, sizeof(r));
	uint8_t kb = nic->tables.mr_keybyte[slot];
	/* Next time a different byte, by a random step 1..255. */
	nic->tables.mr_keybyte[slot] = (uint8_t)(kb + 1 + r[1] % 255);
	return (uint32_t)r[0] << 24 | slot << 8 | kb;
}

void srn_mr_rekey(struct srn_nic *nic, struct srn_mr *mr)
{
	uint32_t slot = SRN_KEY_SLOT(mr->key);
	if (slot < nic->tables.mr_cap && nic->tables.mrs[slot] == mr) {
		mr->key = next_key(nic, slot);
		/* Same slot, new key: peers' copies of the old key stop. */
		srn_direct_pub_mr(nic, mr);
	}
}

int srn_mr_insert(struct srn_nic *nic, struct srn_mr *mr)
{
	for (;;) {
		/* Slot 0 is never used, so key 0 (a common uninitialised
		 * value) is always invalid. */
		for (uint32_t n = 0; n < nic->tables.mr_cap; n++) {
			uint32_t slot = (nic->tables.mr_free_hint + n) % nic->tables.mr_cap;
			if (slot == 0 || nic->tables.mrs[slot])
				continue;
			mr->key = next_key(nic, slot);
			nic->tables.mrs[slot] = mr;
			nic->tables.mr_free_hint = slot + 1;
			srn_direct_pub_mr(nic, mr);
			return 0;
		}
		int ret = grow(nic);
		if (ret)
			return ret;
	}
}

void srn_mr_remove(struct srn_nic *nic, struct srn_mr *mr)
{
	uint32_t slot = SRN_KEY_SLOT(mr->key);
	if (slot < nic->tables.mr_cap && nic->tables.mrs[slot] == mr) {
		nic->tables.mrs[slot] = NULL;
		/* Fenced: no peer's placement into it runs past this point. */
		srn_direct_unpub_mr(nic, mr);
	}
}

int srn_sge_copy_in(struct srn_nic *nic, struct srn_pd *pd, uint32_t qpn,
		    const struct ibv_sge *sge, uint32_t nsge, uint32_t off,
		    const uint8_t *src, uint32_t len)
{
	for (uint32_t i = 0; i < nsge && len; i++) {
		if (off >= sge[i].length) {
			off -= sge[i].length;
			continue;
		}
		uint32_t take = sge[i].length - off < len ? sge[i].length - off : len;
		const char *why;
		void *dst = srn_mr_resolve(nic, pd, qpn, sge[i].lkey, sge[i].addr + off, take,
					   IBV_ACCESS_LOCAL_WRITE, &why);
		if (!dst)
			return -EACCES;
		memcpy(dst, src, take);
		src += take;
		len -= take;
		off = 0;
	}
	return len ? -EMSGSIZE : 0;
}

struct srn_mr *srn_key_lookup(struct srn_nic *nic, uint32_t key)
{
	uint32_t slot = SRN_KEY_SLOT(key);
	struct srn_mr *mr = slot < nic->tables.mr_cap ? nic->tables.mrs[slot] : NULL;
	return mr && mr->key == key ? mr : NULL;
}

void *srn_mr_resolve(struct srn_nic *nic, struct srn_pd *pd, uint32_t qpn, uint32_t key,
		     uint64_t va, uint64_t len, unsigned need, const char **why)
{
	uint32_t slot = SRN_KEY_SLOT(key);
	struct srn_mr *mr = slot < nic->tables.mr_cap ? nic->tables.mrs[slot] : NULL;
	if (!mr || mr->key != key) {
		*why = mr ? "stale key (region re-registered or key byte mismatch)" : "no such key";
		return NULL;
	}
	if (mr->pd != pd) {
		*why = "key belongs to another protection domain";
		return NULL;
	}
	const struct srn_mr *region = mr;
	if (mr->is_mw) {
		/* A window key is an rkey only (IBTA 10.6.7). */
		if (!(need & (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
			      IBV_ACCESS_REMOTE_ATOMIC))) {
			*why = "a memory window key used as an lkey";
			return NULL;
		}
		if (!mr->bound) {
			*why = "memory window not bound (or invalidated)";
			return NULL;
		}
		if (mr->ibmw.type == IBV_MW_TYPE_2 && mr->mw_qpn != qpn) {
			*why = "type 2 memory window bound to another QP";
			return NULL;
		}
		region = mr->bound;
	}
	if (region->revoked) {
		*why = "the region's memory was unmapped or replaced under the registration";
		return NULL;
	}
	if (!srn_mr_rights_range_ok(mr->access, mr->iova, mr->length, need, va, len, why))
		return NULL;
	return region->at + (va - region->iova);
}

bool srn_mr_rights_range_ok(unsigned access, uint64_t iova, uint64_t length, unsigned need,
			    uint64_t va, uint64_t len, const char **why)
{
	if ((access & need) != need) {
		*why = "region lacks the required access right";
		return false;
	}
	/* [va, va+len) inside [iova, iova+length), written to avoid overflow */
	if (va < iova || va - iova > length || len > length - (va - iova)) {
		*why = "address range outside the region";
		return false;
	}
	return true;
}

uint32_t srn_mr_key_slot(uint32_t key)
{
	return SRN_KEY_SLOT(key);
}
