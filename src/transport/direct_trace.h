/*
 * direct_trace.h - SOFTRNIC_PCAP for same-host direct operations
 * (direct_trace.c): a Write, Read or atomic that direct.c executed in the
 * target's memory is recorded on our trace as the packets the UDP link
 * would have carried for it, both ways.  Must hold nic->lock.
 */
#ifndef SRN_TRANSPORT_DIRECT_TRACE_H
#define SRN_TRANSPORT_DIRECT_TRACE_H

#include <stdint.h>

struct srn_qp;

/* Record the `count` WQEs from req.cur on, just executed directly and not
 * yet completed nor given back their PSNs (count > 1: a batch of plain
 * Writes, recorded one Write at a time in order).  orig: an atomic's
 * original value.  Call only with a trace open (nic->link.udp.pcap). */
void srn_direct_trace(struct srn_qp *qp, unsigned count, uint64_t orig);

#endif
