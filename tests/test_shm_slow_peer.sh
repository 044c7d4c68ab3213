#!/bin/bash
# A same-host receiver that is not scheduled is slow, not lossy.
#
# Debian's ib_write_bw (perftest: 7 retries of a 67 ms ACK timeout, about
# half a second) sends 64-byte RDMA Writes one at a time (-t 1: the ring
# never fills, so the full-ring rule does not hide the case) over the
# same-host rings for 8 s (SOFTRNIC_DIRECT=0: the target's thread places
# them), and the test stops the server with SIGSTOP for 2 s mid-run, as a
# loaded 2-CPU host can starve a process.  The client's packets sit unread
# in the stopped server's ring; they were not lost, so the client must not spend its retries on them
# (before, it ended in RETRY_EXC_ERR).  Both must finish, and the client's
# counters must show the waits (shm_slow_peer_waits), or the stop missed
# the run and the test tries again (bounded).  Exit 0 pass, 1 fail, 77 skip.
set -u
command -v ib_write_bw >/dev/null || { echo "SKIP: perftest not installed"; exit 77; }
SOFTRNIC=${SOFTRNIC:-$SRN_BUILD/bin/softrnic}
tmp=$(mktemp -d)
trap '[ -n "${spid:-}" ] && kill -CONT "$spid" 2>/dev/null; rm -rf "$tmp"' EXIT
asan=()
[ -n "${SRN_ASAN_PRELOAD:-}" ] && asan=(LD_PRELOAD="$SRN_ASAN_PRELOAD" ASAN_OPTIONS=detect_leaks=0)
waits() { awk '$1 == "softrnic" && $3 == "shm_slow_peer_waits" { v += $4 } END { print v + 0 }' "$1"; }

for ((try = 0; try < 3; try++)); do
	port=$((20000 + RANDOM % 12000))
	env "${asan[@]}" SOFTRNIC_DIRECT=0 timeout -k 5 120 \
		"$SOFTRNIC" run -- ib_write_bw -p "$port" -s 64 -t 1 -D 8 >"$tmp/s" 2>&1 &
	tpid=$!
	for ((i = 0; i < 200; i++)); do
		ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
		sleep 0.05
	done
	# softrnic run execs the program: timeout's only child is the server.
	spid=$(pgrep -P "$tpid" | head -1)
	env "${asan[@]}" SOFTRNIC_DIRECT=0 SOFTRNIC_STATS=1 timeout -k 5 120 \
		"$SOFTRNIC" run -- ib_write_bw -p "$port" -s 64 -t 1 -D 8 127.0.0.1 >"$tmp/c" 2>&1 &
	cpid=$!
	# Into the stream (its output is buffered until exit, so it cannot
	# tell us): a stop that lands before the stream or after it counts
	# no waits and the round is run again.
	sleep 2
	[ -n "$spid" ] && kill -STOP "$spid"
	sleep 2
	[ -n "$spid" ] && kill -CONT "$spid"
	wait "$cpid"
	crc=$?
	wait "$tpid"
	src=$?
	spid=
	if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
		echo "FAIL: a stopped server broke the run (server rc=$src, client rc=$crc)"
		echo "--- server:"; tail -8 "$tmp/s"
		echo "--- client:"; grep -v '^softrnic' "$tmp/c" | tail -8
		exit 1
	fi
	w=$(waits "$tmp/c")
	if [ "$w" -gt 0 ]; then
		echo "ok: server stopped 2 s mid-run; both finished; $w ACK timeouts waited, not retried"
		exit 0
	fi
	echo "note: the stop missed the run (no waits counted), again"
done
echo "FAIL: the stop never landed mid-run in 3 tries"
exit 1
