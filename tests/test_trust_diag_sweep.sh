#!/bin/bash
# test_trust_diag_sweep.sh - dead processes' segments stay bounded, and a
# segment costs memory for what it holds only (issue 10, "Also": 44 files,
# 88 MB of RAM in /dev/shm after a day of test runs).
#
#   tmpfs dir (1777) ── diag_leak_prog (live, root)
#                    ── 12 x diag_seg_writer exit (dead, kept: errors)
#                    ── planted: 65534's file, 65534's FIFO, our non-segment
#
# Checks: after 12 processes each opened a device and died, 9 of their
# segments remain (each open keeps the newest 8 dead ones, then dies
# itself), and they are the newest; the live process's segment and the
# planted files are untouched.  Then sizes: `softrnic res`, `stat --qp
# all` and `explain --qp-log` read the live segment (every slot) without
# allocating a single page of it (st_blocks unchanged; a reader that maps
# the file allocates every tmpfs page it touches, 2 MB per segment), and
# the segment holds under 256 KB.
set -u
source "$SRN_SRC/tests/lib/trust_diag.sh"
[ -d /dev/shm ] && [ "$(stat -f -c %T /dev/shm)" = tmpfs ] || { echo "SKIP: no tmpfs /dev/shm"; exit 77; }
srn_trust_diag_init "$SRN_BUILD/bin/diag_leak_prog" "$SRN_BUILD/bin/diag_seg_writer"
# On tmpfs, where a touched page is a page of RAM.
D=$(mktemp -d -p /dev/shm srn-sweep-test.XXXXXX)
trap 'rm -rf "$tmp" "$D"' EXIT
chmod 1777 "$D"
export SOFTRNIC_DIAG_DIR=$D

srn_leak_prog_start
trap 'kill -9 "$pid" 2>/dev/null; rm -rf "$tmp" "$D"' EXIT
live=$(ls "$D"/softrnic."$pid".* | head -n1)

$OTHER sh -c "echo theirs >'$D/softrnic.99999.theirs'; mkfifo '$D/softrnic.99998.fifo'"
echo "not a segment" >"$D/softrnic.99997.mine"
pids=()
for i in $(seq 12); do
	"$SRN_BUILD/bin/diag_seg_writer" exit >/dev/null 2>"$tmp/w.err" \
		|| { echo "FAIL: diag_seg_writer run $i: $(cat "$tmp/w.err")"; exit 1; }
	newest=$(ls -t "$D"/softrnic.*.fakedev | head -n1)
	newest=${newest#"$D"/softrnic.}
	pids+=("${newest%.fakedev}")
done
dead=("$D"/softrnic.*.fakedev)
left=${#dead[@]}
[ "$left" = 9 ] && ok "12 dead segments swept to 9" || fail "$left dead segments left: $(ls "$D")"
newest_kept=1
for p in "${pids[@]:3}"; do
	[ -e "$D/softrnic.$p.fakedev" ] || newest_kept=0
done
[ "$newest_kept" = 1 ] && ok "the newest 9 are kept" || fail "kept: $(ls "$D"), newest: ${pids[*]:3}"
[ -e "$live" ] && ok "the live process's segment stays" || fail "live segment $live removed"
[ -f "$D/softrnic.99999.theirs" ] && [ -p "$D/softrnic.99998.fifo" ] && [ -f "$D/softrnic.99997.mine" ] \
	&& ok "other users' files, FIFOs and non-segments untouched" || fail "planted files: $(ls -l "$D")"
rm -f "$D"/softrnic.9999?.*   # (test_trust_diag_planted.sh covers the tools against FIFOs)

blocks() { stat -c %b "$live"; }
before=$(blocks)
for cmd in "res" "stat --qp all" "explain --qp-log 1" "res --json"; do
	# shellcheck disable=SC2086  # $cmd is words
	timeout 10 "$SOFTRNIC" $cmd >/dev/null 2>&1
done
after=$(blocks)
[ "$after" = "$before" ] && ok "reading every slot allocated nothing ($after blocks)" \
	|| fail "the tools made the segment grow from $before to $after 512-byte blocks"
kb=$(( $(blocks) / 2 ))
size=$(stat -c %s "$live")
[ "$kb" -lt 256 ] && ok "the segment holds $kb KB (of $((size / 1024)) KB sparse)" \
	|| fail "the segment holds $kb KB"
exit $bad
