/*
 * qp_attr.h - the path record and QP attributes a connection gives its
 * id and QP, and the QP moves librdmacm makes with them (qp_attr.c).
 * All must hold srn_cm.lock; -errno.
 */
#ifndef SRN_CM_QP_ATTR_H
#define SRN_CM_QP_ATTR_H

#include <stdint.h>
#include <infiniband/verbs.h>

#include "cm/cm_id.h"

/* RoCE paths have no SA: the packet lifetime rdma_cm uses for them
 * (CMA_IBOE_PACKET_LIFETIME), its CM response timeout and retries. */
#define CMA_PACKET_LIFETIME 16
#define CMA_CM_RESPONSE_TIMEOUT 20
#define CMA_MAX_CM_RETRIES 15
#define CMA_MRA_SERVICE_TIMEOUT 24
#define CMA_DEFAULT_ACK_TIMEOUT 18    /* 2 × lifetime: 4.096 us << 18 ≈ 1.07 s */

/* The one path record of an id (route.path_rec): our GID to the peer's,
 * P_Key 0xffff, the kernel's packet lifetime, at this MTU. */
void srn_cm_fill_path(struct srn_cm_id *id, enum ibv_mtu mtu);
int srn_cm_init_qp_attr(struct srn_cm_id *id, struct ibv_qp_attr *a, int *mask);
int srn_cm_qp_to(struct srn_cm_id *id, enum ibv_qp_state s);
/* UD ids (RDMA_PS_UDP, RDMA_PS_IB with UD QPs): their QP's attributes
 * and the Q_Key they use. */
int srn_cm_ud_init_qp_attr(struct srn_cm_id *id, struct ibv_qp_attr *a, int *mask);
uint32_t srn_cm_ud_qkey(const struct srn_cm_id *id);

#endif
