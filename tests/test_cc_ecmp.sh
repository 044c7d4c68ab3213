#!/bin/bash
# ECMP in `softrnic switch`: two equal-cost egress links, flows hashed over
# them by 5-tuple.
#
#   ┌ $NS_A ────────────┐   ┌ $NS_S ───────────────────────────┐   ┌ $NS_B ─────────────────────┐
#   │ sa 10.80.0.1/24 ──┼───┼─ pa   softrnic switch       pb1 ─┼───┼─ rb1 10.80.0.2/24 (MAC M)   │
#   └───────────────────┘   │       --egress pb1 --ecmp pb2 pb2 ─┼───┼─ rb2 (MAC M, no address)   │
#                           └──────────────────────────────────┘   └────────────────────────────┘
#
# B's two links share one MAC and B answers on either (weak host model,
# rp_filter off), so both lead to the same host as two ECMP paths would;
# B's own traffic leaves by rb1, with a static neighbour entry for A there
# (an ARP reply hashed onto rb2 would never complete rb1's entry).
#  1. Eight UDP flows from A that differ only in their source port: both
#     links carry frames, each flow stays on one link (its stats line names
#     one), the links' frame counts add up to the flows', and every
#     datagram arrives.
#  2. RoCE across the pair: ibv_rc_pingpong through `softrnic run`, with
#     enough messages to take the path the hash gives it, in order.
# Skipped (77) without root, python3 or ibverbs-utils.
set -u
source "$SRN_SRC/tests/lib/netns.sh"
source "$SRN_SRC/tests/lib/pingpong.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }
srn_netns_require_root

work=$(mktemp -d)
trap 'srn_netns_cleanup; rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
srn_netns_switch_setup e 80 ecmp || exit 1

ip netns exec "$NS_S" timeout -k 5 240 "$SOFTRNIC" switch --egress pb1 --ecmp pb2 \
    --stats "$work/sw.stats" pa pb1 pb2 >"$work/sw.sum" 2>"$work/sw.err" &
SW_PID=$!
srn_netns_at_exit "kill $SW_PID"
sleep 0.3
kill -0 "$SW_PID" 2>/dev/null || { echo "FAIL: the switch did not start"; cat "$work/sw.err"; exit 1; }
fail=0

# A's neighbour entry for B first: while ARP resolves, the kernel keeps
# only a few datagrams per neighbour and drops the rest (not the switch's
# doing).  One datagram to the discard port starts the resolution; wait
# (at most 10 s) for B's MAC.
for ((i = 0; i < 100; i++)); do
    ((i % 20 == 0)) && ip netns exec "$NS_A" python3 -c \
        "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('$ADDR_B', 9))"
    ip -n "$NS_A" neigh show "$ADDR_B" | grep -q lladdr && break
    sleep 0.1
done
[ "$i" -lt 100 ] || { echo "FAIL: A never resolved B through the switch"; exit 1; }

# 1. Eight flows, 200 datagrams each, paced (no queue: this is about paths).
ip netns exec "$NS_B" timeout -k 5 60 python3 - "$ADDR_B" "$work/ready" >"$work/recv" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
# Room for every datagram: a receiver descheduled on a loaded machine must
# not drop what the switch delivered (SO_RCVBUFFORCE: we are root).
s.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), 8 << 20)
s.bind(("0.0.0.0", 9999))
s.settimeout(3.0)
open(sys.argv[2], "w").close()
n, end = 0, time.time() + 50
while time.time() < end:
    try:
        s.recv(2048)
        n += 1
    except socket.timeout:
        break
print(n)
PY
rpid=$!
for ((i = 0; i < 100; i++)); do [ -e "$work/ready" ] && break; sleep 0.05; done
ip netns exec "$NS_A" timeout -k 5 60 python3 - "$ADDR_B" <<'PY' || fail=1
import socket, sys, time
socks = []
for k in range(8):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", 40001 + k))
    socks.append(s)
for i in range(200):
    for s in socks:
        s.sendto(b"\x5a" * 200, (sys.argv[1], 9999))
    time.sleep(0.002)
PY
wait "$rpid"
got=$(cat "$work/recv")
kill -TERM "$SW_PID" 2>/dev/null
wait "$SW_PID"
cat "$work/sw.sum"
echo "received $got of 1600 datagrams"
[ "$got" = 1600 ] || { echo "FAIL: datagrams lost across the ECMP pair"; fail=1; }
q_tx() { grep "^t=.* port=$1 qbytes=" "$work/sw.sum" | tail -1 | tr ' ' '\n' | sed -n 's/^tx=//p'; }
tx1=$(q_tx pb1) tx2=$(q_tx pb2)
echo "link pb1 tx=$tx1, link pb2 tx=$tx2"
[ "${tx1:-0}" -gt 0 ] && [ "${tx2:-0}" -gt 0 ] || { echo "FAIL: the flows did not spread over both links"; fail=1; }
flows=$(grep -c "flow $ADDR_A:4000[1-8]>$ADDR_B:9999 .* link=pb[12]$" "$work/sw.sum")
[ "$flows" = 8 ] || { echo "FAIL: $flows of 8 flows named one link"; fail=1; }
for l in pb1 pb2; do
    n=$(grep "flow $ADDR_A:4000[1-8]>$ADDR_B:9999 .* link=$l$" "$work/sw.sum" |
        tr ' ' '\n' | sed -n 's/^pkts=//p' | awk '{ s += $1 } END { print s + 0 }')
    tx=$(q_tx $l)
    echo "link $l: flows' packets $n, link frames $tx"
    # The link also carried ARP and whatever B's kernel sent; never fewer.
    [ "$n" -le "$tx" ] && [ $((n % 200)) = 0 ] && [ "$n" -gt 0 ] ||
        { echo "FAIL: link $l's count disagrees with its flows"; fail=1; }
done

# 2. RoCE across the pair.
A="ip netns exec $NS_A env SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR_A"
B="ip netns exec $NS_B env SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR_B"
ip netns exec "$NS_S" timeout -k 5 240 "$SOFTRNIC" switch --egress pb1 --ecmp pb2 \
    pa pb1 pb2 >"$work/sw2.sum" 2>"$work/sw2.err" &
SW_PID=$!
srn_netns_at_exit "kill $SW_PID"
sleep 0.3
srn_pingpong ibv_rc_pingpong "$B" "$A" "$ADDR_B" -g 0 -s 4096 -n 200 ||
    srn_pingpong ibv_rc_pingpong "$B" "$A" "$ADDR_B" -g 0 -s 4096 -n 200 || fail=1
kill -TERM "$SW_PID" 2>/dev/null
wait "$SW_PID"
grep " flow $ADDR_A:[0-9]*>$ADDR_B:4791 proto=17 .* link=" "$work/sw2.sum" ||
    { echo "FAIL: no RoCE flow through the ECMP pair"; fail=1; }
exit $fail
