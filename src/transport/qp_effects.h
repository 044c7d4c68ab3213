/*
 * qp_effects.h - QP state transitions with their transport effects
 * (qp_effects.c).  Must hold nic->lock.
 */
#ifndef SRN_TRANSPORT_QP_EFFECTS_H
#define SRN_TRANSPORT_QP_EFFECTS_H

#include <infiniband/verbs.h>

struct srn_qp;

/* ibv_modify_qp after its checks (core/qp_rules.h): apply the transition
 * to the QP (core/qp.c: srn_qp_apply), then what it sets off in the
 * transport: flush and LAST_WQE_REACHED on entering Error, SQ_DRAINED,
 * the lists left on RESET or Error, transmission resumed in RTS.
 * Returns 0 or -errno (nothing changed). */
int srn_qp_modify(struct srn_qp *qp, const struct ibv_qp_attr *attr, int mask);
/* The QP is being destroyed: off the transport's lists, and an XRC
 * receive QP lets go of its SRQ. */
void srn_qp_unlink(struct srn_qp *qp);

#endif
