#!/bin/bash
# UD multicast across hosts: the sender in namespace A (10.77.0.1), three
# receiving processes in namespace B (10.77.0.2, .3, .4), joined by the
# veth pair of tests/lib/netns.sh.  Every message reaches every receiver;
# after detach none does.  Skipped (77) without root.
set -u
source "$SRN_SRC/tests/lib/netns.sh"
srn_netns_require_root
srn_netns_setup
ip -n "$NS_B" addr add 10.77.0.3/24 dev "$IF_B"
ip -n "$NS_B" addr add 10.77.0.4/24 dev "$IF_B"
export SRN_MCAST_NS_SEND=$NS_A SRN_MCAST_ADDR_SEND=$ADDR_A SRN_MCAST_NS_RECV=$NS_B
export SRN_MCAST_ADDR_RECV0=$ADDR_B SRN_MCAST_ADDR_RECV1=10.77.0.3 SRN_MCAST_ADDR_RECV2=10.77.0.4
export SOFTRNIC_DIAG=0
timeout -k 5 60 "$SRN_BUILD/bin/test_ud_mcast"
