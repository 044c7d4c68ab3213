#!/bin/bash
# test_blockstore.sh MODE - the block store example (examples/blockstore)
# end to end: one server, several client processes, every block checked.
#
#   tcp     the TCP twin on 127.0.0.1 (no softrnic)
#   shm     RDMA through `softrnic run`, same-host shared-memory rings
#   udp     the same with SOFTRNIC_SHM=0: RoCEv2 over UDP on loopback
#   netns   server in namespace A, clients in B, RoCEv2 over a veth pair
#           (topology in tests/lib/netns.sh; root only, else skipped)
#
# Phases, one server throughout:
#   1. two clients, random reads and writes, each checks its range
#   2. four clients while the server moves its cache twice (SIGUSR1):
#      every request retried, nothing lost or corrupted
#   3. three writers, one killed with SIGKILL mid-run: the server survives
#      and the other two finish clean
#   4. the whole device read back (every block whole and at its LBA);
#      the server stopped (it writes back everything), restarted on the
#      same file, and the whole device read back again
# Every wait is bounded; exit 0 pass, 1 fail, 77 skip.
set -u
MODE=${1:?usage: test_blockstore.sh tcp|shm|udp|netns}
source "$SRN_SRC/tests/lib/blockstore_lib.sh"

start_server

# 1. Two clients, mixed random I/O, each over its own range.
client basic1 --op mix --qd 8 --seconds 2 --fill --verify-end --start 0 --count 500 --writer 1
p1=$!
client basic2 --op mix --qd 1 --seconds 2 --fill --verify-end --start 500 --count 500 --writer 2
p2=$!
wait $p1; check basic1 $?
wait $p2; check basic2 $?
[ $fail -eq 0 ] && echo "ok: $MODE: reads and writes verified ($(field basic1 ops) + $(field basic2 ops) ops, $(field basic1 rdma_read_hits) RDMA Read hits)"

# 2. Four clients; the server moves its cache twice under them.
pids=()
for w in 1 2 3 4; do
	client remap$w --op mix --qd 8 --seconds 4 --fill --verify-end --start $((w * 500)) --count 500 --writer $((10 + w))
	pids+=($!)
done
sleep 1.5
kill -USR1 "$spid"
sleep 1.2
kill -USR1 "$spid"
maxms=0
for w in 1 2 3 4; do
	wait "${pids[$((w - 1))]}"
	check remap$w $? || continue
	ms=$(field remap$w reconnect_max_ms)
	maxms=$(echo "$ms $maxms" | awk '{print ($1 > $2) ? $1 : $2}')
done
moves=$(server_stats | sed -n 's/.* remaps=\([0-9]*\).*/\1/p')
if [ "${moves:-0}" -ne 2 ]; then
	echo "FAIL: $MODE: the server reports ${moves:-no} cache moves, not 2"
	tail -5 "$work/server.log"
	fail=1
elif [ "$MODE" != tcp ] && [ "$(cat "$work"/remap[1-4] | grep -c 'remaps_seen=2')" -ne 4 ]; then
	echo "FAIL: $MODE: not every client saw both new rkeys"
	cat "$work"/remap[1-4]
	fail=1
else
	echo "ok: $MODE: 2 cache moves under 4 clients, 0 lost or corrupted, slowest reconnect ${maxms} ms"
fi

# 3. Three writers; one is killed in the middle of its writes.
client kill1 --op write --qd 8 --seconds 4 --verify-end --start 3000 --count 300 --writer 21
k1=$!
client kill2 --op write --qd 8 --seconds 4 --verify-end --start 3300 --count 300 --writer 22
k2=$!
NEXT=$((NEXT + 1))
cexec "$B" bench "${TRANSPORT[@]}" --addr "$SADDR" --port "$PORT" --op write --qd 16 \
	--seconds 30 --start 3600 --count 300 --writer 23 >"$work/victim" 2>&1 &
victim=$!
sleep 1.5
kill -9 "$victim"
wait "$victim" 2>/dev/null
wait $k1; check kill1 $?
wait $k2; check kill2 $?
if ! server_stats >"$work/stats"; then
	echo "FAIL: $MODE: the server does not answer after a client was killed"
	fail=1
elif [ $fail -eq 0 ]; then
	echo "ok: $MODE: a writer killed mid-run, the other two clean, server alive ($(cat "$work/stats"))"
fi

# 4. The whole device, then again after a restart from the file.
client all1 --verify-all --qd 32
wait $!; check all1 $? && echo "ok: $MODE: whole device read back, every block whole"
kill -TERM "$spid"
for ((i = 0; i < 200; i++)); do kill -0 "$spid" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$spid" 2>/dev/null; then
	echo "FAIL: $MODE: the server did not stop within 10 s of SIGTERM"
	fail=1
fi
wait "$spid"
src=$?
spid=
if [ "$src" -ne 0 ]; then
	echo "FAIL: $MODE: server exited with $src"
	tail -5 "$work/server.log"
	fail=1
fi
start_server
client all2 --verify-all --qd 32
wait $!; check all2 $? && echo "ok: $MODE: after a restart from the file, every block whole again"
kill -TERM "$spid"
wait "$spid"
spid=
exit $fail
