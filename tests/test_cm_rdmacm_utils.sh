#!/bin/bash
# test_cm_rdmacm_utils.sh - Debian's unmodified rdmacm-utils through
# `softrnic run`, two processes on one host:
#
#   server: SOFTRNIC_DEVICES=softrnic0 on 127.x.y.z (random, its own)
#   client: zero configuration (127.0.0.N); loopback reaches 127.x.y.z
#
#   rping -s / rping -c -v -C 100         RC, RDMA READ/WRITE + SEND
#   ucmatose (4 connections, 20 messages) async event loop
#   rdma_server / rdma_client             synchronous ids, rdma_create_ep
#   rping -c to a live device, no listener -> REJECTED, reason 8
#   rping -c to an address no device has  -> ADDR_ERROR
# Every run is bounded (timeout); exit 0 pass, 1 fail, 77 skip.
set -u
SOFTRNIC=$SRN_BUILD/bin/softrnic
command -v rping >/dev/null || { echo "SKIP: rdmacm-utils not installed"; exit 77; }
T=${SRN_CM_TIMEOUT:-30}
envs=()
[ -n "${SRN_ASAN_PRELOAD:-}" ] && envs=(LD_PRELOAD="$SRN_ASAN_PRELOAD" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1)
fail=0
addr=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
port() { echo $((20000 + RANDOM % 12000)); }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

# pair NAME "server args" "client args" CLIENT_OK_REGEX
pair() {
	local name=$1 sargs=$2 cargs=$3 ok=$4 src crc spid
	# shellcheck disable=SC2086
	env "${envs[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=$addr" timeout -k 5 "$T" \
		"$SOFTRNIC" run -- $sargs >"$work/s" 2>&1 &
	spid=$!
	sleep 1
	# shellcheck disable=SC2086
	env "${envs[@]}" timeout -k 5 "$T" "$SOFTRNIC" run -- $cargs >"$work/c" 2>&1
	crc=$?
	wait "$spid"; src=$?
	if [ $crc -ne 0 ] || [ $src -ne 0 ] || ! grep -qE "$ok" "$work/c"; then
		echo "FAIL: $name (server rc=$src, client rc=$crc)"
		echo "--- server:"; tail -20 "$work/s"; echo "--- client:"; tail -20 "$work/c"
		fail=1
	else
		echo "ok: $name"
	fi
}

p=$(port)
pair "rping -C 100 -v" "rping -s -a $addr -p $p" "rping -c -a $addr -p $p -v -C 100" "rdma-ping-99:"
if [ $fail -eq 0 ] && [ "$(grep -c 'ping data: rdma-ping-' "$work/c")" -ne 100 ]; then
	echo "FAIL: rping client printed $(grep -c 'ping data' "$work/c") pings, not 100"; fail=1
fi
p=$(port)
pair "ucmatose -c 4" "ucmatose -b $addr -p $p -c 4 -C 20" "ucmatose -s $addr -p $p -c 4 -C 20" "test complete"
p=$(port)
pair "rdma_server/rdma_client" "rdma_server -s $addr -p $p" "rdma_client -s $addr -p $p" "rdma_client: end 0"

# No listener on the port: the peer's CM answers REJ, invalid service ID (8).
p=$(port)
env "${envs[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=$addr" timeout -k 5 "$T" \
	"$SOFTRNIC" run -- rping -s -a "$addr" -p "$p" >"$work/s" 2>&1 &
spid=$!
sleep 1
env "${envs[@]}" timeout -k 5 10 "$SOFTRNIC" run -- rping -c -a "$addr" -p $((p + 1)) -C 1 >"$work/c" 2>&1
if grep -q "RDMA_CM_EVENT_REJECTED, error 8" "$work/c"; then
	echo "ok: no listener -> REJECTED (8)"
else
	echo "FAIL: no listener:"; cat "$work/c"; fail=1
fi
kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null

# An address no device has or reaches: ADDR_ERROR, at once.
env "${envs[@]}" timeout -k 5 10 "$SOFTRNIC" run -- rping -c -a 192.0.2.77 -p 7999 -C 1 >"$work/c" 2>&1
if grep -q "RDMA_CM_EVENT_ADDR_ERROR" "$work/c"; then
	echo "ok: unreachable address -> ADDR_ERROR"
else
	echo "FAIL: unreachable address:"; cat "$work/c"; fail=1
fi
exit $fail
