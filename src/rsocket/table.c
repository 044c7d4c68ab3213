/*
 * table.c - socket numbers to rsockets.  The number is a descriptor the
 * rsocket owns (its event channel's fd), so the table is an array indexed
 * by it, grown on demand.  Each rsocket is counted once by the table and
 * once per caller inside an r* call; it is freed when the last count goes,
 * so an rclose racing another thread's rrecv never frees memory under it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rsocket/rs.h"

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct srn_rs **table;
static int table_len;

int srn_rs_seterr(int neg)
{
	if (neg >= 0)
		return neg;
	errno = -neg;
	return -1;
}

int srn_rs_table_add(struct srn_rs *rs)
{
	int ret = 0;
	pthread_mutex_lock(&table_lock);
	if (rs->fd >= table_len) {
		int n = table_len ? table_len : 64;
		while (n <= rs->fd)
			n *= 2;
		struct srn_rs **t = realloc(table, (size_t)n * sizeof(*t));
		if (!t) {
			ret = -ENOMEM;
			goto out;
		}
		memset(t + table_len, 0, (size_t)(n - table_len) * sizeof(*t));
		table = t;
		table_len = n;
	}
	if (table[rs->fd]) {
		ret = -EEXIST;   /* a descriptor we own cannot be in use twice */
		goto out;
	}
	table[rs->fd] = rs;
	rs->refs++;
out:
	pthread_mutex_unlock(&table_lock);
	return ret;
}

/* Drop a count (must hold table_lock); true: it was the last, the
 * caller frees the rsocket once table_lock is released (freeing destroys
 * the rdma_cm id, which takes the CM lock). */
static bool unref(struct srn_rs *rs)
{
	return --rs->refs == 0;
}

void srn_rs_table_del(struct srn_rs *rs)
{
	bool last = false;
	pthread_mutex_lock(&table_lock);
	if (rs->fd >= 0 && rs->fd < table_len && table[rs->fd] == rs) {
		table[rs->fd] = NULL;
		last = unref(rs);
	}
	pthread_mutex_unlock(&table_lock);
	if (last)
		srn_rs_free(rs);
}

struct srn_rs *srn_rs_get(int fd)
{
	struct srn_rs *rs = NULL;
	pthread_mutex_lock(&table_lock);
	if (fd >= 0 && fd < table_len && table[fd]) {
		rs = table[fd];
		rs->refs++;
	}
	pthread_mutex_unlock(&table_lock);
	if (!rs) {
		errno = EBADF;
		return NULL;
	}
	pthread_mutex_lock(&rs->lock);
	return rs;
}

void srn_rs_put(struct srn_rs *rs)
{
	pthread_mutex_unlock(&rs->lock);
	pthread_mutex_lock(&table_lock);
	bool last = unref(rs);
	pthread_mutex_unlock(&table_lock);
	if (last)
		srn_rs_free(rs);
}

bool srn_rs_is_rsocket(int fd)
{
	pthread_mutex_lock(&table_lock);
	bool yes = fd >= 0 && fd < table_len && table[fd];
	pthread_mutex_unlock(&table_lock);
	return yes;
}

struct srn_rs *srn_rs_alloc(const struct srn_rs *inherit)
{
	struct srn_rs *rs = calloc(1, sizeof(*rs));
	if (!rs)
		return NULL;
	pthread_mutex_init(&rs->lock, NULL);
	rs->fd = -1;
	if (inherit) {
		/* An accepted socket takes the listener's sizes, as rdma-core's. */
		rs->sbuf_size = inherit->sbuf_size;
		rs->rbuf_size = inherit->rbuf_size;
		rs->sq_size = inherit->sq_size;
		rs->rq_size = inherit->rq_size;
		rs->sq_inline = inherit->sq_inline;
		rs->iomap_size = inherit->iomap_size;
		rs->domain = inherit->domain;
	} else {
		rs->sbuf_size = SRN_RS_DEF_MEM;
		rs->rbuf_size = SRN_RS_DEF_MEM;
		rs->sq_size = SRN_RS_DEF_SQ;
		rs->rq_size = SRN_RS_DEF_RQ;
		rs->sq_inline = SRN_RS_DEF_INLINE;
	}
	return rs;
}

void srn_rs_free(struct srn_rs *rs)
{
	/* The last count went: close.c tore the connection down already, or
	 * setup failed before there was one. */
	srn_rs_iomap_free_all(rs);
	srn_rs_res_destroy(rs);
	srn_ds_free(rs);             /* closes the UDP socket, the number */
	if (rs->id)
		rdma_destroy_id(rs->id);
	if (rs->ch)
		rdma_destroy_event_channel(rs->ch);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
}
