#!/bin/bash
# A forked child keeps none of the device's sockets (link/fork_drop.h).
#
# fork_keeper opens its device on a shared address, forks a child that
# lives on without exec, closes the device and exits.  Before the fix the
# child's copy kept the socket in the address's SO_REUSEPORT group after
# the members' order file said it left: the steering program then sent
# the next member's packets into it, unread, and an ibv_rc_pingpong pair
# started next on that address failed (reproduced every time).  Checks:
#   - the child holds no socket (fork_keeper reports what it holds);
#   - a pingpong pair on the shared address, started after the keeper
#     left, finishes while the child still lives (UDP and the rings);
#   - with share=0 the address is free again at once: a new process binds
#     it while the child lives.
# Exit 0 pass, 1 fail, 77 skip.
set -u
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }
SR=$SRN_BUILD/bin/softrnic
KEEPER=$SRN_BUILD/bin/fork_keeper
envs=()
[ -n "${SRN_ASAN_PRELOAD:-}" ] && envs=(LD_PRELOAD="$SRN_ASAN_PRELOAD" ASAN_OPTIONS=detect_leaks=0)
tmp=$(mktemp -d)
children=()
cleanup() {
	for c in "${children[@]}"; do kill "$c" 2>/dev/null; done
	pkill -P $$ 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
fail=0

# keeper DEVICES: run fork_keeper on those devices; sets $child (its
# child's pid, added to $children) and $held (the sockets the child holds).
keeper() {
	local out
	out=$(env "${envs[@]}" SOFTRNIC_DEVICES="$1" timeout -k 5 30 "$SR" run -- "$KEEPER" 60) ||
		{ echo "FAIL: fork_keeper ($1)"; return 1; }
	read -r child held <<<"$(echo "$out" | tail -1)"
	children+=("$child")
	if [ "$held" = 0 ]; then
		echo "ok: $1: the forked child holds no socket"
	else
		echo "FAIL: $1: the forked child holds $held socket(s)"
		fail=1
	fi
}

for shm in 0 1; do
	X=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
	dev="name=softrnic0,addr=$X"
	port=$((20000 + RANDOM % 12000))
	# A member that stays, joined before the keeper (so the keeper is not
	# last in the group's order: the case where a later member's packets
	# went astray).
	env "${envs[@]}" SOFTRNIC_DEVICES="$dev" SOFTRNIC_SHM=$shm timeout -k 5 60 \
		"$SR" run -- ibv_rc_pingpong -g 0 -p $((port + 1)) -n 100000 >/dev/null 2>&1 &
	sleep 0.5
	SOFTRNIC_SHM=$shm keeper "$dev" || { fail=1; continue; }
	env "${envs[@]}" SOFTRNIC_DEVICES="$dev" SOFTRNIC_SHM=$shm timeout -k 5 30 \
		"$SR" run -- ibv_rc_pingpong -g 0 -p "$port" -n 500 >"$tmp/s$shm" 2>&1 &
	s=$!
	sleep 0.5
	env "${envs[@]}" SOFTRNIC_DEVICES="$dev" SOFTRNIC_SHM=$shm timeout -k 5 30 \
		"$SR" run -- ibv_rc_pingpong -g 0 -p "$port" -n 500 "$X" >"$tmp/c$shm" 2>&1
	crc=$?
	wait "$s"
	src=$?
	if [ "$crc" = 0 ] && [ "$src" = 0 ]; then
		echo "ok: shm=$shm: a pingpong pair on the shared address beside the keeper's child"
	else
		echo "FAIL: shm=$shm: pingpong client $crc, server $src"
		tail -n 3 "$tmp/c$shm" "$tmp/s$shm"
		fail=1
	fi
	if ! kill -0 "$child" 2>/dev/null; then
		echo "FAIL: shm=$shm: the keeper's child is gone: the pingpong did not run beside it"
		fail=1
	fi
done

# share=0: the address is free for the next process while the child lives.
Y=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
if keeper "name=softrnic0,addr=$Y,share=0"; then
	if env "${envs[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=$Y,share=0" timeout -k 5 30 \
		"$SR" run -- ibv_devinfo >"$tmp/d" 2>&1; then
		echo "ok: share=0: the address binds again while the keeper's child lives"
	else
		echo "FAIL: share=0: the address is still taken"
		tail -n 3 "$tmp/d"
		fail=1
	fi
else
	fail=1
fi
exit $fail
