#!/bin/bash
# Tests tests/lib/netns.sh: the two namespaces come up as drawn there (MTU,
# addresses, lo), ICMP and UDP cross the veth pair in both IP versions, and
# cleanup leaves no namespace behind after a normal exit, a failing exit and
# SIGTERM.
#
#   bash tests/test_netns_lib.sh                  the library test
#   bash tests/test_netns_lib.sh --link HELPER    softrnic UDP link across the
#                                                 namespaces (test_link_netns)
#
# Needs root and 'ip netns' (exit 77 otherwise). Every wait is bounded.
set -u

SRC=${SRN_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
SELF="$SRC/tests/test_netns_lib.sh"
source "$SRC/tests/lib/netns.sh"

MTU=1400
PY_LISTEN='
import socket, sys
fam = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
s.settimeout(5)
try:
    data, peer = s.recvfrom(2048)
    print(data.decode(), peer[0])
except socket.timeout:
    print("timeout")
'

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# Child: bring the namespaces up and check everything the drawing promises.
child_check() {
    local out=$1
    SRN_NETNS_MTU=$MTU srn_netns_setup || fail "setup"
    echo "$NS_A $NS_B" >"$out/names"

    ip netns list | grep -qw "$NS_A" || fail "$NS_A missing"
    ip netns list | grep -qw "$NS_B" || fail "$NS_B missing"
    ip link show "$IF_A" >/dev/null 2>&1 && fail "$IF_A leaked into the host namespace"
    local ns dev
    for ns in "$NS_A:$IF_A" "$NS_B:$IF_B"; do
        dev=${ns#*:} ns=${ns%%:*}
        ip -n "$ns" -o link show "$dev" | grep -q "mtu $MTU " || fail "$dev in $ns: MTU is not $MTU"
        ip -n "$ns" -o link show lo | grep -q 'LOOPBACK,UP' || fail "lo down in $ns"
    done
    ip -n "$NS_A" -o addr show "$IF_A" | grep -q "inet $ADDR_A/24" || fail "no $ADDR_A"
    ip -n "$NS_B" -o addr show "$IF_B" | grep -q "inet $ADDR_B/24" || fail "no $ADDR_B"
    ip -n "$NS_A" -o addr show "$IF_A" | grep -q "inet6 $ADDR6_A/64" || fail "no $ADDR6_A"
    ip -n "$NS_B" -o addr show "$IF_B" | grep -q "inet6 $ADDR6_B/64" || fail "no $ADDR6_B"
    ip -n "$NS_A" -o addr show "$IF_A" | grep "inet6 $ADDR6_A" | grep -q tentative &&
        fail "$ADDR6_A is still tentative (nodad missing)"

    if command -v ping >/dev/null 2>&1; then
        srn_ns_a ping -c 2 -W 2 "$ADDR_B" >/dev/null || fail "ping $ADDR_B"
        srn_ns_b ping -c 2 -W 2 "$ADDR_A" >/dev/null || fail "ping $ADDR_A"
        srn_ns_a ping -6 -c 2 -W 2 "$ADDR6_B" >/dev/null || fail "ping $ADDR6_B"
        echo "ping: ok both ways (IPv4) and A->B (IPv6)"
    else
        echo "ping not installed: ICMP check skipped"
    fi

    # UDP A -> B, listener in B; the sender repeats (bounded) until the
    # listener has it, so no start-up race.
    local dst src pid i
    for dst in "$ADDR_B" "$ADDR6_B"; do
        [ "$dst" = "$ADDR_B" ] && src=$ADDR_A || src=$ADDR6_A
        rm -f "$out/udp"
        ip netns exec "$NS_B" python3 -c "$PY_LISTEN" "$dst" 4791 >"$out/udp" &
        pid=$!
        srn_netns_at_exit "kill $pid"
        for ((i = 0; i < 40; i++)); do
            srn_ns_a bash -c "echo -n hello-$$ >/dev/udp/$dst/4791" 2>/dev/null
            [ -s "$out/udp" ] && break
            sleep 0.1
        done
        wait "$pid"
        read -r msg from <"$out/udp"
        [ "$msg" = "hello-$$" ] || fail "UDP to $dst: got '$msg'"
        [ "$from" = "$src" ] || fail "UDP to $dst came from '$from', want $src"
        echo "udp: $src -> $dst ok"
    done
    exit 0
}

# Child: set up, then fail; the trap must still clean up.
child_fail() {
    srn_netns_setup || fail "setup"
    echo "$NS_A $NS_B" >"$1/names"
    false || exit 3
}

# Child: set up, leave a process inside NS_A, wait to be killed.
child_signal() {
    srn_netns_setup || fail "setup"
    # Not registered with srn_netns_at_exit: cleanup must find it by itself.
    ip netns exec "$NS_A" sleep 30 &
    echo $! >"$1/inner"
    sleep 30 &
    srn_netns_at_exit "kill $!"
    echo "$NS_A $NS_B" >"$1/names"
    wait $!
    exit 0
}

# Child: softrnic UDP link across the namespaces (see test_link_netns.c).
child_link() {
    local helper=$1
    SRN_NETNS_MTU=$MTU srn_netns_setup || fail "setup"
    SOFTRNIC_DEVICES="name=b4,addr=$ADDR_B;name=b6,addr=$ADDR6_B" \
        ip netns exec "$NS_B" "$helper" serve $MTU &
    local pid=$!
    srn_netns_at_exit "kill $pid"
    SOFTRNIC_DEVICES="name=a4,addr=$ADDR_A;name=a6,addr=$ADDR6_A" \
        srn_ns_a "$helper" client $MTU "$ADDR_B" "$ADDR6_B" || fail "client"
    wait "$pid" || fail "serve"

    if command -v tc >/dev/null 2>&1 &&
        srn_ns_a tc qdisc add dev "$IF_A" root tbf rate 1mbit burst 4000 limit 1000000; then
        SOFTRNIC_DEVICES="addr=$ADDR_A" srn_ns_a "$helper" eagain "$ADDR_B" || fail "eagain"
    else
        echo "tc/tbf unavailable: EAGAIN check skipped"
    fi
    exit 0
}

gone() {
    local ns
    for ns in $1; do
        ip netns list | grep -qw "$ns" && return 1
    done
    return 0
}

case "${1:-}" in
--child)
    case "$2" in
    check) child_check "$3" ;;
    fail) child_fail "$3" ;;
    signal) child_signal "$3" ;;
    link) child_link "$3" ;;
    esac
    exit 2
    ;;
esac

srn_netns_require_root
command -v python3 >/dev/null 2>&1 || srn_netns_skip "python3 is not installed"
OUT=$(mktemp -d /tmp/srn_netns_test.XXXXXX) || fail "mktemp"
trap 'rm -rf "$OUT"' EXIT

if [ "${1:-}" = "--link" ]; then
    [ -x "${2:-}" ] || fail "usage: $0 --link PATH-TO-test_link_netns"
    timeout 120 bash "$SELF" --child link "$2" || fail "softrnic link across namespaces"
    echo "test_link_netns: ok"
    exit 0
fi

timeout 120 bash "$SELF" --child check "$OUT" || fail "setup/traffic checks"
names=$(cat "$OUT/names")
gone "$names" || fail "namespaces left after a normal exit: $names"
echo "cleanup after normal exit: ok"

rm -f "$OUT/names"
timeout 60 bash "$SELF" --child fail "$OUT"
rc=$?
[ $rc = 3 ] || fail "failing child exited $rc, want 3"
names=$(cat "$OUT/names")
gone "$names" || fail "namespaces left after a failing exit: $names"
echo "cleanup after failing exit: ok"

rm -f "$OUT/names" "$OUT/inner"
bash "$SELF" --child signal "$OUT" &
child=$!
for ((i = 0; i < 100; i++)); do
    [ -s "$OUT/names" ] && break
    sleep 0.1
done
[ -s "$OUT/names" ] || { kill "$child"; fail "signal child did not come up"; }
kill -TERM "$child"
wait "$child"
rc=$?
[ $rc = 143 ] || fail "SIGTERM child exited $rc, want 143"
names=$(cat "$OUT/names")
gone "$names" || fail "namespaces left after SIGTERM: $names"
inner=$(cat "$OUT/inner")
for ((i = 0; i < 30; i++)); do
    state=$(awk '{print $3}' "/proc/$inner/stat" 2>/dev/null)
    [ -z "$state" ] || [ "$state" = Z ] && break
    sleep 0.1
done
[ -z "$state" ] || [ "$state" = Z ] || fail "process $inner inside the namespace survived cleanup"
echo "cleanup after SIGTERM (with a process inside): ok"
echo "test_netns_lib: ok"
