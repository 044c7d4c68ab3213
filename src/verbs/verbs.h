/*
 * verbs.h - shared by the verbs entry-point files only: the ops table
 * setup and the one place where -errno becomes what each kind of verb
 * returns (post: positive errno; create: NULL + errno; poll: negative).
 */
#ifndef SRN_VERBS_VERBS_H
#define SRN_VERBS_VERBS_H

#include <errno.h>
#include <stdbool.h>
#include <infiniband/verbs.h>

#include "verbs/visibility.h"

struct srn_context;

/* Fill the context's ops tables; every operation not provided points at a
 * stub that fails with EOPNOTSUPP. */
void srn_verbs_set_ops(struct srn_context *ctx);

/* ops implemented in the verbs_*.c files */
int srn_verbs_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int srn_verbs_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int srn_verbs_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int srn_verbs_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int srn_verbs_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int srn_verbs_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a, size_t len);
int srn_verbs_query_rt_values(struct ibv_context *c, struct ibv_values_ex *v);
int srn_verbs_query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in,
			      struct ibv_device_attr_ex *a, size_t len);

struct srn_qp;
/* verbs_qp.c: create a QP (0 or -errno); queue one send work request
 * after every check ibv_post_send makes (must hold nic->lock). */
struct srn_xrcd;
int srn_qp_create(struct ibv_context *c, struct ibv_pd *pd, struct ibv_qp_init_attr *init,
		  struct srn_xrcd *xrcd, struct srn_qp **out);
/* The same, as the nic's GSI QP (QP number 1) when gsi (verbs_gsi.c). */
int srn_qp_create_at(struct ibv_context *c, struct ibv_pd *pd, struct ibv_qp_init_attr *init,
		     struct srn_xrcd *xrcd, bool gsi, struct srn_qp **out);
int srn_qp_post_one(struct srn_qp *qp, const struct ibv_send_wr *wr);
/* Check one send work request and write it into SQ slot pos without
 * making it visible (sq.head stays; no PSNs yet).  The caller owns the
 * slot: it holds nic->lock and pos is sq.head, or it holds qp->sq.lock and
 * pos lies in the free part of the ring it saw under nic->lock (the
 * transport reads only [sq.tail, sq.head)).  wr is ours, aligned (the
 * verbs copy the caller's); its sg_list may be the caller's, at any
 * alignment (core/caller_mem.h).  0 or -errno. */
int srn_sq_fill(struct srn_qp *qp, uint32_t pos, const struct ibv_send_wr *wr);
/* verbs_ex.c */
struct ibv_cq_ex *srn_verbs_create_cq_ex(struct ibv_context *c, struct ibv_cq_init_attr_ex *attr);
struct ibv_qp *srn_verbs_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *attr);
struct ibv_cq *srn_cq_create(struct ibv_context *context, int cqe, void *cq_context,
			     struct ibv_comp_channel *channel, int comp_vector);

/* verbs_xrc.c */
struct ibv_xrcd *srn_verbs_open_xrcd(struct ibv_context *c, struct ibv_xrcd_init_attr *a);
int srn_verbs_close_xrcd(struct ibv_xrcd *x);
struct ibv_srq *srn_verbs_create_srq_ex(struct ibv_context *c, struct ibv_srq_init_attr_ex *a);
int srn_verbs_get_srq_num(struct ibv_srq *srq, uint32_t *num);
/* verbs_rate.c: QP rate limits.  The check and apply functions return 0
 * or -errno and must hold nic->lock. */
struct srn_qp;
struct srn_nic;
int srn_verbs_modify_qp_rate_limit(struct ibv_qp *qp, struct ibv_qp_rate_limit_attr *attr);
void srn_verbs_pacing_caps(struct srn_nic *nic, struct ibv_packet_pacing_caps *c);
int srn_verbs_rate_check(struct srn_qp *qp, uint32_t kbps, uint32_t burst, uint16_t pkt_sz);
int srn_verbs_rate_apply(struct srn_qp *qp, uint32_t kbps, uint32_t burst, uint16_t pkt_sz);
/* verbs_mw.c */
struct ibv_mw *srn_verbs_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int srn_verbs_dealloc_mw(struct ibv_mw *mw);
int srn_verbs_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind);
struct srn_mr *srn_mw_from_handle(struct ibv_mw *mw);

/* verbs_device.c: before an object events can name is freed, withdraw
 * its unread events and wait until those read are acknowledged. */
struct srn_async_ref;
void srn_verbs_forget_events(struct srn_context *ctx, struct srn_async_ref *ref);

/* -errno → NULL with errno set */
static inline void *srn_null_errno(int neg)
{
	errno = -neg;
	return NULL;
}

/* A channel's fd is known to the interposed waits (verbs_fdwait.c). */
struct srn_channel;
void srn_fdwait_channel_add(struct srn_channel *ch);
void srn_fdwait_channel_del(struct srn_channel *ch);

#endif
