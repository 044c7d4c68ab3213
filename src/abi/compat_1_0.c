/*
 * compat_1_0.c - the IBVERBS_1.0 versions of 33 verbs.
 *
 * Before libibverbs 1.1 (2006) these verbs took different structures
 * (struct ibv_context_1_0, ibv_pd_1_0, ...) that wrapped the real ones.
 * Binaries linked then bind to name@IBVERBS_1.0; everything linked since
 * binds to name@@IBVERBS_1.1, which the working verbs in src/verbs define.
 * Debian's libibverbs still exports both, so softrnic does too: a program
 * that merely references the old versions must load.
 *
 * Invariant: no entry point here touches its arguments (their old layouts
 * are not ours to interpret) and each fails in the convention of its verb:
 *   - constructors return NULL with errno = EOPNOTSUPP;
 *   - int verbs return EOPNOTSUPP (positive) with errno set, except the
 *     two event readers, which return -1 with errno set, as they do in 1.1;
 *   - void verbs (free, ack) do nothing: nothing they could be handed was
 *     ever allocated here;
 *   - ibv_get_device_guid has no error value: it returns 0 (no GUID).
 *
 * The internal names srn_compat10_<verb> are exported only through the
 * versioned alias: libibverbs.map's "local: *" hides the names themselves.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "abi/export.h"

/* The 1.0 structures: only pointers to them pass through here. */
struct ibv_device_1_0;
struct ibv_context_1_0;
struct ibv_pd_1_0;
struct ibv_mr_1_0;
struct ibv_cq_1_0;
struct ibv_srq_1_0;
struct ibv_qp_1_0;
struct ibv_qp_init_attr_1_0;
struct ibv_ah_1_0;

/*
 * SRN_COMPAT10(ret, verb, args): declares srn_compat10_<verb> bound to
 * <verb>@IBVERBS_1.0, so that the definition below it has a prototype.
 */
#define SRN_COMPAT10(ret, verb, ...) \
	SRN_COMPAT(verb, IBVERBS_1.0) ret srn_compat10_##verb(__VA_ARGS__)

SRN_COMPAT10(struct ibv_device_1_0 **, ibv_get_device_list, int *num);
SRN_COMPAT10(void, ibv_free_device_list, struct ibv_device_1_0 **list);
SRN_COMPAT10(const char *, ibv_get_device_name, struct ibv_device_1_0 *device);
SRN_COMPAT10(__be64, ibv_get_device_guid, struct ibv_device_1_0 *device);
SRN_COMPAT10(struct ibv_context_1_0 *, ibv_open_device,
	     struct ibv_device_1_0 *device);
SRN_COMPAT10(int, ibv_close_device, struct ibv_context_1_0 *context);
SRN_COMPAT10(int, ibv_get_async_event, struct ibv_context_1_0 *context,
	     struct ibv_async_event *event);
SRN_COMPAT10(void, ibv_ack_async_event, struct ibv_async_event *event);
SRN_COMPAT10(int, ibv_query_device, struct ibv_context_1_0 *context,
	     struct ibv_device_attr *device_attr);
SRN_COMPAT10(int, ibv_query_port, struct ibv_context_1_0 *context,
	     uint8_t port_num, struct ibv_port_attr *port_attr);
SRN_COMPAT10(int, ibv_query_gid, struct ibv_context_1_0 *context,
	     uint8_t port_num, int index, union ibv_gid *gid);
SRN_COMPAT10(int, ibv_query_pkey, struct ibv_context_1_0 *context,
	     uint8_t port_num, int index, __be16 *pkey);
SRN_COMPAT10(struct ibv_pd_1_0 *, ibv_alloc_pd,
	     struct ibv_context_1_0 *context);
SRN_COMPAT10(int, ibv_dealloc_pd, struct ibv_pd_1_0 *pd);
SRN_COMPAT10(struct ibv_mr_1_0 *, ibv_reg_mr, struct ibv_pd_1_0 *pd,
	     void *addr, size_t length, int access);
SRN_COMPAT10(int, ibv_dereg_mr, struct ibv_mr_1_0 *mr);
SRN_COMPAT10(struct ibv_cq_1_0 *, ibv_create_cq,
	     struct ibv_context_1_0 *context, int cqe, void *cq_context,
	     struct ibv_comp_channel *channel, int comp_vector);
SRN_COMPAT10(int, ibv_resize_cq, struct ibv_cq_1_0 *cq, int cqe);
SRN_COMPAT10(int, ibv_destroy_cq, struct ibv_cq_1_0 *cq);
SRN_COMPAT10(int, ibv_get_cq_event, struct ibv_comp_channel *channel,
	     struct ibv_cq_1_0 **cq, void **cq_context);
SRN_COMPAT10(void, ibv_ack_cq_events, struct ibv_cq_1_0 *cq,
	     unsigned int nevents);
SRN_COMPAT10(struct ibv_srq_1_0 *, ibv_create_srq, struct ibv_pd_1_0 *pd,
	     struct ibv_srq_init_attr *srq_init_attr);
SRN_COMPAT10(int, ibv_modify_srq, struct ibv_srq_1_0 *srq,
	     struct ibv_srq_attr *srq_attr, int srq_attr_mask);
SRN_COMPAT10(int, ibv_query_srq, struct ibv_srq_1_0 *srq,
	     struct ibv_srq_attr *srq_attr);
SRN_COMPAT10(int, ibv_destroy_srq, struct ibv_srq_1_0 *srq);
SRN_COMPAT10(struct ibv_qp_1_0 *, ibv_create_qp, struct ibv_pd_1_0 *pd,
	     struct ibv_qp_init_attr_1_0 *qp_init_attr);
SRN_COMPAT10(int, ibv_query_qp, struct ibv_qp_1_0 *qp,
	     struct ibv_qp_attr *attr, int attr_mask,
	     struct ibv_qp_init_attr_1_0 *init_attr);
SRN_COMPAT10(int, ibv_modify_qp, struct ibv_qp_1_0 *qp,
	     struct ibv_qp_attr *attr, int attr_mask);
SRN_COMPAT10(int, ibv_destroy_qp, struct ibv_qp_1_0 *qp);
SRN_COMPAT10(struct ibv_ah_1_0 *, ibv_create_ah, struct ibv_pd_1_0 *pd,
	     struct ibv_ah_attr *attr);
SRN_COMPAT10(int, ibv_destroy_ah, struct ibv_ah_1_0 *ah);
SRN_COMPAT10(int, ibv_attach_mcast, struct ibv_qp_1_0 *qp, union ibv_gid *gid,
	     uint16_t lid);
SRN_COMPAT10(int, ibv_detach_mcast, struct ibv_qp_1_0 *qp, union ibv_gid *gid,
	     uint16_t lid);

static void *srn_compat10_null(void)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int srn_compat10_err(void)
{
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}

static int srn_compat10_event_err(void)
{
	errno = EOPNOTSUPP;
	return -1;
}

/* ---- device list and context ---------------------------------------- */

struct ibv_device_1_0 **srn_compat10_ibv_get_device_list(int *num)
{
	/* A caller that ignores NULL still sees an empty list. */
	if (num)
		*num = 0;
	return srn_compat10_null();
}

void srn_compat10_ibv_free_device_list(struct ibv_device_1_0 **list)
{
}

const char *srn_compat10_ibv_get_device_name(struct ibv_device_1_0 *device)
{
	return srn_compat10_null();
}

__be64 srn_compat10_ibv_get_device_guid(struct ibv_device_1_0 *device)
{
	errno = EOPNOTSUPP;
	return 0;
}

struct ibv_context_1_0 *
srn_compat10_ibv_open_device(struct ibv_device_1_0 *device)
{
	return srn_compat10_null();
}

int srn_compat10_ibv_close_device(struct ibv_context_1_0 *context)
{
	return srn_compat10_err();
}

int srn_compat10_ibv_get_async_event(struct ibv_context_1_0 *context,
				     struct ibv_async_event *event)
{
	return srn_compat10_event_err();
}

void srn_compat10_ibv_ack_async_event(struct ibv_async_event *event)
{
}

int srn_compat10_ibv_query_device(struct ibv_context_1_0 *context,
				  struct ibv_device_attr *device_attr)
{
	return srn_compat10_err();
}

int srn_compat10_ibv_query_port(struct ibv_context_1_0 *context,
				uint8_t port_num,
				struct ibv_port_attr *port_attr)
{
	return srn_compat10_err();
}

int srn_compat10_ibv_query_gid(struct ibv_context_1_0 *context,
			       uint8_t port_num, int index, union ibv_gid *gid)
{
	return srn_compat10_err();
}

int srn_compat10_ibv_query_pkey(struct ibv_context_1_0 *context,
				uint8_t port_num, int index, __be16 *pkey)
{
	return srn_compat10_err();
}

/* ---- PD and MR -------------------------------------------------------- */

struct ibv_pd_1_0 *srn_compat10_ibv_alloc_pd(struct ibv_context_1_0 *context)
{
	return srn_compat10_null();
}

int srn_compat10_ibv_dealloc_pd(struct ibv_pd_1_0 *pd)
{
	return srn_compat10_err();
}

struct ibv_mr_1_0 *srn_compat10_ibv_reg_mr(struct ibv_pd_1_0 *pd, void *addr,
					   size_t length, int access)
{
	return srn_compat10_null();
}

int srn_compat10_ibv_dereg_mr(struct ibv_mr_1_0 *mr)
{
	return srn_compat10_err();
}

/* ---- CQ --------------------------------------------------------------- */

struct ibv_cq_1_0 *
srn_compat10_ibv_create_cq(struct ibv_context_1_0 *context, int cqe,
			   void *cq_context, struct ibv_comp_channel *channel,
			   int comp_vector)
{
	return srn_compat10_null();
}

int srn_compat10_ibv_resize_cq(struct ibv_cq_1_0 *cq, int cqe)
{
	return srn_compat10_err();
}

int srn_compat10_ibv_destroy_cq(struct ibv_cq_1_0 *cq)
{
	return srn_compat10_err();
}

int srn_compat10_ibv_get_cq_event(struct ibv_comp_channel *channel,
				  struct ibv_cq_1_0 **cq, void **cq_context)
{
	return srn_compat10_event_err();
}

void srn_compat10_ibv_ack_cq_events(struct ibv_cq_1_0 *cq,
				    unsigned int nevents)
{
}

/* ---- SRQ -------------------------------------------------------------- */

struct ibv_srq_1_0 *
srn_compat10_ibv_create_srq(struct ibv_pd_1_0 *pd,
			    struct ibv_srq_init_attr *srq_init_attr)
{
	return srn_compat10_null();
}

int srn_compat10_ibv_modify_srq(struct ibv_srq_1_0 *srq,
				struct ibv_srq_attr *srq_attr,
				int srq_attr_mask)
{
	return srn_compat10_err();
}

int srn_compat10_ibv_query_srq(struct ibv_srq_1_0 *srq,
			       struct ibv_srq_attr *srq_attr)
{
	return srn_compat10_err();
}

int srn_compat10_ibv_destroy_srq(struct ibv_srq_1_0 *srq)
{
	return srn_compat10_err();
}

/* ---- QP and multicast ------------------------------------------------- */

struct ibv_qp_1_0 *
srn_compat10_ibv_create_qp(struct ibv_pd_1_0 *pd,
			   struct ibv_qp_init_attr_1_0 *qp_init_attr)
{
	return srn_compat10_null();
}

int srn_compat10_ibv_query_qp(struct ibv_qp_1_0 *qp, struct ibv_qp_attr *attr,
			      int attr_mask,
			      struct ibv_qp_init_attr_1_0 *init_attr)
{
	return srn_compat10_err();
}

int srn_compat10_ibv_modify_qp(struct ibv_qp_1_0 *qp, struct ibv_qp_attr *attr,
			       int attr_mask)
{
	return srn_compat10_err();
}

int srn_compat10_ibv_destroy_qp(struct ibv_qp_1_0 *qp)
{
	return srn_compat10_err();
}

int srn_compat10_ibv_attach_mcast(struct ibv_qp_1_0 *qp, union ibv_gid *gid,
				  uint16_t lid)
{
	return srn_compat10_err();
}

int srn_compat10_ibv_detach_mcast(struct ibv_qp_1_0 *qp, union ibv_gid *gid,
				  uint16_t lid)
{
	return srn_compat10_err();
}

/* ---- AH --------------------------------------------------------------- */

struct ibv_ah_1_0 *srn_compat10_ibv_create_ah(struct ibv_pd_1_0 *pd,
					      struct ibv_ah_attr *attr)
{
	return srn_compat10_null();
}

int srn_compat10_ibv_destroy_ah(struct ibv_ah_1_0 *ah)
{
	return srn_compat10_err();
}
