/*
 * qp1.c - each device's QP1: the CM's state, device addresses, QP1 open,
 * MAD post and send, the CM's counters, and the doorbell of the CM thread.
 *
 * At the first rdma_cm call the CM opens every softrnic device (as
 * librdmacm opens every RDMA device), reads its address from GID 0 and
 * gives it a GSI QP: QPN 1, UD, Q_Key 0x80010000, SRN_CM_NRECV receive
 * buffers of GRH + MAD, SRN_CM_NSEND send slots.  One thread per process (thread.c) sleeps in
 * epoll on the devices' completion channels, a kick eventfd and the
 * earliest CM timer; it receives MADs and runs timers under srn_cm.lock.
 * Packets reach QP1 through the nic like any UD packet, so the nic's own
 * progress (an application's poll or the nic's thread) is what delivers
 * them.
 */
#include "cm/qp1.h"
#include "diag/counters.h"
#include "diag/memcheck.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* libibverbs.so.1's private entry point (src/verbs/verbs_gsi.c). */
struct ibv_qp *softrnic_create_gsi_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init);

struct srn_cm srn_cm = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

#define SLOT_RECV (SRN_UD_GRH_LEN + SRN_MAD_LEN)

void srn_cm_addr_to_gid(const struct sockaddr *a, uint8_t gid[16])
{
	memset(gid, 0, 16);
	if (a->sa_family == AF_INET) {
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, &((const struct sockaddr_in *)a)->sin_addr, 4);
	} else if (a->sa_family == AF_INET6) {
		memcpy(gid, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
	}
}

static void gid_to_addr(const uint8_t gid[16], struct sockaddr_storage *ss)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	memset(ss, 0, sizeof(*ss));
	if (memcmp(gid, v4mapped, 12) == 0) {
		struct sockaddr_in *s = (void *)ss;
		s->sin_family = AF_INET;
		memcpy(&s->sin_addr, gid + 12, 4);
	} else {
		struct sockaddr_in6 *s = (void *)ss;
		s->sin6_family = AF_INET6;
		memcpy(&s->sin6_addr, gid, 16);
	}
}

static bool same_ip(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		      &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
}

static bool is_loopback(const struct sockaddr *a)
{
	if (a->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
	return a->sa_family == AF_INET6 &&
	       IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)a)->sin6_addr);
}

static bool is_multicast(const struct sockaddr *a)
{
	if (a->sa_family == AF_INET)
		return IN_MULTICAST(ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr));
	return a->sa_family == AF_INET6 &&
	       IN6_IS_ADDR_MULTICAST(&((const struct sockaddr_in6 *)a)->sin6_addr);
}

/*
 * Linux binds an rdma_cm id to a loopback address that no RDMA device has
 * as it binds the wildcard: the bind succeeds, id->verbs stays NULL, the
 * device is chosen later. libfabric's verbs provider relies on it: with no
 * node it binds "localhost" and then takes the address of each device's
 * interface instead (vrb_fill_addr).
 */
bool srn_cm_bind_without_dev(const struct sockaddr *a)
{
	return is_loopback(a);
}

struct srn_cm_dev *srn_cm_dev_by_addr(const struct sockaddr *a)
{
	for (int i = 0; i < srn_cm.ndev; i++)
		if (same_ip(a, (const struct sockaddr *)&srn_cm.dev[i].addr))
			return &srn_cm.dev[i];
	return NULL;
}

struct srn_cm_dev *srn_cm_dev_route(const struct sockaddr *src, const struct sockaddr *dst)
{
	if (src && !(src->sa_family == AF_INET ? ((const struct sockaddr_in *)src)->sin_addr.s_addr == 0
		     : IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)src)->sin6_addr)))
		return srn_cm_dev_by_addr(src);
	struct srn_cm_dev *d = srn_cm_dev_by_addr(dst);
	if (d)
		return d;              /* one of ours: that device reaches itself */
	if (is_loopback(dst)) {
		/* Loopback reaches every loopback address: the device on it. */
		for (int i = 0; i < srn_cm.ndev; i++)
			if (is_loopback((const struct sockaddr *)&srn_cm.dev[i].addr) &&
			    srn_cm.dev[i].addr.ss_family == dst->sa_family)
				return &srn_cm.dev[i];
		return NULL;
	}
	/* Elsewhere: the kernel's route picks the source address; the device
	 * that owns it reaches dst. */
	int s = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return NULL;
	struct sockaddr_storage tmp, me;
	socklen_t len = sizeof(me);
	memcpy(&tmp, dst, dst->sa_family == AF_INET ? sizeof(struct sockaddr_in)
						     : sizeof(struct sockaddr_in6));
	((struct sockaddr_in *)&tmp)->sin_port = htons(4791);
	d = NULL;
	if (connect(s, (struct sockaddr *)&tmp, dst->sa_family == AF_INET ? sizeof(struct sockaddr_in)
									  : sizeof(struct sockaddr_in6)) == 0 &&
	    getsockname(s, (struct sockaddr *)&me, &len) == 0)
		d = srn_cm_dev_by_addr((struct sockaddr *)&me);
	close(s);
	/* A multicast group is reached from any interface that joins it
	 * (mckey without -b): when the route's interface has no device, the
	 * first device of the family sends and joins there. */
	for (int i = 0; !d && is_multicast(dst) && i < srn_cm.ndev; i++)
		if (srn_cm.dev[i].addr.ss_family == dst->sa_family)
			d = &srn_cm.dev[i];
	return d;
}

static int post_recv(struct srn_cm_dev *d, uint32_t slot)
{
	struct ibv_sge sge = { (uintptr_t)(d->buf + slot * SLOT_RECV), SLOT_RECV, d->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;
	return ibv_post_recv(d->qp, &wr, &bad);
}

int srn_cm_qp1_open(struct srn_cm_dev *d, struct ibv_device *ibdev)
{
	union ibv_gid gid;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;

	d->ctx = ibv_open_device(ibdev);
	if (!d->ctx)
		return -errno;
	if (ibv_query_gid(d->ctx, 1, 0, &gid) || ibv_query_device(d->ctx, &da) ||
	    ibv_query_port(d->ctx, 1, &pa))
		return -EIO;
	memcpy(d->gid, gid.raw, 16);
	gid_to_addr(d->gid, &d->addr);
	d->guid = be64toh(da.node_guid);
	d->mtu = pa.active_mtu;
	d->max_rd_atomic = (uint8_t)(da.max_qp_rd_atom > 255 ? 255 : da.max_qp_rd_atom);
	d->pd = ibv_alloc_pd(d->ctx);
	d->ch = ibv_create_comp_channel(d->ctx);
	if (!d->pd || !d->ch)
		return -ENOMEM;
	fcntl(d->ch->fd, F_SETFL, fcntl(d->ch->fd, F_GETFL) | O_NONBLOCK);
	d->cq = ibv_create_cq(d->ctx, SRN_CM_NRECV, d, d->ch, 0);
	d->scq = ibv_create_cq(d->ctx, SRN_CM_NSEND, d, NULL, 0);
	if (!d->cq || !d->scq)
		return -ENOMEM;
	size_t size = SRN_CM_NRECV * SLOT_RECV + SRN_CM_NSEND * SRN_MAD_LEN;
	d->buf = calloc(1, size);
	if (!d->buf)
		return -ENOMEM;
	d->mr = ibv_reg_mr(d->pd, d->buf, size, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp_init_attr qa = {
		.send_cq = d->scq, .recv_cq = d->cq, .qp_type = IBV_QPT_UD, .sq_sig_all = 1,
		.cap = { .max_send_wr = SRN_CM_NSEND, .max_recv_wr = SRN_CM_NRECV,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	if (!d->mr || !(d->qp = softrnic_create_gsi_qp(d->pd, &qa)))
		return -errno;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = SRN_GSI_QKEY };
	if (ibv_modify_qp(d->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return -errno;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(d->qp, &a, IBV_QP_STATE))
		return -errno;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(d->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return -errno;
	for (uint32_t i = 0; i < SRN_CM_NRECV; i++)
		if (post_recv(d, i))
			return -ENOMEM;
	if (ibv_req_notify_cq(d->cq, 0))
		return -EIO;
	return 0;
}

static struct ibv_ah *ah_for(struct srn_cm_dev *d, const uint8_t gid[16])
{
	for (unsigned i = 0; i < d->nah; i++)
		if (memcmp(d->ah[i].gid, gid, 16) == 0)
			return d->ah[i].ah;
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
				  .grh = { .sgid_index = 0, .hop_limit = 64 } };
	memcpy(aa.grh.dgid.raw, gid, 16);
	struct ibv_ah *ah = ibv_create_ah(d->pd, &aa);
	if (!ah)
		return NULL;
	unsigned slot = d->nah < SRN_CM_NAH ? d->nah++ : (unsigned)(srn_now_ns() % SRN_CM_NAH);
	if (d->ah[slot].ah)
		ibv_destroy_ah(d->ah[slot].ah);   /* no send in flight uses it: sends are copied */
	memcpy(d->ah[slot].gid, gid, 16);
	d->ah[slot].ah = ah;
	return ah;
}

/* Count the sends that completed: their slots are free again (a UD send
 * completes once the nic has transmitted it, in order). */
static void reap_sends(struct srn_cm_dev *d)
{
	struct ibv_wc wc[16];
	int n;
	while ((n = ibv_poll_cq(d->scq, 16, wc)) > 0)
		d->send_busy -= (uint32_t)n;
}

int srn_cm_send(struct srn_cm_dev *d, const uint8_t gid[16], const uint8_t mad[SRN_MAD_LEN])
{
	if (d->send_busy >= SRN_CM_NSEND)
		reap_sends(d);
	if (d->send_busy >= SRN_CM_NSEND) {
		srn_cm.cnt[SRN_CM_CNT_TX_FAIL]++;
		return -EAGAIN;        /* the peer's retry or ours recovers */
	}
	struct ibv_ah *ah = ah_for(d, gid);
	if (!ah) {
		srn_cm.cnt[SRN_CM_CNT_TX_FAIL]++;
		return -EHOSTUNREACH;
	}
	uint32_t slot = d->send_next++ % SRN_CM_NSEND;
	uint8_t *p = d->buf + SRN_CM_NRECV * SLOT_RECV + slot * SRN_MAD_LEN;
	/* We built every byte (the private data in it is the program's):
	 * the link reads a send's payload as a NIC's DMA would, unjudged
	 * by memcheck, so the MAD is judged here (diag/memcheck.h). */
	SRN_MEM_CHECK_DEFINED(mad, SRN_MAD_LEN);
	memcpy(p, mad, SRN_MAD_LEN);
	struct ibv_sge sge = { (uintptr_t)p, SRN_MAD_LEN, d->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = UINT64_MAX, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = 1;
	wr.wr.ud.remote_qkey = SRN_GSI_QKEY;
	if (ibv_post_send(d->qp, &wr, &bad)) {
		srn_cm.cnt[SRN_CM_CNT_TX_FAIL]++;
		return -EIO;
	}
	d->send_busy++;
	srn_cm.cnt[SRN_CM_CNT_TX_MAD]++;
	uint16_t attr = (uint16_t)(mad[16] << 8 | mad[17]);
	srn_cm.cnt_attr_tx[attr & 15]++;
	srn_cm_count_mad(d, attr, SRN_CM_COUNT_SENT);
	return 0;
}

void srn_cm_qp1_poll(struct srn_cm_dev *d, srn_cm_mad_fn *on_mad)
{
	struct ibv_wc wc[16];
	int n;
	reap_sends(d);
	while ((n = ibv_poll_cq(d->cq, 16, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			uint32_t slot = (uint32_t)wc[i].wr_id;
			if (slot >= SRN_CM_NRECV)
				continue;
			if (wc[i].status == IBV_WC_SUCCESS && wc[i].byte_len >= SRN_UD_GRH_LEN &&
			    wc[i].byte_len <= SLOT_RECV) {
				const uint8_t *g = d->buf + slot * SLOT_RECV;
				uint8_t src[16];
				struct sockaddr_storage ss = { 0 };
				if ((g[20] >> 4) == 4) {
					((struct sockaddr_in *)&ss)->sin_family = AF_INET;
					memcpy(&((struct sockaddr_in *)&ss)->sin_addr, g + 20 + 12, 4);
				} else {
					((struct sockaddr_in6 *)&ss)->sin6_family = AF_INET6;
					memcpy(&((struct sockaddr_in6 *)&ss)->sin6_addr, g + 8, 16);
				}
				srn_cm_addr_to_gid((struct sockaddr *)&ss, src);
				srn_cm.cnt[SRN_CM_CNT_RX_MAD]++;
				on_mad(d, g + SRN_UD_GRH_LEN, wc[i].byte_len - SRN_UD_GRH_LEN, src);
			}
			if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
				post_recv(d, slot);
		}
	}
}

void srn_cm_kick(void)
{
	uint64_t one = 1;
	if (srn_cm.kick_fd >= 0 && write(srn_cm.kick_fd, &one, sizeof(one)) < 0) { /* full: already kicked */ }
}

/*
 * The CM's MADs in the device counters that `softrnic stat` shows: by
 * type (REQ .. SIDR_REP), sent, received, and received but dropped; and
 * MADs the parser refused.  The counters live in the nic's
 * diagnostic segment (diag/counters.h), reached through libibverbs.so.1's
 * private softrnic_cm_count.  srn_cm.cnt keeps the CM's own finer reasons.
 */

/* libibverbs.so.1's private entry point (src/verbs/verbs_gsi.c). */
void softrnic_cm_count(struct ibv_context *ctx, unsigned counter);

_Static_assert(SRN_CNT_CM_MALFORMED - SRN_CNT_CM_FIRST ==
	       (SRN_CM_ATTR_SIDR_REP - SRN_CM_ATTR_REQ + 1) * SRN_CM_COUNT_DIRS,
	       "three counters per MAD type from REQ to SIDR_REP, then malformed");

void srn_cm_count_mad(const struct srn_cm_dev *dev, uint16_t attr, enum srn_cm_count_dir dir)
{
	if (!dev || attr < SRN_CM_ATTR_REQ || attr > SRN_CM_ATTR_SIDR_REP)
		return;                /* LAP/APR and the rest: not counted by type */
	softrnic_cm_count(dev->ctx, SRN_CNT_CM_FIRST + (unsigned)(attr - SRN_CM_ATTR_REQ) * SRN_CM_COUNT_DIRS + dir);
}

void srn_cm_count_malformed(const struct srn_cm_dev *dev)
{
	softrnic_cm_count(dev->ctx, SRN_CNT_CM_MALFORMED);
}
