/*
 * private_abi.c - the IBVERBS_PRIVATE_34 symbols: rdma-core's provider
 * interface (kernel command marshalling and provider registration).
 *
 * In rdma-core, hardware providers (libmlx5, libefa, ...) register with
 * libibverbs from a load-time constructor and then reach the kernel through
 * the ibv_cmd_* helpers.  softrnic has no kernel driver and is the only
 * device, so:
 *  - a provider that registers is ignored (harmless: it is never asked to
 *    open a device, so it never calls the rest of this file);
 *  - every kernel command fails with EOPNOTSUPP in the convention of its
 *    helper: positive errno (and errno set) for most, -1 with errno for
 *    ibv_cmd_poll_cq, *bad_wr = first WR for the post helpers;
 *  - context construction (verbs_open_device, _verbs_init_and_alloc_context)
 *    fails with NULL + errno EOPNOTSUPP, so a direct-verbs call such as
 *    mlx5dv_open_device() fails cleanly on a softrnic device.
 * The pieces that need no kernel are real: __ioctl_final_num_attrs (a
 * provider sizes a stack array with it), verbs_init_cq (fills public
 * struct ibv_cq fields) and ibv_query_gid_type (answers from the GID table).
 *
 * The prototypes are rdma-core 44's, in private_abi.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_user_ioctl_cmds.h>

#include "abi/export.h"
#include "abi/private_abi.h"

/* A bool in .bss, as in rdma-core (set there from RDMAV_ALLOW_DISASSOC_DESTROY). */
SRN_EXPORT bool verbs_allow_disassociate_destroy;

static int srn_cmd_unsupported(void)
{
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}

static void *srn_cmd_null(void)
{
	errno = EOPNOTSUPP;
	return NULL;
}

/* ---- provider registration and context plumbing ---------------------- */

SRN_EXPORT void verbs_register_driver_34(const struct verbs_device_ops *ops)
{
}

SRN_EXPORT void *_verbs_init_and_alloc_context(struct ibv_device *device,
					       int cmd_fd, size_t alloc_size,
					       struct verbs_context *context_offset,
					       uint32_t driver_id)
{
	return srn_cmd_null();
}

SRN_EXPORT void verbs_uninit_context(struct verbs_context *context)
{
}

SRN_EXPORT void verbs_set_ops(struct verbs_context *vctx,
			      const struct verbs_context_ops *ops)
{
}

SRN_EXPORT struct ibv_context *verbs_open_device(struct ibv_device *device,
						 void *private_data)
{
	return srn_cmd_null();
}

/*
 * Fills the library-owned fields of a provider-allocated CQ.  Unlike
 * rdma-core, the channel's reference count is left alone: no CQ that a
 * provider creates can belong to a softrnic context.
 */
SRN_EXPORT void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *context,
			      struct ibv_comp_channel *channel,
			      void *cq_context)
{
	cq->context = context;
	cq->channel = channel;
	cq->cq_context = cq_context;
	cq->comp_events_completed = 0;
	cq->async_events_completed = 0;
	pthread_mutex_init(&cq->mutex, NULL);
	pthread_cond_init(&cq->cond, NULL);
}

/* Provider debug output: there is no provider running, so nothing to say. */
SRN_EXPORT void __verbs_log(struct verbs_context *ctx, uint32_t level,
			    const char *fmt, ...)
{
}

SRN_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs,
						struct ibv_command_buffer *link)
{
	/* Bounded: a chain longer than this is a corrupt (cyclic) list. */
	for (unsigned int depth = 0; link && depth < 64; depth++) {
		num_attrs += (unsigned int)(link->next_attr - link->hdr.attrs);
		link = link->next;
	}
	return num_attrs;
}

SRN_EXPORT int execute_ioctl(struct ibv_context *context,
			     struct ibv_command_buffer *cmd)
{
	return srn_cmd_unsupported();
}

/*
 * rdma-core's convention: 0, or -1 with errno; a GID slot that is empty
 * reads as RoCE v1.  Every softrnic GID is RoCE v2 (UDP encapsulated).
 */
SRN_EXPORT int ibv_query_gid_type(struct ibv_context *context,
				  uint8_t port_num, unsigned int index,
				  enum ibv_gid_type_sysfs *type)
{
	struct ibv_gid_entry entry = { 0 };
	int ret;

	ret = _ibv_query_gid_ex(context, port_num, index, &entry, 0,
				sizeof(entry));
	if (ret == ENODATA) {
		*type = IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
		return 0;
	}
	if (ret) {
		errno = ret;
		return -1;
	}
	*type = entry.gid_type == IBV_GID_TYPE_ROCE_V2 ?
		IBV_GID_TYPE_SYSFS_ROCE_V2 : IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
	return 0;
}

/*
 * Reads a provider's device attribute from sysfs.  softrnic devices are
 * not in sysfs, and no verbs_sysfs_dev is ever handed to a provider.
 */
SRN_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size,
					 struct verbs_sysfs_dev *sysfs_dev,
					 const char *fnfmt, ...)
{
	errno = sysfs_dev ? EOPNOTSUPP : EINVAL;
	return -1;
}

/* ---- kernel commands: device, PD, XRCD, MR, MW ------------------------ */

SRN_EXPORT int ibv_cmd_get_context(struct verbs_context *context,
				   struct ibv_get_context *cmd, size_t cmd_size,
				   struct ib_uverbs_get_context_resp *resp,
				   size_t resp_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_query_context(struct ibv_context *ctx,
				     struct ibv_command_buffer *driver)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_query_device_any(struct ibv_context *context,
					const struct ibv_query_device_ex_input *input,
					struct ibv_device_attr_ex *attr,
					size_t attr_size,
					struct ib_uverbs_ex_query_device_resp *resp,
					size_t *resp_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_query_port(struct ibv_context *context,
				  uint8_t port_num,
				  struct ibv_port_attr *port_attr,
				  struct ibv_query_port *cmd, size_t cmd_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_alloc_pd(struct ibv_context *context, struct ibv_pd *pd,
				struct ibv_alloc_pd *cmd, size_t cmd_size,
				struct ib_uverbs_alloc_pd_resp *resp,
				size_t resp_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_dealloc_pd(struct ibv_pd *pd)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_open_xrcd(struct ibv_context *context,
				 struct verbs_xrcd *xrcd, int vxrcd_size,
				 struct ibv_xrcd_init_attr *attr,
				 struct ibv_open_xrcd *cmd, size_t cmd_size,
				 struct ib_uverbs_open_xrcd_resp *resp,
				 size_t resp_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_close_xrcd(struct verbs_xrcd *xrcd)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			      uint64_t hca_va, int access,
			      struct verbs_mr *vmr, struct ibv_reg_mr *cmd,
			      size_t cmd_size,
			      struct ib_uverbs_reg_mr_resp *resp,
			      size_t resp_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_rereg_mr(struct verbs_mr *vmr, uint32_t flags,
				void *addr, size_t length, uint64_t hca_va,
				int access, struct ibv_pd *pd,
				struct ibv_rereg_mr *cmd, size_t cmd_sz,
				struct ib_uverbs_rereg_mr_resp *resp,
				size_t resp_sz)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_dereg_mr(struct verbs_mr *vmr)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_query_mr(struct ibv_pd *pd, struct verbs_mr *vmr,
				uint32_t mr_handle)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_advise_mr(struct ibv_pd *pd,
				 enum ibv_advise_mr_advice advice,
				 uint32_t flags, struct ibv_sge *sg_list,
				 uint32_t num_sge)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
				     size_t length, uint64_t iova, int fd,
				     int access, struct verbs_mr *vmr)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type,
				struct ibv_mw *mw, struct ibv_alloc_mw *cmd,
				size_t cmd_size,
				struct ib_uverbs_alloc_mw_resp *resp,
				size_t resp_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_dealloc_mw(struct ibv_mw *mw)
{
	return srn_cmd_unsupported();
}

/* ---- kernel commands: CQ ---------------------------------------------- */

SRN_EXPORT int ibv_cmd_create_cq(struct ibv_context *context, int cqe,
				 struct ibv_comp_channel *channel,
				 int comp_vector, struct ibv_cq *cq,
				 struct ibv_create_cq *cmd, size_t cmd_size,
				 struct ib_uverbs_create_cq_resp *resp,
				 size_t resp_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_create_cq_ex(struct ibv_context *context,
				    const struct ibv_cq_init_attr_ex *cq_attr,
				    struct verbs_cq *cq,
				    struct ibv_create_cq_ex *cmd,
				    size_t cmd_size,
				    struct ib_uverbs_ex_create_cq_resp *resp,
				    size_t resp_size, uint32_t cmd_flags)
{
	return srn_cmd_unsupported();
}

/* Returns a completion count, so failure is -1 (errno set), as rdma-core. */
SRN_EXPORT int ibv_cmd_poll_cq(struct ibv_cq *cq, int ne, struct ibv_wc *wc)
{
	errno = EOPNOTSUPP;
	return -1;
}

SRN_EXPORT int ibv_cmd_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_resize_cq(struct ibv_cq *cq, int cqe,
				 struct ibv_resize_cq *cmd, size_t cmd_size,
				 struct ib_uverbs_resize_cq_resp *resp,
				 size_t resp_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_destroy_cq(struct ibv_cq *cq)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_modify_cq(struct ibv_cq *cq,
				 struct ibv_modify_cq_attr *attr,
				 struct ibv_modify_cq *cmd, size_t cmd_size)
{
	return srn_cmd_unsupported();
}

/* ---- kernel commands: SRQ --------------------------------------------- */

SRN_EXPORT int ibv_cmd_create_srq(struct ibv_pd *pd, struct ibv_srq *srq,
				  struct ibv_srq_init_attr *attr,
				  struct ibv_create_srq *cmd, size_t cmd_size,
				  struct ib_uverbs_create_srq_resp *resp,
				  size_t resp_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_create_srq_ex(struct ibv_context *context,
				     struct verbs_srq *srq,
				     struct ibv_srq_init_attr_ex *attr_ex,
				     struct ibv_create_xsrq *cmd,
				     size_t cmd_size,
				     struct ib_uverbs_create_srq_resp *resp,
				     size_t resp_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_modify_srq(struct ibv_srq *srq,
				  struct ibv_srq_attr *srq_attr,
				  int srq_attr_mask,
				  struct ibv_modify_srq *cmd, size_t cmd_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_query_srq(struct ibv_srq *srq,
				 struct ibv_srq_attr *srq_attr,
				 struct ibv_query_srq *cmd, size_t cmd_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_destroy_srq(struct ibv_srq *srq)
{
	return srn_cmd_unsupported();
}

/* ---- kernel commands: QP ---------------------------------------------- */

SRN_EXPORT int ibv_cmd_create_qp(struct ibv_pd *pd, struct ibv_qp *qp,
				 struct ibv_qp_init_attr *attr,
				 struct ibv_create_qp *cmd, size_t cmd_size,
				 struct ib_uverbs_create_qp_resp *resp,
				 size_t resp_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_create_qp_ex(struct ibv_context *context,
				    struct verbs_qp *qp,
				    struct ibv_qp_init_attr_ex *attr_ex,
				    struct ibv_create_qp *cmd, size_t cmd_size,
				    struct ib_uverbs_create_qp_resp *resp,
				    size_t resp_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_create_qp_ex2(struct ibv_context *context,
				     struct verbs_qp *qp,
				     struct ibv_qp_init_attr_ex *qp_attr,
				     struct ibv_create_qp_ex *cmd,
				     size_t cmd_size,
				     struct ib_uverbs_ex_create_qp_resp *resp,
				     size_t resp_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_open_qp(struct ibv_context *context,
			       struct verbs_qp *qp, int vqp_sz,
			       struct ibv_qp_open_attr *attr,
			       struct ibv_open_qp *cmd, size_t cmd_size,
			       struct ib_uverbs_create_qp_resp *resp,
			       size_t resp_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *qp_attr,
				int attr_mask,
				struct ibv_qp_init_attr *qp_init_attr,
				struct ibv_query_qp *cmd, size_t cmd_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
				 int attr_mask, struct ibv_modify_qp *cmd,
				 size_t cmd_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_modify_qp_ex(struct ibv_qp *qp,
				    struct ibv_qp_attr *attr, int attr_mask,
				    struct ibv_modify_qp_ex *cmd,
				    size_t cmd_size,
				    struct ib_uverbs_ex_modify_qp_resp *resp,
				    size_t resp_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_destroy_qp(struct ibv_qp *qp)
{
	return srn_cmd_unsupported();
}

/* The post helpers name the first WR that was not posted: all of them. */
SRN_EXPORT int ibv_cmd_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
				 struct ibv_send_wr **bad_wr)
{
	if (bad_wr)
		*bad_wr = wr;
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
				 struct ibv_recv_wr **bad_wr)
{
	if (bad_wr)
		*bad_wr = wr;
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_post_srq_recv(struct ibv_srq *srq,
				     struct ibv_recv_wr *wr,
				     struct ibv_recv_wr **bad_wr)
{
	if (bad_wr)
		*bad_wr = wr;
	return srn_cmd_unsupported();
}

/* ---- kernel commands: AH, multicast, flows, WQ, counters, DM ---------- */

SRN_EXPORT int ibv_cmd_create_ah(struct ibv_pd *pd, struct ibv_ah *ah,
				 struct ibv_ah_attr *attr,
				 struct ib_uverbs_create_ah_resp *resp,
				 size_t resp_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_destroy_ah(struct ibv_ah *ah)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
				    uint16_t lid)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
				    uint16_t lid)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_create_flow(struct ibv_qp *qp, struct ibv_flow *flow_id,
				   struct ibv_flow_attr *flow_attr, void *ucmd,
				   size_t ucmd_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_destroy_flow(struct ibv_flow *flow_id)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_create_flow_action_esp(struct ibv_context *ctx,
					      struct ibv_flow_action_esp_attr *attr,
					      struct verbs_flow_action *flow_action,
					      struct ibv_command_buffer *driver)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_modify_flow_action_esp(struct verbs_flow_action *flow_action,
					      struct ibv_flow_action_esp_attr *attr,
					      struct ibv_command_buffer *driver)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_destroy_flow_action(struct verbs_flow_action *action)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_create_wq(struct ibv_context *context,
				 struct ibv_wq_init_attr *wq_init_attr,
				 struct ibv_wq *wq, struct ibv_create_wq *cmd,
				 size_t cmd_size,
				 struct ib_uverbs_ex_create_wq_resp *resp,
				 size_t resp_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *attr,
				 struct ibv_modify_wq *cmd, size_t cmd_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_destroy_wq(struct ibv_wq *wq)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_create_rwq_ind_table(struct ibv_context *context,
					    struct ibv_rwq_ind_table_init_attr *init_attr,
					    struct ibv_rwq_ind_table *rwq_ind_table,
					    struct ib_uverbs_ex_create_rwq_ind_table_resp *resp,
					    size_t resp_size)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_destroy_rwq_ind_table(struct ibv_rwq_ind_table *rwq_ind_table)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_create_counters(struct ibv_context *context,
				       struct ibv_counters_init_attr *init_attr,
				       struct verbs_counters *vcounters,
				       struct ibv_command_buffer *link)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_destroy_counters(struct verbs_counters *vcounters)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_read_counters(struct verbs_counters *vcounters,
				     uint64_t *counters_value,
				     uint32_t ncounters, uint32_t flags,
				     struct ibv_command_buffer *link)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_alloc_dm(struct ibv_context *ctx,
				const struct ibv_alloc_dm_attr *dm_attr,
				struct verbs_dm *dm,
				struct ibv_command_buffer *link)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_free_dm(struct verbs_dm *dm)
{
	return srn_cmd_unsupported();
}

SRN_EXPORT int ibv_cmd_reg_dm_mr(struct ibv_pd *pd, struct verbs_dm *dm,
				 uint64_t offset, size_t length,
				 unsigned int access, struct verbs_mr *vmr,
				 struct ibv_command_buffer *link)
{
	return srn_cmd_unsupported();
}
