/*
 * mr.c - memory keys: allocation, lookup and the access check every byte
 * movement goes through.
 */
#include "core/mr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

static int grow(struct srn_nic *nic)
{
	uint32_t cap = nic->mr_cap ? nic->mr_cap * 2 : 64;
	if (cap > SRN_MAX_MR + 1)
		return -ENOMEM;
	struct srn_mr **m = realloc(nic->mrs, cap * sizeof(*m));
	if (!m)
		return -ENOMEM;
	nic->mrs = m;
	uint8_t *k = realloc(nic->mr_keybyte, cap);
	if (!k)
		return -ENOMEM;
	nic->mr_keybyte = k;
	memset(&nic->mrs[nic->mr_cap], 0, (cap - nic->mr_cap) * sizeof(*m));
	/* Seed key bytes from the slot so fresh tables do not all start at 0. */
	for (uint32_t i = nic->mr_cap; i < cap; i++)
		nic->mr_keybyte[i] = (uint8_t)(i * 37 + 1);
	nic->mr_cap = cap;
	return 0;
}

int srn_mr_insert(struct srn_nic *nic, struct srn_mr *mr)
{
	for (;;) {
		/* Slot 0 is never used, so key 0 (a common uninitialised
		 * value) is always invalid. */
		for (uint32_t n = 0; n < nic->mr_cap; n++) {
			uint32_t slot = (nic->mr_free_hint + n) % nic->mr_cap;
			if (slot == 0 || nic->mrs[slot])
				continue;
			uint8_t kb = nic->mr_keybyte[slot]++;
			mr->key = slot << 8 | kb;
			nic->mrs[slot] = mr;
			nic->mr_free_hint = slot + 1;
			return 0;
		}
		int ret = grow(nic);
		if (ret)
			return ret;
	}
}

void srn_mr_remove(struct srn_nic *nic, struct srn_mr *mr)
{
	uint32_t slot = mr->key >> 8;
	if (slot < nic->mr_cap && nic->mrs[slot] == mr)
		nic->mrs[slot] = NULL;
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
	uint32_t slot = key >> 8;
	struct srn_mr *mr = slot < nic->mr_cap ? nic->mrs[slot] : NULL;
	return mr && mr->key == key ? mr : NULL;
}

void *srn_mr_resolve(struct srn_nic *nic, struct srn_pd *pd, uint32_t qpn, uint32_t key,
		     uint64_t va, uint64_t len, unsigned need, const char **why)
{
	uint32_t slot = key >> 8;
	struct srn_mr *mr = slot < nic->mr_cap ? nic->mrs[slot] : NULL;
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
	if ((mr->access & need) != need) {
		*why = "region lacks the required access right";
		return NULL;
	}
	/* [va, va+len) inside [iova, iova+length), written to avoid overflow */
	if (va < mr->iova || va - mr->iova > mr->length || len > mr->length - (va - mr->iova)) {
		*why = "address range outside the region";
		return NULL;
	}
	return region->base + (va - region->iova);
}
