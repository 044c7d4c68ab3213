#!/bin/bash
# test_res.sh - the registration-leak story: diag_leak_prog registers
# three regions (4096, 65536, 1048576 bytes), never deregisters them and
# sleeps; `softrnic res`, run from outside, must show them.
#
#   diag_leak_prog (PD, 3 MRs, CQ, RC QP -> itself) ──segment──> softrnic res
#
# Checks: `res --dump` lists exactly three MRs with those lengths, lkey ==
# rkey, in the PD shown; the QP (RTS, its own QPN as peer) and the CQ;
# `res --json` parses and agrees.  Needs the library's object hooks
# (srn_diag_obj_add + srn_diag_snap for PD/MR/CQ/QP): without them the
# checks fail and say so.
set -u
source "$SRN_SRC/tests/lib/diag.sh"
srn_diag_test_init "$SRN_BUILD/bin/diag_leak_prog"
srn_leak_prog_start
qpn=$(awk '{ print $4 }' "$tmp/prog.out")
ls "$SOFTRNIC_DIAG_DIR"/softrnic."$pid".* >/dev/null 2>&1 || {
	echo "FAIL: no diagnostic segment for pid $pid: the library does not call" \
	     "srn_diag_create yet (lead's hook)"
	exit 1
}

out=$(timeout 30 "$SOFTRNIC" res --dump --pid "$pid")
mrs=$(grep -P '^\d+\t\S+\trunning\tmr\t' <<<"$out")
lens=$(grep -oP '\tlength=\K\d+' <<<"$mrs" | sort -n | tr '\n' ' ')
[ "$lens" = "4096 65536 1048576 " ] && ok "three leaked MRs: $lens" \
	|| fail "MR lengths '$lens' in: $out"
keys_ok=1
while IFS= read -r l; do
	lk=$(grep -oP '\tlkey=\K\S+' <<<"$l"); rk=$(grep -oP '\trkey=\K\S+' <<<"$l")
	[ -n "$lk" ] && [ "$lk" = "$rk" ] || keys_ok=0
done <<<"$mrs"
[ "$keys_ok" = 1 ] && [ -n "$mrs" ] && ok "lkey == rkey" || fail "keys: $mrs"
pdid=$(grep -P '\tpd\t' <<<"$out" | cut -f5 | head -n1)
[ -n "$pdid" ] && [ "$(grep -c "	pd=$pdid	" <<<"$mrs")" = 3 ] && ok "MRs in PD $pdid" \
	|| fail "PD references: $out"
grep -P "\tqp\t.*\tqpn=$qpn\ttype=RC\tstate=RTS\t" <<<"$out" | grep -q "peer_qpn=$qpn" \
	&& ok "QP $qpn RTS, connected to itself" || fail "QP line: $out"
grep -qP '\tcq\t\d+\tcqe=16\t' <<<"$out" && ok "CQ with 16 entries" || fail "CQ line: $out"

out=$(timeout 30 "$SOFTRNIC" res --json --pid "$pid")
if jq -e '.devices | length == 1 and (.[0].mrs | map(.length) | sort) == [4096,65536,1048576]
	and .[0].mr_bytes == 1118208 and (.[0].qps | length) == 1 and .[0].qps[0].state == "RTS"' \
	<<<"$out" >/dev/null; then
	ok "res --json"
else
	fail "res --json: $out"
fi
out=$(timeout 30 "$SOFTRNIC" res --pid "$pid")
grep -q "3 MR (1118208 bytes)" <<<"$out" && ok "table summary" || fail "res table: $out"

kill -9 "$pid"
for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
out=$(timeout 30 "$SOFTRNIC" res --dump --pid "$pid")
[ "$(grep -cP '\tdead\tmr\t' <<<"$out")" = 3 ] && ok "MRs of the killed process still listed" \
	|| fail "after kill: $out"
timeout 30 "$SOFTRNIC" stat --cleanup --pid "$pid" >/dev/null
pid=
exit $bad
