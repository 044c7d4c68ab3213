#!/bin/bash
# test_rsocket_udp.sh MODE - datagram rsockets (SOCK_DGRAM over UD QPs,
# src/rsocket/dgram*.c) through `softrnic run`, two processes, Debian's
# programs unmodified where there are any:
#
#   loopback   udpong, server on its own device (127.x.y.z), client with
#              zero configuration (127.0.0.N): echo (latency) and one-way
#              (bandwidth) runs at several sizes, blocking, non-blocking
#              and rpoll-driven; a server bound to 0.0.0.0
#   netns      udpong between two network namespaces (veth, MTU 9000 and
#              1500), both directions of who serves
#   preload    tests/helpers/rsocket_udp_echo.c, a plain UDP program, under Debian's
#              librspreload.so: several sizes echoed identical, 2100 bytes
#              refused with EMSGSIZE
#   malformed  datagrams that are no rsocket's (garbage, a wrong tag,
#              version, length or op, a payload too large) sent at a live
#              udpong server, and UD messages with a wrong source header
#              (tests/helpers/rsocket_udp_inject.c): it keeps serving, and
#              `softrnic stat` counts each in rsocket_dgram_malformed
# udpong's server never exits: it is stopped by its pid once the client is
# done.  Every run is bounded (timeout); exit 0 pass, 1 fail, 77 skip.
set -u
MODE=${1:?mode}
SOFTRNIC=$SRN_BUILD/bin/softrnic
T=${SRN_RS_TIMEOUT:-60}
envs=()
[ -n "${SRN_ASAN_PRELOAD:-}" ] && envs=(LD_PRELOAD="$SRN_ASAN_PRELOAD" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1)
fail=0
addr=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
port() { echo $((20000 + RANDOM % 12000)); }
work=$(mktemp -d)
spid=""
cleanup() { [ -n "$spid" ] && kill "$spid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
command -v udpong >/dev/null || [ "$MODE" = preload ] || { echo "SKIP: rdmacm-utils not installed"; exit 77; }

# serve PREFIX "server command": start it in the background (pid in spid).
serve() {
	# shellcheck disable=SC2086
	$1 env "${envs[@]}" timeout -k 5 $((T * 3)) "$SOFTRNIC" run -- stdbuf -oL $2 >"$work/s" 2>&1 &
	spid=$!
	sleep 1
}

# unserve: stop the server (udpong serves for ever), bounded.
unserve() {
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	spid=""
}

# client NAME PREFIX "client command" OK_REGEX: run it, bounded; it must
# exit 0 and print OK_REGEX.
client() {
	local name=$1 rc
	# shellcheck disable=SC2086
	$2 env "${envs[@]}" timeout -k 5 "$T" "$SOFTRNIC" run ${client_run_opts:-} -- stdbuf -oL $3 \
		>"$work/c" 2>&1
	rc=$?
	if [ $rc -ne 0 ] || ! grep -qE "$4" "$work/c"; then
		echo "FAIL: $name (client rc=$rc)"
		echo "--- server:"; tail -20 "$work/s"; echo "--- client:"; tail -20 "$work/c"
		fail=1
		return 1
	fi
	echo "ok: $name"; tail -n +2 "$work/c" | sed 's/^/    /'
}

# udpong_runs NAME SPREFIX SADDR CPREFIX: a server on SADDR, then clients.
udpong_runs() {
	local name=$1 spre=$2 saddr=$3 cpre=$4 p
	p=$(port)
	serve "$spre" "udpong -b $saddr -p $p -T b"
	client "$name: udpong -S 64 echo, blocking" "$cpre" "udpong -s $saddr -p $p -S 64 -C 300 -T e -T b" "^custom"
	client "$name: udpong -S 1000 echo, rpoll" "$cpre" "udpong -s $saddr -p $p -S 1000 -C 300 -T e -T a" "^custom"
	client "$name: udpong -S 1500 echo, non-blocking" "$cpre" "udpong -s $saddr -p $p -S 1500 -C 300 -T e -T n" "^custom"
	client "$name: udpong -S 2000 one-way" "$cpre" "udpong -s $saddr -p $p -S 2000 -C 1000 -T b" "^custom"
	client "$name: udpong -S 16 one-way, non-blocking" "$cpre" "udpong -s $saddr -p $p -S 16 -C 2000" "^custom"
	unserve
	grep -q "client login" "$work/s" || { echo "FAIL: $name: the server saw no login"; cat "$work/s"; fail=1; }
}

case $MODE in
loopback)
	dev="env SOFTRNIC_DEVICES=name=softrnic0,addr=$addr"
	udpong_runs "loopback" "$dev" "$addr" ""
	# Bound to the any address: its replies must come from its device's
	# address (IP_PKTINFO), the one its UD messages name.
	p=$(port)
	serve "$dev" "udpong -b 0.0.0.0 -p $p -T b"
	client "loopback, server on 0.0.0.0: udpong -S 512 echo" "" "udpong -s $addr -p $p -S 512 -C 300 -T e -T b" "^custom"
	unserve
	;;
netns)
	source "$SRN_SRC/tests/lib/netns.sh"
	srn_netns_require_root
	SRN_NETNS_MTU=9000 srn_netns_setup || { echo "FAIL: namespaces"; exit 1; }
	srn_netns_at_exit cleanup
	A="ip netns exec $NS_A env SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR_A"
	B="ip netns exec $NS_B env SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR_B"
	udpong_runs "netns, A serves" "$A" "$ADDR_A" "$B"
	udpong_runs "netns, B serves" "$B" "$ADDR_B" "$A"
	# MTU 1500: port MTU 1024, so 1000 bytes and our 8-byte header fit.
	ip -n "$NS_A" link set "$IF_A" mtu 1500 && ip -n "$NS_B" link set "$IF_B" mtu 1500
	p=$(port)
	serve "$A" "udpong -b $ADDR_A -p $p -T b"
	client "netns, MTU 1500: udpong -S 1000 echo" "$B" "udpong -s $ADDR_A -p $p -S 1000 -C 300 -T e -T b" "^custom"
	unserve
	;;
preload)
	pre=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
	[ -e "$pre" ] || { echo "SKIP: $pre not installed (librdmacm1)"; exit 77; }
	[ -n "${SRN_ASAN_PRELOAD:-}" ] && { echo "SKIP: preload test not under ASan"; exit 77; }
	p=$(port)
	echo_prog=$SRN_BUILD/bin/rsocket_udp_echo
	# The server gets the preload by hand, the client by `run --rsocket-preload`.
	serve "env SOFTRNIC_DEVICES=name=softrnic0,addr=$addr" "env LD_PRELOAD=$pre $echo_prog server $addr $p"
	client_run_opts=--rsocket-preload client "UDP echo under librspreload" "" \
		"$echo_prog client $addr $p" "echoed identical"
	wait "$spid"; src=$?; spid=""
	if [ $src -ne 0 ] || ! grep -q "server transport: rsocket" "$work/s" ||
	   ! grep -q "client transport: rsocket" "$work/c" || ! grep -q "EMSGSIZE" "$work/c"; then
		echo "FAIL: the echo did not go over rsockets, or the server failed (rc=$src)"
		cat "$work/s" "$work/c"; fail=1
	fi
	;;
malformed)
	export SOFTRNIC_DIAG_DIR=$work/diag
	mkdir -p "$SOFTRNIC_DIAG_DIR"
	p=$(port)
	serve "env SOFTRNIC_DEVICES=name=softrnic0,addr=$addr" "udpong -b $addr -p $p -T b"
	client "before: udpong -S 64 echo" "" "udpong -s $addr -p $p -S 64 -C 100 -T e -T b" "^custom"
	# Ten datagrams no rsocket sends, from a kernel socket: random bytes,
	# short headers, the wrong tag, version, length or op, and a payload
	# larger than a receive buffer.
	python3 - "$addr" "$p" <<'PY' || { echo "FAIL: could not send"; fail=1; }
import os, socket, struct, sys
dst = (sys.argv[1], int(sys.argv[2]))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
ip = socket.inet_aton("127.0.0.1")
hdr = lambda tag=0x55555555, ver=4, op=0, ln=16: struct.pack("!IBBBBI", tag, ver, op, ln, 0, 0x123) + ip
for d in (os.urandom(40), b"", b"x" * 10, hdr()[:12], hdr(tag=0x55555554) + b"p",
          hdr(ver=6) + b"p", hdr(ln=28) + b"p" * 20, hdr(op=3) + b"p", hdr(op=255),
          hdr() + b"p" * 2100):
    s.sendto(d, dst)
PY
	# And eight UD messages with a wrong source header, from a peer that
	# learnt the server's QPN by the handshake.
	# shellcheck disable=SC2086
	env "${envs[@]}" timeout -k 5 "$T" "$SOFTRNIC" run -- "$SRN_BUILD/bin/rsocket_udp_inject" \
		"$addr" "$p" 8 >"$work/i" 2>&1 || { echo "FAIL: inject"; cat "$work/i"; fail=1; }
	cat "$work/i"
	sleep 1
	client "after: udpong -S 64 echo" "" "udpong -s $addr -p $p -S 64 -C 100 -T e -T b" "^custom"
	n=$("$SOFTRNIC" stat --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(x["counters"].get("rsocket_dgram_malformed", 0) for x in d["devices"] if x["state"] == "running"))')
	unserve
	echo "rsocket_dgram_malformed of the server: $n"
	# Each of the ten UDP datagrams and the eight UD messages is refused.
	[ "${n:-0}" -ge 18 ] || { echo "FAIL: expected 18 malformed datagrams counted, got ${n:-none}"; fail=1; }
	;;
*)
	echo "unknown mode $MODE"; exit 2 ;;
esac
exit $fail
