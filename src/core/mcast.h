/*
 * mcast.h - UD multicast groups of one nic: which QPs are attached to
 * which group, and the socket each group is received on.  Must hold
 * nic->lock.
 */
#ifndef SRN_CORE_MCAST_H
#define SRN_CORE_MCAST_H

#include <stdint.h>

#include "link/udp.h"

struct srn_nic;
struct srn_qp;

struct srn_mcast_group {
	uint8_t gid[16];
	struct srn_udp sock;
	struct srn_qp **qps;
	int nqps, cap;
};

int srn_mcast_attach(struct srn_nic *nic, struct srn_qp *qp, const uint8_t gid[16]);
int srn_mcast_detach(struct srn_nic *nic, struct srn_qp *qp, const uint8_t gid[16]);
/* A QP is being destroyed: leave every group it joined. */
void srn_mcast_qp_gone(struct srn_nic *nic, struct srn_qp *qp);
void srn_mcast_fini(struct srn_nic *nic);

#endif
