# shellcheck shell=bash
# Sourceable bash library for the squat tests (tests/test_trust_squat_*.sh,
# link/rundir.h): another user (uid 65534) creates our per-user names in
# /dev/shm first, then we run a real workload.
#
#   host (root)
#   +-- netns $SQ_NS (throwaway, lo up): its inode $SQ_NET names the
#       per-namespace directories, so no other test's files are involved
#
#   sq_setup                 skip (77) unless root with setpriv and ip;
#                            $SQ_W work dir, $SQ_NS up, $SQ_XDG a private
#                            runtime directory (0700, ours) for the victim
#   sq_squat PATH...         uid 65534 makes each PATH a directory of its
#                            own, mode 0777, before we run (anything there
#                            before is removed first); removed at exit
#   sq_env                   the environment every victim process gets
#   sq_run LOG T CMD...      CMD in the namespace with sq_env, bounded by T s,
#                            in the background (pid in $sq_bg), as uid
#                            $SQ_UID (default: ours)
#   sq_wait_listen PORT      bounded wait for a TCP listener in the namespace
#   sq_counter LOG NAME      a SOFTRNIC_STATS=1 counter from LOG
#
# SQ_KEEP=1 keeps the work directory (the logs) for a look afterwards.
#
# Under the ASan build (SRN_ASAN_PRELOAD) the uninstrumented Debian
# programs get the ASan runtime first (their leaks are theirs: not checked).

SOFTRNIC=${SOFTRNIC:-$SRN_BUILD/bin/softrnic}
SQ_ATTACKER=(setpriv --reuid=65534 --regid=65534 --clear-groups)
sq_squatted=()
sq_bg=""

sq_cleanup() {
	[ -n "$sq_bg" ] && kill "$sq_bg" 2>/dev/null
	local p
	for p in "${sq_squatted[@]}"; do
		rm -rf "$p"
	done
	[ -n "${SQ_NS:-}" ] && ip netns del "$SQ_NS" 2>/dev/null
	[ -n "${SQ_W:-}" ] && [ -z "${SQ_KEEP:-}" ] && rm -rf "$SQ_W"
}

sq_setup() {
	[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (plays uid 65534)"; exit 77; }
	command -v setpriv >/dev/null || { echo "SKIP: no setpriv"; exit 77; }
	command -v ip >/dev/null || { echo "SKIP: no ip"; exit 77; }
	SQ_W=$(mktemp -d)
	SQ_NS=srn-squat-$$-$RANDOM
	trap sq_cleanup EXIT
	ip netns add "$SQ_NS" || { echo "SKIP: cannot create a network namespace"; exit 77; }
	ip -n "$SQ_NS" link set lo up
	# shellcheck disable=SC2034  # for the tests that source this
	SQ_NET=$(printf %x "$(stat -L -c %i "/run/netns/$SQ_NS")")
	SQ_XDG=$SQ_W/xdg
	mkdir -m 0700 "$SQ_XDG"
	unset XDG_RUNTIME_DIR
}

sq_squat() {
	local p
	for p in "$@"; do
		# Whatever is there belongs to a dead namespace that had our
		# namespace's inode number (or to an earlier run of a test).
		rm -rf "$p"
		"${SQ_ATTACKER[@]}" mkdir -m 0777 "$p" || { echo "FAIL: uid 65534 could not create $p"; exit 1; }
		sq_squatted+=("$p")
	done
}

sq_env() {
	echo "LD_LIBRARY_PATH=$SRN_BUILD/lib SOFTRNIC_LOG=warn SOFTRNIC_STATS=1"
	if [ -n "${SRN_ASAN_PRELOAD:-}" ]; then
		echo "LD_PRELOAD=$SRN_ASAN_PRELOAD ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"
	fi
}

sq_run() {
	local log=$1 t=$2
	shift 2
	local -a as=()
	[ "${SQ_UID:-0}" -ne 0 ] && as=(setpriv --reuid="$SQ_UID" --regid="$SQ_UID" --clear-groups)
	# shellcheck disable=SC2046
	ip netns exec "$SQ_NS" "${as[@]}" env $(sq_env) timeout -k 5 "$t" "$@" >"$log" 2>&1 &
	sq_bg=$!
}

sq_wait_listen() {
	local i
	for ((i = 0; i < 200; i++)); do
		ip netns exec "$SQ_NS" ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return 0
		sleep 0.05
	done
	return 1
}

sq_counter() {
	awk -v n="$2" '$1 == "softrnic" && $3 == n { v = $4 } END { print v + 0 }' "$1"
}
