/*
 * cnp_np.h - the DCQCN notification point (NP): when a CE-marked packet
 * arrives for a QP, decide whether that QP sends a CNP back to its peer.
 *
 * Pure: state per QP, time passed in.  At most one CNP per QP per
 * min_time_between_cnps (mlx5 roce_np, default 4 us; the paper's N,
 * 50 us): a congested flow hears about it at most once per interval
 * however many of its packets are marked.
 *
 * The counters are mlx5's: np_ecn_marked_roce_packets counts every
 * CE-marked RoCE packet, np_cnp_sent every CNP this QP decided to send.
 */
#ifndef SRN_TRANSPORT_CNP_NP_H
#define SRN_TRANSPORT_CNP_NP_H

#include <stdbool.h>
#include <stdint.h>

#include "transport/dcqcn.h"

struct srn_cnp_np {
	uint64_t last_cnp_ns;	/* when the last CNP was decided */
	bool sent_any;		/* last_cnp_ns is meaningful */
	uint64_t ecn_marked;	/* np_ecn_marked_roce_packets, this QP */
	uint64_t cnp_sent;	/* np_cnp_sent, this QP */
};

static inline void srn_cnp_np_init(struct srn_cnp_np *np)
{
	*np = (struct srn_cnp_np){ 0 };
}

/* A CE-marked packet for this QP arrived at now: true when a CNP should
 * be sent now (and it is counted as sent). */
bool srn_cnp_np_marked(struct srn_cnp_np *np, const struct srn_dcqcn_cfg *cfg, uint64_t now_ns);

#endif /* SRN_TRANSPORT_CNP_NP_H */
