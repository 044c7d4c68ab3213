/*
 * conn.h - the connection protocol of rdma_cm ids (conn.c): what the
 * rdma_* calls ask of it, and the one entry for every CM MAD that
 * arrives, srn_cm_conn_mad.  UD ids go on to SIDR (sidr.c).  All must
 * hold srn_cm.lock; -errno.
 */
#ifndef SRN_CM_CONN_H
#define SRN_CM_CONN_H

#include <stdint.h>
#include <rdma/rdma_cma.h>

#include "cm/cm_id.h"
#include "cm/mad.h"

struct srn_cm_dev;

int srn_cm_connect(struct srn_cm_id *id, const struct rdma_conn_param *p);
int srn_cm_accept(struct srn_cm_id *id, const struct rdma_conn_param *p);
int srn_cm_reject(struct srn_cm_id *id, const void *pdata, uint8_t len);
int srn_cm_establish(struct srn_cm_id *id);
int srn_cm_disconnect(struct srn_cm_id *id);
/* The id goes away: tell the peer what the state asks (REJ, DREQ/DREP). */
void srn_cm_abort(struct srn_cm_id *id);

/* Handle a parsed MAD that dev received from gid: 0, or -ENOENT for a
 * REQ no listener takes yet (the CM thread holds it: held.c). */
int srn_cm_conn_mad(struct srn_cm_dev *dev, const struct srn_cm_msg *m, const uint8_t gid[16]);
/* A REQ for us: 0 when handled (connection request queued, MRA, REJ or
 * dropped), -ENOENT when no listener takes its service ID. */
int srn_cm_req_in(struct srn_cm_dev *dev, const struct srn_cm_msg *m, const uint8_t gid[16]);
/* REJ a REQ we keep no state for, with reason. */
void srn_cm_rej_req(struct srn_cm_dev *dev, const uint8_t gid[16], const struct srn_cm_msg *in,
		    uint16_t reason);
/* The id's timer is due (the CM thread's timers): send its MAD again or
 * give up on it. */
void srn_cm_expire(struct srn_cm_id *id);

/* The peer's process died: end the id's connection as its kernel would. */
void srn_cm_peer_died(struct srn_cm_id *id);
/* The process exits: DREQ/REJ every connection (must hold srn_cm.lock). */
void srn_cm_exit_abort(void);

#endif
