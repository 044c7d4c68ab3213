#!/bin/bash
# Per-namespace state goes with its last user (issue 26, item 5;
# link/rundir.h).  After one suite run /dev/shm held 98 group and CM files
# of network namespaces that no longer existed.  Three throwaway
# namespaces (tests/lib/squat.sh's setup, root only):
#
#   A  Debian's ibv_rc_pingpong, two processes sharing 127.0.0.1, and
#      rping through rdma_cm (server on 127.0.0.3): once all exited normally and A is gone, no
#      group, CM or inbox file of A is left in /dev/shm (nor under
#      $XDG_RUNTIME_DIR, which is unset here).
#   B  the same servers killed with SIGKILL while they wait: their files
#      stay (nobody left to remove them) ...
#   C  ... until the next process of the user that uses them runs, here
#      the same pair in C: then nothing of B is left either.
#
# /dev/shm/softrnic-cmsteer-* (cm/steer.c) is not looked at: that file's
# mechanism is being replaced.
set -u
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }
command -v rping >/dev/null || { echo "SKIP: rdmacm-utils not installed"; exit 77; }
source "$SRN_SRC/tests/lib/squat.sh"
sq_setup
fail=0
bad() { echo "FAIL: $*"; fail=1; }
nsb="" nsc=""
trap 'ip netns del "$nsb" 2>/dev/null; ip netns del "$nsc" 2>/dev/null; sq_cleanup' EXIT

# left NET: the softrnic names of network namespace NET (hex inode) in /dev/shm.
left() {
	# shellcheck disable=SC2010
	ls /dev/shm | grep -E "^softrnic-(grp|cm|inbox)-$(id -u)-$1(\.alt[0-9])?\$|^softrnic-link-$1-"
}

# workload NS KILL: the pingpong pair on one shared address and an rping
# pair in NS; KILL=1: only the servers, killed with SIGKILL while waiting.
workload() {
	local ns=$1 kill=$2 tcp port e p1 p2
	tcp=$((20000 + RANDOM % 12000)) port=$((20000 + RANDOM % 12000))
	# shellcheck disable=SC2207
	e=(ip netns exec "$ns" env $(sq_env))
	if [ "$kill" = 1 ]; then
		"${e[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=127.0.0.1" timeout -s KILL 3 \
			ibv_rc_pingpong -p "$tcp" -g 0 >"$SQ_W/$ns.pp" 2>&1 &
		p1=$!
		"${e[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=127.0.0.3" timeout -s KILL 3 \
			rping -s -a 127.0.0.3 -p "$port" >"$SQ_W/$ns.rp" 2>&1 &
		p2=$!
		{ wait $p1 $p2; } 2>/dev/null
		return
	fi
	"${e[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=127.0.0.1" timeout -k 5 30 \
		ibv_rc_pingpong -p "$tcp" -g 0 -n 100 >"$SQ_W/$ns.s" 2>&1 &
	p1=$!
	"${e[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=127.0.0.3" timeout -k 5 30 \
		rping -s -a 127.0.0.3 -p "$port" -C 2 >"$SQ_W/$ns.rs" 2>&1 &
	p2=$!
	local i
	for ((i = 0; i < 200; i++)); do
		ip netns exec "$ns" ss -Hltn "sport = :$tcp" | grep -q . && break
		sleep 0.05
	done
	sleep 0.3
	"${e[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=127.0.0.1" timeout -k 5 30 \
		ibv_rc_pingpong -p "$tcp" -g 0 -n 100 127.0.0.1 >"$SQ_W/$ns.c" 2>&1 ||
		bad "$ns: pingpong client: $(tail -n 3 "$SQ_W/$ns.c")"
	"${e[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=127.0.0.2" timeout -k 5 30 \
		rping -c -a 127.0.0.3 -p "$port" -C 2 >"$SQ_W/$ns.rc" 2>&1 ||
		bad "$ns: rping client: $(tail -n 3 "$SQ_W/$ns.rc")"
	wait $p1 || bad "$ns: pingpong server: $(tail -n 3 "$SQ_W/$ns.s")"
	wait $p2 || bad "$ns: rping server: $(tail -n 3 "$SQ_W/$ns.rs")"
}

# A: normal exits.
net_a=$SQ_NET
workload "$SQ_NS" 0
ip netns del "$SQ_NS"
SQ_NS=""
l=$(left "$net_a")
if [ -z "$l" ]; then
	echo "ok: A. nothing of namespace $net_a left after its processes exited"
else
	bad "A: files of dead namespace $net_a left: $l"
fi

# B: killed.
nsb=srn-clean-b-$$
ip netns add "$nsb" && ip -n "$nsb" link set lo up
net_b=$(printf %x "$(stat -L -c %i "/run/netns/$nsb")")
workload "$nsb" 1
ip netns del "$nsb"
nsb=""
echo "B. left by the killed processes of namespace $net_b: $(left "$net_b" | tr '\n' ' ')"

# C: the next user of the same kinds reclaims B's.
nsc=srn-clean-c-$$
ip netns add "$nsc" && ip -n "$nsc" link set lo up
net_c=$(printf %x "$(stat -L -c %i "/run/netns/$nsc")")
workload "$nsc" 0
ip netns del "$nsc"
nsc=""
l=$(left "$net_b"; [ "$net_c" != "$net_b" ] && left "$net_c")
if [ -z "$l" ]; then
	echo "ok: C. nothing of namespaces $net_b (killed) and $net_c left"
else
	bad "C: files of dead namespaces left: $l"
fi
exit $fail
