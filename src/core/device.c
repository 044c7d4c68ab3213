/*
 * device.c - the device table and per-device attributes.
 *
 * Devices come from link/config.c (SOFTRNIC_DEVICES, a config file, or one
 * zero-configuration loopback device).  The table is built once and lives
 * until exit: ibv_device pointers must stay valid for as long as the
 * application may still hold them.
 */
#include "core/device.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "core/limits.h"
#include "core/nic.h"
#include "link/udp.h"

static pthread_once_t devices_once = PTHREAD_ONCE_INIT;
static struct srn_device *devices[SRN_MAX_DEVICES];
static int ndevices;
static int devices_err;

/* A node GUID derived from the configured address: 02:53:52:4e ("SRN",
 * locally administered) followed by the low 32 bits of the address, so the
 * same configuration always gives the same GUID. */
static uint64_t guid_from_cfg(const struct srn_dev_cfg *cfg)
{
	uint32_t low = 0;
	if (cfg->family == AF_INET) {
		const struct sockaddr_in *sin = (const void *)&cfg->addr;
		low = ntohl(sin->sin_addr.s_addr);
	} else {
		const struct sockaddr_in6 *sin6 = (const void *)&cfg->addr;
		memcpy(&low, &sin6->sin6_addr.s6_addr[12], 4);
		low = ntohl(low);
	}
	uint64_t host = 0x0253524eull << 32 | low;
	return htobe64(host);
}

static void build_devices(void)
{
	struct srn_dev_cfg cfg[SRN_MAX_DEVICES];
	char err[256] = "";
	int n = srn_config_load(cfg, SRN_MAX_DEVICES, err, sizeof(err));
	if (n < 0) {
		fprintf(stderr, "softrnic: %s\n", err[0] ? err : strerror(-n));
		devices_err = -n;
		return;
	}
	for (int i = 0; i < n; i++) {
		struct srn_device *d = calloc(1, sizeof(*d));
		if (!d) {
			devices_err = ENOMEM;
			return;
		}
		d->cfg = cfg[i];
		d->index = i;
		d->guid = guid_from_cfg(&cfg[i]);
		pthread_mutex_init(&d->open_lock, NULL);
		pthread_mutex_init(&d->ctx_lock, NULL);
		d->ibdev.node_type = IBV_NODE_CA;
		d->ibdev.transport_type = IBV_TRANSPORT_IB;
		snprintf(d->ibdev.name, sizeof(d->ibdev.name), "%.*s", (int)sizeof(d->ibdev.name) - 1,
			 cfg[i].name);
		snprintf(d->ibdev.dev_name, sizeof(d->ibdev.dev_name), "uverbs%d", i);
		snprintf(d->ibdev.dev_path, sizeof(d->ibdev.dev_path),
			 "/sys/class/infiniband_verbs/uverbs%d", i);
		snprintf(d->ibdev.ibdev_path, sizeof(d->ibdev.ibdev_path),
			 "/sys/class/infiniband/%.63s", cfg[i].name);
		devices[ndevices++] = d;
	}
}

int srn_devices_get(struct srn_device ***list, int *count)
{
	pthread_once(&devices_once, build_devices);
	*list = devices;
	*count = ndevices;
	return ndevices ? 0 : -(devices_err ? devices_err : ENODEV);
}

struct srn_device *srn_device_from_ibdev(struct ibv_device *d)
{
	struct srn_device **list;
	int n;
	srn_devices_get(&list, &n);
	for (int i = 0; i < n; i++)
		if (&list[i]->ibdev == d)
			return list[i];
	return NULL;
}

int srn_devices_built(struct srn_device ***list)
{
	*list = devices;
	return ndevices;
}

void srn_device_query(struct srn_device *dev, struct ibv_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "%s", SRN_FW_VER);
	a->node_guid = dev->guid;
	a->sys_image_guid = dev->guid;
	a->max_mr_size = SRN_MAX_MR_SIZE;
	a->page_size_cap = 0xfffff000;
	a->vendor_id = SRN_VENDOR_ID;
	a->vendor_part_id = SRN_VENDOR_PART_ID;
	a->hw_ver = 1;
	a->max_qp = SRN_MAX_QP;
	a->max_qp_wr = SRN_MAX_QP_WR;
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT |
			      IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_SHUTDOWN_PORT |
			      IBV_DEVICE_MEM_WINDOW |
			      IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_MEM_MGT_EXTENSIONS;
	a->max_sge = SRN_MAX_SGE;
	a->max_sge_rd = SRN_MAX_SGE;
	a->max_cq = SRN_MAX_CQ;
	a->max_cqe = SRN_MAX_CQE;
	a->max_mr = SRN_MAX_MR;
	a->max_pd = SRN_MAX_PD;
	a->max_qp_rd_atom = SRN_MAX_RD_ATOMIC;
	a->max_ee_rd_atom = 0;
	a->max_res_rd_atom = SRN_MAX_RD_ATOMIC * SRN_MAX_QP;
	a->max_qp_init_rd_atom = SRN_MAX_RD_ATOMIC;
	a->max_ee_init_rd_atom = 0;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_ee = 0;
	a->max_rdd = 0;
	a->max_mw = SRN_MAX_MR;
	a->max_raw_ipv6_qp = 0;
	a->max_raw_ethy_qp = 0;
	a->max_mcast_grp = SRN_MAX_MCAST_GRP;
	a->max_mcast_qp_attach = SRN_MAX_MCAST_QP_ATTACH;
	a->max_total_mcast_qp_attach = SRN_MAX_MCAST_GRP * SRN_MAX_MCAST_QP_ATTACH;
	a->max_ah = SRN_MAX_AH;
	a->max_fmr = 0;
	a->max_map_per_fmr = 0;
	a->max_srq = SRN_MAX_SRQ;
	a->max_srq_wr = SRN_MAX_QP_WR;
	a->max_srq_sge = SRN_MAX_SGE;
	a->max_pkeys = SRN_PKEY_TBL_LEN;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
}

void srn_port_query(struct srn_device *dev, struct ibv_port_attr *a)
{
	memset(a, 0, sizeof(*a));
	/* An open device knows its link MTU (detected when the socket was
	 * bound); the configuration may have left it to detection. */
	int mtu = dev->nic ? dev->nic->ib_mtu : srn_link_ib_mtu(dev->cfg.link_mtu);
	a->state = IBV_PORT_ACTIVE;
	/* Like rxe and RoCE NICs: the port can do 4096; what the link's MTU
	 * allows is the active MTU.  QPs are held to the active MTU
	 * (verbs_qp.c), because a larger packet could not leave with DF. */
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = mtu;
	a->gid_tbl_len = SRN_GID_TBL_LEN;
	a->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
	a->max_msg_sz = SRN_MAX_MSG_SZ;
	a->bad_pkey_cntr = 0;
	a->qkey_viol_cntr = 0;
	a->pkey_tbl_len = SRN_PKEY_TBL_LEN;
	a->lid = 0;
	a->sm_lid = 0;
	a->lmc = 0;
	a->max_vl_num = 1;
	a->sm_sl = 0;
	a->subnet_timeout = 0;
	a->init_type_reply = 0;
	a->active_width = 2;           /* 4X */
	a->active_speed = 32;          /* EDR-like; software speed varies */
	a->phys_state = 5;             /* LinkUp */
	a->link_layer = IBV_LINK_LAYER_ETHERNET;
	a->flags = 0;
	a->port_cap_flags2 = 0;
}

static void post_fatal(struct srn_context *c)
{
	struct ibv_async_event ev = { .event_type = IBV_EVENT_DEVICE_FATAL };
	srn_async_post(&c->async, &ev, NULL);
}

void srn_device_ctx_add(struct srn_device *dev, struct srn_context *ctx)
{
	pthread_mutex_lock(&dev->ctx_lock);
	ctx->next = dev->contexts;
	dev->contexts = ctx;
	/* Opened after the engine it shares stopped: told at once. */
	if (dev->fatal_nic && dev->fatal_nic == ctx->nic)
		post_fatal(ctx);
	pthread_mutex_unlock(&dev->ctx_lock);
}

void srn_device_ctx_del(struct srn_device *dev, struct srn_context *ctx)
{
	pthread_mutex_lock(&dev->ctx_lock);
	for (struct srn_context **p = &dev->contexts; *p; p = &(*p)->next) {
		if (*p == ctx) {
			*p = ctx->next;
			break;
		}
	}
	/* The engine goes with its last context; the next is a new one. */
	if (!dev->contexts)
		dev->fatal_nic = NULL;
	pthread_mutex_unlock(&dev->ctx_lock);
}

void srn_device_fatal(struct srn_device *dev, const struct srn_nic *nic)
{
	pthread_mutex_lock(&dev->ctx_lock);
	dev->fatal_nic = nic;
	for (struct srn_context *c = dev->contexts; c; c = c->next)
		if (c->nic == nic)
			post_fatal(c);
	pthread_mutex_unlock(&dev->ctx_lock);
}
