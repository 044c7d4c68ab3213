/*
 * switch_flow.h - per-flow accounting of `softrnic switch`: a flow is an
 * IP 5-tuple (UDP/TCP ports, else 0), found by parsing the frame once
 * (Ethernet, one optional VLAN tag, IPv4 or IPv6).  A fixed table, no
 * allocation; flows past its size are counted together as "other".
 */
#ifndef SRN_TOOLS_SWITCH_FLOW_H
#define SRN_TOOLS_SWITCH_FLOW_H

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
/* One line per flow: throughput since the last call over dt_ns. */
void srn_swf_print(struct srn_swf_table *t, FILE *out, double t_s, uint64_t dt_ns);

#endif /* SRN_TOOLS_SWITCH_FLOW_H */
