#!/bin/bash
# `softrnic switch` between two namespaces, itself in a third:
#
#   ┌ $NS_A ─────────────┐   ┌ $NS_S ────────────────────────┐   ┌ $NS_B ─────────────┐
#   │ sa 10.78.0.1/24 ───┼───┼─ pa   softrnic switch     pb ─┼───┼── sb 10.78.0.2/24  │
#   └────────────────────┘   │       (egress: pb, towards B) │   └────────────────────┘
#                            └───────────────────────────────┘
#
# 1. Debian's ibv_rc_pingpong through `softrnic run`, A <-> B across the
#    switch, unlimited and then at a 20 Mb/s egress: RoCE survives the
#    switch (whole frames forwarded, ICRC intact).
# 2. ECN: ECT(0) UDP blasted from A at the 20 Mb/s egress with RED on
#    (Kmin 8K, Kmax 64K, Pmax 0.5): B sees CE-marked datagrams
#    (IP_RECVTOS), no more than the switch says it marked, and the switch
#    dropped at its buffer (tail drop).
# 3. Pause: the same blast with --pfc 64K,16K and a big buffer: the switch
#    paused its ingress, sent PFC frames to A, and dropped nothing.
# Skipped (77) without root, ibverbs-utils or python3.
set -u
source "$SRN_SRC/tests/lib/netns.sh"
source "$SRN_SRC/tests/lib/pingpong.sh"
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }
srn_netns_require_root

ECN_UDP="$SRN_SRC/tests/helpers/ecn_udp.py"
work=$(mktemp -d)
trap 'srn_netns_cleanup; rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
srn_netns_switch_setup sw 78 || exit 1

SW_PID=
# start_switch NAME ARGS...: the switch in NS_S, summary to $work/NAME.sum.
start_switch() {
    local name=$1
    shift
    # Niced up: on a loaded machine a starved switch is a lossy link, and
    # RoCE's retry budget (7 x 67 ms for ibv_rc_pingpong) is not long.
    ip netns exec "$NS_S" nice -n -10 timeout -k 5 240 "$SOFTRNIC" switch --egress pb \
        --stats "$work/$name.stats" "$@" pa pb >"$work/$name.sum" 2>"$work/$name.err" &
    SW_PID=$!
    srn_netns_at_exit "kill $SW_PID"
    sleep 0.3
    kill -0 "$SW_PID" 2>/dev/null || { echo "FAIL: switch $name did not start"; cat "$work/$name.err"; exit 1; }
}
stop_switch() {
    kill -TERM "$SW_PID" 2>/dev/null
    wait "$SW_PID"
}
# field NAME KEY: KEY= of the egress port's summary line.
field() {
    grep "^t=.* port=pb qbytes=" "$work/$1.sum" | tail -1 | tr ' ' '\n' | sed -n "s/^$2=//p"
}
port_field() {  # port_field NAME PORT KEY
    grep "^t=.* port=$2 rx=" "$work/$1.sum" | tail -1 | tr ' ' '\n' | sed -n "s/^$3=//p"
}
# blast NAME COUNT: ECT(0) datagrams A -> B; B's counts in $work/NAME.recv.
blast() {
    rm -f "$work/ready"
    ip netns exec "$NS_B" timeout -k 5 90 python3 "$ECN_UDP" recv "$ADDR_B" 9999 "$work/ready" \
        >"$work/$1.recv" &
    local rpid=$! i
    for ((i = 0; i < 100; i++)); do [ -e "$work/ready" ] && break; sleep 0.05; done
    ip netns exec "$NS_A" timeout -k 5 60 python3 "$ECN_UDP" send "$ADDR_B" 9999 "$2" 1000 0x02 \
        >/dev/null
    wait "$rpid"
    cat "$work/$1.recv"
}
recv_field() { tr ' ' '\n' <"$work/$1.recv" | sed -n "s/^$2=//p"; }

A="ip netns exec $NS_A env SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR_A"
B="ip netns exec $NS_B env SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR_B"
fail=0

# pingpong ARGS...: one retry, said out loud.  ibv_rc_pingpong's retry
# budget is fixed (7 x 67 ms): on a machine loaded to 10+ runnable tasks
# per CPU three processes can stall longer than that, through the switch
# or not (rc_pingpong_netns fails the same way there).
pingpong() {
    srn_pingpong ibv_rc_pingpong "$B" "$A" "$ADDR_B" -g 0 "$@" && return 0
    echo "retrying once: ibv_rc_pingpong $* (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    srn_pingpong ibv_rc_pingpong "$B" "$A" "$ADDR_B" -g 0 "$@"
}

# 1. RoCE across the switch.
start_switch open
pingpong -n 300 || fail=1
pingpong -s 4096 -n 100 || fail=1
stop_switch
cat "$work/open.sum"
[ "$(field open tx)" -gt 0 ] 2>/dev/null || { echo "FAIL: nothing left the egress"; fail=1; }
[ "$(field open drops)" = 0 ] || { echo "FAIL: drops on an unlimited switch"; fail=1; }

# 2. A 20 Mb/s egress with RED marking: RoCE still passes, ECT traffic is marked.
start_switch red --rate 20M --buffer 256K --ecn 8K,64K,0.5 --interval 500
pingpong -s 4096 -n 100 || fail=1
blast red 4000
stop_switch
cat "$work/red.sum"
marks=$(field red marks) drops=$(field red drops) ce=$(recv_field red ce)
echo "switch marks=$marks drops=$drops; receiver ce=$ce"
[ "${ce:-0}" -gt 0 ] || { echo "FAIL: no CE-marked datagram arrived"; fail=1; }
[ "${ce:-0}" -le "${marks:-0}" ] || { echo "FAIL: more CE ($ce) than marks ($marks)"; fail=1; }
[ "${drops:-0}" -gt 0 ] || { echo "FAIL: a 4 MB blast into 256K at 20 Mb/s dropped nothing"; fail=1; }
grep -q "flow $ADDR_A:[0-9]*>$ADDR_B:9999 .* marks=[1-9]" "$work/red.sum" ||
    { echo "FAIL: no per-flow marks line"; fail=1; }

# 3. Pause instead of loss: XOFF 64K, XON 16K, buffer 4M.  tshark on A's
#    side of the link (if installed) must decode the switch's pause frames.
cap_pid=
if command -v tshark >/dev/null; then
    ip netns exec "$NS_A" timeout -k 5 60 tshark -q -i sa -f "ether proto 0x8808" \
        -a packets:2 -w "$work/pfc.pcap" >/dev/null 2>&1 &
    cap_pid=$!
    srn_netns_at_exit "kill $cap_pid"
    for ((i = 0; i < 100; i++)); do [ -s "$work/pfc.pcap" ] && break; sleep 0.05; done
fi
start_switch pfc --rate 20M --buffer 4M --pfc 64K,16K
blast pfc 2000
stop_switch
cat "$work/pfc.sum"
pauses=$(field pfc pauses) drops=$(field pfc drops) pfc_sent=$(port_field pfc pa pfc_sent)
echo "switch pauses=$pauses drops=$drops pfc_sent(pa)=$pfc_sent"
[ "${pauses:-0}" -gt 0 ] || { echo "FAIL: never paused"; fail=1; }
[ "${pfc_sent:-0}" -gt 0 ] || { echo "FAIL: no PFC frame towards A"; fail=1; }
[ "${drops:-1}" = 0 ] || { echo "FAIL: the switch dropped while pausing"; fail=1; }
if [ -n "$cap_pid" ]; then
    wait "$cap_pid"
    pfc=$(timeout 30 tshark -r "$work/pfc.pcap" -T fields -e macc.opcode -e macc.cbfc.enbv \
        -e macc.cbfc.pause_time.c0 2>/dev/null | head -2)
    echo "PFC frames seen in A: $(echo "$pfc" | tr '\n' ' ')"
    # The first pause: opcode 0x0101, all priorities, quanta 65535; then the resume (0).
    echo "$pfc" | head -1 | grep -q "^0x0101.*65535" ||
        { echo "FAIL: no 802.1Qbb pause frame decoded on A's link"; fail=1; }
    echo "$pfc" | sed -n 2p | grep -q "^0x0101.*[[:space:]]0$" ||
        { echo "FAIL: no resume (quanta 0) frame decoded"; fail=1; }
fi
exit $fail
