#!/bin/bash
# test_cm_backlog.sh - a full listen backlog, two processes on one host
# (tests/test_cm_backlog.c says what is checked):
#
#   server: test_cm_backlog server on 127.x.y.z (its own device), backlog 1
#   client: test_cm_backlog client from 127.0.0.N, two connects at once
#
# Exit 0 pass, 1 fail.
set -u
bin=$SRN_BUILD/bin/test_cm_backlog
addr=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
work=$(mktemp -d)
trap 'kill $spid 2>/dev/null; rm -rf "$work"' EXIT
mkfifo "$work/fifo"
for ((try = 0; try < 5; try++)); do
	port=$((20000 + RANDOM % 12000))
	SOFTRNIC_DEVICES="name=softrnic0,addr=$addr" timeout -k 5 90 \
		"$bin" server "$addr" "$port" "$work/fifo" >"$work/s" 2>&1 &
	spid=$!
	for ((i = 0; i < 100; i++)); do
		grep -q listening "$work/s" && break 2
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.1
	done
	kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null
done
timeout -k 5 90 "$bin" client "$addr" "$port" "$work/fifo" >"$work/c" 2>&1
crc=$?
wait "$spid"
src=$?
cat "$work/s" "$work/c"
[ $crc -eq 0 ] && [ $src -eq 0 ] || { echo "FAIL: server rc=$src, client rc=$crc"; exit 1; }
exit 0
