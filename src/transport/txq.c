/*
 * txq.c - the transport's door to the link (see txq.h): the device's
 * transmit side is link/egress.c; here only what needs the nic, the
 * device log line when the path refuses UDP GSO.
 */
#include "transport/txq.h"

#include <string.h>

#include "core/nic.h"
#include "diag/shm.h"

int srn_txq_add(struct srn_nic *nic, const struct sockaddr *dst, socklen_t dstlen,
		const struct srn_ip_meta *meta, const uint8_t *hdr, int hl,
		const struct iovec *pay, int npay, uint32_t paylen)
{
	return srn_egress_add(nic->link.egress, dst, dstlen, meta, hdr, hl, pay, npay, paylen);
}

void srn_txq_flush(struct srn_nic *nic)
{
	struct srn_egress *e = nic->link.egress;
	srn_egress_flush(e);
	/* Also catches a refusal met by a flush inside srn_egress_add. */
	if (e->gso_refused) {
		srn_diag_dev_log(nic->diag.seg, SRN_LOG_WARN,
				 "the path refused a UDP GSO send (%s): one datagram "
				 "per packet from now on", strerror(-e->gso_refused));
		e->gso_refused = 0;
	}
}
