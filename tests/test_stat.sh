#!/bin/bash
# test_stat.sh - `softrnic stat` reading a real softrnic process from
# outside: diag_leak_prog (tests/helpers/diag_leak_prog.c) sends one message to
# itself over loopback and sleeps; the tool reads its segment.
#
#   diag_leak_prog (127.0.0.x:4791, QP -> itself) ──segment──> softrnic stat
#
# Checks: the segment file appears with mode 0600 (its owner's alone);
# `stat --json` parses and shows the process running with non-zero packet
# counters (the library's counters live in the segment); after kill -9 the process is "dead" with
# the same last values; `stat` counts the stale file; `--cleanup` removes
# it.  Needs the library to create segments (srn_diag_create in the nic):
# without that the first check fails and says so.
set -u
source "$SRN_SRC/tests/lib/diag.sh"
srn_diag_test_init "$SRN_BUILD/bin/diag_leak_prog"
srn_leak_prog_start

seg=$(ls "$SOFTRNIC_DIAG_DIR"/softrnic."$pid".* 2>/dev/null | head -n1)
if [ -z "$seg" ]; then
	echo "FAIL: no diagnostic segment $SOFTRNIC_DIAG_DIR/softrnic.$pid.*:" \
	     "the library does not call srn_diag_create yet (lead's hook)"
	exit 1
fi
ok "segment $seg"
[ "$(stat -c %a "$seg")" = 600 ] && ok "mode 0600" || fail "mode $(stat -c %a "$seg")"
dev=${seg##*.}

out=$(timeout 30 "$SOFTRNIC" stat --json --pid "$pid")
if jq -e --arg d "$dev" '.devices | length == 1 and .[0].dev == $d and .[0].state == "running"
	and .[0].counters.sent_pkts > 0 and .[0].counters.rcvd_pkts > 0' <<<"$out" >/dev/null; then
	ok "stat --json: running, packets counted"
else
	fail "stat --json: $out"
fi
before=$(timeout 30 "$SOFTRNIC" stat --dump --pid "$pid" | cut -f4- | sort)

qpn=$(awk '{ print $4 }' "$tmp/prog.out")
out=$(timeout 30 "$SOFTRNIC" stat --dump --pid "$pid" --qp "$qpn")
grep -q "	qp:$qpn	" <<<"$out" && ok "per-QP counters of $qpn" || fail "stat --qp $qpn: $out"

kill -9 "$pid"
for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
out=$(timeout 30 "$SOFTRNIC" stat --json --pid "$pid")
jq -e '.devices[0].state == "dead"' <<<"$out" >/dev/null && ok "killed process shows dead" \
	|| fail "after kill: $out"
after=$(timeout 30 "$SOFTRNIC" stat --dump --pid "$pid" | cut -f4- | sort)
[ -n "$before" ] && [ "$before" = "$after" ] && ok "last values readable after the crash" \
	|| fail "values changed: before '$before' after '$after'"
out=$(timeout 30 "$SOFTRNIC" stat)
grep -q "1 file of processes that are gone" <<<"$out" && ok "stale file counted" \
	|| fail "stale count: $out"
out=$(timeout 30 "$SOFTRNIC" stat --cleanup)
grep -q "removed 1 file" <<<"$out" && [ ! -e "$seg" ] && ok "--cleanup removed it" \
	|| fail "--cleanup: $out"
pid=
exit $bad
