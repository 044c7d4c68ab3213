/*
 * nic.c - the nic's object state that every layer above reads: the QP
 * number table and the doorbell that wakes the progress
 * thread (its eventfd and the flag a deferred transmission raises).  Creating, running and destroying the nic
 * is the engine's (engine/nic.c, engine/progress.c).
 */
#include "core/direct_pub.h"
#include "core/nic.h"

#include <errno.h>
#include <unistd.h>

#include "core/qp.h"

void srn_nic_kick(struct srn_nic *nic)
{
	uint64_t one = 1;
	if (nic->engine.kick_fd >= 0 && write(nic->engine.kick_fd, &one, sizeof(one)) < 0) {
		/* Counter saturated: the thread is already due to wake. */
	}
}

void srn_nic_tx_deferred(struct srn_nic *nic)
{
	/* Raise the flag, then look: the thread announces its deep sleep,
	 * then reads the flag (both sequentially consistent), so it either
	 * sees the flag or is kicked. */
	if (atomic_load_explicit(&nic->engine.tx_waiting, memory_order_relaxed))
		return;
	atomic_store(&nic->engine.tx_waiting, true);
	if (atomic_load(&nic->engine.bg_deep_sleep))
		srn_nic_kick(nic);
}

void srn_nic_deadline_set(struct srn_nic *nic, uint64_t at)
{
	/* The deadline was stored first; this load is ordered after it by
	 * the fence, and the progress thread stores sleep_until before it
	 * re-reads the deadlines (both sequentially consistent): it either
	 * sees the new deadline or is kicked. */
	atomic_thread_fence(memory_order_seq_cst);
	uint64_t until = atomic_load(&nic->engine.sleep_until);
	if (until && at < until)
		srn_nic_kick(nic);
}

int srn_nic_qp_add(struct srn_nic *nic, struct srn_qp *qp, uint32_t *qpn)
{
	/* QPN 0 and 1 are the special QPs (SMI/GSI); never hand them out. */
	for (uint32_t i = 0; i < SRN_QP_TABLE_SIZE; i++) {
		uint32_t slot = (nic->tables.nqps + i + 2) & (SRN_QP_TABLE_SIZE - 1);
		if (slot < 2 || nic->tables.qps[slot])
			continue;
		nic->tables.qpn_gen = (nic->tables.qpn_gen + 1) & SRN_QPN_GEN_MASK;
		if (nic->tables.qpn_gen == 0)
			nic->tables.qpn_gen = 1;
		nic->tables.qps[slot] = qp;
		nic->tables.nqps++;
		/* The top bits say which process behind a shared address owns
		 * the QP (link/udp_group.h), 0 when the address is ours alone. */
		*qpn = (uint32_t)srn_udp_member(&nic->link.udp) << SRN_QPN_MEMBER_SHIFT |
		       (nic->tables.qpn_gen << SRN_QP_TABLE_BITS) | slot;
		return 0;
	}
	return -ENOMEM;
}

int srn_nic_qp_add_gsi(struct srn_nic *nic, struct srn_qp *qp, uint32_t *qpn)
{
	/* QPN 1 is slot 1, generation 0: srn_nic_qp_add never uses slot 1. */
	if (nic->tables.qps[SRN_GSI_QPN])
		return -EBUSY;
	nic->tables.qps[SRN_GSI_QPN] = qp;
	nic->tables.nqps++;
	*qpn = SRN_GSI_QPN;
	return 0;
}

void srn_nic_qp_del(struct srn_nic *nic, uint32_t qpn)
{
	uint32_t slot = qpn & (SRN_QP_TABLE_SIZE - 1);
	if (nic->tables.qps[slot] && nic->tables.qps[slot]->qpn == qpn) {
		nic->tables.qps[slot] = NULL;
		nic->tables.nqps--;
		srn_direct_unpub_qpn(nic, qpn);
	}
}

struct srn_qp *srn_nic_qp_lookup(struct srn_nic *nic, uint32_t qpn)
{
	struct srn_qp *qp = nic->tables.qps[qpn & (SRN_QP_TABLE_SIZE - 1)];
	return qp && qp->qpn == qpn ? qp : NULL;
}
