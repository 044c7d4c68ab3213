/*
 * switch_flow.h - per-flow accounting of `softrnic switch`: a flow is an
 * IP 5-tuple (UDP/TCP ports, else 0), found by parsing the frame once
 * (Ethernet, one optional VLAN tag, IPv4 or IPv6).  A fixed table, no
 * allocation; flows past its size are counted together as "other".
 */
#ifndef SRN_TOOLS_SWITCH_FLOW_H
#define SRN_TOOLS_SWITCH_FLOW_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SRN_SWF_MAX 64

struct srn_swf_key {
	uint8_t family;		/* 4 or 6 */
	uint8_t proto;
	uint16_t sport, dport;
	uint8_t src[16], dst[16];
};

struct srn_swf {
	struct srn_swf_key key;
	uint64_t pkts, bytes, marks, drops;
	uint64_t bytes_reported;	/* bytes at the last stats line */
	uint8_t link;			/* ECMP: the egress link its hash chose */
};

struct srn_swf_table {
	struct srn_swf f[SRN_SWF_MAX + 1];	/* the last one is "other" */
	int n;
};

/* Offset of the IP header in an Ethernet frame, and the flow key.
 * Returns the offset, or -1 when the frame is not IP. */
int srn_swf_parse(const uint8_t *eth, uint32_t len, struct srn_swf_key *key);
/* The flow's index for key (added if new). */
int srn_swf_lookup(struct srn_swf_table *t, const struct srn_swf_key *key);
/* The ECMP hash of a flow: FNV-1a over its 5-tuple, so every packet of a
 * flow takes one link and flows that differ in any field (a QP's own UDP
 * source port included) spread. */
uint32_t srn_swf_hash(const struct srn_swf_key *key);
uint32_t srn_swf_hash_bytes(const uint8_t *p, size_t len);
/* One line per flow: throughput since the last call over dt_ns; with
 * links (ECMP), the name of each flow's link as link=NAME. */
void srn_swf_print(struct srn_swf_table *t, FILE *out, double t_s, uint64_t dt_ns,
		   const char *const *links);

#endif /* SRN_TOOLS_SWITCH_FLOW_H */
