# shellcheck shell=bash disable=SC2034  # $bad and $tmp are for the sourcing test
# Sourceable bash library for the tests of the diagnostic tools
# (test_stat.sh, test_res.sh, test_diag_tools.sh).
#
#   source "$SRN_SRC/tests/lib/diag.sh"
#   srn_diag_test_init "$SRN_BUILD/bin/diag_leak_prog"
#   srn_leak_prog_start         # $pid: a live process with segments
#
# srn_diag_test_init BIN...: the softrnic tool ($SOFTRNIC) and each BIN
# must be built (FAIL otherwise), jq installed (SKIP otherwise).  Defines
# fail/ok (a failure sets $bad; every check still runs), makes $tmp, points
# SOFTRNIC_DIAG_DIR at a fresh directory in it, and removes $tmp on exit.
srn_diag_test_init() {
	: "${SRN_BUILD:?SRN_BUILD must point at the build directory}"
	SOFTRNIC="$SRN_BUILD/bin/softrnic"
	for b in "$SOFTRNIC" "$@"; do
		[ -x "$b" ] || { echo "FAIL: $b not built"; exit 1; }
	done
	command -v jq >/dev/null || { echo "SKIP: jq not installed"; exit 77; }
	bad=0
	tmp=$(mktemp -d)
	export SOFTRNIC_DIAG_DIR="$tmp/shm"
	mkdir "$SOFTRNIC_DIAG_DIR"
	trap 'rm -rf "$tmp"' EXIT
}
fail() { echo "FAIL: $*"; bad=1; }
ok() { echo "ok: $*"; }

# srn_leak_prog_start: run diag_leak_prog (PD, 3 MRs, CQ, RC QP, then
# sleeps) in the background with the default device; $pid is its PID, its
# stdout is in $tmp/prog.out.  Waits at most 10 s for its "ready PID" line;
# the process is killed on exit.
srn_leak_prog_start() {
	unset SOFTRNIC_DEVICES SOFTRNIC_CONFIG SOFTRNIC_DIAG SOFTRNIC_LOG
	"$SRN_BUILD/bin/diag_leak_prog" >"$tmp/prog.out" 2>"$tmp/prog.err" &
	pid=$!
	disown "$pid"   # no "Killed" notice from bash when the test kills it
	trap 'kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
	for _ in $(seq 100); do
		grep -q ready "$tmp/prog.out" 2>/dev/null && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	grep -q "ready $pid" "$tmp/prog.out" || {
		echo "FAIL: diag_leak_prog did not start: $(cat "$tmp/prog.err")"
		exit 1
	}
}
