/*
 * verbs_note.c - a line in a device's log from softrnic's librdmacm.
 *
 * The CM (src/cm/, in librdmacm.so.1) has no diagnostic segment of its
 * own; what it must tell the user about a device (its rdma_cm port
 * directory's name was taken by another user, link/rundir.h) goes into
 * the log of each device it opened, where `softrnic explain` and
 * SOFTRNIC_LOG show the library's own lines.  Exported under
 * SOFTRNIC_PRIVATE_CM_1 only.  Not per operation: once per process.
 */
#include "core/device.h"
#include "core/nic.h"
#include "diag/shm.h"
#include "engine/nic.h"
#include "verbs/verbs.h"

SRN_EXPORT void softrnic_dev_note(struct ibv_context *ctx, const char *line);

SRN_EXPORT void softrnic_dev_note(struct ibv_context *ctx, const char *line)
{
	if (!ctx || !line)
		return;
	struct srn_nic *nic = srn_ctx(ctx)->nic;
	srn_nic_lock(nic);
	srn_diag_dev_log(nic->diag.seg, SRN_LOG_WARN, "%s", line);
	srn_nic_unlock(nic);
}
