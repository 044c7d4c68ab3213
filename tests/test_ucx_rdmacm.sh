#!/bin/bash
# UCX's own wire-up over librdmacm (issue 13): Debian's unmodified io_demo
# (ucx-utils, UCX 1.13), a UCP client/server that connects by socket
# address through a UCP listener, with UCX_SOCKADDR_TLS_PRIORITY=rdmacm so
# UCX's rdmacm connection manager (not its TCP one) carries the connection
# setup, and rc_verbs/ud_verbs on softrnic0 the data, with io_demo's data
# and transaction checks (-q) on reads and writes:
#   lo     two processes on loopback
#   netns  between two network namespaces joined by a veth pair (root only)
set -u
MODE=${1:?mode: lo|netns}
SR="$SRN_BUILD/bin/softrnic"
command -v io_demo >/dev/null || { echo "SKIP: ucx-utils (io_demo) not installed"; exit 77; }
if ! "$SR" run -- test -c /dev/infiniband/uverbs0 2>/dev/null; then
    echo "SKIP: softrnic run cannot make its /dev view here:"
    "$SR" run -- true
    exit 77
fi
TMP=$(mktemp -d)
chmod 755 "$TMP"
trap 'rm -rf "$TMP"' EXIT
export UCX_NET_DEVICES=softrnic0:1 UCX_WARN_UNUSED_ENV_VARS=n
export UCX_TLS=rc_verbs,ud_verbs UCX_SOCKADDR_TLS_PRIORITY=rdmacm
fail=0
ASAN_ENV=
[ -n "${SRN_ASAN_PRELOAD:-}" ] &&
    ASAN_ENV="env LD_PRELOAD=$SRN_ASAN_PRELOAD ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"

# On loopback each zero-configuration process owns its own 127.0.0.N and
# an rdma_cm connect reaches the device that owns the address: the server
# takes a random loopback address of its own and the client connects there.
srv_addr=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
SRV_AS="env SOFTRNIC_DEVICES=name=softrnic0,addr=$srv_addr" CLI_AS= TARGET=$srv_addr
if [ "$MODE" = netns ]; then
    source "$SRN_SRC/tests/lib/netns.sh"
    srn_netns_require_root
    srn_netns_setup || { echo "FAIL  cannot set up the namespaces"; exit 1; }
    srn_netns_at_exit "rm -rf $TMP"
    SRV_AS="ip netns exec $NS_A env SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR_A"
    CLI_AS="ip netns exec $NS_B env SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR_B"
    TARGET=$ADDR_A
fi

# rdma_cm ports are not TCP ports: nothing to see with ss. The server says
# when its listener is up; the client retries its connect a few times.
port=$((20000 + RANDOM % 12000))
timeout 120 $SRV_AS $ASAN_ENV "$SR" run -- io_demo -p $port -q -i 0 >"$TMP/srv" 2>&1 &
spid=$!
for _ in $(seq 200); do
    grep -aq "started listener" "$TMP/srv" && break
    kill -0 $spid 2>/dev/null || break
    sleep 0.1
done
UCX_LOG_LEVEL=debug timeout 100 $CLI_AS $ASAN_ENV "$SR" run -- io_demo -p $port -q \
    -o read,write -i 500 -c 5 -y 1 -n 20 "$TARGET" >"$TMP/cli" 2>&1
rc=$?
kill $spid 2>/dev/null
wait $spid 2>/dev/null

if [ $rc = 0 ] && grep -aq "Client exit with status 'OK'" "$TMP/cli"; then
    echo "ok    io_demo read,write x500 with checks: $(grep -a 'total min' "$TMP/cli" | tail -1 |
        sed 's/.*| read/read/; s/ min:.*| write/, write/; s/ min:.*//')"
else
    echo "FAIL  io_demo client exit $rc"
    grep -a -E "DEMO|ERROR|DIAG" "$TMP/cli" | tail -8 | cut -c1-200
    grep -a -E "ERROR|DIAG" "$TMP/srv" | tail -4 | cut -c1-200
    fail=1
fi
# Which connection manager and transports did the work: UCX's debug log.
grep -aq "client created ep .* on device softrnic0:1, .* on cm rdmacm" "$TMP/cli" &&
    echo "ok    connection set up by UCX's rdmacm CM on softrnic0:1" ||
    { echo "FAIL  no rdmacm CM connection on softrnic0:1 in the log"; fail=1; }
grep -aq "lane\[[0-9]\]: .*rc_verbs/softrnic0:1" "$TMP/cli" &&
    echo "ok    data over rc_verbs/softrnic0:1" ||
    { echo "FAIL  no rc_verbs/softrnic0:1 lane in the log"; fail=1; }
exit $fail
