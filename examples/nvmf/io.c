/*
 * io.c - namespaces and the NVM I/O commands: Read, Write, Flush, Write
 * Zeroes, Dataset Management.
 *
 * A namespace is a file or block device (pread/pwrite, fdatasync for
 * Flush, holes for deallocation) or anonymous memory ("ram:SIZE").  LBAs
 * are 512 bytes.  Every range is checked against the namespace before it
 * is touched (LBA Out of Range), without overflow: slba + nlb is computed
 * only once slba is known to be below the size.
 *
 * Several I/O threads may serve one namespace.  A file is the kernel's
 * to order; RAM is copied stripe by stripe (64 KiB), each under its lock
 * once the namespace is shared (nvmf_ns_share), so a sector is never torn
 * and a thread reading a block another wrote sees it in full.
 */
#include "core.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct nvmf_ns *nvmf_ns_find(struct nvmf_subsys *ss, uint32_t nsid)
{
	for (unsigned i = 0; i < ss->nns; i++)
		if (ss->ns[i].nsid == nsid)
			return &ss->ns[i];
	return NULL;
}

static uint64_t parse_size(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 10);
	switch (*end) {
	case 'k': case 'K': v <<= 10; break;
	case 'm': case 'M': v <<= 20; break;
	case 'g': case 'G': v <<= 30; break;
	default: break;
	}
	return v;
}

int nvmf_ns_open(struct nvmf_ns *ns, const char *spec)
{
	ns->fd = -1;
	ns->ram = NULL;
	ns->stripes = NULL;
	uint64_t bytes;
	if (!strncmp(spec, "ram:", 4)) {
		bytes = parse_size(spec + 4) & ~(uint64_t)(NVMF_LBA_SIZE - 1);
		if (!bytes)
			return -EINVAL;
		ns->ram = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
				       MAP_NORESERVE, -1, 0);
		if (ns->ram == MAP_FAILED) {
			ns->ram = NULL;
			return -ENOMEM;
		}
	} else {
		ns->fd = open(spec, O_RDWR | O_CLOEXEC);
		if (ns->fd < 0)
			return -errno;
		off_t end = lseek(ns->fd, 0, SEEK_END); /* files and block devices alike */
		bytes = end > 0 ? (uint64_t)end & ~(uint64_t)(NVMF_LBA_SIZE - 1) : 0;
		if (!bytes) {
			close(ns->fd);
			ns->fd = -1;
			return -EINVAL;
		}
	}
	ns->nlb = bytes >> NVMF_LBA_SHIFT;
	/* A stable NGUID from the spec string and NSID. */
	uint64_t h = 1469598103934665603ull;
	for (const char *p = spec; *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ull;
	memcpy(ns->nguid, &h, 8);
	h = (h ^ ns->nsid) * 1099511628211ull;
	memcpy(ns->nguid + 8, &h, 8);
	return 0;
}

#define STRIPE_SHIFT 16

int nvmf_ns_share(struct nvmf_ns *ns)
{
	if (!ns->ram || ns->stripes)
		return 0;
	ns->stripes = calloc(NVMF_NS_STRIPES, sizeof(*ns->stripes));
	if (!ns->stripes)
		return -ENOMEM;
	for (unsigned i = 0; i < NVMF_NS_STRIPES; i++)
		pthread_mutex_init(&ns->stripes[i], NULL);
	return 0;
}

void nvmf_ns_close(struct nvmf_ns *ns)
{
	if (ns->stripes) {
		for (unsigned i = 0; i < NVMF_NS_STRIPES; i++)
			pthread_mutex_destroy(&ns->stripes[i]);
		free(ns->stripes);
		ns->stripes = NULL;
	}
	if (ns->ram)
		munmap(ns->ram, ns->nlb << NVMF_LBA_SHIFT);
	if (ns->fd >= 0)
		close(ns->fd);
	ns->ram = NULL;
	ns->fd = -1;
}

static bool in_range(const struct nvmf_ns *ns, uint64_t slba, uint64_t nlb)
{
	return slba < ns->nlb && nlb <= ns->nlb - slba;
}

enum ram_op { RAM_READ, RAM_WRITE, RAM_ZERO };

/* [off, off + len) of a RAM namespace, stripe by stripe, each under its
 * lock when shared (buf is NULL for RAM_ZERO). */
static void ram_op(struct nvmf_ns *ns, enum ram_op op, uint8_t *buf, uint64_t off, uint64_t len)
{
	while (len) {
		uint64_t n = (((off >> STRIPE_SHIFT) + 1) << STRIPE_SHIFT) - off;
		n = n < len ? n : len;
		pthread_mutex_t *m =
			ns->stripes ? &ns->stripes[(off >> STRIPE_SHIFT) % NVMF_NS_STRIPES] : NULL;
		if (m)
			pthread_mutex_lock(m);
		if (op == RAM_WRITE)
			memcpy(ns->ram + off, buf, n);
		else if (op == RAM_READ)
			memcpy(buf, ns->ram + off, n);
		else
			memset(ns->ram + off, 0, n);
		if (m)
			pthread_mutex_unlock(m);
		off += n;
		len -= n;
		buf = buf ? buf + n : NULL;
	}
}

int nvmf_ns_rw(struct nvmf_ns *ns, bool write, uint8_t *buf, uint64_t off, size_t len)
{
	if (ns->ram) {
		ram_op(ns, write ? RAM_WRITE : RAM_READ, buf, off, len);
		return 0;
	}
	while (len) {
		ssize_t n = write ? pwrite(ns->fd, buf, len, (off_t)off)
				  : pread(ns->fd, buf, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EIO;
		buf += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

static int ns_zero(struct nvmf_ns *ns, uint64_t off, uint64_t len)
{
	if (ns->ram) {
		ram_op(ns, RAM_ZERO, NULL, off, len);
		return 0;
	}
	if (!fallocate(ns->fd, FALLOC_FL_ZERO_RANGE, (off_t)off, (off_t)len))
		return 0;
	/* Block devices and some file systems: write zeros. */
	static const uint8_t zeros[65536];
	while (len) {
		size_t n = len < sizeof(zeros) ? (size_t)len : sizeof(zeros);
		if (nvmf_ns_rw(ns, true, (uint8_t *)zeros, off, n))
			return -EIO;
		off += n;
		len -= n;
	}
	return 0;
}

static void stat_add(uint64_t *v, uint64_t n)
{
	__atomic_fetch_add(v, n, __ATOMIC_RELAXED); /* read by the SMART log (admin.c) */
}

static uint16_t do_rw(struct nvmf_stats *st, struct nvmf_ns *ns, struct nvmf_req *r, bool write)
{
	uint64_t slba = r->sqe.cdw10 | (uint64_t)r->sqe.cdw11 << 32;
	uint64_t nlb = (r->sqe.cdw12 & 0xffff) + 1ull;
	uint64_t bytes = nlb << NVMF_LBA_SHIFT;
	if (bytes > NVMF_MAX_DATA)
		return ST_INVALID_FIELD | ST_DNR; /* beyond MDTS */
	if (!in_range(ns, slba, nlb))
		return ST_LBA_RANGE | ST_DNR;
	if (r->len < bytes)
		return ST_SGL_LEN_INVALID | ST_DNR;
	if (nvmf_ns_rw(ns, write, r->data, slba << NVMF_LBA_SHIFT, bytes))
		return ST_INTERNAL;
	if (write) {
		stat_add(&st->wr_cmds, 1);
		stat_add(&st->wr_units, nlb);
	} else {
		stat_add(&st->rd_cmds, 1);
		stat_add(&st->rd_units, nlb);
		r->xfer = (uint32_t)bytes;
	}
	return ST_OK;
}

static uint16_t do_flush(struct nvmf_ctrl *c, uint32_t nsid)
{
	for (unsigned i = 0; i < c->ss->nns; i++) {
		struct nvmf_ns *ns = &c->ss->ns[i];
		if ((nsid == 0xffffffff || ns->nsid == nsid) && ns->fd >= 0 && fdatasync(ns->fd))
			return ST_INTERNAL;
	}
	return ST_OK;
}

static uint16_t do_write_zeroes(struct nvmf_ns *ns, struct nvmf_req *r)
{
	uint64_t slba = r->sqe.cdw10 | (uint64_t)r->sqe.cdw11 << 32;
	uint64_t nlb = (r->sqe.cdw12 & 0xffff) + 1ull;
	if (!in_range(ns, slba, nlb))
		return ST_LBA_RANGE | ST_DNR;
	return ns_zero(ns, slba << NVMF_LBA_SHIFT, nlb << NVMF_LBA_SHIFT) ? ST_INTERNAL : ST_OK;
}

/* Dataset Management (Base 7.3 / NVM 3.2.3): ranges of 16 bytes (context
 * attributes, NLB, SLBA).  Deallocate zeros the ranges (DLFEAT says
 * deallocated blocks read as zeros); the other attributes are hints. */
static uint16_t do_dsm(struct nvmf_ns *ns, struct nvmf_req *r)
{
	uint32_t nr = (r->sqe.cdw10 & 0xff) + 1;
	if (r->len < nr * 16)
		return ST_SGL_LEN_INVALID | ST_DNR;
	struct { uint32_t cattr, nlb; uint64_t slba; } rg;
	for (uint32_t i = 0; i < nr; i++) {
		memcpy(&rg, r->data + 16 * i, 16);
		if (rg.nlb && !in_range(ns, rg.slba, rg.nlb))
			return ST_LBA_RANGE | ST_DNR; /* checked all before any is done */
	}
	if (!(r->sqe.cdw11 & 4))
		return ST_OK;
	for (uint32_t i = 0; i < nr; i++) {
		memcpy(&rg, r->data + 16 * i, 16);
		if (rg.nlb && ns_zero(ns, rg.slba << NVMF_LBA_SHIFT,
				      (uint64_t)rg.nlb << NVMF_LBA_SHIFT))
			return ST_INTERNAL;
	}
	return ST_OK;
}

/* Without the target's lock: CSTS is an atomic, the subsystem fixed. */
uint16_t nvmf_io(struct nvmf_ctrl *c, struct nvmf_stats *st, struct nvmf_req *r)
{
	if (!(__atomic_load_n(&c->csts, __ATOMIC_RELAXED) & CSTS_RDY))
		return ST_CMD_SEQ_ERROR;
	if (r->sqe.opc == OPC_FLUSH && r->sqe.nsid == 0xffffffff)
		return do_flush(c, r->sqe.nsid);
	struct nvmf_ns *ns = nvmf_ns_find(c->ss, r->sqe.nsid);
	switch (r->sqe.opc) {
	case OPC_READ:
	case OPC_WRITE:
	case OPC_FLUSH:
	case OPC_WRITE_ZEROES:
	case OPC_DSM:
		if (!ns)
			return ST_INVALID_NS | ST_DNR;
		break;
	default: return ST_INVALID_OPCODE | ST_DNR;
	}
	switch (r->sqe.opc) {
	case OPC_READ: return do_rw(st, ns, r, false);
	case OPC_WRITE: return do_rw(st, ns, r, true);
	case OPC_FLUSH: return do_flush(c, ns->nsid);
	case OPC_WRITE_ZEROES: return do_write_zeroes(ns, r);
	default: return do_dsm(ns, r);
	}
}
