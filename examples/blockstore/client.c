/*
 * client.c - the client library's transport-independent part: request
 * objects and their buffers, the queue of requests waiting for room on a
 * connection, completions, retries.
 *
 * A request is in exactly one place: the caller's hands, `pending`, a
 * transport's flight (io->busy, io->conn), or `done`.  A transport that
 * loses a connection hands its requests back with bs_requeue; they go to
 * the front of `pending`, so a retry is not overtaken by newer requests.
 */
#include "client_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

uint64_t bs_client_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int bs_client_open(const struct bs_client_opts *o, struct bs_client **out)
{
	if (!o->nconn || !o->depth || o->depth > BS_MAX_QP_DEPTH || o->nconn > 64)
		return -EINVAL;
	struct bs_client *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->o = *o;
	if (!c->o.reconnect_ms)
		c->o.reconnect_ms = 10000;
	c->t = o->tcp ? &bs_tcp_transport : &bs_rdma_transport;
	c->nios = o->nconn * o->depth;
	c->ios = calloc(c->nios, sizeof(*c->ios));
	void *bufs = mmap(NULL, (size_t)c->nios * BS_SLOT_STRIDE, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	c->bufs = bufs == MAP_FAILED ? NULL : bufs;
	c->pending_tail = &c->pending;
	c->done_tail = &c->done;
	if (!c->ios || !c->bufs) {
		free(c->ios);
		free(c);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < c->nios; i++) {
		c->ios[i].index = i;
		c->ios[i].buf = c->bufs + (size_t)i * BS_SLOT_STRIDE;
		c->ios[i].conn = -1;
	}
	int ret = c->t->open(c);
	if (ret) {
		munmap(c->bufs, (size_t)c->nios * BS_SLOT_STRIDE);
		free(c->ios);
		free(c);
		return ret;
	}
	*out = c;
	return 0;
}

void bs_client_close(struct bs_client *c)
{
	c->t->close(c);
	munmap(c->bufs, (size_t)c->nios * BS_SLOT_STRIDE);
	free(c->ios);
	free(c);
}

unsigned bs_client_nios(const struct bs_client *c)
{
	return c->nios;
}

struct bs_io *bs_client_io(struct bs_client *c, unsigned i)
{
	return i < c->nios ? &c->ios[i] : NULL;
}

uint64_t bs_client_nblocks(const struct bs_client *c)
{
	return c->nblocks;
}

const struct bs_client_counters *bs_client_counters(const struct bs_client *c)
{
	return &c->cnt;
}

int bs_submit(struct bs_client *c, struct bs_io *io)
{
	if (io->busy)
		return -EBUSY;
	if ((io->op == BS_OP_WRITE || io->op == BS_OP_READ) && io->lba >= c->nblocks)
		return -ERANGE;
	io->busy = true;
	io->status = 0;
	io->seq = 0;
	io->rdma_read = false;
	io->no_hint = c->o.no_rdma_read;
	io->t_submit = bs_client_now();
	if (io->op == BS_OP_WRITE)
		io->csum = bs_crc32c(0, io->buf, BS_BLOCK);
	io->next = NULL;
	*c->pending_tail = io;
	c->pending_tail = &io->next;
	return 0;
}

void bs_complete(struct bs_client *c, struct bs_io *io, int status)
{
	/* A read served by the server is checked here; an RDMA Read hit was
	 * checked by the transport before it counted as one. */
	if (!status && io->op == BS_OP_READ && !io->rdma_read && !bs_tag_ok(io->buf, io->lba))
		status = -EBADMSG;
	if (!status && io->op == BS_OP_READ)
		io->seq = ((const struct bs_tag *)(io->buf + BS_BLOCK))->seq;
	io->status = status;
	io->conn = -1;
	io->next = NULL;
	*c->done_tail = io;
	c->done_tail = &io->next;
}

void bs_note_up(struct bs_client *c, uint64_t *down_since)
{
	if (!*down_since)
		return; /* never down: the first connect */
	uint64_t us = (bs_client_now() - *down_since) / 1000;
	c->cnt.reconnects++;
	if (us > c->cnt.reconnect_max_us)
		c->cnt.reconnect_max_us = us;
	*down_since = 0;
}

void bs_requeue(struct bs_client *c, struct bs_io *io, bool retry)
{
	if (retry)
		c->cnt.retries++;
	io->conn = -1;
	io->next = c->pending;
	c->pending = io;
	if (c->pending_tail == &c->pending)
		c->pending_tail = &io->next;
}

static void post_pending(struct bs_client *c)
{
	while (c->pending) {
		/* Off the queue first: a transport links posted requests
		 * through io->next itself. */
		struct bs_io *io = c->pending;
		c->pending = io->next;
		if (!c->pending)
			c->pending_tail = &c->pending;
		io->next = NULL;
		int ret = c->t->post(c, io);
		if (ret == -EAGAIN) {
			bs_requeue(c, io, false);
			return;
		}
		if (ret)
			bs_complete(c, io, ret);
	}
}

int bs_reap(struct bs_client *c, struct bs_io **out, int max, int timeout_ms)
{
	uint64_t end = bs_client_now() + (uint64_t)timeout_ms * 1000000u;
	for (;;) {
		post_pending(c);
		if (c->done)
			break;
		uint64_t now = bs_client_now();
		c->t->progress(c, now >= end ? 0 : (int)((end - now + 999999) / 1000000));
		post_pending(c);
		if (c->done)
			break;
		if (bs_client_now() >= end)
			return 0;
	}
	int n = 0;
	while (n < max && c->done) {
		struct bs_io *io = c->done;
		c->done = io->next;
		io->busy = false;
		out[n++] = io;
	}
	if (!c->done)
		c->done_tail = &c->done;
	return n;
}

int bs_do(struct bs_client *c, struct bs_io *io, int timeout_ms)
{
	int ret = bs_submit(c, io);
	if (ret)
		return ret;
	struct bs_io *got;
	uint64_t end = bs_client_now() + (uint64_t)timeout_ms * 1000000u;
	while (bs_client_now() < end) {
		if (bs_reap(c, &got, 1, 100) == 1) {
			if (got == io)
				return io->status;
			/* someone else's request: this helper is for idle clients */
		}
	}
	return -ETIMEDOUT;
}
