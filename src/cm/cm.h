/*
 * cm.h - softrnic's RDMA connection manager: the rdma_cm state machine
 * and IBTA CM protocol under librdmacm.so.1 (src/rdmacm/ is the exported
 * surface).  It sits above verbs and uses only the public ibv_* calls of
 * libibverbs.so.1, plus softrnic_create_gsi_qp for each device's QP1.
 * This header is what src/rdmacm/ sees of it; inside cm/ each file
 * includes the headers it uses.  The files, lowest first (each uses only
 * those before it, as scripts/layers.txt's [order cm] checks):
 *
 *   mad.h        the CM MADs on the wire
 *   qp1.h        the CM's state and lock, device addresses, QP1, counters
 *   cm_id.h      what the CM keeps of one rdma_cm id
 *   ports.h      port rules, port files, which listener takes a request
 *   ids.h        making and freeing ids, channels and events
 *   qp_attr.h    the path and QP attributes of a connection
 *   retry.h      an id's MADs out, and the retry timer
 *   peer_watch.h a same-host peer's death ends its connections
 *   steer.h      MADs of the other processes behind a shared address
 *   sidr.h       UD ids: SIDR_REQ/SIDR_REP
 *   conn.h       the connection protocol, entered by srn_cm_conn_mad
 *   held.h       REQs held a moment for a listener
 *   thread.h     init, the CM thread, the dispatcher and the timers
 *
 * Locking: one mutex (srn_cm.lock) guards every id, channel, connection
 * and device of the CM; the CM thread (thread.c) takes it to process MADs
 * and timers.  Verbs calls made under it take the nic lock below it, and
 * nothing under the nic lock takes the cm lock, so the order is cm lock →
 * nic lock.  (The one call up under the nic lock, srn_cm_port_holder, by
 * which the link routes a REQ behind a shared address, reads files only.)
 */
#ifndef SRN_CM_CM_H
#define SRN_CM_CM_H

#include "cm/cm_id.h"
#include "cm/conn.h"
#include "cm/held.h"
#include "cm/ids.h"
#include "cm/mad.h"
#include "cm/ports.h"
#include "cm/qp1.h"
#include "cm/qp_attr.h"
#include "cm/retry.h"
#include "cm/sidr.h"
#include "cm/thread.h"
#include "diag/clock.h"

#endif
