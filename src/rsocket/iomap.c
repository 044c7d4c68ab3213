/*
 * iomap.c - riomap, riounmap, riowrite: direct placement.  riomap
 * registers a local buffer for remote writing and, at the next send call,
 * writes its entry (offset, address, key, length) into a slot of the
 * peer's iomap table (an IOMAP_SGL Write with immediate; the table size
 * came in the peer's connect data).  riowrite looks the offset up in OUR
 * table, which the peer fills the same way, and places the bytes there by
 * plain RDMA Write: no immediate, so the peer's application learns of
 * the data only by its own means (riostream polls a byte).  Being a
 * Write on the same RC QP, it lands before any later rsend's data.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "rdmacm/export.h"
#include "rsocket/rs.h"

static bool slot_used(const struct srn_rs *rs, int index)
{
	for (const struct srn_rs_iomr *m = rs->iomaps; m; m = m->next)
		if (m->index == index)
			return true;
	return false;
}

SRN_RDMACM_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
	(void)flags;
	struct srn_rs *rs = srn_rs_get(socket);
	if (!rs)
		return -1;
	int ret = 0;
	struct srn_rs_iomr *m = NULL;
	if (!rs->cq || (prot & ~PROT_WRITE) || !buf || !len) {
		ret = -EINVAL;
		goto out;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		ret = -ENOMEM;
		goto out;
	}
	m->index = -1;
	int access = IBV_ACCESS_LOCAL_WRITE;
	if (prot & PROT_WRITE) {
		for (unsigned i = 0; i < rs->peer_iomap.length && m->index < 0; i++)
			if (!slot_used(rs, (int)i))
				m->index = (int)i;
		if (m->index < 0) {
			ret = -ENOMEM;     /* the peer's table is full (or it has none) */
			goto out;
		}
		access |= IBV_ACCESS_REMOTE_WRITE;
	}
	m->mr = ibv_reg_mr(rs->id->pd, buf, len, access);
	if (!m->mr) {
		ret = -(errno ? errno : ENOMEM);
		goto out;
	}
	if (offset == -1)
		offset = (off_t)(uintptr_t)buf;
	m->offset = (uint64_t)offset;
	m->next = rs->iomaps;
	rs->iomaps = m;
	if (m->index >= 0)
		rs->iomap_pending = true;
	m = NULL;
out:
	free(m);
	srn_rs_put(rs);
	return ret ? (off_t)srn_rs_seterr(ret) : offset;
}

SRN_RDMACM_EXPORT int riounmap(int socket, void *buf, size_t len)
{
	struct srn_rs *rs = srn_rs_get(socket);
	if (!rs)
		return -1;
	int ret = -EINVAL;
	for (struct srn_rs_iomr **pp = &rs->iomaps; *pp; pp = &(*pp)->next) {
		struct srn_rs_iomr *m = *pp;
		if (m->mr->addr == buf && m->mr->length == len) {
			*pp = m->next;
			ibv_dereg_mr(m->mr);
			free(m);
			ret = 0;
			break;
		}
	}
	srn_rs_put(rs);
	return srn_rs_seterr(ret);
}

void srn_rs_iomap_free_all(struct srn_rs *rs)
{
	while (rs->iomaps) {
		struct srn_rs_iomr *m = rs->iomaps;
		rs->iomaps = m->next;
		ibv_dereg_mr(m->mr);
		free(m);
	}
}

static bool can_send_or_closed(const struct srn_rs *rs)
{
	return srn_rs_can_send(rs) || !rs->writable || !srn_rs_connected(rs);
}

int srn_rs_send_iomaps(struct srn_rs *rs, bool nonblock)
{
	for (struct srn_rs_iomr *m = rs->iomaps; m; m = m->next) {
		if (m->index < 0 || m->sent)
			continue;
		/* It uses a receive at the peer, so it needs a credit too. */
		int ret = srn_rs_wait(rs, nonblock, -1, can_send_or_closed);
		if (ret)
			return ret;
		if (!rs->writable || !srn_rs_connected(rs))
			return -ECONNRESET;
		struct srn_rs_iomap e = { .offset = m->offset,
			.sge = { (uintptr_t)m->mr->addr, m->mr->rkey, (uint32_t)m->mr->length } };
		srn_rs_iomap_for_peer(&e, rs->swap);
		ret = srn_rs_post_write(rs, srn_rs_imm(SRN_RS_OP_IOMAP_SGL, (uint32_t)m->index), true,
					&e, sizeof(e),
					rs->peer_iomap.addr + (uint64_t)m->index * SRN_RS_IOMAP_LEN,
					rs->peer_iomap.key, true);
		if (ret)
			return ret;
		rs->sseq_no++;
		m->sent = true;
	}
	rs->iomap_pending = false;
	return 0;
}

/* Our table entry covering offset, NULL if none. */
static const struct srn_rs_iomap *find(const struct srn_rs *rs, uint64_t offset)
{
	const struct srn_rs_iomap *tab = (const void *)(rs->tslots + SRN_RS_SGL_SLOTS);
	for (unsigned i = 0; i < rs->iomap_size; i++) {
		uint64_t len = __atomic_load_n(&tab[i].sge.length, __ATOMIC_ACQUIRE);
		if (len && offset >= tab[i].offset && offset - tab[i].offset < len)
			return &tab[i];
	}
	return NULL;
}

static bool can_write_direct(const struct srn_rs *rs)
{
	/* A plain Write uses no receive at the peer: no credit needed. */
	return (rs->cq && rs->sqe_avail > 0 && rs->sbuf_avail >= SRN_RS_SNDLOWAT) ||
	       !rs->writable || !srn_rs_connected(rs);
}

static ssize_t iowrite_locked(struct srn_rs *rs, const uint8_t *buf, size_t count, uint64_t offset,
			      bool nb)
{
	int ret = 0;
	if (!srn_rs_connected(rs) || !rs->writable)
		return rs->state == SRN_RS_CONNECTED || rs->state == SRN_RS_ERROR ||
		       rs->state == SRN_RS_DISCONNECTED ? -ECONNRESET : -ENOTCONN;
	if (rs->iomap_pending) {
		ret = srn_rs_send_iomaps(rs, nb);
		if (ret)
			return ret;
	}
	size_t done = 0;
	while (done < count) {
		const struct srn_rs_iomap *e = find(rs, offset);
		if (!e) {
			ret = -EINVAL;   /* the peer mapped nothing there */
			break;
		}
		ret = srn_rs_wait(rs, nb, -1, can_write_direct);
		if (ret)
			break;
		if (!rs->writable || !srn_rs_connected(rs)) {
			ret = -ECONNRESET;
			break;
		}
		uint64_t in_map = e->sge.length - (offset - e->offset);
		uint32_t n = count - done < SRN_RS_MAX_XFER ? (uint32_t)(count - done) : SRN_RS_MAX_XFER;
		if (n > rs->sbuf_avail)
			n = rs->sbuf_avail;
		if (n > in_map)
			n = (uint32_t)in_map;
		ret = srn_rs_post_write(rs, srn_rs_imm(SRN_RS_OP_WRITE, n), false, buf + done, n,
					e->sge.addr + (offset - e->offset), e->sge.key, true);
		if (ret)
			break;
		done += n;
		offset += n;
	}
	return done ? (ssize_t)done : ret;
}

SRN_RDMACM_EXPORT size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	struct srn_rs *rs = srn_rs_get(socket);
	if (!rs)
		return (size_t)-1;
	bool nb = (rs->fd_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT);
	ssize_t ret = iowrite_locked(rs, buf, count, (uint64_t)offset, nb);
	srn_rs_put(rs);
	return ret < 0 ? (size_t)srn_rs_seterr((int)ret) : (size_t)ret;
}
