#!/bin/bash
# test_cm_xrc_netns.sh - XRC through rdma_cm between two "hosts": Debian's
# unmodified rdma_xserver -c x / rdma_xclient -c x through `softrnic run`
# in two network namespaces this test creates (tests/lib/netns.sh), so
# every packet crosses a veth as RoCEv2 over UDP (no same-host rings):
#
#   ┌─ $NS_A ──────────────────┐        ┌─ $NS_B ──────────────────┐
#   │ veth-a 10.77.0.1 ────────┼────────┼──────── veth-b 10.77.0.2 │
#   │        rdma_xserver -c x │  veth  │        rdma_xclient -c x │
#   └──────────────────────────┘        └──────────────────────────┘
#
# The server is traced and the REQ, REP and XRC Send checked as in
# test_cm_xrc.sh.  Not IPv6: rdma_xserver listens on what
# rdma_getaddrinfo(NULL, port) gives first, the IPv4 wildcard, which takes
# no IPv6 request on a kernel either (the REQ is refused: no listener).
# Skipped (77) without root or rdmacm-utils.  Every run is bounded.
set -u
command -v rdma_xserver >/dev/null || { echo "SKIP: rdmacm-utils not installed"; exit 77; }
source "$SRN_SRC/tests/lib/cm_pair.sh"
source "$SRN_SRC/tests/lib/cm_xrc.sh"
source "$SRN_SRC/tests/lib/netns.sh"
srn_netns_require_root
srn_netns_setup || { echo "FAIL: namespaces"; exit 1; }
srn_netns_at_exit "rm -rf $srn_cm_work"
A="ip netns exec $NS_A env" B="ip netns exec $NS_B env"
dev() { echo "SOFTRNIC_DEVICES=name=softrnic0,addr=$1"; }
xrc_pair "XRC between namespaces" "$ADDR_A" \
	"$A $(dev "$ADDR_A") SOFTRNIC_PCAP=$srn_cm_work/s.pcap" "$B $(dev "$ADDR_B")" ||
	{ echo "FAIL: XRC between namespaces"; exit 1; }
xrc_trace_check "$srn_cm_work/s.pcap" "$ADDR_B"
