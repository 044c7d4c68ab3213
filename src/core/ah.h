/*
 * ah.h - address handles: a destination GID resolved once to the UDP
 * address it is reached at and the IP facts its packets' ICRC covers.
 */
#ifndef SRN_CORE_AH_H
#define SRN_CORE_AH_H

#include <infiniband/verbs.h>
#include <sys/socket.h>

#include "wire/icrc.h"

struct srn_ah {
	struct ibv_ah ibah;
	struct ibv_ah_attr attr;
	struct sockaddr_storage dst;
	socklen_t dstlen;
	struct srn_ip_meta meta;       /* for packets sent to dst */
	struct srn_diag_obj *diag;
};

static inline struct srn_ah *srn_ah(struct ibv_ah *a)
{
	return (struct srn_ah *)a;
}

#endif
