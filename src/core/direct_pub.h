/*
 * direct_pub.h - keeping this device's direct-placement table (link/direct.h)
 * in step with its QPs and memory regions.
 *
 * Same-host peers place RDMA Writes and serve RDMA Reads in our memory
 * themselves, with the checks our responder would make, from what this
 * table says.  So every change a responder check depends on is published
 * here, under nic->lock, before the verb that made it returns; and every
 * change that takes a right away (dereg, revocation, rereg, a QP leaving
 * RTR/RTS or destroyed) is followed by a fence: when the call returns, no
 * placement that saw the old entry is still running.
 */
#ifndef SRN_CORE_DIRECT_PUB_H
#define SRN_CORE_DIRECT_PUB_H

#include <stdint.h>

struct srn_nic;
struct srn_qp;
struct srn_mr;

/* The QP's state, access flags and PD as they are now.  Must hold nic->lock. */
void srn_direct_pub_qp(struct srn_qp *qp);
/* QP number qpn is gone (destroy).  Must hold nic->lock. */
void srn_direct_unpub_qpn(struct srn_nic *nic, uint32_t qpn);
/* A region as it is now (key, PD, range, rights, revoked); windows are
 * never published.  Must hold nic->lock. */
void srn_direct_pub_mr(struct srn_nic *nic, const struct srn_mr *mr);
/* The region's key stops resolving (dereg).  Must hold nic->lock. */
void srn_direct_unpub_mr(struct srn_nic *nic, const struct srn_mr *mr);

#endif
