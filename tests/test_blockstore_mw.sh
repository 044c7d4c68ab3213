#!/bin/bash
# test_blockstore_mw.sh MODE - per-connection memory windows (server --mw).
#
#   server --mw: each connection a type-2 window over the cache, its key
#                in the hello, bound by that connection's QP
#   1. three writers; SIGUSR2 revokes one connection's window: that
#      client alone reconnects (its next access fails, it gets a new
#      window), the other two never notice; every block checked
#   2. two clients while the cache moves (SIGUSR1): windows are freed
#      before the region is deregistered, everyone reconnects clean
# MODE: shm | udp.  Exit 0/1/77.
set -u
MODE=${1:?usage: test_blockstore_mw.sh shm|udp}
BS_SERVER_ARGS="--blocks 4096 --slots 6144 --mw"
source "$SRN_SRC/tests/lib/blockstore_lib.sh"

start_server
pids=()
for w in 1 2 3; do
	client mw$w --op mix --qd 8 --seconds 3 --fill --verify-end --start $((w * 300)) --count 300 --writer $w
	pids+=($!)
done
sleep 1.5
kill -USR2 "$spid"
moved=0 still=0
for w in 1 2 3; do
	wait "${pids[$((w - 1))]}"
	check mw$w $? || continue
	if [ "$(field mw$w reconnects)" = 0 ]; then still=$((still + 1)); else moved=$((moved + 1)); fi
done
if ! grep -q "revoked the window (rkey 0x[0-9a-f]*) of connection" "$work/server.log"; then
	echo "FAIL: $MODE: the server revoked no window"
	cat "$work/server.log"
	fail=1
elif [ $fail -eq 0 ] && { [ $moved -ne 1 ] || [ $still -ne 2 ]; }; then
	echo "FAIL: $MODE: one revoked window should reconnect one client, not $moved ($still untouched)"
	cat "$work"/mw[1-3]
	fail=1
elif [ $fail -eq 0 ]; then
	echo "ok: $MODE: one window revoked: its client reconnected, the other two untouched, every block checked"
fi

pids=()
for w in 4 5; do
	client mv$w --op mix --qd 8 --seconds 3 --verify-end --start $((w * 300)) --count 300 --writer $w
	pids+=($!)
done
sleep 1.5
kill -USR1 "$spid"
for w in 4 5; do
	wait "${pids[$((w - 4))]}"
	check mv$w $? || continue
	if [ "$(field mv$w remaps_seen)" != 1 ]; then
		echo "FAIL: $MODE: client mv$w did not see the cache move"
		cat "$work/mv$w"
		fail=1
	fi
done
[ $fail -eq 0 ] && echo "ok: $MODE: the cache moved under windows, both clients clean"
kill -TERM "$spid"
wait "$spid" || { echo "FAIL: $MODE: the server did not exit cleanly"; tail -5 "$work/server.log"; fail=1; }
spid=
exit $fail
