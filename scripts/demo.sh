#!/bin/bash
# scripts/demo.sh - install, build, and show softrnic working: two endpoints
# on this host's loopback (both share 127.0.0.1, as on a NIC), Debian's
# unmodified ibv_rc_pingpong run through `softrnic run`, first as a
# latency pingpong, then as a bandwidth run, with each endpoint's NIC
# counters printed when it closes the device (SOFTRNIC_STATS=1).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j2 >/dev/null
SOFTRNIC=build/bin/softrnic
PORT=$((20000 + RANDOM % 12000))

echo "== softrnic devinfo"
$SOFTRNIC devinfo | head -20

# Output goes to a private directory: a predictable name in /tmp could be
# a link planted by another user.
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# run_pair TITLE ARGS...: server and client of ibv_rc_pingpong.
run_pair() {
	local title=$1
	shift
	PORT=$((PORT + 1))
	echo
	echo "== $title: ibv_rc_pingpong -g 0 $*"
	SOFTRNIC_STATS=1 timeout 60 $SOFTRNIC run -- ibv_rc_pingpong -g 0 -p $PORT "$@" \
		> "$OUT/server" 2>&1 &
	local spid=$!
	for _ in $(seq 100); do
		ss -Hltn "sport = :$PORT" | grep -q . && break
		sleep 0.05
	done
	SOFTRNIC_STATS=1 timeout 60 $SOFTRNIC run -- ibv_rc_pingpong -g 0 -p $PORT "$@" 127.0.0.1 \
		> "$OUT/client" 2>&1 || { cat "$OUT/client"; exit 1; }
	wait "$spid" || { cat "$OUT/server"; exit 1; }
	echo "-- client:"
	sed 's/^/   /' "$OUT/client"
	echo "-- server counters:"
	grep '^softrnic' "$OUT/server" | sed 's/^/   /'
}

run_pair "pingpong (latency, 64 B)" -s 64 -n 2000
run_pair "bandwidth (1 MiB messages, MTU 4096)" -s 1048576 -m 4096 -n 200
