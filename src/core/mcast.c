/*
 * mcast.c - UD multicast membership (delivery: engine/progress.c).
 *
 * One socket per joined group (link/mcast.c), registered in the progress
 * thread's epoll set; a packet that arrives on it goes to every attached
 * UD QP whose Q_Key matches (the responder checks it), as a switch
 * replicates a multicast packet to every member port.
 */
#include "core/mcast.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "core/limits.h"
#include "core/nic.h"
#include "core/qp.h"
#include "link/mcast.h"

static struct srn_mcast_group *find(struct srn_nic *nic, const uint8_t gid[16])
{
	for (int i = 0; i < nic->tables.nmcast; i++)
		if (memcmp(nic->tables.mcast[i]->gid, gid, 16) == 0)
			return nic->tables.mcast[i];
	return NULL;
}

static int group_open(struct srn_nic *nic, const uint8_t gid[16], struct srn_mcast_group **out)
{
	if (nic->tables.nmcast >= SRN_MAX_MCAST_GRP)
		return -ENOMEM;
	if (!nic->tables.mcast_sender_ready) {
		int r = srn_udp_mcast_sender(&nic->link.udp);
		if (r)
			return r;
		nic->tables.mcast_sender_ready = true;
	}
	struct srn_mcast_group *g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	memcpy(g->gid, gid, 16);
	int ret = srn_udp_mcast_join(&g->sock, &nic->link.udp, gid);
	if (ret) {
		free(g);
		return ret;
	}
	/* Trace what the group receives in the device's trace (the
	 * trace belongs to the device socket; the group socket borrows it). */
	g->sock.pcap = nic->link.udp.pcap;
	g->sock.hooked = g->sock.pcap != NULL;
	struct epoll_event e = { .events = EPOLLIN, .data.u32 = 2 };
	if (epoll_ctl(nic->engine.ep_all, EPOLL_CTL_ADD, g->sock.fd, &e)) {
		ret = -errno;
		g->sock.pcap = NULL;
		srn_udp_close(&g->sock);
		free(g);
		return ret;
	}
	nic->tables.mcast[nic->tables.nmcast++] = g;
	*out = g;
	return 0;
}

static void group_close(struct srn_nic *nic, struct srn_mcast_group *g)
{
	epoll_ctl(nic->engine.ep_all, EPOLL_CTL_DEL, g->sock.fd, NULL);
	g->sock.pcap = NULL;       /* borrowed from the device socket */
	srn_udp_close(&g->sock);   /* closing the socket leaves the group */
	free(g->qps);
	for (int i = 0; i < nic->tables.nmcast; i++)
		if (nic->tables.mcast[i] == g) {
			nic->tables.mcast[i] = nic->tables.mcast[--nic->tables.nmcast];
			break;
		}
	free(g);
}

int srn_mcast_attach(struct srn_nic *nic, struct srn_qp *qp, const uint8_t gid[16])
{
	struct srn_mcast_group *g = find(nic, gid);
	if (!g) {
		int ret = group_open(nic, gid, &g);
		if (ret)
			return ret;
	}
	for (int i = 0; i < g->nqps; i++)
		if (g->qps[i] == qp)
			return 0;       /* attaching twice is not an error */
	if (g->nqps >= SRN_MAX_MCAST_QP_ATTACH)
		return -ENOMEM;
	if (g->nqps == g->cap) {
		int cap = g->cap ? g->cap * 2 : 4;
		struct srn_qp **q = realloc(g->qps, (size_t)cap * sizeof(*q));
		if (!q)
			return -ENOMEM;
		g->qps = q;
		g->cap = cap;
	}
	g->qps[g->nqps++] = qp;
	return 0;
}

int srn_mcast_detach(struct srn_nic *nic, struct srn_qp *qp, const uint8_t gid[16])
{
	struct srn_mcast_group *g = find(nic, gid);
	if (!g)
		return -EINVAL;
	for (int i = 0; i < g->nqps; i++)
		if (g->qps[i] == qp) {
			g->qps[i] = g->qps[--g->nqps];
			if (g->nqps == 0)
				group_close(nic, g);
			return 0;
		}
	return -EINVAL;
}

void srn_mcast_qp_gone(struct srn_nic *nic, struct srn_qp *qp)
{
	for (int i = nic->tables.nmcast - 1; i >= 0; i--)
		srn_mcast_detach(nic, qp, nic->tables.mcast[i]->gid);
}

void srn_mcast_fini(struct srn_nic *nic)
{
	while (nic->tables.nmcast)
		group_close(nic, nic->tables.mcast[0]);
}
