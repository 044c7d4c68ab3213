/*
 * util_verbs.c - the public verbs that need no device.
 *
 * Enum-to-string tables, IB rate conversions, the fork-safety calls, the
 * historical sysfs helpers, the kernel-struct copy helpers that librdmacm
 * uses, and the verbs whose subject (kernel objects shared between
 * processes, ECE, L2 resolution by the kernel) does not exist in softrnic.
 *
 * Invariants:
 *  - Strings are byte-for-byte the ones rdma-core 44 returns, because
 *    programs print them and tests compare them; anything out of range is
 *    "unknown", never NULL.
 *  - Every table is indexed by the enum value and its length is checked
 *    against the last enumerator at compile time, so a new enumerator in
 *    <infiniband/verbs.h> breaks the build instead of reading past the end.
 *  - "Not supported" is EOPNOTSUPP, in the convention of each verb
 *    (NULL + errno, positive errno, or negative errno where rdma-core's
 *    verb returns negative values).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ib_user_sa.h>

#include "abi/export.h"

#define SRN_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/*
 * Not in any installed header: these are declared by rdma-core's private
 * driver.h and marshall.h, with these exact signatures.
 */
SRN_EXPORT int ibv_dontfork_range(void *base, size_t size);
SRN_EXPORT int ibv_dofork_range(void *base, size_t size);
SRN_EXPORT const char *ibv_get_sysfs_path(void);
SRN_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file,
				   char *buf, size_t size);
SRN_EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst,
					   struct ib_uverbs_ah_attr *src);
SRN_EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst,
					   struct ib_uverbs_qp_attr *src);
SRN_EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst,
					    struct ib_user_path_rec *src);
SRN_EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst,
					  struct ibv_sa_path_rec *src);

/* The IBVERBS_1.1 provider-registration entry (pre-2017 providers). */
struct ibv_device;
typedef struct ibv_device *(*srn_driver_init_func_1_1)(const char *sysfs_path,
							int abi_version);
SRN_COMPAT(ibv_register_driver, IBVERBS_1.1)
void srn_compat11_ibv_register_driver(const char *name,
				      srn_driver_init_func_1_1 init_func);

/* ---- enum names ---------------------------------------------------- */

static const char *const srn_wc_status_names[] = {
	[IBV_WC_SUCCESS]		= "success",
	[IBV_WC_LOC_LEN_ERR]		= "local length error",
	[IBV_WC_LOC_QP_OP_ERR]		= "local QP operation error",
	[IBV_WC_LOC_EEC_OP_ERR]		= "local EE context operation error",
	[IBV_WC_LOC_PROT_ERR]		= "local protection error",
	[IBV_WC_WR_FLUSH_ERR]		= "Work Request Flushed Error",
	[IBV_WC_MW_BIND_ERR]		= "memory management operation error",
	[IBV_WC_BAD_RESP_ERR]		= "bad response error",
	[IBV_WC_LOC_ACCESS_ERR]		= "local access error",
	[IBV_WC_REM_INV_REQ_ERR]	= "remote invalid request error",
	[IBV_WC_REM_ACCESS_ERR]		= "remote access error",
	[IBV_WC_REM_OP_ERR]		= "remote operation error",
	[IBV_WC_RETRY_EXC_ERR]		= "transport retry counter exceeded",
	[IBV_WC_RNR_RETRY_EXC_ERR]	= "RNR retry counter exceeded",
	[IBV_WC_LOC_RDD_VIOL_ERR]	= "local RDD violation error",
	[IBV_WC_REM_INV_RD_REQ_ERR]	= "remote invalid RD request",
	[IBV_WC_REM_ABORT_ERR]		= "aborted error",
	[IBV_WC_INV_EECN_ERR]		= "invalid EE context number",
	[IBV_WC_INV_EEC_STATE_ERR]	= "invalid EE context state",
	[IBV_WC_FATAL_ERR]		= "fatal error",
	[IBV_WC_RESP_TIMEOUT_ERR]	= "response timeout error",
	[IBV_WC_GENERAL_ERR]		= "general error",
	[IBV_WC_TM_ERR]			= "TM error",
	[IBV_WC_TM_RNDV_INCOMPLETE]	= "TM software rendezvous",
};
_Static_assert(SRN_ARRAY_SIZE(srn_wc_status_names) ==
	       IBV_WC_TM_RNDV_INCOMPLETE + 1, "one name per ibv_wc_status");

static const char *const srn_event_type_names[] = {
	[IBV_EVENT_CQ_ERR]		= "CQ error",
	[IBV_EVENT_QP_FATAL]		= "local work queue catastrophic error",
	[IBV_EVENT_QP_REQ_ERR]		= "invalid request local work queue error",
	[IBV_EVENT_QP_ACCESS_ERR]	= "local access violation work queue error",
	[IBV_EVENT_COMM_EST]		= "communication established",
	[IBV_EVENT_SQ_DRAINED]		= "send queue drained",
	[IBV_EVENT_PATH_MIG]		= "path migrated",
	[IBV_EVENT_PATH_MIG_ERR]	= "path migration request error",
	[IBV_EVENT_DEVICE_FATAL]	= "local catastrophic error",
	[IBV_EVENT_PORT_ACTIVE]		= "port active",
	[IBV_EVENT_PORT_ERR]		= "port error",
	[IBV_EVENT_LID_CHANGE]		= "LID change",
	[IBV_EVENT_PKEY_CHANGE]		= "P_Key change",
	[IBV_EVENT_SM_CHANGE]		= "SM change",
	[IBV_EVENT_SRQ_ERR]		= "SRQ catastrophic error",
	[IBV_EVENT_SRQ_LIMIT_REACHED]	= "SRQ limit reached",
	[IBV_EVENT_QP_LAST_WQE_REACHED]	= "last WQE reached",
	[IBV_EVENT_CLIENT_REREGISTER]	= "client reregistration",
	[IBV_EVENT_GID_CHANGE]		= "GID table change",
	[IBV_EVENT_WQ_FATAL]		= "WQ fatal",
};
_Static_assert(SRN_ARRAY_SIZE(srn_event_type_names) == IBV_EVENT_WQ_FATAL + 1,
	       "one name per ibv_event_type");

/* Index 0 is no node type (IBV_NODE_CA is 1): it stays NULL -> "unknown". */
static const char *const srn_node_type_names[] = {
	[IBV_NODE_CA]		= "InfiniBand channel adapter",
	[IBV_NODE_SWITCH]	= "InfiniBand switch",
	[IBV_NODE_ROUTER]	= "InfiniBand router",
	[IBV_NODE_RNIC]		= "iWARP NIC",
	[IBV_NODE_USNIC]	= "usNIC",
	[IBV_NODE_USNIC_UDP]	= "usNIC UDP",
	[IBV_NODE_UNSPECIFIED]	= "unspecified",
};
_Static_assert(SRN_ARRAY_SIZE(srn_node_type_names) == IBV_NODE_UNSPECIFIED + 1,
	       "one name per ibv_node_type");

static const char *const srn_port_state_names[] = {
	[IBV_PORT_NOP]		= "no state change (NOP)",
	[IBV_PORT_DOWN]		= "down",
	[IBV_PORT_INIT]		= "init",
	[IBV_PORT_ARMED]	= "armed",
	[IBV_PORT_ACTIVE]	= "active",
	[IBV_PORT_ACTIVE_DEFER]	= "active defer",
};
_Static_assert(SRN_ARRAY_SIZE(srn_port_state_names) ==
	       IBV_PORT_ACTIVE_DEFER + 1, "one name per ibv_port_state");

/*
 * The value arrives as an enum but callers pass whatever came off a wire or
 * out of a struct, so it is range-checked as a plain integer (negative
 * values included: IBV_NODE_UNKNOWN is -1).
 */
static const char *srn_name_of(const char *const *names, size_t count,
			       long value)
{
	if (value < 0 || (unsigned long)value >= count || !names[value])
		return "unknown";
	return names[value];
}

SRN_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	return srn_name_of(srn_wc_status_names,
			   SRN_ARRAY_SIZE(srn_wc_status_names), (long)status);
}

SRN_EXPORT const char *ibv_event_type_str(enum ibv_event_type event)
{
	return srn_name_of(srn_event_type_names,
			   SRN_ARRAY_SIZE(srn_event_type_names), (long)event);
}

SRN_EXPORT const char *ibv_node_type_str(enum ibv_node_type node_type)
{
	return srn_name_of(srn_node_type_names,
			   SRN_ARRAY_SIZE(srn_node_type_names), (long)node_type);
}

SRN_EXPORT const char *ibv_port_state_str(enum ibv_port_state port_state)
{
	return srn_name_of(srn_port_state_names,
			   SRN_ARRAY_SIZE(srn_port_state_names),
			   (long)port_state);
}

/* ---- static rates -------------------------------------------------- */

/*
 * mult is the rate as a multiple of 2.5 Gb/s (1x SDR), 0 where the rate is
 * not such a multiple (the FDR/EDR/HDR encodings: 64b/66b lanes), for
 * which rdma-core has no multiplier either.  mbps is the data rate of the
 * link, rounded as rdma-core rounds it (FDR lane = 14.0625 Gb/s, EDR lane
 * = 25.78125 Gb/s, so 4x EDR "100G" is 103125 Mb/s).
 */
struct srn_rate_info {
	enum ibv_rate rate;
	int mult;
	int mbps;
};

static const struct srn_rate_info srn_rates[] = {
	{ IBV_RATE_2_5_GBPS,	  1,	   2500 },
	{ IBV_RATE_5_GBPS,	  2,	   5000 },
	{ IBV_RATE_10_GBPS,	  4,	  10000 },
	{ IBV_RATE_20_GBPS,	  8,	  20000 },
	{ IBV_RATE_30_GBPS,	 12,	  30000 },
	{ IBV_RATE_40_GBPS,	 16,	  40000 },
	{ IBV_RATE_60_GBPS,	 24,	  60000 },
	{ IBV_RATE_80_GBPS,	 32,	  80000 },
	{ IBV_RATE_120_GBPS,	 48,	 120000 },
	{ IBV_RATE_14_GBPS,	  0,	  14062 },
	{ IBV_RATE_56_GBPS,	  0,	  56250 },
	{ IBV_RATE_112_GBPS,	  0,	 112500 },
	{ IBV_RATE_168_GBPS,	  0,	 168750 },
	{ IBV_RATE_25_GBPS,	  0,	  25781 },
	{ IBV_RATE_100_GBPS,	  0,	 103125 },
	{ IBV_RATE_200_GBPS,	  0,	 206250 },
	{ IBV_RATE_300_GBPS,	  0,	 309375 },
	{ IBV_RATE_28_GBPS,	 11,	  28125 },
	{ IBV_RATE_50_GBPS,	 20,	  53125 },
	{ IBV_RATE_400_GBPS,	160,	 425000 },
	{ IBV_RATE_600_GBPS,	240,	 637500 },
	{ IBV_RATE_800_GBPS,	320,	 850000 },
	{ IBV_RATE_1200_GBPS,	480,	1275000 },
};
/* Every enum ibv_rate except IBV_RATE_MAX (0), which is "no limit". */
_Static_assert(SRN_ARRAY_SIZE(srn_rates) == IBV_RATE_1200_GBPS - 1,
	       "one row per ibv_rate");

static const struct srn_rate_info *srn_rate_by_enum(enum ibv_rate rate)
{
	for (size_t i = 0; i < SRN_ARRAY_SIZE(srn_rates); i++)
		if (srn_rates[i].rate == rate)
			return &srn_rates[i];
	return NULL;
}

SRN_EXPORT int ibv_rate_to_mult(enum ibv_rate rate)
{
	const struct srn_rate_info *r = srn_rate_by_enum(rate);

	return r && r->mult ? r->mult : -1;
}

SRN_EXPORT enum ibv_rate mult_to_ibv_rate(int mult)
{
	if (mult <= 0)
		return IBV_RATE_MAX;
	for (size_t i = 0; i < SRN_ARRAY_SIZE(srn_rates); i++)
		if (srn_rates[i].mult == mult)
			return srn_rates[i].rate;
	return IBV_RATE_MAX;
}

SRN_EXPORT int ibv_rate_to_mbps(enum ibv_rate rate)
{
	const struct srn_rate_info *r = srn_rate_by_enum(rate);

	return r ? r->mbps : -1;
}

SRN_EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	for (size_t i = 0; i < SRN_ARRAY_SIZE(srn_rates); i++)
		if (srn_rates[i].mbps == mbps)
			return srn_rates[i].rate;
	return IBV_RATE_MAX;
}

/* ---- fork ------------------------------------------------------------ */

/*
 * rdma-core marks registered memory MADV_DONTFORK because the kernel pins
 * it for DMA: after fork() a copy-on-write fault would move the parent's
 * page away from under the NIC.  softrnic's "NIC" reads and writes the
 * memory through the process's own mappings (or a peer writes it through
 * this process's pid), which stay correct across fork(), exactly like a
 * kernel with copy-on-fork pinning; pages moved onto a memfd for direct
 * placement are copied into the child by an atfork handler
 * (core/mr_share_maps.c).  Hence IBV_FORK_UNNEEDED and no-ops.
 */
SRN_EXPORT int ibv_fork_init(void)
{
	return 0;
}

SRN_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

SRN_EXPORT int ibv_dontfork_range(void *base, size_t size)
{
	return 0;
}

SRN_EXPORT int ibv_dofork_range(void *base, size_t size)
{
	return 0;
}

/* ---- sysfs helpers (IBVERBS_1.0 historical, used by librdmacm) ------- */

/* rdma-core bounds SYSFS_PATH at 256 characters (IBV_SYSFS_PATH_MAX). */
#define SRN_SYSFS_PATH_MAX 256

static char srn_sysfs_path[SRN_SYSFS_PATH_MAX + 1];
static pthread_once_t srn_sysfs_once = PTHREAD_ONCE_INIT;

static void srn_sysfs_path_init(void)
{
	/* secure_getenv: a set-user-ID program must not be redirected. */
	const char *env = secure_getenv("SYSFS_PATH");
	size_t len;

	if (!env)
		env = "/sys";
	len = strnlen(env, SRN_SYSFS_PATH_MAX);
	memcpy(srn_sysfs_path, env, len);
	while (len > 0 && srn_sysfs_path[len - 1] == '/')
		len--;
	srn_sysfs_path[len] = '\0';
}

SRN_EXPORT const char *ibv_get_sysfs_path(void)
{
	pthread_once(&srn_sysfs_once, srn_sysfs_path_init);
	return srn_sysfs_path;
}

/*
 * Reads <dir>/<file> with one read() (sysfs attributes are produced whole)
 * into buf, drops one trailing newline and NUL-terminates.  Returns the
 * string length, or -1 with errno; fails rather than hand back a string
 * that had to be truncated to fit its terminator.
 */
SRN_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file,
				   char *buf, size_t size)
{
	char path[PATH_MAX];
	ssize_t len;
	int n, fd;

	n = snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	len = read(fd, buf, size > INT_MAX ? INT_MAX : size);
	close(fd);
	if (len <= 0)
		return (int)len;
	if (buf[len - 1] == '\n')
		buf[--len] = '\0';
	else if ((size_t)len < size)
		buf[len] = '\0';
	else {
		errno = EOVERFLOW;
		return -1;
	}
	return (int)len;
}

/* ---- kernel struct conversions (used by librdmacm) ------------------- */

/*
 * The field set is rdma-core's: in particular qp_attr_mask and qp_state
 * are not copied (callers of the kernel's INIT_QP_ATTR keep their own
 * requested state and take the mask from the response themselves).
 * Byte order is the same on both sides: fields that are big-endian on the
 * wire (dlid, slid, flow_label, pkey in path records) are big-endian in
 * both structs.
 */
SRN_EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst,
					   struct ib_uverbs_ah_attr *src)
{
	_Static_assert(sizeof(dst->grh.dgid.raw) == sizeof(src->grh.dgid),
		       "GID is 16 bytes on both sides");
	memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid.raw));
	dst->grh.flow_label = src->grh.flow_label;
	dst->grh.sgid_index = src->grh.sgid_index;
	dst->grh.hop_limit = src->grh.hop_limit;
	dst->grh.traffic_class = src->grh.traffic_class;
	dst->dlid = src->dlid;
	dst->sl = src->sl;
	dst->src_path_bits = src->src_path_bits;
	dst->static_rate = src->static_rate;
	dst->is_global = src->is_global;
	dst->port_num = src->port_num;
}

SRN_EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst,
					   struct ib_uverbs_qp_attr *src)
{
	dst->cur_qp_state = src->cur_qp_state;
	dst->path_mtu = src->path_mtu;
	dst->path_mig_state = src->path_mig_state;
	dst->qkey = src->qkey;
	dst->rq_psn = src->rq_psn;
	dst->sq_psn = src->sq_psn;
	dst->dest_qp_num = src->dest_qp_num;
	dst->qp_access_flags = src->qp_access_flags;

	dst->cap.max_send_wr = src->max_send_wr;
	dst->cap.max_recv_wr = src->max_recv_wr;
	dst->cap.max_send_sge = src->max_send_sge;
	dst->cap.max_recv_sge = src->max_recv_sge;
	dst->cap.max_inline_data = src->max_inline_data;

	ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
	ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);

	dst->pkey_index = src->pkey_index;
	dst->alt_pkey_index = src->alt_pkey_index;
	dst->en_sqd_async_notify = src->en_sqd_async_notify;
	dst->sq_draining = src->sq_draining;
	dst->max_rd_atomic = src->max_rd_atomic;
	dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	dst->min_rnr_timer = src->min_rnr_timer;
	dst->port_num = src->port_num;
	dst->timeout = src->timeout;
	dst->retry_cnt = src->retry_cnt;
	dst->rnr_retry = src->rnr_retry;
	dst->alt_port_num = src->alt_port_num;
	dst->alt_timeout = src->alt_timeout;
}

SRN_EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst,
					    struct ib_user_path_rec *src)
{
	memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid.raw));
	memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid.raw));
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = (int)src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->reversible = (int)src->reversible;
	dst->numb_path = src->numb_path;
	dst->pkey = src->pkey;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->mtu = (uint8_t)src->mtu;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
	dst->packet_life_time_selector = src->packet_life_time_selector;
}

SRN_EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst,
					  struct ibv_sa_path_rec *src)
{
	memcpy(dst->dgid, src->dgid.raw, sizeof(dst->dgid));
	memcpy(dst->sgid, src->sgid.raw, sizeof(dst->sgid));
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = (__u32)src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->reversible = (__u32)src->reversible;
	dst->numb_path = src->numb_path;
	dst->pkey = src->pkey;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->mtu = src->mtu;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
	dst->packet_life_time_selector = src->packet_life_time_selector;
}

/* ---- what softrnic does not have -------------------------------------- */

/*
 * Old (IBVERBS_1.1) provider registration.  softrnic is the only device;
 * a provider library registering itself is ignored, not an error.
 */
void srn_compat11_ibv_register_driver(const char *name,
				      srn_driver_init_func_1_1 init_func)
{
}

/*
 * rdma-core asks the kernel's neighbour table for the MAC and VLAN of a
 * RoCE destination.  softrnic runs over UDP sockets and the kernel
 * resolves L2 when it sends them, so there is no MAC to return.  Negative
 * errno: this verb's failures are negative in rdma-core.
 */
SRN_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *context,
					   struct ibv_ah_attr *attr,
					   uint8_t eth_mac[ETHERNET_LL_SIZE],
					   uint16_t *vid)
{
	errno = EOPNOTSUPP;
	return -EOPNOTSUPP;
}

/*
 * Importing shares a kernel object (device fd, PD, MR, DM handle) between
 * processes.  softrnic objects live in the creating process and have no
 * kernel handle, so nothing can be imported, and nothing handed to
 * unimport can have been imported: those are no-ops.
 */
SRN_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	errno = EOPNOTSUPP;
	return NULL;
}

SRN_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *context,
					uint32_t pd_handle)
{
	errno = EOPNOTSUPP;
	return NULL;
}

SRN_EXPORT void ibv_unimport_pd(struct ibv_pd *pd)
{
}

SRN_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	errno = EOPNOTSUPP;
	return NULL;
}

SRN_EXPORT void ibv_unimport_mr(struct ibv_mr *mr)
{
}

SRN_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *context,
					uint32_t dm_handle)
{
	errno = EOPNOTSUPP;
	return NULL;
}

SRN_EXPORT void ibv_unimport_dm(struct ibv_dm *dm)
{
}

/*
 * Enhanced Connection Establishment negotiates vendor options through
 * rdma_cm; softrnic has no vendor options.  Positive errno, as rdma-core.
 */
SRN_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}

SRN_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}
