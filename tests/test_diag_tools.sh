#!/bin/bash
# test_diag_tools.sh - `softrnic stat`, `res` and `explain` against
# diag_seg_writer, a process that fills a diagnostic segment through the
# diag API with known contents (see tests/helpers/diag_seg_writer.c), so every
# value printed can be checked exactly, independently of the data path.
#
#   diag_seg_writer run  ──(segment in $SOFTRNIC_DIAG_DIR)──>  softrnic stat/res/explain
#
# Checks: table/JSON/dump output of stat (device and per-QP counters),
# --watch rates, res objects and references, explain's error line and
# QP log, status paragraphs; a killed writer shows as "dead" with its last
# values and --cleanup removes it; "closed"/"exited" states; a bogus file
# is counted as unreadable, never fatal.  All checks run even after one
# fails.
set -u
source "$SRN_SRC/tests/lib/diag.sh"
WRITER="$SRN_BUILD/bin/diag_seg_writer"
srn_diag_test_init "$WRITER"
wpid=
cleanup() {
	[ -n "$wpid" ] && kill -9 "$wpid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# srn ARGS...: run the tool; stdout in $out, status in $rc.
srn() {
	out=$(timeout 60 "$SOFTRNIC" "$@" 2>"$tmp/stderr")
	rc=$?
}
# has TEXT WHAT: $out contains TEXT (fixed string).
has() {
	if grep -qF -- "$1" <<<"$out"; then ok "$2"; else fail "$2: no '$1' in:"; echo "$out"; fi
}

"$WRITER" run >"$tmp/writer.out" &
wpid=$!
disown "$wpid"   # no "Killed" notice from bash when the test kills it
for _ in $(seq 100); do
	grep -q ready "$tmp/writer.out" 2>/dev/null && break
	sleep 0.1
done
grep -q "ready $wpid" "$tmp/writer.out" || { echo "FAIL: writer did not start"; exit 1; }
[ -f "$SOFTRNIC_DIAG_DIR/softrnic.$wpid.fakedev" ] && ok "segment file exists" \
	|| fail "no $SOFTRNIC_DIAG_DIR/softrnic.$wpid.fakedev"

srn help
has "  stat " "help lists stat"
has "  res " "help lists res"
has "  explain " "help lists explain"

# -- stat ------------------------------------------------------------------
srn stat
[ "$rc" -eq 0 ] || fail "stat exit $rc"
has "fakedev  pid $wpid (diag_seg_write" "stat heading names device, pid and comm"
has "127.0.0.9  running" "stat shows address and running state"
grep -qE '^ +bad_icrc +3$' <<<"$out" && ok "stat shows bad_icrc 3" || fail "stat bad_icrc: $out"
grep -qE '^ +rcvd_pkts +40$' <<<"$out" && ok "stat shows rcvd_pkts 40" || fail "stat rcvd_pkts"
grep -qE '^ +rdma_reads ' <<<"$out" && fail "stat shows a zero counter" || ok "zero counters hidden"
srn stat --all
grep -qE '^ +rdma_reads +0$' <<<"$out" && ok "--all shows zero counters" || fail "--all"

srn stat --json
if jq -e --argjson p "$wpid" '.devices[] | select(.pid == $p) |
	.dev == "fakedev" and .state == "running" and .counters.bad_icrc == 3 and
	.counters.rcvd_pkts == 40 and .counters.sent_pkts >= 100 and .counters.rdma_reads == 0' \
	<<<"$out" >/dev/null; then ok "stat --json"; else fail "stat --json: $out"; fi

srn stat --dump
has "$wpid	fakedev	running	dev	bad_icrc	3" "stat --dump line"
srn stat --dump --qp 0xa001
has "$wpid	fakedev	running	qp:0x00a001	sent_pkts	77" "per-QP counter (dump)"
has "qp:0x00a001	retransmits	2" "per-QP retransmits"
srn stat --qp 0x00a001
has "qp 0x00a001  RC RTS" "per-QP heading"
srn stat --qp 0x00a002
has "no such QP" "unknown QP"
srn stat --pid 1
has "no softrnic devices in use matching the filter" "pid filter"
srn stat --dev fakedev --json
[ "$(jq '.devices | length' <<<"$out")" = 1 ] && ok "dev filter" || fail "dev filter: $out"

srn stat --watch 0.2 --count 3 --json
n=$(wc -l <<<"$out")
rate=$(tail -n1 <<<"$out" | jq --argjson p "$wpid" '.devices[] | select(.pid == $p) | .rates.sent_pkts')
first=$(head -n1 <<<"$out" | jq --argjson p "$wpid" '.devices[] | select(.pid == $p) | .counters.sent_pkts')
if [ "$n" = 3 ] && [ -n "$rate" ] && awk -v r="$rate" 'BEGIN { exit !(r > 0) }' && [ "$first" -ge 100 ]; then
	ok "--watch: 3 samples, sent_pkts rising at $rate/s"
else
	fail "--watch: $n lines, rate '$rate', first '$first'"
fi
srn stat --watch --count 2 --dump
[ "$(grep -c "	dev	sent_pkts	" <<<"$out")" = 2 ] && ok "--watch (default interval) --dump" \
	|| fail "--watch --dump: $out"
srn stat --bogus
[ "$rc" -eq 2 ] && ok "bad option exits 2" || fail "bad option: rc $rc"

# -- res -------------------------------------------------------------------
srn res --dump
for l in "mr	1	pd=0	addr=0x7f0000000000	length=4096	lkey=0x101	rkey=0x101" \
	 "mr	2	pd=0	addr=0x7f0000200000	length=65536	lkey=0x202	rkey=0x202" \
	 "mr	3	pd=0	addr=0x7f0000400000	length=1048576	lkey=0x303" \
	 "pd	0	users=5" "cq	4	cqe=16	size=16	fill=2	qps=1" \
	 "qp	5	qpn=0x00a001	type=RC	state=RTS	pd=0	scq=4	rcq=4" \
	 "peer=127.0.0.2	peer_qpn=0x00b002" "retry_left=7	retry_cnt=7" \
	 "last_peer=NAK_REM_ACCESS,psn=0x000100"; do
	has "$l" "res --dump: ${l%%	*} ..."
done
has "$wpid	fakedev	running	mr	1	" "res --dump prefix: pid dev state kind id" 
grep -q "access=LOCAL_WRITE|REMOTE_WRITE" <<<"$out" && ok "access flags" || fail "access flags"
srn res
has "total: 1 PD, 3 MR (1118208 bytes), 1 CQ, 1 QP, 0 SRQ, 0 AH" "res table summary"
has "  qp 5  qpn 0x00a001  type RC  state RTS" "res table QP line"
srn res --json
if jq -e '.devices[0] | (.mrs | length) == 3 and (.mrs | map(.length) | sort) == [4096,65536,1048576]
	and .mrs[0].pd == 0 and .qps[0].qpn == 40961 and .qps[0].state == "RTS"
	and .cqs[0].fill == 2 and .mr_bytes == 1118208' <<<"$out" >/dev/null; then
	ok "res --json"
else
	fail "res --json: $out"
fi
srn res --type mr --dump
[ "$(grep -c '	mr	' <<<"$out")" = 3 ] && ! grep -q '	qp	' <<<"$out" && ok "res --type mr" \
	|| fail "res --type mr: $out"
srn res --qp 0xa001 --dump
[ "$(wc -l <<<"$out")" = 1 ] && grep -q 'qpn=0x00a001' <<<"$out" && ok "res --qp" || fail "res --qp: $out"
srn res --type nosuch
[ "$rc" -eq 2 ] && ok "res bad type exits 2" || fail "res bad type: rc $rc"

# -- explain ---------------------------------------------------------------
want="REM_ACCESS_ERR: RDMA_WRITE wr_id 0x2a PSN 0x000100 rkey 0x1234 va 0x7f00deadb000 len 4096 to QP 0x00b002 at 127.0.0.2: the responder NAKed remote access error"
srn explain
has "pid $wpid (diag_seg_write" "explain names the process"
has "fakedev qp 0x00a001  error: $want" "explain line"
srn explain --qp 0xa002
has "no errors recorded for that QP" "explain --qp filter"
srn explain --qp-log 0xa001
has "qp 0x00a001  pid $wpid" "qp-log heading"
[ "$(grep -c 'info: event' <<<"$out")" = 15 ] && ! grep -q 'event 4$' <<<"$out" && grep -q 'event 19$' <<<"$out" \
	&& ok "qp-log keeps the newest 16 lines" || fail "qp-log: $out"
tail -n1 <<<"$out" | grep -qF "error: $want" && ok "qp-log ends with the error" || fail "qp-log end"
for s in RNR_RETRY_EXC_ERR IBV_WC_RNR_RETRY_EXC_ERR rnr_retry_exc_err 13; do
	srn explain "$s"
	[ "$rc" -eq 0 ] && head -n1 <<<"$out" | grep -q '^IBV_WC_RNR_RETRY_EXC_ERR (13): ' \
		&& grep -q 'recv_posted' <<<"$out" && ok "explain $s" || fail "explain $s: $out"
done
srn explain --list
[ "$(wc -l <<<"$out")" = 24 ] && ok "explain --list: 24 statuses" || fail "explain --list"
for i in $(seq 0 23); do
	srn explain "$i"
	[ "$rc" -eq 0 ] && [ "$(wc -l <<<"$out")" -ge 3 ] || fail "explain $i: rc $rc"
done
srn explain NOT_A_STATUS
[ "$rc" -eq 2 ] && ok "unknown status exits 2" || fail "unknown status: rc $rc"

# -- a bogus file is reported, never fatal ---------------------------------
head -c 100 /dev/zero >"$SOFTRNIC_DIAG_DIR/softrnic.1.bogus"
echo hi >"$SOFTRNIC_DIAG_DIR/softrnic.notapid.x"
srn stat --json
[ "$rc" -eq 0 ] && [ "$(jq .unreadable_files <<<"$out")" = 1 ] && ok "bogus file counted" \
	|| fail "bogus file: rc $rc $out"
rm -f "$SOFTRNIC_DIAG_DIR/softrnic.1.bogus" "$SOFTRNIC_DIAG_DIR/softrnic.notapid.x"

# -- kill -9: dead, last values, cleanup -----------------------------------
srn stat --dump
before=$(awk -F'\t' '$4 == "dev" && $5 == "sent_pkts" { print $6 }' <<<"$out")
kill -9 "$wpid"
# kill returns before the process is gone, and a disowned one is not
# waited for: wait until it is a zombie or reaped (bounded), as stat
# would see it a moment later on a loaded machine (CI saw "running").
for ((i = 0; i < 100; i++)); do
	st=$(awk '{ print $3 }' "/proc/$wpid/stat" 2>/dev/null)
	[ -z "$st" ] || [ "$st" = Z ] && break
	sleep 0.05
done
srn stat --dump
after=$(awk -F'\t' '$4 == "dev" && $5 == "sent_pkts" { print $6 }' <<<"$out")
has "$wpid	fakedev	dead	dev	bad_icrc	3" "killed writer shows dead with last values"
[ -n "$after" ] && [ "$after" -ge "$before" ] && ok "last sent_pkts $after readable" \
	|| fail "sent_pkts before $before after $after"
srn stat
has "1 file of processes that are gone; \`softrnic stat --cleanup\` removes them" "stale count"
srn res --dump
has "$wpid	fakedev	dead	mr	1" "res of the dead process"
srn explain
has "$want" "explanation kept after the crash"
srn stat --cleanup
has "removed 1 file" "--cleanup"
[ -e "$SOFTRNIC_DIAG_DIR/softrnic.$wpid.fakedev" ] && fail "file still there" || ok "file removed"
wpid=

# -- closed cleanly / exited without closing -------------------------------
"$WRITER" close &
cpid=$!
wait "$cpid"
"$WRITER" exit &
epid=$!
wait "$epid"
srn stat --dump
has "$cpid	fakedev	closed	dev	bad_icrc	3" "closed cleanly (kept: it logged an error)"
has "$epid	fakedev	exited	dev	bad_icrc	3" "exited without closing"
srn stat --cleanup
has "removed 2 files" "cleanup of finished processes"
srn stat
has "no softrnic devices in use" "nothing left"

exit $bad
