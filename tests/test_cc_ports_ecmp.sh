#!/bin/bash
# Per-QP source ports spread RoCE over `softrnic switch --ecmp`.
#
#   ┌ $NS_A ────────────┐   ┌ $NS_S ───────────────────────────┐   ┌ $NS_B ─────────────────────┐
#   │ sa 10.81.0.1/24 ──┼───┼─ pa   softrnic switch       pb1 ─┼───┼─ rb1 10.81.0.2/24 (MAC M)   │
#   └───────────────────┘   │       --egress pb1 --ecmp pb2 pb2 ─┼───┼─ rb2 (MAC M, no address)   │
#                           └──────────────────────────────────┘   └────────────────────────────┘
#
# The topology of test_cc_ecmp.sh (see there why B has one MAC on both
# links).  `softrnic perf` writes from A to B over 16 RC QPs:
#  1. ports on (default): each QP is its own 5-tuple (A:0xC000+h(qpn) >
#     B:4791), the switch names one link per flow, and both links carry
#     RoCE (all 16 on one link: 2^-15 by chance);
#  2. SOFTRNIC_SRC_PORTS=0: all of A's RoCE is one 5-tuple (A:4791 >
#     B:4791) on one link, what the fabric saw before.
# Skipped (77) without root or python3.
set -u
source "$SRN_SRC/tests/lib/netns.sh"
SOFTRNIC=${SOFTRNIC:-$SRN_BUILD/bin/softrnic}
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }
srn_netns_require_root

work=$(mktemp -d)
trap 'srn_netns_cleanup; rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# Static neighbours both ways: no ARP to resolve through the hash.
srn_netns_switch_setup p 81 ecmp || exit 1
ip -n "$NS_A" neigh replace "$ADDR_B" lladdr "$MAC_B" dev sa nud permanent || exit 1

asan_env() {
    [ -n "${SRN_ASAN_PRELOAD:-}" ] && echo "LD_PRELOAD=$SRN_ASAN_PRELOAD ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"
}

# run TAG ENV...: the switch, a perf server in B and a 16-QP client in A;
# the switch's summary in $work/TAG.sum.  0 when perf succeeded.
run() {
    local tag=$1 port sw spid rc=1 i
    shift
    ip netns exec "$NS_S" timeout -k 5 240 "$SOFTRNIC" switch --egress pb1 --ecmp pb2 \
        pa pb1 pb2 >"$work/$tag.sum" 2>"$work/$tag.err" &
    sw=$!
    srn_netns_at_exit "kill $sw"
    sleep 0.3
    kill -0 "$sw" 2>/dev/null || { echo "FAIL: the switch did not start"; cat "$work/$tag.err"; return 1; }
    port=$((20000 + RANDOM % 12000))
    # shellcheck disable=SC2046
    ip netns exec "$NS_B" env $(asan_env) SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR_B "$@" \
        timeout -k 5 120 "$SOFTRNIC" perf -p "$port" >"$work/$tag.s" 2>&1 &
    spid=$!
    for ((i = 0; i < 100; i++)); do
        ip netns exec "$NS_B" ss -Hltn "sport = :$port" | grep -q . && break
        sleep 0.05
    done
    # shellcheck disable=SC2046
    ip netns exec "$NS_A" env $(asan_env) SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR_A "$@" \
        timeout -k 5 120 "$SOFTRNIC" perf -T bw -q 16 -s 8192 -n 3200 -p "$port" "$ADDR_B" \
        >"$work/$tag.c" 2>&1 && rc=0
    wait "$spid" || rc=1
    kill -TERM "$sw" 2>/dev/null
    wait "$sw"
    [ $rc = 0 ] || { echo "FAIL: $tag: perf failed"; cat "$work/$tag.s" "$work/$tag.c"; }
    return $rc
}

# flows TAG: "SPORT LINK" for each RoCE flow from A to B the switch saw.
flows() {
    grep -o " flow $ADDR_A:[0-9]*>$ADDR_B:4791 proto=17 .* link=pb[12]" "$work/$1.sum" |
        sed -E 's/^ flow [0-9.]+:([0-9]+)>.* link=(pb[12])$/\1 \2/' | sort -u
}

fail=0
# 1. Ports on.
run on || fail=1
flows on >"$work/on.flows"
n=$(awk '$1 >= 49152' "$work/on.flows" | cut -d' ' -f1 | sort -u | wc -l)
links=$(cut -d' ' -f2 "$work/on.flows" | sort -u | tr '\n' ' ')
echo "ports on: $n source ports >= 0xC000, links used: $links" \
    "(pb1: $(grep -c ' pb1$' "$work/on.flows") flows, pb2: $(grep -c ' pb2$' "$work/on.flows") flows)"
[ "$n" -ge 16 ] || { echo "FAIL: expected 16 flows from per-QP ports"; cat "$work/on.flows"; fail=1; }
[ "$(cut -d' ' -f1 "$work/on.flows" | uniq -d | wc -l)" = 0 ] ||
    { echo "FAIL: a flow named two links"; fail=1; }
[ "$links" = "pb1 pb2 " ] || { echo "FAIL: RoCE did not spread over both links"; fail=1; }

# 2. Ports off.
run off SOFTRNIC_SRC_PORTS=0 || fail=1
flows off >"$work/off.flows"
echo "ports off: $(cat "$work/off.flows" | tr '\n' ';')"
[ "$(wc -l <"$work/off.flows")" = 1 ] && grep -q "^4791 " "$work/off.flows" ||
    { echo "FAIL: with SOFTRNIC_SRC_PORTS=0, expected one flow from 4791"; fail=1; }
[ $fail = 0 ] || { cat "$work/on.sum" | tail -40; }
exit $fail
