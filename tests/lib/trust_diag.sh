# shellcheck shell=bash disable=SC2034  # $OTHER is for the sourcing test
# Sourceable bash library for the trust tests of the diagnostic segments
# (tests/trust_diag.cmake), on top of tests/lib/diag.sh.
#
#   source "$SRN_SRC/tests/lib/trust_diag.sh"
#   srn_trust_diag_init BIN...  # root and setpriv, else SKIP; then
#                               # srn_diag_test_init BIN..., the segment
#                               # directory shared like /dev/shm (1777,
#                               # reachable by others); $OTHER prefixes a
#                               # command to run it as uid 65534
#   srn_wait_ready FILE PID     # waits at most 10 s for "ready PID" in
#                               # FILE; fails (1) when it did not come
source "$SRN_SRC/tests/lib/diag.sh"

srn_trust_diag_init() {
	[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to play another user"; exit 77; }
	command -v setpriv >/dev/null || { echo "SKIP: setpriv not installed"; exit 77; }
	srn_diag_test_init "$@"
	chmod 755 "$tmp"
	chmod 1777 "$SOFTRNIC_DIAG_DIR"
	OTHER="setpriv --reuid=65534 --regid=65534 --clear-groups"
}

srn_wait_ready() {
	for _ in $(seq 100); do
		grep -q ready "$1" 2>/dev/null && break
		kill -0 "$2" 2>/dev/null || break
		sleep 0.1
	done
	grep -q "ready $2" "$1"
}
