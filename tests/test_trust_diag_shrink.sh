#!/bin/bash
# test_trust_diag_shrink.sh - a segment that shrinks while the tools read
# it never kills them with SIGBUS (issue 10, item 3: seen 10 times in 600
# `softrnic stat` runs when the tools mapped the file).
#
#   diag_seg_writer exit ──> segment (kept: it logged an error)
#   test_trust_diag_shrinker: cut to 4096 bytes, restore, cut, ... ──┐
#   softrnic res --json | stat --qp all | explain --qp-log, in turn ──┘
#
# Checks: over at most 300 runs (or 40 s) no tool run ends by a signal;
# at least one run saw the segment whole (so the reading path was taken,
# not only the "wrong size" refusal).
set -u
source "$SRN_SRC/tests/lib/diag.sh"
SHRINKER="$SRN_BUILD/bin/test_trust_diag_shrinker"
srn_diag_test_init "$SRN_BUILD/bin/diag_seg_writer" "$SHRINKER"
unset SOFTRNIC_LOG
"$SRN_BUILD/bin/diag_seg_writer" exit || { echo "FAIL: diag_seg_writer exit"; exit 1; }
seg=$(ls "$SOFTRNIC_DIAG_DIR"/softrnic.*.fakedev 2>/dev/null | head -n1)
[ -n "$seg" ] || { echo "FAIL: no segment kept"; exit 1; }
pid=${seg#*/softrnic.}; pid=${pid%%.*}

"$SHRINKER" "$seg" 4096 45 >"$tmp/shrinker.out" &
spid=$!
trap 'kill "$spid" 2>/dev/null; rm -rf "$tmp"' EXIT
cmds=("res --json" "stat --qp all --json" "explain --qp-log 0xa001")
signals=0 whole=0 runs=0
end=$((SECONDS + 40))
while [ "$runs" -lt 300 ] && [ "$SECONDS" -lt "$end" ]; do
	cmd=${cmds[$((runs % 3))]}
	# shellcheck disable=SC2086  # $cmd is words
	timeout 10 "$SRN_BUILD/bin/softrnic" $cmd --pid "$pid" >"$tmp/out" 2>/dev/null
	rc=$?
	runs=$((runs + 1))
	if [ "$rc" -gt 128 ] || [ "$rc" = 124 ]; then
		signals=$((signals + 1))
		echo "softrnic $cmd: rc $rc"
	fi
	grep -q '"dev":"fakedev"\|qp 0x00a001  pid' "$tmp/out" && whole=$((whole + 1))
done
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
[ "$signals" = 0 ] && ok "$runs runs, none ended by a signal" \
	|| fail "$signals of $runs runs ended by a signal (SIGBUS is rc 135)"
[ "$whole" -gt 0 ] && ok "$whole runs read the segment whole" \
	|| fail "no run saw the segment whole: the test did not test reading"
exit $bad
