#!/bin/bash
# test_cm_ipv6.sh - rdma_cm over IPv6, and UD/multicast across hosts,
# with Debian's unmodified rdmacm-utils through `softrnic run`, in two
# network namespaces this test creates (tests/lib/netns.sh):
#
#   ┌─ $NS_A ─────────────────────────┐        ┌─ $NS_B ──────────────┐
#   │ lo  ::1         server device   │        │                      │
#   │     fd78::2/128 client device   │  veth  │                      │
#   │ veth-a fd77::1, 10.77.0.1 ──────┼────────┼── veth-b fd77::2,    │
#   │                                 │        │          10.77.0.2   │
#   └─────────────────────────────────┘        └──────────────────────┘
#
#   rping -v -C 100 over ::1 (both processes in A; the client's device on
#     fd78::2, bound with -I, reaches ::1 on lo)
#   udaddy over ::1 (-b fd78::2)
#   rping -v -C 50 and udaddy -c 2 from B to A over fd77::/64
#   mckey across the veth: IPv4 group with a send-only sender, and an
#     IPv6 group (ff0e::/16; the kernel's RoCEv2 rdma_cm refuses IPv6
#     groups, softrnic's link joins them like IPv4 ones)
# Skipped (77) without root or rdmacm-utils.  Every run is bounded.
set -u
command -v rping >/dev/null || { echo "SKIP: rdmacm-utils not installed"; exit 77; }
source "$SRN_SRC/tests/lib/cm_pair.sh"
source "$SRN_SRC/tests/lib/netns.sh"
srn_netns_require_root
srn_netns_setup || { echo "FAIL: namespaces"; exit 1; }
srn_netns_at_exit "rm -rf $srn_cm_work"
ip -n "$NS_A" addr add fd78::2/128 dev lo nodad || exit 1
A="ip netns exec $NS_A env" B="ip netns exec $NS_B env"
dev() { echo "SOFTRNIC_DEVICES=name=softrnic0,addr=$1"; }

p=$((20000 + RANDOM % 12000))
srn_cm_pair "rping -C 100 over ::1" "::1" \
	"$A $(dev ::1)" "rping -s -a ::1 -p $p" \
	"$A $(dev fd78::2)" "rping -c -I fd78::2 -a ::1 -p $p -v -C 100" \
	"" "rdma-ping-99:"
srn_cm_pair "udaddy over ::1" "::1" \
	"$A $(dev ::1)" "udaddy -b ::1" \
	"$A $(dev fd78::2)" "udaddy -b fd78::2 -s ::1" \
	"^return status 0" "^data transfers complete"
p=$((20000 + RANDOM % 12000))
srn_cm_pair "rping -C 50 between namespaces, IPv6" "$ADDR6_A" \
	"$A $(dev "$ADDR6_A")" "rping -s -a $ADDR6_A -p $p" \
	"$B $(dev "$ADDR6_B")" "rping -c -a $ADDR6_A -p $p -v -C 50" \
	"" "rdma-ping-49:"
srn_cm_pair "udaddy -c 2 between namespaces, IPv6" "$ADDR6_A" \
	"$A $(dev "$ADDR6_A")" "udaddy -b $ADDR6_A -c 2" \
	"$B $(dev "$ADDR6_B")" "udaddy -s $ADDR6_A -c 2" \
	"^return status 0" "^data transfers complete"
g4=239.77.1.$((RANDOM % 250 + 1)) g6=ff0e::77:$((RANDOM % 250 + 1))
srn_cm_pair "mckey between namespaces, IPv4 group, send-only sender" "$ADDR_A" \
	"$A $(dev "$ADDR_A")" "mckey -m $g4 -b $ADDR_A -C 10" \
	"$B $(dev "$ADDR_B")" "mckey -m $g4 -b $ADDR_B -s -o -C 10" \
	"^data transfers complete" "^data transfers complete"
srn_cm_pair "mckey between namespaces, IPv6 group" "$ADDR6_A" \
	"$A $(dev "$ADDR6_A")" "mckey -m $g6 -b $ADDR6_A -C 10" \
	"$B $(dev "$ADDR6_B")" "mckey -m $g6 -b $ADDR6_B -s -C 10" \
	"^data transfers complete" "^data transfers complete"
[ $srn_cm_fail -eq 0 ]
