/*
 * ids.h - rdma_cm ids, event channels and events: making and freeing
 * them, queueing events and handing them out (ids.c).  Must hold
 * srn_cm.lock unless a function says otherwise.
 */
#ifndef SRN_CM_IDS_H
#define SRN_CM_IDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <rdma/rdma_cma.h>

#include "cm/cm_id.h"
#include "cm/mad.h"

struct srn_cm_dev;

struct srn_cm_event {
	struct rdma_cm_event ev;       /* handed out */
	struct srn_cm_event *next;
	struct srn_cm_id *owner;       /* counted in owner->nevents */
	uint8_t pdata[SRN_CM_MAX_PDATA];
};

/* An event channel lives until it is destroyed (rdma_destroy_event_channel,
 * or its synchronous id going away) and no id and no sleeping thread uses
 * it any more.  Destroyed, it is off the live list, its fd is closed (-1),
 * its events are dropped and nothing is queued in it again. */
struct srn_cm_chan {
	struct rdma_event_channel ch;  /* fd: eventfd, one count per queued event */
	struct srn_cm_event *head, *tail;
	int nids;
	int waiters;                   /* threads blocked in rdma_get_cm_event */
	bool destroyed;                /* never ready again: its waiters stay asleep */
	struct srn_cm_chan *next_live; /* srn_cm.chans */
};

struct srn_cm_id *srn_cm_id_new(struct srn_cm_chan *chan, void *context, enum rdma_port_space ps,
				enum ibv_qp_type qpt);
void srn_cm_id_free(struct srn_cm_id *id);
/* A passive id for a request listener l took on dev from gid, with the
 * addresses of its CM header h (the request's destination is our source). */
struct srn_cm_id *srn_cm_child_new(struct srn_cm_id *l, struct srn_cm_dev *dev, const struct srn_cma_hdr *h,
				   const uint8_t gid[16], enum ibv_qp_type qpt);
struct srn_cm_chan *srn_cm_chan_new(void);
/* The channel's owner is done with it; its memory goes when nothing uses it. */
void srn_cm_chan_free(struct srn_cm_chan *c);
/* Is c a channel we handed out and nobody destroyed?  Callers' channel
 * pointers are checked with this before anything reads them. */
bool srn_cm_chan_live(const struct rdma_event_channel *c);
/* An id stops using c (nids--); frees a destroyed channel nobody uses. */
void srn_cm_chan_unref(struct srn_cm_chan *c);
/* Queue an event for id (copies pdata).  status: 0, -errno or a REJ reason. */
struct srn_cm_event *srn_cm_event_queue(struct srn_cm_id *id, enum rdma_cm_event_type type,
					int status, const void *pdata, size_t plen);
int srn_cm_get_event(struct srn_cm_chan *c, struct srn_cm_event **out);
void srn_cm_ack_event(struct srn_cm_event *e);

#endif
