/*
 * stubs.c - the parts of librdmacm not built yet.  They exist so every
 * binary linked against Debian's librdmacm loads; each fails the way its
 * man page says a failure looks (-1, NULL or (off_t)-1) with errno
 * EOPNOTSUPP, and never pretends to work:
 *   ECE (rdma_set_local_ece, rdma_get_remote_ece).
 */
#include <errno.h>
#include <rdma/rdma_cma.h>

#include "rdmacm/export.h"

#define FAIL(v) do { errno = EOPNOTSUPP; return (v); } while (0)

SRN_RDMACM_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	FAIL(-1);
}

SRN_RDMACM_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	FAIL(-1);
}
