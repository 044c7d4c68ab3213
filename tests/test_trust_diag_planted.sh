#!/bin/bash
# test_trust_diag_planted.sh - what another user plants in the segment
# directory neither hangs nor fools softrnic (issue 10, items 2 and 3).
#
#   65534: mkfifo softrnic.<victim pid>.softrnic0 ──┐  dir 1777, like /dev/shm
#          mkfifo softrnic.7.x, a symlink ──────────┤
#   root:  diag_leak_prog (ibv_open_device) ────────┤  must start, say why,
#          softrnic stat/res/explain/--cleanup ─────┘  and never block
#
# Checks: a FIFO planted at the victim's future segment path (the victim
# is started by a shell that plants it for its own pid, then execs) does
# not hang ibv_open_device; the device log says the name was taken by a
# FIFO of uid 65534 and which name was used instead; the FIFO is left
# alone; the tools read the segment under that name.  A FIFO named
# softrnic.N.x hangs none of stat, res, explain, explain --qp-log and
# stat --cleanup (as root and as 65534), and is left alone.  A
# SOFTRNIC_DIAG_DIR another user owns, or one writable by all and not
# sticky, gets no file, and the reason is given.  Every command runs under
# `timeout`: a hang is a failure, not a stuck test.
set -u
source "$SRN_SRC/tests/lib/trust_diag.sh"
srn_trust_diag_init "$SRN_BUILD/bin/diag_leak_prog" "$SRN_BUILD/bin/diag_seg_writer"
D=$SOFTRNIC_DIAG_DIR

# -- a FIFO at the victim's own path ---------------------------------------
unset SOFTRNIC_DEVICES SOFTRNIC_CONFIG SOFTRNIC_DIAG
# shellcheck disable=SC2016  # $$ and $0.. belong to the inner shell
SOFTRNIC_LOG=warn sh -c '$2 mkfifo "$0/softrnic.$$.softrnic0" && exec "$1"' \
	"$D" "$SRN_BUILD/bin/diag_leak_prog" "$OTHER" >"$tmp/prog.out" 2>"$tmp/prog.err" &
pid=$!
disown "$pid"
trap 'kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fifo="$D/softrnic.$pid.softrnic0"
if srn_wait_ready "$tmp/prog.out" "$pid"; then
	ok "ibv_open_device returns with a FIFO at its segment path"
else
	fail "victim not ready in 10 s (hangs in ibv_open_device?): $(cat "$tmp/prog.err")"
fi
[ -p "$fifo" ] && [ "$(stat -c %u "$fifo")" = 65534 ] && ok "the planted FIFO is left alone" \
	|| fail "planted FIFO: $(ls -l "$fifo" 2>&1)"
grep -q "softrnic.$pid.softrnic0 is taken by a FIFO of uid 65534: left alone, using softrnic.$pid.softrnic0." \
	"$tmp/prog.err" && ok "the device log says why and which name it used" \
	|| fail "log: $(cat "$tmp/prog.err")"
alt=$(ls "$D"/softrnic."$pid".softrnic0.* 2>/dev/null | head -n1)
[ -n "$alt" ] && [ -f "$alt" ] && [ "$(stat -c %a "$alt")" = 600 ] \
	&& ok "segment under ${alt##*/}, mode 0600" || fail "no segment under another name: $(ls -l "$D")"
out=$(timeout 30 "$SOFTRNIC" res --json --pid "$pid" 2>/dev/null)
jq -e '(.devices | length) == 1 and (.devices[0].mrs | length) == 3' <<<"$out" >/dev/null \
	&& ok "res reads it" || fail "res --pid $pid: $out"
out=$(timeout 30 "$SOFTRNIC" explain --pid "$pid" 2>/dev/null)
grep -q "warn: diagnostic file softrnic.$pid.softrnic0 is taken by a FIFO" <<<"$out" \
	&& ok "explain shows the warning" || fail "explain: $out"
kill -9 "$pid" 2>/dev/null

# -- FIFOs and links named like segments: the tools do not block -----------
$OTHER mkfifo "$D/softrnic.7.x"
mkfifo "$D/softrnic.8.x"
$OTHER ln -s /etc/passwd "$D/softrnic.9.x"
for who in root 65534; do
	pre=; [ "$who" = root ] || pre=$OTHER
	for cmd in "stat" "stat --json" "stat --qp all" "res" "res --json" "explain" \
		   "explain --qp-log 1" "stat --cleanup"; do
		# shellcheck disable=SC2086  # word splitting of $pre and $cmd wanted
		timeout 5 $pre "$SOFTRNIC" $cmd >"$tmp/cmd.out" 2>&1
		rc=$?
		if [ "$rc" = 124 ] || [ "$rc" -gt 128 ]; then
			fail "as $who: softrnic $cmd: rc $rc (hung or died): $(cat "$tmp/cmd.out")"
		else
			ok "as $who: softrnic $cmd returns (rc $rc)"
		fi
	done
done
[ -p "$D/softrnic.7.x" ] && [ -p "$D/softrnic.8.x" ] && [ -L "$D/softrnic.9.x" ] \
	&& [ -p "$fifo" ] && ok "--cleanup left FIFOs and links alone" || fail "after cleanup: $(ls -l "$D")"
out=$(timeout 10 "$SOFTRNIC" stat 2>&1)
grep -q "softrnic.8.x: a FIFO, not a segment: skipped" <<<"$out" \
	&& ok "stat says it skipped the FIFO" || fail "stat: $out"

# -- SOFTRNIC_DIAG_DIR another user could write into ----------------------
mkdir "$tmp/theirs" "$tmp/open"
chown 65534:65534 "$tmp/theirs"
chmod 777 "$tmp/open"
for d in theirs open; do
	SOFTRNIC_DIAG_DIR="$tmp/$d" timeout 10 "$SRN_BUILD/bin/diag_seg_writer" close \
		>"$tmp/w.out" 2>"$tmp/w.err"
	rc=$?
	[ "$d" = theirs ] && want="owned by another user" || want="writable by others and not sticky"
	if [ "$rc" = 1 ] && [ -z "$(ls "$tmp/$d")" ] && grep -q "$tmp/$d: $want" "$tmp/w.err"; then
		ok "no segment in a directory $want"
	else
		fail "dir $d: rc $rc, files '$(ls "$tmp/$d")', $(cat "$tmp/w.err")"
	fi
done
exit $bad
