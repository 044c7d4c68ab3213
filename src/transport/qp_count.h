/*
 * qp_count.h - counting an event for the device and for the QP it
 * happened on (the QP's slot in the diagnostic segment), in one call.
 */
#ifndef SRN_TRANSPORT_QP_COUNT_H
#define SRN_TRANSPORT_QP_COUNT_H

#include "core/nic.h"
#include "core/qp.h"
#include "diag/shm.h"

static inline void srn_qp_count(struct srn_qp *qp, enum srn_counter dev, enum srn_qp_counter qc,
				uint64_t n)
{
	srn_count(qp->nic->diag.cnt, dev, n);
	srn_diag_qp_count(qp->diag, qc, n);
}

#endif
