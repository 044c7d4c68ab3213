/*
 * sidr.h - UD ids (RDMA_PS_UDP, RDMA_PS_IB with UD QPs) resolve the
 * peer's QPN and Q_Key with SIDR_REQ/SIDR_REP (sidr.c).  conn.c's entry
 * points hand UD ids to these.  All must hold srn_cm.lock; -errno.
 */
#ifndef SRN_CM_SIDR_H
#define SRN_CM_SIDR_H

#include <stdint.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "cm/cm_id.h"
#include "cm/mad.h"

struct srn_cm_dev;

int srn_cm_sidr_connect(struct srn_cm_id *id, const struct rdma_conn_param *p);
int srn_cm_sidr_accept(struct srn_cm_id *id, const struct rdma_conn_param *p);
int srn_cm_sidr_reject(struct srn_cm_id *id, const void *pdata, uint8_t len);
/* rdma_disconnect of a UD id: its QP to ERR, no message (as the kernel). */
int srn_cm_sidr_disconnect(struct srn_cm_id *id);
void srn_cm_sidr_abort(struct srn_cm_id *id);
/* A UD id's request went unanswered through every retry. */
void srn_cm_sidr_expire(struct srn_cm_id *id);
void srn_cm_sidr_recv(struct srn_cm_dev *dev, const struct srn_cm_msg *m, const uint8_t gid[16]);
/* The address handle to reach gid from id's device (ud events). */
void srn_cm_ud_ah_attr(const struct srn_cm_id *id, const uint8_t gid[16], struct ibv_ah_attr *ah);

#endif
