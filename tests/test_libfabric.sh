#!/bin/bash
# libfabric (Debian's libfabric-bin, libfabric 1.17) over softrnic,
# unmodified, through `softrnic run`:
#   info   fi_info -p verbs on the zero-configuration loopback device lists
#          the DGRAM endpoint; with the device on a veth address (a network
#          namespace) it lists MSG and DGRAM, and "verbs;ofi_rxm" lists RDM
#          (libfabric skips loopback interfaces for MSG, for any device)
#   lo     two processes on the zero-configuration loopback devices, with
#          data checks: fi_pingpong -e dgram, and -e rdm through ofi_rxd (RDM
#          over the verbs DGRAM endpoint, which needs no rdma_cm)
#   netns  fi_pingpong -e msg, -e dgram and "verbs;ofi_rxm" -e rdm, with data
#          checks, between two network namespaces joined by a veth pair
#          (tests/lib/netns.sh; root only): rdma_cm wire-up, the UDP link
# A run passes when both ends exit 0 and the client prints a result line for
# every size it was asked for.
set -u
MODE=${1:?mode: info|lo|netns}
SR="$SRN_BUILD/bin/softrnic"
command -v fi_pingpong >/dev/null && command -v fi_info >/dev/null ||
    { echo "SKIP: libfabric-bin not installed"; exit 77; }
if ! "$SR" run -- test -c /dev/infiniband/uverbs0 2>/dev/null; then
    echo "SKIP: softrnic run cannot make its /dev view here:"
    "$SR" run -- true
    exit 77
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# Only the providers that matter here: the others (psm2, usnic, ...) probe
# hardware and print noise.
export FI_PROVIDER=verbs,ofi_rxm,ofi_rxd
fail=0
ASAN_ENV=
[ -n "${SRN_ASAN_PRELOAD:-}" ] &&
    ASAN_ENV="env LD_PRELOAD=$SRN_ASAN_PRELOAD ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"

ok() { echo "ok    $*"; }
bad() { echo "FAIL  $*"; fail=1; }

# lists AS PROV EXPECT...: fi_info -p PROV run as AS lists every "type" in
# EXPECT for a softrnic0 domain.
lists() {
    local as=$1 prov=$2 t; shift 2
    timeout 60 $as $ASAN_ENV "$SR" run -- fi_info -p "$prov" >"$TMP/info" 2>&1
    for t in "$@"; do
        if grep -B3 "type: $t\$" "$TMP/info" | grep -q "domain: softrnic0"; then
            ok "fi_info -p '$prov' ${as:+(netns) }lists softrnic0 $t"
        else
            bad "fi_info -p '$prov' ${as:+(netns) }lists no softrnic0 $t"
            head -20 "$TMP/info"
        fi
    done
}

# pp PROV EP SIZES...: one fi_pingpong server/client pair over all its
# sizes (-S all: 64 bytes to 1m, as far as the endpoint's largest message)
# with data checks (-c); every size in SIZES (as fi_pingpong prints them,
# "4k") must have its line. SRV_AS/CLI_AS: how to start each end; TARGET:
# the server's address. On loopback the control port is random and a clash
# is retried.
pp() {
    local prov=$1 ep=$2 try port spid rc src s sizes="-S all"; shift 2
    for try in 1 2 3; do
        port=$((20000 + RANDOM % 12000))
        timeout 90 ${SRV_AS:-} $ASAN_ENV "$SR" run -- fi_pingpong -p "$prov" -e $ep \
            -B $port -I 20 -c $sizes >"$TMP/srv" 2>&1 &
        spid=$!
        # The client does not retry: wait until the server listens (<= 20 s).
        for _ in $(seq 200); do
            ${SRV_NS:-} ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
            kill -0 $spid 2>/dev/null || break
            sleep 0.1
        done
        kill -0 $spid 2>/dev/null && break
        wait $spid
        grep -q "Address already in use" "$TMP/srv" || break
    done
    timeout 90 ${CLI_AS:-} $ASAN_ENV "$SR" run -- fi_pingpong -p "$prov" -e $ep \
        -P $port -I 20 -c $sizes "${TARGET:-127.0.0.1}" >"$TMP/cli" 2>&1
    rc=$?
    # A server whose client never came would wait forever: bounded.
    for _ in $(seq 100); do kill -0 $spid 2>/dev/null || break; sleep 0.1; done
    kill $spid 2>/dev/null
    wait $spid; src=$?
    local missing=0
    for s in "$@"; do
        grep -qE "^$s +20 +=20 " "$TMP/cli" || missing=1
    done
    if [ $rc = 0 ] && [ $src = 0 ] && [ $missing = 0 ]; then
        ok "fi_pingpong -p '$prov' -e $ep -c: $(for s in "$@"; do
            awk -v s=$s '$1 == s {printf "%s %sus/xfer, ", $1, $7}' "$TMP/cli"; done)"
    else
        bad "fi_pingpong -p '$prov' -e $ep $* (client $rc, server $src)"
        tail -n 5 "$TMP/cli" "$TMP/srv"
    fi
}

netns_up() {
    source "$SRN_SRC/tests/lib/netns.sh"
    srn_netns_require_root
    srn_netns_setup || { echo "FAIL  cannot set up the namespaces"; exit 1; }
    srn_netns_at_exit "rm -rf $TMP"
    SRV_AS="ip netns exec $NS_A env SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR_A"
    CLI_AS="ip netns exec $NS_B env SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR_B"
    SRV_NS="ip netns exec $NS_A"
    TARGET=$ADDR_A
}

case $MODE in
info)
    lists "" verbs FI_EP_DGRAM
    if [ "$(id -u)" = 0 ] && ip netns list >/dev/null 2>&1; then
        netns_up
        lists "$SRV_AS" verbs FI_EP_MSG FI_EP_DGRAM
        lists "$SRV_AS" "verbs;ofi_rxm" FI_EP_RDM
    else
        echo "note  not root: the MSG/RDM listing (needs a namespace) not checked"
    fi
    ;;
lo)
    pp verbs dgram 64 256 1k
    pp "verbs;ofi_rxd" rdm 64 4k 64k 1m
    ;;
netns)
    netns_up
    pp verbs msg 64 256 1k 4k 64k 1m
    pp verbs dgram 64 256 1k
    pp "verbs;ofi_rxm" rdm 64 256 1k 4k 64k 1m
    ;;
esac
exit $fail
