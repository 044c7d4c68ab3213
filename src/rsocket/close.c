/*
 * close.c - rshutdown and rclose.  An orderly close tells the peer in band
 * first (a control Write: SHUTDOWN when only our write side closes,
 * DISCONNECT when nothing more will flow either way), waits a bounded
 * time for what we sent to complete, then disconnects the rdma_cm id
 * (DREQ).  The peer reads what we sent, then end of stream.
 */
#include <errno.h>
#include <sys/socket.h>

#include "rdmacm/export.h"
#include "rsocket/rs.h"

static bool ctrl_ready(const struct srn_rs *rs)
{
	return srn_rs_ctrl_avail(rs) || !srn_rs_connected(rs);
}

void srn_rs_shutdown_locked(struct srn_rs *rs, int how)
{
	if (!srn_rs_connected(rs))
		return;
	enum srn_rs_ctrl ctrl;
	bool send = true;
	if (how == SHUT_RDWR) {
		ctrl = SRN_RS_CTRL_DISCONNECT;
		rs->readable = rs->writable = false;
	} else if (how == SHUT_WR) {
		rs->writable = false;
		ctrl = rs->readable ? SRN_RS_CTRL_SHUTDOWN : SRN_RS_CTRL_DISCONNECT;
	} else {
		rs->readable = false;
		ctrl = SRN_RS_CTRL_DISCONNECT;
		send = !rs->writable;    /* reading stops here; the peer may still be told later */
	}
	if (!send)
		return;
	/* Bounded: a peer that is gone never frees a control slot. */
	srn_rs_wait(rs, false, SRN_RS_CLOSE_MS, ctrl_ready);
	if (srn_rs_connected(rs) && srn_rs_ctrl_avail(rs))
		srn_rs_post_ctrl(rs, ctrl);
	srn_rs_wait(rs, false, SRN_RS_CLOSE_MS, srn_rs_all_sent);
	if (!rs->readable && !rs->writable && rs->state == SRN_RS_CONNECTED) {
		rs->state = SRN_RS_DISCONNECTED;
		rdma_disconnect(rs->id);
	}
}

SRN_RDMACM_EXPORT int rshutdown(int socket, int how)
{
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return srn_rs_seterr(-EINVAL);
	struct srn_rs *rs = srn_rs_get(socket);
	if (!rs)
		return -1;
	int ret = 0;
	if (rs->ds) {
		/* Datagrams: reading or writing stops here, nothing is sent. */
		if (how != SHUT_WR)
			rs->readable = false;
		if (how != SHUT_RD)
			rs->writable = false;
	} else if (rs->state == SRN_RS_CONNECTED)
		srn_rs_shutdown_locked(rs, how);
	else if (rs->state != SRN_RS_DISCONNECTED && rs->state != SRN_RS_ERROR)
		ret = -ENOTCONN;
	srn_rs_put(rs);
	return srn_rs_seterr(ret);
}

SRN_RDMACM_EXPORT int rclose(int socket)
{
	struct srn_rs *rs = srn_rs_get(socket);
	if (!rs)
		return -1;
	if (rs->ds) {
		/* Let the Sends we posted leave (bounded: a UD Send completes
		 * without the peer), then the last reference frees it all. */
		srn_rs_wait(rs, false, SRN_RS_CLOSE_MS, srn_ds_all_sent);
		rs->readable = rs->writable = false;
		srn_rs_table_del(rs);
		srn_rs_put(rs);
		return 0;
	}
	if (rs->state == SRN_RS_CONNECTED)
		srn_rs_shutdown_locked(rs, SHUT_RDWR);
	if (rs->state == SRN_RS_DISCONNECTED || rs->state == SRN_RS_ERROR || rs->state == SRN_RS_CONNECTING)
		rdma_disconnect(rs->id);
	/* Connections accepted and never raccept'ed go with the listener. */
	while (rs->accept_head) {
		struct srn_rs *c = rs->accept_head;
		rs->accept_head = c->accept_next;
		pthread_mutex_lock(&c->lock);
		srn_rs_shutdown_locked(c, SHUT_RDWR);
		rdma_disconnect(c->id);
		pthread_mutex_unlock(&c->lock);
		srn_rs_table_del(c);
	}
	rs->accept_tail = NULL;
	rs->state = SRN_RS_DISCONNECTED;
	rs->readable = rs->writable = false;
	/* Off the table: the number is free once the last user lets go
	 * (srn_rs_put frees the socket and closes its channel). */
	srn_rs_table_del(rs);
	srn_rs_put(rs);
	return 0;
}
