#!/bin/bash
# UCX (Debian's ucx-utils, UCX 1.13) over softrnic, unmodified, through
# `softrnic run`:
#   info  ucx_info -d lists softrnic0's rc_verbs and ud_verbs (and does not
#         with --no-sysfs: the private /dev and /sys view is what UCX needs)
#   rc    ucx_perftest server + client on loopback, UCX_TLS=rc_verbs (ud_verbs
#         only as the auxiliary wire-up transport): UCP tag, put, get,
#         atomics, and UCT-level verbs atomics
#   ud    the same with UCX_TLS=ud_verbs
#   netns rc_verbs and ud_verbs between two network namespaces joined by a
#         veth pair (tests/lib/netns.sh; root only): the UDP link
#   user  one rc_verbs run as an ordinary user (uid 4242 via setpriv; needs
#         root to switch): the user-namespace path of `softrnic run`
# Each run is small and bounded; a run passes when both ends exit 0, the
# client prints its "Final:" line, and UCX's info log names the transport.
set -u
MODE=${1:?mode: info|rc|ud|netns|user}
SR="$SRN_BUILD/bin/softrnic"
command -v ucx_perftest >/dev/null && command -v ucx_info >/dev/null ||
    { echo "SKIP: ucx-utils not installed"; exit 77; }
if ! "$SR" run -- test -c /dev/infiniband/uverbs0 2>/dev/null; then
    echo "SKIP: softrnic run cannot make its /dev view here:"
    "$SR" run -- true
    exit 77
fi
TMP=$(mktemp -d)
chmod 755 "$TMP"
trap 'rm -rf "$TMP"' EXIT
export UCX_NET_DEVICES=softrnic0:1 UCX_WARN_UNUSED_ENV_VARS=n
fail=0
SRV_NS=
# Under the ASan build (scripts/test.sh sets SRN_ASAN_PRELOAD) the
# uninstrumented UCX programs need the ASan runtime first; their own leaks
# are not ours to report.
ASAN_ENV=
[ -n "${SRN_ASAN_PRELOAD:-}" ] &&
    ASAN_ENV="env LD_PRELOAD=$SRN_ASAN_PRELOAD ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"

# perf AS TLS EXPECT ARGS...: one server/client pair. EXPECT is the
# ep_cfg text UCX must log (which lane carried the test).
perf() {
    local as=$1 tls=$2 expect=$3; shift 3
    local port=$((20000 + RANDOM % 12000)) spid rc src
    UCX_TLS=$tls timeout 60 ${SRV_AS:-$as} $ASAN_ENV "$SR" run -- ucx_perftest -p $port \
        >"$TMP/srv" 2>&1 &
    spid=$!
    # The client does not retry: wait until the server listens (up to 20 s).
    for _ in $(seq 200); do
        $SRV_NS ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
        kill -0 $spid 2>/dev/null || break
        sleep 0.1
    done
    UCX_TLS=$tls UCX_LOG_LEVEL=info timeout 60 ${CLI_AS:-$as} $ASAN_ENV "$SR" run -- \
        ucx_perftest ${TARGET:-127.0.0.1} -p $port "$@" >"$TMP/cli" 2>&1
    rc=$?
    wait $spid; src=$?
    if [ $rc = 0 ] && [ $src = 0 ] && grep -q '^Final:' "$TMP/cli" &&
       grep -qF "$expect" "$TMP/cli"; then
        echo "ok    $tls $*: $(grep '^Final:' "$TMP/cli" | tr -s ' ')"
    else
        echo "FAIL  $tls $* (client $rc, server $src, want '$expect')"
        grep -E 'ERROR|ep_cfg|Fatal' "$TMP/cli" "$TMP/srv" | head -8
        # A crash: UCX's own handler printed the backtrace (UCX_HANDLE_ERRORS=bt).
        for f in srv cli; do
            grep -q 'Caught signal' "$TMP/$f" && { echo "--- $f:"; sed -n '/Caught signal/,$p' "$TMP/$f" | head -40; }
        done
        fail=1
    fi
}

case $MODE in
info)
    out=$($ASAN_ENV "$SR" run -- ucx_info -d 2>&1)
    for tl in rc_verbs ud_verbs; do
        if echo "$out" | sed -n '/Memory domain: softrnic0/,/Memory domain: [^s]/p' |
           grep -q "Transport: $tl"; then
            echo "ok    ucx_info -d: softrnic0 $tl"
        else
            echo "FAIL  ucx_info -d lists no softrnic0 $tl"; fail=1
        fi
    done
    if $ASAN_ENV "$SR" run --no-sysfs -- ucx_info -d 2>&1 | grep -q 'Memory domain: softrnic0'; then
        echo "FAIL  --no-sysfs still shows softrnic0 to UCX"; fail=1
    else
        echo "ok    --no-sysfs: no softrnic0 for UCX"
    fi
    sysfs=$("$SR" run -- cat /sys/class/infiniband/softrnic0/ports/1/gid_attrs/types/0)
    [ "$sysfs" = "RoCE v2" ] && echo "ok    GID 0 type: $sysfs" ||
        { echo "FAIL  GID 0 type '$sysfs'"; fail=1; }
    ;;
rc)
    TLS=rc_verbs,ud_verbs:aux
    RC="ep_cfg[0]: tag(rc_verbs/softrnic0:1)"
    perf "" $TLS "$RC" -t tag_lat -n 200
    perf "" $TLS "$RC" -t tag_bw -s 65536 -n 100
    perf "" $TLS "$RC" -t tag_bw -s 1048576 -n 20
    perf "" $TLS "rma(rc_verbs/softrnic0:1)" -t ucp_put_lat -n 100
    perf "" $TLS "rma(rc_verbs/softrnic0:1)" -t ucp_put_bw -s 65536 -n 100
    perf "" $TLS "rma(rc_verbs/softrnic0:1)" -t ucp_get -s 65536 -n 100
    perf "" $TLS "amo_am(rc_verbs/softrnic0:1)" -t ucp_fadd -n 100
    perf "" $TLS "amo_am(rc_verbs/softrnic0:1)" -t ucp_cswap -n 100
    # UCT level: rc_verbs' own RDMA atomics (ibv FETCH_ADD, CMP_AND_SWP).
    for t in add_lat fadd cswap; do
        perf "" rc_verbs "" -x rc_verbs -d softrnic0:1 -t $t -n 100
    done
    perf "" rc_verbs "" -x rc_verbs -d softrnic0:1 -t get -s 65536 -D zcopy -n 100
    ;;
ud)
    UD="ep_cfg[0]: tag(ud_verbs/softrnic0:1)"
    perf "" ud_verbs "$UD" -t tag_lat -n 200
    perf "" ud_verbs "$UD" -t tag_bw -s 65536 -n 100
    perf "" ud_verbs "(ud_verbs/softrnic0:1)" -t ucp_put_bw -s 65536 -n 100
    perf "" ud_verbs "(ud_verbs/softrnic0:1)" -t ucp_get -s 65536 -n 100
    perf "" ud_verbs "(ud_verbs/softrnic0:1)" -t ucp_fadd -n 100
    ;;
netns)
    source "$SRN_SRC/tests/lib/netns.sh"
    srn_netns_require_root
    srn_netns_setup
    srn_netns_at_exit "rm -rf $TMP"
    SRV_AS="ip netns exec $NS_A env SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR_A"
    CLI_AS="ip netns exec $NS_B env SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR_B"
    TARGET=$ADDR_A
    SRV_NS="ip netns exec $NS_A"
    perf "" rc_verbs,ud_verbs:aux "ep_cfg[0]: tag(rc_verbs/softrnic0:1)" -t tag_bw -s 65536 -n 100
    perf "" rc_verbs,ud_verbs:aux "rma(rc_verbs/softrnic0:1)" -t ucp_get -s 65536 -n 100
    perf "" ud_verbs "ep_cfg[0]: tag(ud_verbs/softrnic0:1)" -t tag_lat -n 100
    ;;
user)
    [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null ||
        { echo "SKIP: needs root to play an ordinary user"; exit 77; }
    cd "$TMP"
    # Not 65534: that is the overflow uid, which `run` refuses to map.
    USER_AS="setpriv --reuid=4242 --regid=4242 --clear-groups"
    # An address of its own: with the default, whichever user's processes
    # come first take 127.0.0.1, and the suite's other tests expect root's.
    export SOFTRNIC_DEVICES="name=softrnic0,addr=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))"
    # Both join one user namespace, so the same-host rings still work
    # between them (sibling namespaces could not open each other's inbox).
    export SOFTRNIC_STATS=1
    perf "$USER_AS" rc_verbs,ud_verbs:aux "shm_sent_pkts" -t tag_lat -n 200
    grep -q "ep_cfg\[0\]: tag(rc_verbs/softrnic0:1)" "$TMP/cli" ||
        { echo "FAIL  user run did not use rc_verbs"; fail=1; }
    ;;
esac
exit $fail
