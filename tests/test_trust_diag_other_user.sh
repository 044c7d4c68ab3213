#!/bin/bash
# test_trust_diag_other_user.sh - another local user gets nothing out of a
# softrnic process's diagnostic segment (issue 10, item 2): the segment
# lists every MR's address and rkey, enough to RDMA-read the region.
#
#   root:  diag_leak_prog (3 MRs) ──segment 0600──┐   dir 1777, like /dev/shm
#   65534: diag_seg_writer (its own segment) ─────┤
#   65534: cat / softrnic res|stat|explain ───────┘   sees only its own
#
# Checks: the victim's file is 0600; the other user cannot read it; its
# `softrnic res --json` and `stat --json` show only its own process, none
# of the victim's keys, and count 1 file of another user; the table output
# says "1 segment of other users not shown"; root still sees both.
# Needs root (plays uid 65534 with setpriv): skipped otherwise.
set -u
source "$SRN_SRC/tests/lib/trust_diag.sh"
srn_trust_diag_init "$SRN_BUILD/bin/diag_leak_prog" "$SRN_BUILD/bin/diag_seg_writer"
as_other() { $OTHER "$@"; }

srn_leak_prog_start
seg=$(ls "$SOFTRNIC_DIAG_DIR"/softrnic."$pid".* 2>/dev/null | head -n1)
[ -n "$seg" ] || { echo "FAIL: no segment for the victim $pid"; exit 1; }
[ "$(stat -c %a "$seg")" = 600 ] && ok "victim's segment is 0600" \
	|| fail "victim's segment mode $(stat -c %a "$seg")"
if as_other cat "$seg" >/dev/null 2>&1; then
	fail "uid 65534 read the victim's segment"
else
	ok "uid 65534 cannot open the victim's segment"
fi

# The other user's own process, with a segment of its own.
# (setpriv execs the writer: $! is the writer's pid.)
$OTHER "$SRN_BUILD/bin/diag_seg_writer" run >"$tmp/w.out" 2>"$tmp/w.err" &
wpid=$!
disown "$wpid"
trap 'kill -9 "$pid" "$wpid" 2>/dev/null; rm -rf "$tmp"' EXIT
srn_wait_ready "$tmp/w.out" "$wpid" || { echo "FAIL: writer as 65534: $(cat "$tmp/w.err")"; exit 1; }

rkeys=$(timeout 30 "$SOFTRNIC" res --dump --pid "$pid" | grep -oP '\trkey=\K\S+')
[ "$(wc -w <<<"$rkeys")" = 3 ] && ok "root sees the victim's 3 MRs" || fail "root res: $rkeys"

out=$(as_other timeout 30 "$SOFTRNIC" res --json)
rc=$?
echo "$out" >"$tmp/res.json"
if [ "$rc" = 0 ] && jq -e --argjson w "$wpid" '(.devices | length) == 1 and .devices[0].pid == $w
	and .other_users_files == 1' <<<"$out" >/dev/null; then
	ok "res --json as 65534: only its own process, 1 file of another user counted"
else
	fail "res --json as 65534 (rc $rc): $out"
fi
leak=0
for k in $rkeys; do
	grep -q "$((k))" "$tmp/res.json" && leak=1
done
grep -q "\"pid\":$pid," "$tmp/res.json" && leak=1
[ "$leak" = 0 ] && ok "nothing of the victim in the other user's res" \
	|| fail "victim's pid or rkeys in: $out"

out=$(as_other timeout 30 "$SOFTRNIC" stat --json)
jq -e --argjson w "$wpid" '(.devices | map(.pid)) == [$w] and .other_users_files == 1' \
	<<<"$out" >/dev/null && ok "stat --json as 65534" || fail "stat --json as 65534: $out"
out=$(as_other timeout 30 "$SOFTRNIC" res 2>&1)
grep -q "1 segment of other users not shown" <<<"$out" && ok "res table says so" \
	|| fail "res table as 65534: $out"
out=$(as_other timeout 30 "$SOFTRNIC" explain 2>&1)
grep -q "1 segment of other users not shown" <<<"$out" && ! grep -q "pid $pid " <<<"$out" \
	&& ok "explain as 65534" || fail "explain as 65534: $out"
out=$(as_other timeout 30 "$SOFTRNIC" stat --cleanup 2>&1)
[ -e "$seg" ] && ok "65534's --cleanup leaves the victim's file" || fail "victim's file gone: $out"

out=$(timeout 30 "$SOFTRNIC" res --json)
jq -e '(.devices | length) == 2 and .other_users_files == 0' <<<"$out" >/dev/null \
	&& ok "root sees both processes" || fail "root res --json: $out"
exit $bad
