#!/bin/bash
# The incast demo of issue 16, short: bench/incast.sh for 3 s per case
# (six namespaces: four senders, the switch, the receiver; drawn at the
# top of bench/incast.sh).  Checks what the comparison is for:
#   nocc   the switch dropped, the senders retransmitted: the table says
#          "retransmission storm";
#   pfc    nothing dropped, the switch paused, and the softrnic senders
#          counted the pauses they honoured (rx_pause, rx_pause_duration):
#          "PFC pause storm";
#   dcqcn  the switch marked, the receiver sent CNPs, the senders handled
#          them (DCQCN "reacting"), and it dropped less than nocc;
# and the table, the TSV and one SVG per case exist, the SVGs well-formed
# with a line per flow and one for the queue.
# Skipped (77) without root or python3 (incast.sh decides).
set -u
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
SRN_BUILD=$SRN_BUILD timeout -k 10 400 "$SRN_SRC/bench/incast.sh" --out "$out" --duration 3 \
    --build "$SRN_BUILD" >"$out/table" 2>"$out/log"
rc=$?
cat "$out/table" "$out/log"
[ "$rc" = 77 ] && exit 77
[ "$rc" = 0 ] || { echo "FAIL: incast.sh exited $rc"; exit 1; }
fail=0
# cell METRIC CASE: the value from incast.tsv.
cell() {
    awk -F'\t' -v m="$1" -v c="$2" 'NR == 1 { for (i = 2; i <= NF; i++) col[$i] = i; next }
        $1 == m { print $col[c] }' "$out/incast.tsv"
}
check() {  # check WHAT CONDITION...
    local what=$1
    shift
    if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}
check "nocc: the switch dropped ($(cell 'switch drops' nocc))" [ "$(cell 'switch drops' nocc)" -gt 0 ]
check "nocc: the senders retransmitted ($(cell retransmits nocc))" [ "$(cell retransmits nocc)" -gt 0 ]
check "nocc: diagnosed as a retransmission storm" [ "$(cell diagnosis nocc)" = "retransmission storm" ]
check "pfc: no drop ($(cell 'switch drops' pfc))" [ "$(cell 'switch drops' pfc)" = 0 ]
check "pfc: the switch paused ($(cell 'switch pauses' pfc))" [ "$(cell 'switch pauses' pfc)" -gt 0 ]
check "pfc: senders counted pauses (rx_pause $(cell rx_pause pfc))" [ "$(cell rx_pause pfc)" -gt 0 ]
check "pfc: and their length (rx_pause_duration $(cell 'rx_pause_duration ms' pfc) ms)" \
    [ "$(cell 'rx_pause_duration ms' pfc)" -gt 0 ]
check "pfc: diagnosed as a PFC pause storm" [ "$(cell diagnosis pfc)" = "PFC pause storm" ]
check "dcqcn: the switch marked ($(cell 'ECN marks' dcqcn))" [ "$(cell 'ECN marks' dcqcn)" -gt 0 ]
check "dcqcn: the receiver sent CNPs ($(cell np_cnp_sent dcqcn))" [ "$(cell np_cnp_sent dcqcn)" -gt 0 ]
check "dcqcn: the senders handled them ($(cell rp_cnp_handled dcqcn))" \
    [ "$(cell rp_cnp_handled dcqcn)" -gt 0 ]
check "dcqcn: reacting ($(cell DCQCN dcqcn))" [ "$(cell DCQCN dcqcn)" = reacting ]
# Fewer losses than without control: the point of the comparison, not a
# target (a 3 s run on a busy 2-CPU host drops in the switch's stalls).
check "dcqcn: fewer drops than nocc ($(cell 'switch drops' dcqcn) < $(cell 'switch drops' nocc))" \
    [ "$(cell 'switch drops' dcqcn)" -lt "$(cell 'switch drops' nocc)" ]
for c in nocc dcqcn pfc; do
    check "incast-$c.svg well-formed, a line per flow and the queue" python3 - "$out/incast-$c.svg" <<'PY'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
lines = root.findall("{http://www.w3.org/2000/svg}polyline")
sys.exit(0 if len(lines) >= 5 else 1)
PY
done
exit $fail
