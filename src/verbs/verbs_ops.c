/*
 * verbs_ops.c - the one place that fills a context's ops tables.
 *
 * struct ibv_context_ops holds what the header's inline verbs call
 * directly (post, poll, notify, memory windows): every slot gets a
 * function, so no caller ever meets a NULL.  Slots of
 * struct verbs_context may stay NULL: the header's inline wrappers test
 * them (verbs_get_ctx_op) and answer EOPNOTSUPP themselves.
 */
#include <stddef.h>
#include <string.h>

#include "core/device.h"
#include "verbs/verbs.h"

static int compat_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
	return ibv_query_device(c, a);
}

static int compat_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *a)
{
	return srn_verbs_query_port(c, port, (struct ibv_port_attr *)a,
				    offsetof(struct ibv_port_attr, link_layer) + 1);
}

void srn_verbs_set_ops(struct srn_context *ctx)
{
	struct verbs_context *v = &ctx->vctx;
	struct ibv_context_ops *o = &v->context.ops;

	memset(o, 0, sizeof(*o));
	o->_compat_query_device = compat_query_device;
	o->_compat_query_port = compat_query_port;
	o->alloc_mw = srn_verbs_alloc_mw;
	o->bind_mw = srn_verbs_bind_mw;
	o->dealloc_mw = srn_verbs_dealloc_mw;
	o->poll_cq = srn_verbs_poll_cq;
	o->req_notify_cq = srn_verbs_req_notify_cq;
	o->post_srq_recv = srn_verbs_post_srq_recv;
	o->post_send = srn_verbs_post_send;
	o->post_recv = srn_verbs_post_recv;

	v->query_port = srn_verbs_query_port;
	v->query_device_ex = srn_verbs_query_device_ex;
	v->create_cq_ex = srn_verbs_create_cq_ex;
	v->query_rt_values = srn_verbs_query_rt_values;
	v->create_qp_ex = srn_verbs_create_qp_ex;
	v->open_xrcd = srn_verbs_open_xrcd;
	v->close_xrcd = srn_verbs_close_xrcd;
	v->create_srq_ex = srn_verbs_create_srq_ex;
	v->get_srq_num = srn_verbs_get_srq_num;
	v->modify_qp_rate_limit = srn_verbs_modify_qp_rate_limit;
	v->sz = sizeof(*v);
	v->context.abi_compat = __VERBS_ABI_IS_EXTENDED;
}
