#!/bin/bash
# test_nvmf_inval.sh MODE - NVMe/RDMA keyed SGLs that ask for
# invalidation (subtype 0xF, as the Linux host sends them), end to end:
# `softrnic-nvmf perf --invalidate` binds a type-2 memory window per
# command over its data buffer, names it in the SGL, and checks that
# every response is a Send with Invalidate naming that window's key.
#
#   perf (softrnic run) ---- capsule: keyed SGL 0x4f, window rkey K ---->  target
#        window K bound  <--- RDMA Write (read data) / RDMA Read (write) -- (softrnic run)
#        K now invalid   <--- Send with Invalidate K (the response) -----
#
#   shm   softrnic's same-host rings, target --poll
#   udp   SOFTRNIC_SHM=0: RoCEv2 over UDP loopback, target event-driven
#
# Checks, each bounded in time:
#   1. random reads and writes with no in-capsule data (every command
#      keyed), QD 1 and QD 32 on 2 queues: the result line says errors=0,
#      verify_fail=0 (every read checked), inv_fail=0, and invalidated=
#      the number of I/Os (each response invalidated its window)
#   2. the same at QD 32 with in-capsule writes: invalidated= the reads
#      (a write in the capsule has no key, and its response must not
#      invalidate anything)
#   3. after each run perf names a just-invalidated key in a read: the
#      target's RDMA Write to it must fail ("stale_key ok": no status
#      comes back), and perf's NIC must have NAKed it with a remote
#      access error (SOFTRNIC_STATS: resp_remote_access_errors)
#   4. the target, whose queues those reads ended, still serves a plain run
# Exit 0 pass, 1 fail, 77 skip.
set -u
MODE=${1:?usage: test_nvmf_inval.sh shm|udp}
N=$SRN_BUILD/bin/softrnic-nvmf
SR=$SRN_BUILD/bin/softrnic
[ -x "$N" ] || { echo "SKIP: softrnic-nvmf not built (libibverbs-dev/librdmacm-dev missing)"; exit 77; }
work=$(mktemp -d)
fail=0 tpid=
trap '[ -n "$tpid" ] && kill -9 $tpid 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
envs=()
[ -n "${SRN_ASAN_PRELOAD:-}" ] && envs=(LD_PRELOAD="$SRN_ASAN_PRELOAD" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1)
case $MODE in
shm) shm=1 TARGS=(--poll) ;;
udp) shm=0 TARGS=() ;;
*) echo "unknown mode $MODE"; exit 2 ;;
esac
A=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
H=nqn.2014-08.org.softrnic:test:inv-host S=nqn.2014-08.org.softrnic:test:inv

# target_up: a target on a random port; 0 once its pidfile is written
# (5 s at most), else it is killed.  `softrnic run` execs: $! is the target.
target_up() {
	PORT=$((20000 + RANDOM % 12000))
	rm -f "$work/pid"
	env "${envs[@]}" SOFTRNIC_SHM=$shm SOFTRNIC_DEVICES="name=softrnic0,addr=$A" "$SR" run -- \
		"$N" target --addr "$A" --port "$PORT" "${TARGS[@]}" --pidfile "$work/pid" \
		--subsys $S --ns ram:16M --allow-host $H >>"$work/target.log" 2>&1 &
	tpid=$!
	local i=0
	until [ -s "$work/pid" ]; do
		if ! kill -0 $tpid 2>/dev/null || ((++i > 100)); then
			kill -9 $tpid 2>/dev/null
			wait $tpid 2>/dev/null
			tpid=
			return 1
		fi
		sleep 0.05
	done
}
# A port another test holds makes the target exit at once: try others.
target_up || target_up || target_up ||
	{ echo "FAIL: $MODE: target did not start"; cat "$work/target.log"; exit 1; }

# run_perf NAME ARGS...: one bounded perf run (counters at exit), output in
# $work/NAME.  Spin 50 us, then sleep: two spinning processes on a loaded
# 2-CPU machine take turns by the scheduler's tick.
run_perf() {
	local name=$1
	shift
	timeout -k 5 30 env "${envs[@]}" SOFTRNIC_SHM=$shm SOFTRNIC_STATS=1 \
		SOFTRNIC_DEVICES="name=softrnic0,addr=auto,share=0" "$SR" run -- \
		"$N" perf -t rdma --addr "$A" --port "$PORT" --subnqn $S --hostnqn $H \
		--spin-us 50 "$@" >"$work/$name" 2>&1
}
field() { # FILE NAME: NAME's value on the result line
	sed -n "s/^result .* $2=\([0-9]*\).*/\1/p" "$1"
}
# inv_ok NAME WANT ARGS...: a perf --invalidate run whose invalidated=
# count equals the result line's field WANT (ios or reads)
inv_ok() {
	local name=$1 want=$2
	shift 2
	run_perf "$name" --invalidate "$@"
	local rc=$? f=$work/$name why=
	local inv ref
	inv=$(field "$f" invalidated)
	ref=$(field "$f" "$want")
	if [ $rc -ne 0 ]; then
		why="rc=$rc"
	elif ! grep -q "^result .* errors=0 verify_fail=0 invalidated=[0-9]* inv_fail=0$" "$f"; then
		why="errors on the result line"
	elif [ -z "$inv" ] || [ "$inv" = 0 ] || [ "$inv" != "$ref" ]; then
		why="invalidated=$inv, $want=$ref"
	elif ! grep -q "^stale_key ok" "$f"; then
		why="a read with an invalidated key was not refused"
	elif ! grep -Eq "resp_remote_access_errors +[1-9]" "$f"; then
		why="no remote access NAK for the invalidated key"
	fi
	if [ -n "$why" ]; then
		echo "FAIL: $MODE: $name: $why"
		cat "$f"
		fail=1
		return 1
	fi
	echo "ok: $MODE: $name: invalidated=$inv = $want," \
		"$(sed -n 's/^result .*\(p50_us=[^ ]*\).*/\1/p' "$f"); $(grep "^stale_key" "$f")"
}

# 1. every command keyed, each response a Send with Invalidate
inv_ok qd1 ios --op rw --qd 1 --no-incap --seconds 2
inv_ok qd32 ios --op rw --qd 32 --queues 2 --no-incap --seconds 2
# 2. writes in the capsule: only the reads name a window
inv_ok qd32_incap reads --op rw --qd 32 --seconds 1
# 4. the target served on past the queues that ended
run_perf after --op rw --qd 1 --seconds 0.3
if ! grep -q "^result .* errors=0 verify_fail=0$" "$work/after"; then
	echo "FAIL: $MODE: a plain run after the stale-key checks"
	cat "$work/after"
	fail=1
else
	echo "ok: $MODE: the target still serves"
fi
kill -0 $tpid 2>/dev/null || { echo "FAIL: $MODE: target died"; fail=1; }
[ $fail -ne 0 ] && { echo "--- target log"; cat "$work/target.log"; }
exit $fail
