/*
 * verbs_device.c - device list, open/close, device/port/GID/P_Key queries
 * and asynchronous events.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/cq.h"
#include "core/device.h"
#include "core/limits.h"
#include "core/nic.h"
#include "core/qp.h"
#include "core/srq.h"
#include "engine/nic.h"
#include "verbs/verbs.h"
#include "wire/roce_hdr.h"

SRN_EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct srn_device **devs;
	int n;
	int ret = srn_devices_get(&devs, &n);
	if (ret && ret != -ENODEV) {
		if (num_devices)
			*num_devices = 0;
		return srn_null_errno(ret);
	}
	struct ibv_device **list = calloc((size_t)n + 1, sizeof(*list));
	if (!list)
		return srn_null_errno(-ENOMEM);
	for (int i = 0; i < n; i++)
		list[i] = &devs[i]->ibdev;
	if (num_devices)
		*num_devices = n;
	return list;
}

SRN_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

SRN_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

SRN_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	struct srn_device *d = srn_device_from_ibdev(device);
	return d ? d->guid : 0;
}

SRN_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	struct srn_device *d = srn_device_from_ibdev(device);
	return d ? d->index : -1;
}

SRN_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct srn_device *dev = srn_device_from_ibdev(device);
	if (!dev)
		return srn_null_errno(-ENODEV);
	struct srn_context *ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return srn_null_errno(-ENOMEM);
	int ret = srn_async_init(&ctx->async);
	if (ret)
		goto fail;
	/* cmd_fd: with rdma-core it is the uverbs character device that
	 * commands are written to.  There is no kernel side here, but
	 * programs dup it, fstat it and hand it to ibv_import_device, so it
	 * is a real descriptor of this context: /dev/null opened read-only,
	 * a character device on which any command written fails (EBADF)
	 * instead of vanishing, closed with the context. */
	int cmd_fd = open("/dev/null", O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (cmd_fd < 0) {
		ret = -errno;
		goto fail_async;
	}
	ret = srn_device_nic_get(dev, &ctx->nic);
	if (ret)
		goto fail_cmd_fd;
	ctx->dev = dev;
	struct ibv_context *c = &ctx->vctx.context;
	c->device = device;
	c->cmd_fd = cmd_fd;
	c->async_fd = ctx->async.efd;
	c->num_comp_vectors = 1;
	pthread_mutex_init(&c->mutex, NULL);
	srn_verbs_set_ops(ctx);
	srn_device_ctx_add(dev, ctx);
	return c;
fail_cmd_fd:
	close(cmd_fd);
fail_async:
	srn_async_destroy(&ctx->async);
fail:
	free(ctx);
	return srn_null_errno(ret);
}

SRN_EXPORT int ibv_close_device(struct ibv_context *context)
{
	struct srn_context *ctx = srn_ctx(context);
	srn_device_ctx_del(ctx->dev, ctx);
	srn_device_nic_put(ctx->dev);
	srn_async_destroy(&ctx->async);
	close(context->cmd_fd);
	pthread_mutex_destroy(&context->mutex);
	free(ctx);
	return 0;
}

SRN_EXPORT int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *attr)
{
	srn_device_query(srn_ctx(context)->dev, attr);
	return 0;
}

int srn_verbs_query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in,
			      struct ibv_device_attr_ex *a, size_t len)
{
	struct ibv_device_attr_ex ex;
	if (in && in->comp_mask)
		return EINVAL;
	if (len < sizeof(ex.orig_attr))
		return EINVAL;
	memset(&ex, 0, sizeof(ex));
	srn_device_query(srn_ctx(c)->dev, &ex.orig_attr);
	ex.max_dm_size = 0;
	ex.raw_packet_caps = 0;
	ex.phys_port_cnt_ex = 1;
	/* Completion timestamps are CLOCK_MONOTONIC nanoseconds: a 1 GHz
	 * "HCA clock" (hca_core_clock is in kHz) that never wraps. */
	ex.completion_timestamp_mask = UINT64_MAX;
	ex.hca_core_clock = 1000000;
	srn_verbs_pacing_caps(srn_ctx(c)->nic, &ex.packet_pacing_caps);
	memcpy(a, &ex, len < sizeof(ex) ? len : sizeof(ex));
	if (len > sizeof(ex))
		memset((char *)a + sizeof(ex), 0, len - sizeof(ex));
	return 0;
}

int srn_verbs_query_rt_values(struct ibv_context *c, struct ibv_values_ex *v)
{
	if (v->comp_mask & ~(uint32_t)IBV_VALUES_MASK_RAW_CLOCK)
		return EINVAL;
	if (v->comp_mask & IBV_VALUES_MASK_RAW_CLOCK)
		clock_gettime(CLOCK_MONOTONIC, &v->raw_clock);
	return 0;
}

int srn_verbs_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a, size_t len)
{
	struct ibv_port_attr attr;
	if (port != 1)
		return EINVAL;
	srn_port_query(srn_ctx(c)->dev, &attr);
	memcpy(a, &attr, len < sizeof(attr) ? len : sizeof(attr));
	return 0;
}

/* The non-inline symbol, for binaries built against headers without
 * verbs_context::query_port: fills the old (shorter) layout. */
#undef ibv_query_port
SRN_EXPORT int ibv_query_port(struct ibv_context *context, uint8_t port_num,
			      struct _compat_ibv_port_attr *port_attr)
{
	return srn_verbs_query_port(context, port_num, (struct ibv_port_attr *)port_attr,
				    offsetof(struct ibv_port_attr, link_layer) + 1);
}

SRN_EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index,
			     union ibv_gid *gid)
{
	if (port_num != 1 || index < 0 || index >= SRN_GID_TBL_LEN)
		return -1;  /* rdma-core returns -1 here, not an errno */
	memcpy(gid->raw, srn_ctx(context)->nic->gid, 16);
	return 0;
}

static void fill_gid_entry(struct srn_context *ctx, uint32_t index, struct ibv_gid_entry *e)
{
	memset(e, 0, sizeof(*e));
	memcpy(e->gid.raw, ctx->nic->gid, 16);
	e->gid_index = index;
	e->port_num = 1;
	e->gid_type = IBV_GID_TYPE_ROCE_V2;
	e->ndev_ifindex = 0;
}

SRN_EXPORT int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num,
				 uint32_t gid_index, struct ibv_gid_entry *entry, uint32_t flags,
				 size_t entry_size)
{
	if (flags || entry_size < sizeof(*entry))
		return EINVAL;
	if (port_num != 1)
		return EINVAL;
	if (gid_index >= SRN_GID_TBL_LEN)
		return ENODATA;
	fill_gid_entry(srn_ctx(context), gid_index, entry);
	return 0;
}

SRN_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *context,
					struct ibv_gid_entry *entries, size_t max_entries,
					uint32_t flags, size_t entry_size)
{
	if (flags || entry_size < sizeof(*entries))
		return -EINVAL;
	if (max_entries < SRN_GID_TBL_LEN)
		return -EINVAL;
	for (uint32_t i = 0; i < SRN_GID_TBL_LEN; i++)
		fill_gid_entry(srn_ctx(context), i,
			       (struct ibv_gid_entry *)((char *)entries + i * entry_size));
	return SRN_GID_TBL_LEN;
}

SRN_EXPORT int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index,
			      __be16 *pkey)
{
	if (port_num != 1 || index < 0 || index >= SRN_PKEY_TBL_LEN)
		return -1;
	*pkey = htobe16(SRN_DEFAULT_PKEY);
	return 0;
}

SRN_EXPORT int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
	if (port_num != 1)
		return -EINVAL;
	/* Full or limited membership of the default partition match index 0. */
	if ((be16toh(pkey) & 0x7fff) == (SRN_DEFAULT_PKEY & 0x7fff))
		return 0;
	return -ENOENT;
}

SRN_EXPORT int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	int ret = srn_async_get(&srn_ctx(context)->async, event);
	if (ret) {
		errno = -ret;
		return -1;
	}
	return 0;
}

/* The object an event names, as the event's type says which member of
 * element is set; NULL for port and device events. */
static struct srn_async_ref *event_ref(const struct ibv_async_event *e, struct ibv_context **c)
{
	switch (e->event_type) {
	case IBV_EVENT_CQ_ERR:
		*c = e->element.cq->context;
		return &srn_cq(e->element.cq)->async_ref;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		*c = e->element.qp->context;
		return &srn_qp(e->element.qp)->async_ref;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		*c = e->element.srq->context;
		return &srn_srq(e->element.srq)->async_ref;
	default:
		return NULL;
	}
}

SRN_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	struct ibv_context *c = NULL;
	struct srn_async_ref *ref = event ? event_ref(event, &c) : NULL;
	if (ref)
		srn_async_ack(&srn_ctx(c)->async, ref);
}

void srn_verbs_forget_events(struct srn_context *ctx, struct srn_async_ref *ref)
{
	if (srn_async_forget(&ctx->async, ref, 1000))
		return;
	/* rdma-core waits as long as it takes too; say why we hang. */
	srn_nic_lock(ctx->nic);
	srn_diag_dev_log(ctx->nic->diag.seg, SRN_LOG_WARN,
			 "destroy waits for async events read but not yet acknowledged "
			 "(ibv_ack_async_event)");
	srn_nic_unlock(ctx->nic);
	srn_async_forget(&ctx->async, ref, -1);
}
