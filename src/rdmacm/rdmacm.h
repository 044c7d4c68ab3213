/*
 * rdmacm.h - what the files of librdmacm's API share (src/rdmacm/).
 */
#ifndef SRN_RDMACM_RDMACM_H
#define SRN_RDMACM_RDMACM_H

#include "cm/cm.h"

/* api.c: a synchronous id's call waits for its event (ucma_complete);
 * 0, or -1 and errno.  Called without srn_cm.lock. */
int srn_rdmacm_complete(struct srn_cm_id *p);

/* mcast.c, under srn_cm.lock: the id's QP now exists, attach it to the
 * groups the id joined; the id goes away, forget its joins. */
void srn_rdmacm_mc_qp_created(struct srn_cm_id *p);
void srn_rdmacm_mc_forget(struct srn_cm_id *p);

#endif
