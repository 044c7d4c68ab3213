# Sourceable bash library: two network namespaces joined by a veth pair, for
# end-to-end tests that need two "hosts" without touching the real network.
#
#   ┌──────────────────────────────┐          ┌──────────────────────────────┐
#   │ $NS_A  (srn-a-$$)            │          │ $NS_B  (srn-b-$$)            │
#   │                              │   veth   │                              │
#   │  lo     127.0.0.1/8  ::1     │          │  lo     127.0.0.1/8  ::1     │
#   │  veth-a 10.77.0.1/24 ────────┼──────────┼──────── veth-b 10.77.0.2/24  │
#   │         fd77::1/64 (nodad)   │          │         fd77::2/64 (nodad)   │
#   └──────────────────────────────┘          └──────────────────────────────┘
#
# Usage:
#   source "$SRN_SRC/tests/lib/netns.sh"
#   srn_netns_require_root             # exit 77 unless we can create namespaces
#   SRN_NETNS_MTU=1400 srn_netns_setup # veth MTU, default 1500
#   srn_ns_a some-command ...          # = ip netns exec "$NS_A" some-command ...
#   ip netns exec "$NS_B" server &     # background: call ip directly so $! is
#   pid=$!                             #   the server, not a subshell
#   srn_netns_at_exit "kill $pid"      # extra cleanup, run before the namespaces go
#
# srn_netns_setup exports NS_A NS_B IF_A IF_B ADDR_A ADDR_B ADDR6_A ADDR6_B
# and installs an EXIT trap (plus INT/TERM/HUP traps that exit) which runs the
# registered cleanups and deletes both namespaces. A test that needs its own
# EXIT trap should call srn_netns_cleanup from it instead.
#
# Safe to source under 'set -euo pipefail'.
#
# Invariants: nothing is created outside the two namespaces (the veth pair is
# created inside NS_A with its peer moved straight into NS_B); names carry the
# creating shell's PID, so parallel tests never collide; every wait is bounded.

SRN_NETNS_CLEANUPS=()
SRN_NETNS_CREATED=()

srn_netns_skip() {
    echo "SKIP: $*" >&2
    exit 77
}

srn_netns_require_root() {
    [ "$(id -u)" = 0 ] || srn_netns_skip "network namespace tests need root"
    command -v ip >/dev/null 2>&1 || srn_netns_skip "iproute2 'ip' is not installed"
    ip netns list >/dev/null 2>&1 || srn_netns_skip "'ip netns' is unavailable"
    # uid 0 in a container may still lack CAP_SYS_ADMIN or veth support: try
    # both once, inside a throwaway namespace so nothing touches the host.
    local probe="srn-probe-$$"
    ip netns add "$probe" >/dev/null 2>&1 || srn_netns_skip "cannot create a network namespace here"
    if ! ip -n "$probe" link add p0 type veth peer name p1 >/dev/null 2>&1; then
        ip netns del "$probe" >/dev/null 2>&1
        srn_netns_skip "cannot create veth interfaces here"
    fi
    ip netns del "$probe" >/dev/null 2>&1 || true
    return 0
}

srn_netns_at_exit() {
    SRN_NETNS_CLEANUPS+=("$1")
}

srn_netns_cleanup() {
    local i ns pids
    # Last registered first, like a stack of destructors.
    for ((i = ${#SRN_NETNS_CLEANUPS[@]} - 1; i >= 0; i--)); do
        eval "${SRN_NETNS_CLEANUPS[i]}" >/dev/null 2>&1 || true
    done
    SRN_NETNS_CLEANUPS=()
    for ns in "${SRN_NETNS_CREATED[@]}"; do
        # Processes still inside keep a namespace alive after 'ip netns del';
        # end the ones we can see so the namespace really goes away.
        pids=$(ip netns pids "$ns" 2>/dev/null)
        [ -z "$pids" ] || kill $pids >/dev/null 2>&1 || true
        ip netns del "$ns" >/dev/null 2>&1 || true
    done
    SRN_NETNS_CREATED=()
}

srn_ns_a() { ip netns exec "$NS_A" "$@"; }
srn_ns_b() { ip netns exec "$NS_B" "$@"; }

# Wait (at most ~5 s) until an interface reports carrier.
srn_netns_wait_up() {
    local ns=$1 dev=$2 i
    for ((i = 0; i < 50; i++)); do
        ip -n "$ns" link show "$dev" 2>/dev/null | grep -q LOWER_UP && return 0
        sleep 0.1
    done
    echo "srn_netns: $dev in $ns did not come up" >&2
    return 1
}

srn_netns_setup() {
    export NS_A="srn-a-$$" NS_B="srn-b-$$"
    export IF_A=veth-a IF_B=veth-b
    export ADDR_A=10.77.0.1 ADDR_B=10.77.0.2
    export ADDR6_A=fd77::1 ADDR6_B=fd77::2
    local mtu=${SRN_NETNS_MTU:-1500}

    trap srn_netns_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP

    # A namespace left by a crashed run with a recycled PID would make 'add' fail.
    ip netns del "$NS_A" >/dev/null 2>&1 || true
    ip netns del "$NS_B" >/dev/null 2>&1 || true
    ip netns add "$NS_A" || return 1
    SRN_NETNS_CREATED+=("$NS_A")
    ip netns add "$NS_B" || return 1
    SRN_NETNS_CREATED+=("$NS_B")

    ip -n "$NS_A" link add "$IF_A" type veth peer name "$IF_B" netns "$NS_B" || return 1
    ip -n "$NS_A" link set "$IF_A" mtu "$mtu" || return 1
    ip -n "$NS_B" link set "$IF_B" mtu "$mtu" || return 1
    ip -n "$NS_A" addr add "$ADDR_A/24" dev "$IF_A" || return 1
    ip -n "$NS_B" addr add "$ADDR_B/24" dev "$IF_B" || return 1
    # nodad: the addresses are usable at once instead of after ~1 s of DAD,
    # and a bind to a tentative address would fail with EADDRNOTAVAIL.
    ip -n "$NS_A" addr add "$ADDR6_A/64" dev "$IF_A" nodad || return 1
    ip -n "$NS_B" addr add "$ADDR6_B/64" dev "$IF_B" nodad || return 1
    ip -n "$NS_A" link set lo up || return 1
    ip -n "$NS_B" link set lo up || return 1
    ip -n "$NS_A" link set "$IF_A" up || return 1
    ip -n "$NS_B" link set "$IF_B" up || return 1
    srn_netns_wait_up "$NS_A" "$IF_A" || return 1
    srn_netns_wait_up "$NS_B" "$IF_B" || return 1
    return 0
}

# Three namespaces with an emulated switch's ports in the middle (the
# `softrnic switch` tests): host A --veth-- S --veth-- host B.
#
#   srn_netns_switch_setup TAG NET [ecmp]
#
# TAG makes the names (srn-TAGa-$$, srn-TAGs-$$, srn-TAGb-$$), NET the
# third octet of 10.NET.0.0/24.  Plain: A's sa <-> S's pa, B's sb <-> S's
# pb.  ecmp: B has two links, rb1 <-> pb1 and rb2 <-> pb2, with one MAC and
# the address on rb1 (what comes in on rb2 is B's too: rp_filter off);
# A's and B's MACs fixed and B's neighbour entry for A permanent.  Sets
# NS_A NS_S NS_B ADDR_A ADDR_B (and MAC_A MAC_B for ecmp); the caller's
# EXIT trap must call srn_netns_cleanup.  Returns 1 on any failure.
srn_netns_switch_setup() {
    local tag=$1 net=$2 ecmp=${3:-} ns l
    NS_A="srn-${tag}a-$$" NS_S="srn-${tag}s-$$" NS_B="srn-${tag}b-$$"
    ADDR_A=10.$net.0.1 ADDR_B=10.$net.0.2
    MAC_A=$(printf '02:00:00:00:%02x:01' "$net") MAC_B=$(printf '02:00:00:00:%02x:02' "$net")
    for ns in "$NS_A" "$NS_S" "$NS_B"; do
        ip netns del "$ns" >/dev/null 2>&1 || true
        ip netns add "$ns" || return 1
        SRN_NETNS_CREATED+=("$ns")
        ip -n "$ns" link set lo up || return 1
    done
    ip -n "$NS_A" link add sa type veth peer name pa netns "$NS_S" || return 1
    ip -n "$NS_A" addr add "$ADDR_A/24" dev sa || return 1
    local -a links=("$NS_A sa" "$NS_S pa")
    if [ "$ecmp" = ecmp ]; then
        ip -n "$NS_B" link add rb1 type veth peer name pb1 netns "$NS_S" || return 1
        ip -n "$NS_B" link add rb2 type veth peer name pb2 netns "$NS_S" || return 1
        ip -n "$NS_B" link set rb1 address "$MAC_B" || return 1
        ip -n "$NS_B" link set rb2 address "$MAC_B" || return 1
        ip -n "$NS_A" link set sa address "$MAC_A" || return 1
        ip -n "$NS_B" addr add "$ADDR_B/24" dev rb1 || return 1
        for l in all.rp_filter default.rp_filter rb1.rp_filter rb2.rp_filter; do
            ip netns exec "$NS_B" sysctl -qw "net.ipv4.conf.$l=0" || return 1
        done
        links+=("$NS_B rb1" "$NS_B rb2" "$NS_S pb1" "$NS_S pb2")
    else
        ip -n "$NS_B" link add sb type veth peer name pb netns "$NS_S" || return 1
        ip -n "$NS_B" addr add "$ADDR_B/24" dev sb || return 1
        links+=("$NS_B sb" "$NS_S pb")
    fi
    for l in "${links[@]}"; do
        set -- $l
        ip -n "$1" link set "$2" up || return 1
    done
    for l in "${links[@]}"; do
        set -- $l
        srn_netns_wait_up "$1" "$2" || return 1
    done
    if [ "$ecmp" = ecmp ]; then
        ip -n "$NS_B" neigh replace "$ADDR_A" lladdr "$MAC_A" dev rb1 nud permanent || return 1
    fi
    return 0
}
