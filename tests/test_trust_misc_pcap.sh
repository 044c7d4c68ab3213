#!/bin/bash
# test_trust_misc_pcap.sh - SOFTRNIC_PCAP against another local user.
#
# The victim (root, as the tests run) traces Debian's unmodified
# ibv_devinfo through `softrnic run --pcap PATH`; the attacker (uid 65534,
# via setpriv) has planted something at PATH first, in a directory both
# may write:
#   - a symlink to a file of the victim's: that file is untouched and the
#     device refuses to open, saying why;
#   - a 0666 file of the attacker's: not written (the trace would leak);
#   - a FIFO with no reader: no hang, a refusal; a FIFO the attacker holds
#     open: nothing reaches it;
#   - (as root, standing in for an attacker on a host without
#     fs.protected_hardlinks) a hard link to a victim's file: untouched.
# And the victim's own cases: a fresh path is created 0600 even under
# umask 000; an old 0600 trace of ours is overwritten (as `tcpdump -w`
# does); our own 0644 file is refused (others may hold it open).
#
# The shared directory is 0777 without the sticky bit, so the kernel's
# fs.protected_symlinks/regular/fifos (which only guard sticky
# world-writable directories like /tmp, and are off on some hosts) never
# step in: what is tested is softrnic's own check.
set -u
: "${SRN_BUILD:?SRN_BUILD must point at the build directory}"
SOFTRNIC="$SRN_BUILD/bin/softrnic"

[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root to play two users"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv not installed"; exit 77; }
command -v ibv_devinfo >/dev/null || { echo "SKIP: ibv_devinfo not installed"; exit 77; }
[ -x "$SOFTRNIC" ] || { echo "FAIL: $SOFTRNIC not built"; exit 1; }
unset SOFTRNIC_DEVICES SOFTRNIC_CONFIG SOFTRNIC_PCAP SOFTRNIC_FAULTS

preload=()
[ -n "${SRN_ASAN_PRELOAD:-}" ] && preload=(LD_PRELOAD="$SRN_ASAN_PRELOAD")

d=$(mktemp -d)
holder=
cleanup() {
	[ -n "$holder" ] && kill "$holder" 2>/dev/null
	rm -rf "$d"
}
trap cleanup EXIT
chmod 0777 "$d"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

attacker() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

# trace PATH: ibv_devinfo with a trace at PATH, bounded in time; sets rc
# and out (stdout and stderr).
trace() {
	out=$(timeout 20 env "${preload[@]}" "$SOFTRNIC" run --pcap "$1" -- ibv_devinfo 2>&1)
	rc=$?
	[ "$rc" -ne 124 ] || fail "$1: ibv_devinfo hung (killed after 20 s)"
}

# refused CASE PATH WHY: the open failed and said WHY about PATH.
refused() {
	if [ "$rc" -eq 0 ] || ! grep -q "SOFTRNIC_PCAP=$2: refusing to write the trace there: $3" <<<"$out"; then
		echo "$out"
		fail "$1: want a refusal naming $2 and '$3' (rc $rc)"
	else
		echo "ok: $1: $(grep -o "refusing.*" <<<"$out" | head -1)"
	fi
}

# 1. A symlink to the victim's file.
echo "victim's precious data" >"$d/precious"
chmod 0600 "$d/precious"
attacker ln -s "$d/precious" "$d/trace-link.pcap"
trace "$d/trace-link.pcap"
refused "symlink" "$d/trace-link.pcap" "it is a symbolic link"
[ "$(cat "$d/precious")" = "victim's precious data" ] ||
	fail "the victim's file behind the symlink was overwritten"

# 2. A 0666 file of the attacker's, waiting for the trace.
attacker bash -c "umask 000; echo planted >'$d/trace-planted.pcap'"
trace "$d/trace-planted.pcap"
refused "attacker's 0666 file" "$d/trace-planted.pcap" "it belongs to uid 65534"
[ "$(cat "$d/trace-planted.pcap")" = planted ] || fail "the attacker's planted file was written"

# 3a. A FIFO nobody reads: a blocking open would wait forever.
attacker mkfifo -m 0666 "$d/trace-fifo.pcap"
trace "$d/trace-fifo.pcap"
refused "FIFO without reader" "$d/trace-fifo.pcap" "it is a FIFO or device"

# 3b. A FIFO the attacker holds open (read-write, so it never blocks):
# whatever the victim writes stays in the pipe, where we look afterwards.
attacker mkfifo -m 0666 "$d/trace-fifo2.pcap"
# The holder gets no stdout/stderr of ours: ctest waits for every holder of
# its pipe, and `kill` below reaches the setpriv, not always the sleep.
attacker bash -c "exec 3<>'$d/trace-fifo2.pcap'; : >'$d/holding'; exec sleep 60" \
	</dev/null >/dev/null 2>&1 &
holder=$!
for _ in $(seq 100); do [ -e "$d/holding" ] && break; sleep 0.05; done
[ -e "$d/holding" ] || fail "the attacker's FIFO holder did not start"
trace "$d/trace-fifo2.pcap"
refused "FIFO with a reader" "$d/trace-fifo2.pcap" "it is not a regular file"
leaked=$(timeout 2 cat "$d/trace-fifo2.pcap" | wc -c)
[ "$leaked" -eq 0 ] || fail "$leaked bytes of trace reached the attacker's FIFO"
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
holder=

# 4. A hard link to a victim's file (made by root here: with
# fs.protected_hardlinks=0 any user may link a file they cannot read).
echo "victim's other file" >"$d/other"
chmod 0600 "$d/other"
ln "$d/other" "$d/trace-hard.pcap"
trace "$d/trace-hard.pcap"
refused "hard link" "$d/trace-hard.pcap" "it has other hard links"
[ "$(cat "$d/other")" = "victim's other file" ] || fail "the hard-linked victim file was written"

# 5. The victim's own cases. A fresh path under umask 000 is still 0600.
(umask 000; trace "$d/fresh.pcap"; [ "$rc" -eq 0 ] || { echo "$out"; exit 1; }) ||
	fail "fresh path: ibv_devinfo failed"
mode=$(stat -c %a "$d/fresh.pcap" 2>/dev/null)
[ "$mode" = 600 ] || fail "fresh trace created with mode $mode, want 600"
[ "$(stat -c %s "$d/fresh.pcap" 2>/dev/null)" = 24 ] || fail "fresh trace is not a bare pcap header"

# An old 0600 trace of ours is overwritten, like tcpdump -w.
head -c 5000 /dev/zero >"$d/old.pcap"
chmod 0600 "$d/old.pcap"
trace "$d/old.pcap"
[ "$rc" -eq 0 ] || { echo "$out"; fail "our own 0600 trace was not reused"; }
[ "$(stat -c %s "$d/old.pcap")" = 24 ] || fail "our own old trace was not truncated"

# Our own file that others may have opened is refused.
echo old >"$d/open.pcap"
chmod 0644 "$d/open.pcap"
trace "$d/open.pcap"
refused "our 0644 file" "$d/open.pcap" "other users may open it (mode 0644"
[ "$(cat "$d/open.pcap")" = old ] || fail "our 0644 file was written"

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "PASS: SOFTRNIC_PCAP refuses what is not a private regular file of ours"
