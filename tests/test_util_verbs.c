/*
 * test_util_verbs.c - the device-free verbs, the IBVERBS_1.0 compat entry
 * points and the IBVERBS_PRIVATE_34 provider interface.
 *
 * Checks: every enum string against rdma-core 44's text (including the
 * "unknown" fallbacks just outside each range); the IB rate tables (every
 * enum ibv_rate round-trips through Mb/s, and through the 2.5 Gb/s
 * multiplier where one exists); the kernel-struct copies field by field
 * with a distinct value per field; the sysfs helpers on a temporary tree;
 * and that every unsupported, compat and private entry point fails in its
 * verb's convention without touching its (NULL) arguments.
 *
 * The expected strings and values are written out here independently of
 * util_verbs.c: this file is the specification the tables are tested
 * against.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/rdma_user_ioctl_cmds.h>
#include "check.h"

#define CHECK_STR(got, want)                                                   \
	do {                                                                   \
		const char *got_ = (got), *want_ = (want);                     \
		if (!got_ || strcmp(got_, want_) != 0) {                       \
			fprintf(stderr, "%s:%d: %s = \"%s\", want \"%s\"\n",   \
				__FILE__, __LINE__, #got,                      \
				got_ ? got_ : "(null)", want_);                \
			srn_check_failures++;                                            \
		}                                                              \
	} while (0)

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- declarations that no installed header carries ----------------- */

/* rdma-core driver.h / marshall.h */
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);
const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
			size_t size);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst,
				struct ib_uverbs_ah_attr *src);
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst,
				struct ib_uverbs_qp_attr *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst,
				 struct ib_user_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst,
			       struct ibv_sa_path_rec *src);

/* The internal names of the versioned compat entry points. */
struct ibv_device_1_0;
struct ibv_context_1_0;
struct ibv_pd_1_0;
struct ibv_mr_1_0;
struct ibv_cq_1_0;
struct ibv_srq_1_0;
struct ibv_qp_1_0;
struct ibv_qp_init_attr_1_0;
struct ibv_ah_1_0;

void srn_compat11_ibv_register_driver(
	const char *name, struct ibv_device *(*init)(const char *, int));
struct ibv_device_1_0 **srn_compat10_ibv_get_device_list(int *num);
void srn_compat10_ibv_free_device_list(struct ibv_device_1_0 **list);
const char *srn_compat10_ibv_get_device_name(struct ibv_device_1_0 *device);
__be64 srn_compat10_ibv_get_device_guid(struct ibv_device_1_0 *device);
struct ibv_context_1_0 *
srn_compat10_ibv_open_device(struct ibv_device_1_0 *device);
int srn_compat10_ibv_close_device(struct ibv_context_1_0 *context);
int srn_compat10_ibv_get_async_event(struct ibv_context_1_0 *context,
				     struct ibv_async_event *event);
void srn_compat10_ibv_ack_async_event(struct ibv_async_event *event);
int srn_compat10_ibv_query_device(struct ibv_context_1_0 *context,
				  struct ibv_device_attr *device_attr);
int srn_compat10_ibv_query_port(struct ibv_context_1_0 *context,
				uint8_t port_num,
				struct ibv_port_attr *port_attr);
int srn_compat10_ibv_query_gid(struct ibv_context_1_0 *context,
			       uint8_t port_num, int index, union ibv_gid *gid);
int srn_compat10_ibv_query_pkey(struct ibv_context_1_0 *context,
				uint8_t port_num, int index, __be16 *pkey);
struct ibv_pd_1_0 *srn_compat10_ibv_alloc_pd(struct ibv_context_1_0 *context);
int srn_compat10_ibv_dealloc_pd(struct ibv_pd_1_0 *pd);
struct ibv_mr_1_0 *srn_compat10_ibv_reg_mr(struct ibv_pd_1_0 *pd, void *addr,
					   size_t length, int access);
int srn_compat10_ibv_dereg_mr(struct ibv_mr_1_0 *mr);
struct ibv_cq_1_0 *
srn_compat10_ibv_create_cq(struct ibv_context_1_0 *context, int cqe,
			   void *cq_context, struct ibv_comp_channel *channel,
			   int comp_vector);
int srn_compat10_ibv_resize_cq(struct ibv_cq_1_0 *cq, int cqe);
int srn_compat10_ibv_destroy_cq(struct ibv_cq_1_0 *cq);
int srn_compat10_ibv_get_cq_event(struct ibv_comp_channel *channel,
				  struct ibv_cq_1_0 **cq, void **cq_context);
void srn_compat10_ibv_ack_cq_events(struct ibv_cq_1_0 *cq,
				    unsigned int nevents);
struct ibv_srq_1_0 *
srn_compat10_ibv_create_srq(struct ibv_pd_1_0 *pd,
			    struct ibv_srq_init_attr *srq_init_attr);
int srn_compat10_ibv_modify_srq(struct ibv_srq_1_0 *srq,
				struct ibv_srq_attr *srq_attr,
				int srq_attr_mask);
int srn_compat10_ibv_query_srq(struct ibv_srq_1_0 *srq,
			       struct ibv_srq_attr *srq_attr);
int srn_compat10_ibv_destroy_srq(struct ibv_srq_1_0 *srq);
struct ibv_qp_1_0 *
srn_compat10_ibv_create_qp(struct ibv_pd_1_0 *pd,
			   struct ibv_qp_init_attr_1_0 *qp_init_attr);
int srn_compat10_ibv_query_qp(struct ibv_qp_1_0 *qp, struct ibv_qp_attr *attr,
			      int attr_mask,
			      struct ibv_qp_init_attr_1_0 *init_attr);
int srn_compat10_ibv_modify_qp(struct ibv_qp_1_0 *qp, struct ibv_qp_attr *attr,
			       int attr_mask);
int srn_compat10_ibv_destroy_qp(struct ibv_qp_1_0 *qp);
int srn_compat10_ibv_attach_mcast(struct ibv_qp_1_0 *qp, union ibv_gid *gid,
				  uint16_t lid);
int srn_compat10_ibv_detach_mcast(struct ibv_qp_1_0 *qp, union ibv_gid *gid,
				  uint16_t lid);
struct ibv_ah_1_0 *srn_compat10_ibv_create_ah(struct ibv_pd_1_0 *pd,
					      struct ibv_ah_attr *attr);
int srn_compat10_ibv_destroy_ah(struct ibv_ah_1_0 *ah);

/* rdma-core 44 driver.h / cmd_ioctl.h (IBVERBS_PRIVATE_34). */
struct verbs_device_ops;
struct verbs_context_ops;
struct verbs_sysfs_dev;
struct verbs_xrcd;
struct verbs_mr;
struct verbs_cq;
struct verbs_srq;
struct verbs_qp;
struct verbs_flow_action;
struct verbs_counters;
struct verbs_dm;
struct ibv_get_context;
struct ibv_query_port;
struct ibv_alloc_pd;
struct ibv_open_xrcd;
struct ibv_reg_mr;
struct ibv_rereg_mr;
struct ibv_alloc_mw;
struct ibv_create_cq;
struct ibv_create_cq_ex;
struct ibv_resize_cq;
struct ibv_modify_cq;
struct ibv_create_srq;
struct ibv_create_xsrq;
struct ibv_modify_srq;
struct ibv_query_srq;
struct ibv_create_qp;
struct ibv_create_qp_ex;
struct ibv_open_qp;
struct ibv_query_qp;
struct ibv_modify_qp;
struct ibv_modify_qp_ex;
struct ibv_create_wq;
struct ibv_modify_wq;

/* The head of rdma-core 44's command buffer, as providers lay it out. */
struct ibv_command_buffer {
	struct ibv_command_buffer *next;
	struct ib_uverbs_attr *next_attr;
	struct ib_uverbs_attr *last_attr;
	uint8_t uhw_in_idx;
	uint8_t uhw_out_idx;
	uint8_t uhw_in_headroom_dwords;
	uint8_t uhw_out_headroom_dwords;
	uint8_t buffer_error : 1;
	uint8_t fallback_require_ex : 1;
	uint8_t fallback_ioctl_only : 1;
	struct ib_uverbs_ioctl_hdr hdr;
};

enum ibv_gid_type_sysfs {
	IBV_GID_TYPE_SYSFS_IB_ROCE_V1,
	IBV_GID_TYPE_SYSFS_ROCE_V2,
};

extern bool verbs_allow_disassociate_destroy;
void verbs_register_driver_34(const struct verbs_device_ops *ops);
void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd,
				    size_t alloc_size,
				    struct verbs_context *context_offset,
				    uint32_t driver_id);
void verbs_uninit_context(struct verbs_context *context);
void verbs_set_ops(struct verbs_context *vctx,
		   const struct verbs_context_ops *ops);
struct ibv_context *verbs_open_device(struct ibv_device *device,
				      void *private_data);
void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *context,
		   struct ibv_comp_channel *channel, void *cq_context);
void __verbs_log(struct verbs_context *ctx, uint32_t level, const char *fmt,
		 ...);
unsigned int __ioctl_final_num_attrs(unsigned int num_attrs,
				     struct ibv_command_buffer *link);
int execute_ioctl(struct ibv_context *context, struct ibv_command_buffer *cmd);
int ibv_read_ibdev_sysfs_file(char *buf, size_t size,
			      struct verbs_sysfs_dev *sysfs_dev,
			      const char *fnfmt, ...);
int ibv_cmd_get_context(struct verbs_context *context,
	struct ibv_get_context *cmd, size_t cmd_size,
	struct ib_uverbs_get_context_resp *resp, size_t resp_size);
int ibv_cmd_query_context(struct ibv_context *ctx,
	struct ibv_command_buffer *driver);
int ibv_cmd_query_device_any(struct ibv_context *context,
	const struct ibv_query_device_ex_input *input,
	struct ibv_device_attr_ex *attr, size_t attr_size,
	struct ib_uverbs_ex_query_device_resp *resp, size_t *resp_size);
int ibv_cmd_query_port(struct ibv_context *context, uint8_t port_num,
	struct ibv_port_attr *port_attr, struct ibv_query_port *cmd, size_t cmd_size);
int ibv_cmd_alloc_pd(struct ibv_context *context, struct ibv_pd *pd,
	struct ibv_alloc_pd *cmd, size_t cmd_size,
	struct ib_uverbs_alloc_pd_resp *resp, size_t resp_size);
int ibv_cmd_dealloc_pd(struct ibv_pd *pd);
int ibv_cmd_open_xrcd(struct ibv_context *context, struct verbs_xrcd *xrcd,
	int vxrcd_size, struct ibv_xrcd_init_attr *attr, struct ibv_open_xrcd *cmd,
	size_t cmd_size, struct ib_uverbs_open_xrcd_resp *resp, size_t resp_size);
int ibv_cmd_close_xrcd(struct verbs_xrcd *xrcd);
int ibv_cmd_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
	uint64_t hca_va, int access, struct verbs_mr *vmr, struct ibv_reg_mr *cmd,
	size_t cmd_size, struct ib_uverbs_reg_mr_resp *resp, size_t resp_size);
int ibv_cmd_rereg_mr(struct verbs_mr *vmr, uint32_t flags, void *addr,
	size_t length, uint64_t hca_va, int access, struct ibv_pd *pd,
	struct ibv_rereg_mr *cmd, size_t cmd_sz, struct ib_uverbs_rereg_mr_resp *resp,
	size_t resp_sz);
int ibv_cmd_dereg_mr(struct verbs_mr *vmr);
int ibv_cmd_query_mr(struct ibv_pd *pd, struct verbs_mr *vmr,
	uint32_t mr_handle);
int ibv_cmd_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
	uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge);
int ibv_cmd_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
	uint64_t iova, int fd, int access, struct verbs_mr *vmr);
int ibv_cmd_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type,
	struct ibv_mw *mw, struct ibv_alloc_mw *cmd, size_t cmd_size,
	struct ib_uverbs_alloc_mw_resp *resp, size_t resp_size);
int ibv_cmd_dealloc_mw(struct ibv_mw *mw);
int ibv_cmd_create_cq(struct ibv_context *context, int cqe,
	struct ibv_comp_channel *channel, int comp_vector, struct ibv_cq *cq,
	struct ibv_create_cq *cmd, size_t cmd_size,
	struct ib_uverbs_create_cq_resp *resp, size_t resp_size);
int ibv_cmd_create_cq_ex(struct ibv_context *context,
	const struct ibv_cq_init_attr_ex *cq_attr, struct verbs_cq *cq,
	struct ibv_create_cq_ex *cmd, size_t cmd_size,
	struct ib_uverbs_ex_create_cq_resp *resp, size_t resp_size,
	uint32_t cmd_flags);
int ibv_cmd_poll_cq(struct ibv_cq *cq, int ne, struct ibv_wc *wc);
int ibv_cmd_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int ibv_cmd_resize_cq(struct ibv_cq *cq, int cqe, struct ibv_resize_cq *cmd,
	size_t cmd_size, struct ib_uverbs_resize_cq_resp *resp, size_t resp_size);
int ibv_cmd_destroy_cq(struct ibv_cq *cq);
int ibv_cmd_modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr,
	struct ibv_modify_cq *cmd, size_t cmd_size);
int ibv_cmd_create_srq(struct ibv_pd *pd, struct ibv_srq *srq,
	struct ibv_srq_init_attr *attr, struct ibv_create_srq *cmd, size_t cmd_size,
	struct ib_uverbs_create_srq_resp *resp, size_t resp_size);
int ibv_cmd_create_srq_ex(struct ibv_context *context, struct verbs_srq *srq,
	struct ibv_srq_init_attr_ex *attr_ex, struct ibv_create_xsrq *cmd,
	size_t cmd_size, struct ib_uverbs_create_srq_resp *resp, size_t resp_size);
int ibv_cmd_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
	int srq_attr_mask, struct ibv_modify_srq *cmd, size_t cmd_size);
int ibv_cmd_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
	struct ibv_query_srq *cmd, size_t cmd_size);
int ibv_cmd_destroy_srq(struct ibv_srq *srq);
int ibv_cmd_create_qp(struct ibv_pd *pd, struct ibv_qp *qp,
	struct ibv_qp_init_attr *attr, struct ibv_create_qp *cmd, size_t cmd_size,
	struct ib_uverbs_create_qp_resp *resp, size_t resp_size);
int ibv_cmd_create_qp_ex(struct ibv_context *context, struct verbs_qp *qp,
	struct ibv_qp_init_attr_ex *attr_ex, struct ibv_create_qp *cmd,
	size_t cmd_size, struct ib_uverbs_create_qp_resp *resp, size_t resp_size);
int ibv_cmd_create_qp_ex2(struct ibv_context *context, struct verbs_qp *qp,
	struct ibv_qp_init_attr_ex *qp_attr, struct ibv_create_qp_ex *cmd,
	size_t cmd_size, struct ib_uverbs_ex_create_qp_resp *resp, size_t resp_size);
int ibv_cmd_open_qp(struct ibv_context *context, struct verbs_qp *qp,
	int vqp_sz, struct ibv_qp_open_attr *attr, struct ibv_open_qp *cmd,
	size_t cmd_size, struct ib_uverbs_create_qp_resp *resp, size_t resp_size);
int ibv_cmd_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *qp_attr,
	int attr_mask, struct ibv_qp_init_attr *qp_init_attr,
	struct ibv_query_qp *cmd, size_t cmd_size);
int ibv_cmd_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
	int attr_mask, struct ibv_modify_qp *cmd, size_t cmd_size);
int ibv_cmd_modify_qp_ex(struct ibv_qp *qp, struct ibv_qp_attr *attr,
	int attr_mask, struct ibv_modify_qp_ex *cmd, size_t cmd_size,
	struct ib_uverbs_ex_modify_qp_resp *resp, size_t resp_size);
int ibv_cmd_destroy_qp(struct ibv_qp *qp);
int ibv_cmd_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
	struct ibv_send_wr **bad_wr);
int ibv_cmd_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
	struct ibv_recv_wr **bad_wr);
int ibv_cmd_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
	struct ibv_recv_wr **bad_wr);
int ibv_cmd_create_ah(struct ibv_pd *pd, struct ibv_ah *ah,
	struct ibv_ah_attr *attr, struct ib_uverbs_create_ah_resp *resp,
	size_t resp_size);
int ibv_cmd_destroy_ah(struct ibv_ah *ah);
int ibv_cmd_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
	uint16_t lid);
int ibv_cmd_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
	uint16_t lid);
int ibv_cmd_create_flow(struct ibv_qp *qp, struct ibv_flow *flow_id,
	struct ibv_flow_attr *flow_attr, void *ucmd, size_t ucmd_size);
int ibv_cmd_destroy_flow(struct ibv_flow *flow_id);
int ibv_cmd_create_flow_action_esp(struct ibv_context *ctx,
	struct ibv_flow_action_esp_attr *attr, struct verbs_flow_action *flow_action,
	struct ibv_command_buffer *driver);
int ibv_cmd_modify_flow_action_esp(struct verbs_flow_action *flow_action,
	struct ibv_flow_action_esp_attr *attr, struct ibv_command_buffer *driver);
int ibv_cmd_destroy_flow_action(struct verbs_flow_action *action);
int ibv_cmd_create_wq(struct ibv_context *context,
	struct ibv_wq_init_attr *wq_init_attr, struct ibv_wq *wq,
	struct ibv_create_wq *cmd, size_t cmd_size,
	struct ib_uverbs_ex_create_wq_resp *resp, size_t resp_size);
int ibv_cmd_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *attr,
	struct ibv_modify_wq *cmd, size_t cmd_size);
int ibv_cmd_destroy_wq(struct ibv_wq *wq);
int ibv_cmd_create_rwq_ind_table(struct ibv_context *context,
	struct ibv_rwq_ind_table_init_attr *init_attr,
	struct ibv_rwq_ind_table *rwq_ind_table,
	struct ib_uverbs_ex_create_rwq_ind_table_resp *resp, size_t resp_size);
int ibv_cmd_destroy_rwq_ind_table(struct ibv_rwq_ind_table *rwq_ind_table);
int ibv_cmd_create_counters(struct ibv_context *context,
	struct ibv_counters_init_attr *init_attr, struct verbs_counters *vcounters,
	struct ibv_command_buffer *link);
int ibv_cmd_destroy_counters(struct verbs_counters *vcounters);
int ibv_cmd_read_counters(struct verbs_counters *vcounters,
	uint64_t *counters_value, uint32_t ncounters, uint32_t flags,
	struct ibv_command_buffer *link);
int ibv_cmd_alloc_dm(struct ibv_context *ctx,
	const struct ibv_alloc_dm_attr *dm_attr, struct verbs_dm *dm,
	struct ibv_command_buffer *link);
int ibv_cmd_free_dm(struct verbs_dm *dm);
int ibv_cmd_reg_dm_mr(struct ibv_pd *pd, struct verbs_dm *dm, uint64_t offset,
	size_t length, unsigned int access, struct verbs_mr *vmr,
	struct ibv_command_buffer *link);

/* ---- enum strings ----------------------------------------------------- */

struct name_case {
	int value;
	const char *name;
};

static const struct name_case wc_status_cases[] = {
	{ IBV_WC_SUCCESS, "success" },
	{ IBV_WC_LOC_LEN_ERR, "local length error" },
	{ IBV_WC_LOC_QP_OP_ERR, "local QP operation error" },
	{ IBV_WC_LOC_EEC_OP_ERR, "local EE context operation error" },
	{ IBV_WC_LOC_PROT_ERR, "local protection error" },
	{ IBV_WC_WR_FLUSH_ERR, "Work Request Flushed Error" },
	{ IBV_WC_MW_BIND_ERR, "memory management operation error" },
	{ IBV_WC_BAD_RESP_ERR, "bad response error" },
	{ IBV_WC_LOC_ACCESS_ERR, "local access error" },
	{ IBV_WC_REM_INV_REQ_ERR, "remote invalid request error" },
	{ IBV_WC_REM_ACCESS_ERR, "remote access error" },
	{ IBV_WC_REM_OP_ERR, "remote operation error" },
	{ IBV_WC_RETRY_EXC_ERR, "transport retry counter exceeded" },
	{ IBV_WC_RNR_RETRY_EXC_ERR, "RNR retry counter exceeded" },
	{ IBV_WC_LOC_RDD_VIOL_ERR, "local RDD violation error" },
	{ IBV_WC_REM_INV_RD_REQ_ERR, "remote invalid RD request" },
	{ IBV_WC_REM_ABORT_ERR, "aborted error" },
	{ IBV_WC_INV_EECN_ERR, "invalid EE context number" },
	{ IBV_WC_INV_EEC_STATE_ERR, "invalid EE context state" },
	{ IBV_WC_FATAL_ERR, "fatal error" },
	{ IBV_WC_RESP_TIMEOUT_ERR, "response timeout error" },
	{ IBV_WC_GENERAL_ERR, "general error" },
	{ IBV_WC_TM_ERR, "TM error" },
	{ IBV_WC_TM_RNDV_INCOMPLETE, "TM software rendezvous" },
	{ IBV_WC_TM_RNDV_INCOMPLETE + 1, "unknown" },
	{ -1, "unknown" },
	{ 1000000, "unknown" },
};

static const struct name_case event_type_cases[] = {
	{ IBV_EVENT_CQ_ERR, "CQ error" },
	{ IBV_EVENT_QP_FATAL, "local work queue catastrophic error" },
	{ IBV_EVENT_QP_REQ_ERR, "invalid request local work queue error" },
	{ IBV_EVENT_QP_ACCESS_ERR, "local access violation work queue error" },
	{ IBV_EVENT_COMM_EST, "communication established" },
	{ IBV_EVENT_SQ_DRAINED, "send queue drained" },
	{ IBV_EVENT_PATH_MIG, "path migrated" },
	{ IBV_EVENT_PATH_MIG_ERR, "path migration request error" },
	{ IBV_EVENT_DEVICE_FATAL, "local catastrophic error" },
	{ IBV_EVENT_PORT_ACTIVE, "port active" },
	{ IBV_EVENT_PORT_ERR, "port error" },
	{ IBV_EVENT_LID_CHANGE, "LID change" },
	{ IBV_EVENT_PKEY_CHANGE, "P_Key change" },
	{ IBV_EVENT_SM_CHANGE, "SM change" },
	{ IBV_EVENT_SRQ_ERR, "SRQ catastrophic error" },
	{ IBV_EVENT_SRQ_LIMIT_REACHED, "SRQ limit reached" },
	{ IBV_EVENT_QP_LAST_WQE_REACHED, "last WQE reached" },
	{ IBV_EVENT_CLIENT_REREGISTER, "client reregistration" },
	{ IBV_EVENT_GID_CHANGE, "GID table change" },
	{ IBV_EVENT_WQ_FATAL, "WQ fatal" },
	{ IBV_EVENT_WQ_FATAL + 1, "unknown" },
	{ -1, "unknown" },
};

static const struct name_case node_type_cases[] = {
	{ IBV_NODE_UNKNOWN, "unknown" },
	{ 0, "unknown" },
	{ IBV_NODE_CA, "InfiniBand channel adapter" },
	{ IBV_NODE_SWITCH, "InfiniBand switch" },
	{ IBV_NODE_ROUTER, "InfiniBand router" },
	{ IBV_NODE_RNIC, "iWARP NIC" },
	{ IBV_NODE_USNIC, "usNIC" },
	{ IBV_NODE_USNIC_UDP, "usNIC UDP" },
	{ IBV_NODE_UNSPECIFIED, "unspecified" },
	{ IBV_NODE_UNSPECIFIED + 1, "unknown" },
};

static const struct name_case port_state_cases[] = {
	{ IBV_PORT_NOP, "no state change (NOP)" },
	{ IBV_PORT_DOWN, "down" },
	{ IBV_PORT_INIT, "init" },
	{ IBV_PORT_ARMED, "armed" },
	{ IBV_PORT_ACTIVE, "active" },
	{ IBV_PORT_ACTIVE_DEFER, "active defer" },
	{ IBV_PORT_ACTIVE_DEFER + 1, "unknown" },
	{ -1, "unknown" },
};

static void test_strings(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(wc_status_cases); i++)
		CHECK_STR(ibv_wc_status_str(
				  (enum ibv_wc_status)wc_status_cases[i].value),
			  wc_status_cases[i].name);
	for (size_t i = 0; i < ARRAY_SIZE(event_type_cases); i++)
		CHECK_STR(ibv_event_type_str(
				  (enum ibv_event_type)event_type_cases[i].value),
			  event_type_cases[i].name);
	for (size_t i = 0; i < ARRAY_SIZE(node_type_cases); i++)
		CHECK_STR(ibv_node_type_str(
				  (enum ibv_node_type)node_type_cases[i].value),
			  node_type_cases[i].name);
	for (size_t i = 0; i < ARRAY_SIZE(port_state_cases); i++)
		CHECK_STR(ibv_port_state_str(
				  (enum ibv_port_state)port_state_cases[i].value),
			  port_state_cases[i].name);
}

/* ---- rates -------------------------------------------------------------- */

/* { rate, multiple of 2.5 Gb/s or -1, Mb/s } for every enum ibv_rate. */
static const struct {
	enum ibv_rate rate;
	int mult;
	int mbps;
} rate_cases[] = {
	{ IBV_RATE_2_5_GBPS, 1, 2500 },	     { IBV_RATE_5_GBPS, 2, 5000 },
	{ IBV_RATE_10_GBPS, 4, 10000 },	     { IBV_RATE_20_GBPS, 8, 20000 },
	{ IBV_RATE_30_GBPS, 12, 30000 },     { IBV_RATE_40_GBPS, 16, 40000 },
	{ IBV_RATE_60_GBPS, 24, 60000 },     { IBV_RATE_80_GBPS, 32, 80000 },
	{ IBV_RATE_120_GBPS, 48, 120000 },   { IBV_RATE_14_GBPS, -1, 14062 },
	{ IBV_RATE_56_GBPS, -1, 56250 },     { IBV_RATE_112_GBPS, -1, 112500 },
	{ IBV_RATE_168_GBPS, -1, 168750 },   { IBV_RATE_25_GBPS, -1, 25781 },
	{ IBV_RATE_100_GBPS, -1, 103125 },   { IBV_RATE_200_GBPS, -1, 206250 },
	{ IBV_RATE_300_GBPS, -1, 309375 },   { IBV_RATE_28_GBPS, 11, 28125 },
	{ IBV_RATE_50_GBPS, 20, 53125 },     { IBV_RATE_400_GBPS, 160, 425000 },
	{ IBV_RATE_600_GBPS, 240, 637500 },  { IBV_RATE_800_GBPS, 320, 850000 },
	{ IBV_RATE_1200_GBPS, 480, 1275000 },
};

static void test_rates(void)
{
	int with_mult = 0;

	/* Every value 2..IBV_RATE_1200_GBPS is an enumerator, each listed once. */
	CHECK(ARRAY_SIZE(rate_cases) == IBV_RATE_1200_GBPS - 1);
	for (size_t i = 0; i < ARRAY_SIZE(rate_cases); i++) {
		enum ibv_rate r = rate_cases[i].rate;

		CHECK(ibv_rate_to_mult(r) == rate_cases[i].mult);
		CHECK(ibv_rate_to_mbps(r) == rate_cases[i].mbps);
		CHECK(mbps_to_ibv_rate(ibv_rate_to_mbps(r)) == r);
		if (rate_cases[i].mult > 0) {
			CHECK(mult_to_ibv_rate(ibv_rate_to_mult(r)) == r);
			with_mult++;
		}
	}
	CHECK(with_mult == 15);

	/* No limit, and values that name no rate. */
	CHECK(ibv_rate_to_mult(IBV_RATE_MAX) == -1);
	CHECK(ibv_rate_to_mbps(IBV_RATE_MAX) == -1);
	CHECK(ibv_rate_to_mult((enum ibv_rate)1) == -1);
	CHECK(ibv_rate_to_mbps((enum ibv_rate)(IBV_RATE_1200_GBPS + 1)) == -1);
	CHECK(mult_to_ibv_rate(0) == IBV_RATE_MAX);
	CHECK(mult_to_ibv_rate(-1) == IBV_RATE_MAX);
	CHECK(mult_to_ibv_rate(3) == IBV_RATE_MAX);
	CHECK(mbps_to_ibv_rate(0) == IBV_RATE_MAX);
	CHECK(mbps_to_ibv_rate(100000) == IBV_RATE_MAX);
	CHECK(mbps_to_ibv_rate(-1) == IBV_RATE_MAX);
}

/* ---- kernel struct copies ---------------------------------------------- */

static void fill_kern_ah(struct ib_uverbs_ah_attr *k, uint8_t base)
{
	for (int i = 0; i < 16; i++)
		k->grh.dgid[i] = (uint8_t)(base + i);
	k->grh.flow_label = 0x000abcde + base;
	k->grh.sgid_index = base + 20;
	k->grh.hop_limit = base + 21;
	k->grh.traffic_class = base + 22;
	k->dlid = (uint16_t)(0x1200 + base);
	k->sl = base + 23;
	k->src_path_bits = base + 24;
	k->static_rate = base + 25;
	k->is_global = 1;
	k->port_num = base + 26;
}

static void check_ah(const struct ibv_ah_attr *a, uint8_t base)
{
	for (int i = 0; i < 16; i++)
		CHECK(a->grh.dgid.raw[i] == (uint8_t)(base + i));
	CHECK(a->grh.flow_label == 0x000abcdeu + base);
	CHECK(a->grh.sgid_index == base + 20);
	CHECK(a->grh.hop_limit == base + 21);
	CHECK(a->grh.traffic_class == base + 22);
	CHECK(a->dlid == 0x1200 + base);
	CHECK(a->sl == base + 23);
	CHECK(a->src_path_bits == base + 24);
	CHECK(a->static_rate == base + 25);
	CHECK(a->is_global == 1);
	CHECK(a->port_num == base + 26);
}

static void test_copy_ah_qp(void)
{
	struct ib_uverbs_qp_attr k;
	struct ibv_qp_attr a;

	memset(&k, 0, sizeof(k));
	memset(&a, 0, sizeof(a));
	fill_kern_ah(&k.ah_attr, 0x10);
	ibv_copy_ah_attr_from_kern(&a.ah_attr, &k.ah_attr);
	check_ah(&a.ah_attr, 0x10);

	memset(&k, 0, sizeof(k));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_SQD;	/* not copied: must survive */
	k.qp_attr_mask = 0xffffffff;
	k.qp_state = IBV_QPS_RTS;
	k.cur_qp_state = IBV_QPS_RTR;
	k.path_mtu = IBV_MTU_4096;
	k.path_mig_state = IBV_MIG_ARMED;
	k.qkey = 0x11111111;
	k.rq_psn = 0x222222;
	k.sq_psn = 0x333333;
	k.dest_qp_num = 0x444444;
	k.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	fill_kern_ah(&k.ah_attr, 0x40);
	fill_kern_ah(&k.alt_ah_attr, 0x80);
	k.max_send_wr = 101;
	k.max_recv_wr = 102;
	k.max_send_sge = 103;
	k.max_recv_sge = 104;
	k.max_inline_data = 105;
	k.pkey_index = 106;
	k.alt_pkey_index = 107;
	k.en_sqd_async_notify = 1;
	k.sq_draining = 1;
	k.max_rd_atomic = 108;
	k.max_dest_rd_atomic = 109;
	k.min_rnr_timer = 110;
	k.port_num = 111;
	k.timeout = 112;
	k.retry_cnt = 113;
	k.rnr_retry = 114;
	k.alt_port_num = 115;
	k.alt_timeout = 116;
	ibv_copy_qp_attr_from_kern(&a, &k);

	CHECK(a.qp_state == IBV_QPS_SQD);
	CHECK(a.cur_qp_state == IBV_QPS_RTR);
	CHECK(a.path_mtu == IBV_MTU_4096);
	CHECK(a.path_mig_state == IBV_MIG_ARMED);
	CHECK(a.qkey == 0x11111111);
	CHECK(a.rq_psn == 0x222222);
	CHECK(a.sq_psn == 0x333333);
	CHECK(a.dest_qp_num == 0x444444);
	CHECK(a.qp_access_flags ==
	      (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ));
	check_ah(&a.ah_attr, 0x40);
	check_ah(&a.alt_ah_attr, 0x80);
	CHECK(a.cap.max_send_wr == 101);
	CHECK(a.cap.max_recv_wr == 102);
	CHECK(a.cap.max_send_sge == 103);
	CHECK(a.cap.max_recv_sge == 104);
	CHECK(a.cap.max_inline_data == 105);
	CHECK(a.pkey_index == 106);
	CHECK(a.alt_pkey_index == 107);
	CHECK(a.en_sqd_async_notify == 1);
	CHECK(a.sq_draining == 1);
	CHECK(a.max_rd_atomic == 108);
	CHECK(a.max_dest_rd_atomic == 109);
	CHECK(a.min_rnr_timer == 110);
	CHECK(a.port_num == 111);
	CHECK(a.timeout == 112);
	CHECK(a.retry_cnt == 113);
	CHECK(a.rnr_retry == 114);
	CHECK(a.alt_port_num == 115);
	CHECK(a.alt_timeout == 116);
}

static void check_path(const struct ibv_sa_path_rec *p,
		       const struct ib_user_path_rec *k)
{
	CHECK(memcmp(p->dgid.raw, k->dgid, 16) == 0);
	CHECK(memcmp(p->sgid.raw, k->sgid, 16) == 0);
	CHECK(p->dlid == k->dlid);
	CHECK(p->slid == k->slid);
	CHECK((uint32_t)p->raw_traffic == k->raw_traffic);
	CHECK(p->flow_label == k->flow_label);
	CHECK(p->hop_limit == k->hop_limit);
	CHECK(p->traffic_class == k->traffic_class);
	CHECK((uint32_t)p->reversible == k->reversible);
	CHECK(p->numb_path == k->numb_path);
	CHECK(p->pkey == k->pkey);
	CHECK(p->sl == k->sl);
	CHECK(p->mtu_selector == k->mtu_selector);
	CHECK(p->mtu == k->mtu);
	CHECK(p->rate_selector == k->rate_selector);
	CHECK(p->rate == k->rate);
	CHECK(p->packet_life_time_selector == k->packet_life_time_selector);
	CHECK(p->packet_life_time == k->packet_life_time);
	CHECK(p->preference == k->preference);
}

static void test_copy_path_rec(void)
{
	struct ib_user_path_rec k, k2;
	struct ibv_sa_path_rec p;

	memset(&k, 0, sizeof(k));
	for (int i = 0; i < 16; i++) {
		k.dgid[i] = (uint8_t)(0xa0 + i);
		k.sgid[i] = (uint8_t)(0xc0 + i);
	}
	k.dlid = htobe16(0x1234);
	k.slid = htobe16(0x5678);
	k.raw_traffic = 1;
	k.flow_label = htobe32(0x000fedcb);
	k.reversible = 1;
	k.mtu = IBV_MTU_2048;
	k.pkey = htobe16(0xffff);
	k.hop_limit = 64;
	k.traffic_class = 0x28;
	k.numb_path = 3;
	k.sl = 5;
	k.mtu_selector = 2;
	k.rate_selector = 1;
	k.rate = IBV_RATE_100_GBPS;
	k.packet_life_time_selector = 2;
	k.packet_life_time = 18;
	k.preference = 7;

	memset(&p, 0, sizeof(p));
	ibv_copy_path_rec_from_kern(&p, &k);
	check_path(&p, &k);

	/* And back: the kernel record comes out as it went in. */
	memset(&k2, 0xee, sizeof(k2));
	ibv_copy_path_rec_to_kern(&k2, &p);
	check_path(&p, &k2);
}

/* ---- sysfs helpers ------------------------------------------------------ */

static void write_file(const char *dir, const char *name, const char *data)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (!f)
		return;
	fputs(data, f);
	fclose(f);
}

static void remove_file(const char *dir, const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
}

/* Must run before anything else in the process asks for the sysfs path. */
static void test_sysfs(void)
{
	char dir[] = "/tmp/srn_sysfs_XXXXXX";
	char with_slashes[64];
	char buf[8];

	if (!mkdtemp(dir)) {
		CHECK(!"mkdtemp");
		return;
	}
	snprintf(with_slashes, sizeof(with_slashes), "%s///", dir);
	setenv("SYSFS_PATH", with_slashes, 1);
	CHECK_STR(ibv_get_sysfs_path(), dir);
	/* Computed once: a later change of the environment is not seen. */
	setenv("SYSFS_PATH", "/elsewhere", 1);
	CHECK_STR(ibv_get_sysfs_path(), dir);
	unsetenv("SYSFS_PATH");

	write_file(dir, "nl", "hello\n");
	memset(buf, 'x', sizeof(buf));
	CHECK(ibv_read_sysfs_file(dir, "nl", buf, sizeof(buf)) == 5);
	CHECK_STR(buf, "hello");

	write_file(dir, "nonl", "abc");
	memset(buf, 'x', sizeof(buf));
	CHECK(ibv_read_sysfs_file(dir, "nonl", buf, 4) == 3);
	CHECK_STR(buf, "abc");

	/* Exactly fills the buffer with no newline: no room for the NUL. */
	write_file(dir, "full", "abcd");
	CHECK(ibv_read_sysfs_file(dir, "full", buf, 4) == -1);

	/* A newline in the last byte becomes the terminator. */
	write_file(dir, "fullnl", "abc\n");
	CHECK(ibv_read_sysfs_file(dir, "fullnl", buf, 4) == 3);
	CHECK_STR(buf, "abc");

	errno = 0;
	CHECK(ibv_read_sysfs_file(dir, "missing", buf, sizeof(buf)) == -1);
	CHECK(errno == ENOENT);

	remove_file(dir, "nl");
	remove_file(dir, "nonl");
	remove_file(dir, "full");
	remove_file(dir, "fullnl");
	rmdir(dir);
}

/* ---- fork and the unsupported verbs ----------------------------------- */

static void test_fork(void)
{
	char page[64];

	CHECK(ibv_fork_init() == 0);
	CHECK(ibv_is_fork_initialized() == IBV_FORK_UNNEEDED);
	CHECK(ibv_dontfork_range(page, sizeof(page)) == 0);
	CHECK(ibv_dofork_range(page, sizeof(page)) == 0);
}

#define EXPECT_NULL_EOPNOTSUPP(call)                                           \
	do {                                                                   \
		errno = 0;                                                     \
		CHECK((call) == NULL);                                         \
		CHECK(errno == EOPNOTSUPP);                                    \
	} while (0)

#define EXPECT_RET_EOPNOTSUPP(call, want)                                      \
	do {                                                                   \
		errno = 0;                                                     \
		CHECK((call) == (want));                                       \
		CHECK(errno == EOPNOTSUPP);                                    \
	} while (0)

/* The usual convention: EOPNOTSUPP returned and in errno. */
#define EXPECT_EOP(call) EXPECT_RET_EOPNOTSUPP(call, EOPNOTSUPP)

static void test_unsupported(void)
{
	struct ibv_ece ece = { .vendor_id = 0x15b3 };
	uint8_t mac[ETHERNET_LL_SIZE];
	uint16_t vid;

	EXPECT_NULL_EOPNOTSUPP(ibv_import_device(3));
	EXPECT_NULL_EOPNOTSUPP(ibv_import_pd(NULL, 1));
	EXPECT_NULL_EOPNOTSUPP(ibv_import_mr(NULL, 1));
	EXPECT_NULL_EOPNOTSUPP(ibv_import_dm(NULL, 1));
	ibv_unimport_pd(NULL);
	ibv_unimport_mr(NULL);
	ibv_unimport_dm(NULL);
	EXPECT_EOP(ibv_set_ece(NULL, &ece));
	EXPECT_EOP(ibv_query_ece(NULL, &ece));
	EXPECT_RET_EOPNOTSUPP(ibv_resolve_eth_l2_from_gid(NULL, NULL, mac, &vid),
			      -EOPNOTSUPP);
}

/* ---- IBVERBS_1.0 / 1.1 compat entry points ----------------------------- */

static void test_compat(void)
{
	int num = 42;

	EXPECT_NULL_EOPNOTSUPP(srn_compat10_ibv_get_device_list(&num));
	CHECK(num == 0);
	EXPECT_NULL_EOPNOTSUPP(srn_compat10_ibv_get_device_list(NULL));
	srn_compat10_ibv_free_device_list(NULL);
	EXPECT_NULL_EOPNOTSUPP(srn_compat10_ibv_get_device_name(NULL));
	EXPECT_RET_EOPNOTSUPP(srn_compat10_ibv_get_device_guid(NULL), 0);
	EXPECT_NULL_EOPNOTSUPP(srn_compat10_ibv_open_device(NULL));
	EXPECT_EOP(srn_compat10_ibv_close_device(NULL));
	EXPECT_RET_EOPNOTSUPP(srn_compat10_ibv_get_async_event(NULL, NULL), -1);
	srn_compat10_ibv_ack_async_event(NULL);
	EXPECT_EOP(srn_compat10_ibv_query_device(NULL, NULL));
	EXPECT_EOP(srn_compat10_ibv_query_port(NULL, 1, NULL));
	EXPECT_EOP(srn_compat10_ibv_query_gid(NULL, 1, 0, NULL));
	EXPECT_EOP(srn_compat10_ibv_query_pkey(NULL, 1, 0, NULL));
	EXPECT_NULL_EOPNOTSUPP(srn_compat10_ibv_alloc_pd(NULL));
	EXPECT_EOP(srn_compat10_ibv_dealloc_pd(NULL));
	EXPECT_NULL_EOPNOTSUPP(srn_compat10_ibv_reg_mr(NULL, NULL, 0, 0));
	EXPECT_EOP(srn_compat10_ibv_dereg_mr(NULL));
	EXPECT_NULL_EOPNOTSUPP(srn_compat10_ibv_create_cq(NULL, 1, NULL, NULL, 0));
	EXPECT_EOP(srn_compat10_ibv_resize_cq(NULL, 1));
	EXPECT_EOP(srn_compat10_ibv_destroy_cq(NULL));
	EXPECT_RET_EOPNOTSUPP(srn_compat10_ibv_get_cq_event(NULL, NULL, NULL), -1);
	srn_compat10_ibv_ack_cq_events(NULL, 1);
	EXPECT_NULL_EOPNOTSUPP(srn_compat10_ibv_create_srq(NULL, NULL));
	EXPECT_EOP(srn_compat10_ibv_modify_srq(NULL, NULL, 0));
	EXPECT_EOP(srn_compat10_ibv_query_srq(NULL, NULL));
	EXPECT_EOP(srn_compat10_ibv_destroy_srq(NULL));
	EXPECT_NULL_EOPNOTSUPP(srn_compat10_ibv_create_qp(NULL, NULL));
	EXPECT_EOP(srn_compat10_ibv_query_qp(NULL, NULL, 0, NULL));
	EXPECT_EOP(srn_compat10_ibv_modify_qp(NULL, NULL, 0));
	EXPECT_EOP(srn_compat10_ibv_destroy_qp(NULL));
	EXPECT_EOP(srn_compat10_ibv_attach_mcast(NULL, NULL, 0));
	EXPECT_EOP(srn_compat10_ibv_detach_mcast(NULL, NULL, 0));
	EXPECT_NULL_EOPNOTSUPP(srn_compat10_ibv_create_ah(NULL, NULL));
	EXPECT_EOP(srn_compat10_ibv_destroy_ah(NULL));

	srn_compat11_ibv_register_driver("legacy", NULL);
}

/* ---- IBVERBS_PRIVATE_34 ------------------------------------------------- */

static struct ibv_command_buffer *new_cmdb(unsigned int capacity,
					   unsigned int used,
					   struct ibv_command_buffer *next)
{
	struct ibv_command_buffer *b;

	b = calloc(1, sizeof(*b) + capacity * sizeof(struct ib_uverbs_attr));
	if (!b)
		abort();
	b->next = next;
	b->next_attr = b->hdr.attrs + used;
	b->last_attr = b->hdr.attrs + capacity;
	return b;
}

static void test_private_cmds(void)
{
	struct ibv_send_wr swr = { 0 }, *bad_swr = NULL;
	struct ibv_recv_wr rwr = { 0 }, *bad_rwr = NULL;
	struct ibv_wc wc;

	EXPECT_RET_EOPNOTSUPP(ibv_cmd_poll_cq(NULL, 1, &wc), -1);
	EXPECT_EOP(ibv_cmd_post_send(NULL, &swr, &bad_swr));
	CHECK(bad_swr == &swr);
	EXPECT_EOP(ibv_cmd_post_recv(NULL, &rwr, &bad_rwr));
	CHECK(bad_rwr == &rwr);
	bad_rwr = NULL;
	EXPECT_EOP(ibv_cmd_post_srq_recv(NULL, &rwr, &bad_rwr));
	CHECK(bad_rwr == &rwr);

	EXPECT_EOP(ibv_cmd_get_context(0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_query_context(0, 0));
	EXPECT_EOP(ibv_cmd_query_device_any(0, 0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_query_port(0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_alloc_pd(0, 0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_dealloc_pd(0));
	EXPECT_EOP(ibv_cmd_open_xrcd(0, 0, 0, 0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_close_xrcd(0));
	EXPECT_EOP(ibv_cmd_reg_mr(0, 0, 0, 0, 0, 0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_rereg_mr(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_dereg_mr(0));
	EXPECT_EOP(ibv_cmd_query_mr(0, 0, 0));
	EXPECT_EOP(ibv_cmd_advise_mr(0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_reg_dmabuf_mr(0, 0, 0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_alloc_mw(0, 0, 0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_dealloc_mw(0));
	EXPECT_EOP(ibv_cmd_create_cq(0, 0, 0, 0, 0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_create_cq_ex(0, 0, 0, 0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_req_notify_cq(0, 0));
	EXPECT_EOP(ibv_cmd_resize_cq(0, 0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_destroy_cq(0));
	EXPECT_EOP(ibv_cmd_modify_cq(0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_create_srq(0, 0, 0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_create_srq_ex(0, 0, 0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_modify_srq(0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_query_srq(0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_destroy_srq(0));
	EXPECT_EOP(ibv_cmd_create_qp(0, 0, 0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_create_qp_ex(0, 0, 0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_create_qp_ex2(0, 0, 0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_open_qp(0, 0, 0, 0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_query_qp(0, 0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_modify_qp(0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_modify_qp_ex(0, 0, 0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_destroy_qp(0));
	EXPECT_EOP(ibv_cmd_create_ah(0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_destroy_ah(0));
	EXPECT_EOP(ibv_cmd_attach_mcast(0, 0, 0));
	EXPECT_EOP(ibv_cmd_detach_mcast(0, 0, 0));
	EXPECT_EOP(ibv_cmd_create_flow(0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_destroy_flow(0));
	EXPECT_EOP(ibv_cmd_create_flow_action_esp(0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_modify_flow_action_esp(0, 0, 0));
	EXPECT_EOP(ibv_cmd_destroy_flow_action(0));
	EXPECT_EOP(ibv_cmd_create_wq(0, 0, 0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_modify_wq(0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_destroy_wq(0));
	EXPECT_EOP(ibv_cmd_create_rwq_ind_table(0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_destroy_rwq_ind_table(0));
	EXPECT_EOP(ibv_cmd_create_counters(0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_destroy_counters(0));
	EXPECT_EOP(ibv_cmd_read_counters(0, 0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_alloc_dm(0, 0, 0, 0));
	EXPECT_EOP(ibv_cmd_free_dm(0));
	EXPECT_EOP(ibv_cmd_reg_dm_mr(0, 0, 0, 0, 0, 0, 0));
}

static void test_private_plumbing(void)
{
	struct ibv_command_buffer *a, *b;
	struct ibv_cq cq;
	int cookie;
	char buf[16];
	enum ibv_gid_type_sysfs type = IBV_GID_TYPE_SYSFS_ROCE_V2;

	(void)type;
	CHECK(!verbs_allow_disassociate_destroy);

	/* A provider's load-time constructor: accepted and ignored. */
	verbs_register_driver_34(NULL);
	verbs_set_ops(NULL, NULL);
	verbs_uninit_context(NULL);
	errno = EIO;
	__verbs_log(NULL, 4, "%s", "ignored");
	CHECK(errno == EIO);

	EXPECT_NULL_EOPNOTSUPP(verbs_open_device(NULL, NULL));
	EXPECT_NULL_EOPNOTSUPP(_verbs_init_and_alloc_context(NULL, -1, 64, NULL, 0));
	EXPECT_EOP(execute_ioctl(NULL, NULL));

	/* Attributes in use along the chain are added to the caller's count. */
	CHECK(__ioctl_final_num_attrs(4, NULL) == 4);
	b = new_cmdb(4, 2, NULL);
	a = new_cmdb(8, 3, b);
	CHECK(__ioctl_final_num_attrs(4, b) == 6);
	CHECK(__ioctl_final_num_attrs(4, a) == 9);
	CHECK(__ioctl_final_num_attrs(0, a) == 5);
	free(a);
	free(b);

	memset(&cq, 0xa5, sizeof(cq));
	verbs_init_cq(&cq, (struct ibv_context *)&cookie, NULL, &cookie);
	CHECK(cq.context == (struct ibv_context *)&cookie);
	CHECK(cq.channel == NULL);
	CHECK(cq.cq_context == &cookie);
	CHECK(cq.comp_events_completed == 0);
	CHECK(cq.async_events_completed == 0);
	CHECK(pthread_mutex_lock(&cq.mutex) == 0);
	CHECK(pthread_mutex_unlock(&cq.mutex) == 0);
	pthread_mutex_destroy(&cq.mutex);
	pthread_cond_destroy(&cq.cond);

	errno = 0;
	CHECK(ibv_read_ibdev_sysfs_file(buf, sizeof(buf), NULL, "%s", "x") == -1);
	CHECK(errno == EINVAL);
	EXPECT_RET_EOPNOTSUPP(ibv_read_ibdev_sysfs_file(
				      buf, sizeof(buf),
				      (struct verbs_sysfs_dev *)&cookie, "%s",
				      "node_guid"),
			      -1);
}

int main(void)
{
	test_sysfs();	/* first: the sysfs path is computed once */
	test_strings();
	test_rates();
	test_copy_ah_qp();
	test_copy_path_rec();
	test_fork();
	test_unsupported();
	test_compat();
	test_private_cmds();
	test_private_plumbing();

	if (srn_check_failures) {
		fprintf(stderr, "test_util_verbs: %d check(s) failed\n",
			srn_check_failures);
		return 1;
	}
	printf("test_util_verbs: ok\n");
	return 0;
}
