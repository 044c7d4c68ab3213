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
B=$SRN_BUILD/bin/blockstore
SR=$SRN_BUILD/bin/softrnic
[ -x "$B" ] || { echo "SKIP: blockstore not built (libibverbs-dev/librdmacm-dev missing)"; exit 77; }
work=$(mktemp -d)
fail=0
spid=

cleanup() {
	[ -n "$spid" ] && kill -9 "$spid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$work"
}

envs=()
[ -n "${SRN_ASAN_PRELOAD:-}" ] && envs=(LD_PRELOAD="$SRN_ASAN_PRELOAD" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1)
SPRE=() TRANSPORT=() shm=1
case $MODE in
tcp)
	SADDR=127.0.0.1
	TRANSPORT=(--tcp)
	;;
shm | udp)
	SADDR=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
	[ "$MODE" = udp ] && shm=0
	SPRE=(env "${envs[@]}" SOFTRNIC_SHM=$shm SOFTRNIC_DEVICES="name=softrnic0,addr=$SADDR" "$SR" run --)
	;;
netns)
	source "$SRN_SRC/tests/lib/netns.sh"
	srn_netns_require_root
	srn_netns_setup
	srn_netns_at_exit cleanup
	SADDR=$ADDR_A
	SPRE=(ip netns exec "$NS_A" env "${envs[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=$ADDR_A" "$SR" run --)
	# Each client process owns UDP port 4791 on an address of its own.
	for ((i = 20; i < 30; i++)); do
		ip -n "$NS_B" addr add "10.77.0.$i/24" dev "$IF_B" || exit 1
	done
	;;
*) echo "unknown mode $MODE"; exit 2 ;;
esac
NEXT=0

# cexec PROG ARGS...: exec PROG as a client-side process (run it in the
# background or in a subshell).  `softrnic run` and `ip netns exec` exec
# too, so $! of `cexec ... &` is the program itself.
cexec() {
	case $MODE in
	tcp) exec "$@" ;;
	shm | udp) exec env "${envs[@]}" SOFTRNIC_SHM=$shm "$SR" run -- "$@" ;;
	netns)
		local a=10.77.0.$((20 + NEXT % 10))
		exec ip netns exec "$NS_B" env "${envs[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=$a" \
			"$SR" run -- "$@" --src "$a" ;;
	esac
}
[ "$MODE" = netns ] || trap cleanup EXIT

# start_server: on a free port (a few tries), wait for its pidfile.
start_server() {
	local try i
	for ((try = 0; try < 5; try++)); do
		PORT=$((20000 + RANDOM % 12000))
		rm -f "$work/pid"
		# `softrnic run` and `ip netns exec` exec the program: $! is the server.
		"${SPRE[@]}" "$B" server "${TRANSPORT[@]}" --addr "$SADDR" --port "$PORT" \
			--dev "$work/dev.img" --blocks 4096 --slots 6144 --pidfile "$work/pid" \
			>>"$work/server.log" 2>&1 &
		spid=$!
		for ((i = 0; i < 200; i++)); do
			[ -s "$work/pid" ] && return 0
			kill -0 "$spid" 2>/dev/null || break
			sleep 0.05
		done
		kill -9 "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
		spid=
	done
	echo "FAIL: $MODE: server did not start"
	cat "$work/server.log"
	exit 1
}

# client NAME ARGS...: one bench process in the background, output in $work/NAME.
client() {
	local name=$1
	shift
	NEXT=$((NEXT + 1))
	cexec timeout -k 5 120 "$B" bench "${TRANSPORT[@]}" --addr "$SADDR" --port "$PORT" \
		"$@" >"$work/$name" 2>&1 &
}

# check NAME RC: the client exited 0 and printed a clean result line.
check() {
	local name=$1 rc=$2
	if [ "$rc" -ne 0 ] || ! grep -q "^result .* errors=0 verify_fail=0 " "$work/$name"; then
		echo "FAIL: $MODE: client $name (rc=$rc)"
		cat "$work/$name"
		fail=1
		return 1
	fi
	return 0
}

field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" "$work/$1" | head -1; }

server_stats() {
	NEXT=$((NEXT + 1))
	(cexec timeout -k 5 30 "$B" stats "${TRANSPORT[@]}" --addr "$SADDR" --port "$PORT")
}

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
