#!/bin/bash
# Debian's ibv_rc_pingpong between two network namespaces joined by a veth
# pair that this test creates (topology in tests/lib/netns.sh): the server
# in A on 10.77.0.1, the client in B on 10.77.0.2, each device pinned with
# SOFTRNIC_DEVICES.  Skipped (77) without root.
set -u
source "$SRN_SRC/tests/lib/netns.sh"
source "$SRN_SRC/tests/lib/pingpong.sh"
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }
srn_netns_require_root
srn_netns_setup

A="ip netns exec $NS_A env SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR_A"
B="ip netns exec $NS_B env SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR_B"
fail=0
srn_pingpong ibv_rc_pingpong "$A" "$B" "$ADDR_A" -g 0 || fail=1
srn_pingpong ibv_rc_pingpong "$A" "$B" "$ADDR_A" -g 0 -e -s 65536 -n 200 || fail=1
srn_pingpong ibv_rc_pingpong "$A" "$B" "$ADDR_A" -g 0 -c -s 4096 || fail=1

# The same over IPv6 GIDs.
A6="ip netns exec $NS_A env SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR6_A"
B6="ip netns exec $NS_B env SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR6_B"
srn_pingpong ibv_rc_pingpong "$A6" "$B6" "$ADDR_A" -g 0 -s 4096 || fail=1
exit $fail
