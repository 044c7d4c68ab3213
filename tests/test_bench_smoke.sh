#!/bin/bash
# test_bench_smoke.sh - keeps bench/compare.sh from rotting: runs it in its
# smallest mode (softrnic on its default link and on UDP, and the raw UDP
# floor only, 8 B, one run each,
# a 1 s idle-CPU probe, no apt-get) and checks that the table, the CSV and
# the JSON come out and that their numbers parse.  Not a timing test: no
# value is compared with a target, only with zero.
#
#   compare.sh --quick --no-install --peers srudp,udp
#     softrnic perf --loopback (lat, bw, rate) ── 127.0.0.N ── its child
#       (once as is, once with SOFTRNIC_SHM=0)
#     udp_pingpong (built from bench/ with cc)  ── 127.0.0.1 ── its child
#     idle_qps (built from bench/, linked with $SRN_BUILD/lib)
#
# Skips (77) without cc, python3 or ss, which the script needs.
set -u
: "${SRN_BUILD:?SRN_BUILD must point at the build directory}"
: "${SRN_SRC:?SRN_SRC must point at the source directory}"
[ -x "$SRN_BUILD/bin/softrnic" ] || { echo "FAIL: $SRN_BUILD/bin/softrnic not built"; exit 1; }
for t in cc python3 ss; do
	command -v "$t" >/dev/null || { echo "SKIP: $t not installed"; exit 77; }
done
unset SOFTRNIC_DEVICES SOFTRNIC_CONFIG SOFTRNIC_PCAP SOFTRNIC_FAULTS

bad=0
fail() { echo "FAIL: $*"; bad=1; }
ok() { echo "ok: $*"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

start=$SECONDS
timeout -k 5 60 bash "$SRN_SRC/bench/compare.sh" --quick --no-install --peers srudp,udp \
	--build "$SRN_BUILD" --csv "$tmp/t.csv" --json "$tmp/t.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
took=$((SECONDS - start))
cat "$tmp/out"
if [ "$rc" -ne 0 ]; then
	fail "compare.sh exited $rc after $took s: $(tail -5 "$tmp/err")"
	exit 1
fi
ok "compare.sh --quick finished in $took s"

# The table: a header, then rows whose softrnic and UDP cells are numbers.
if grep -Eq '^metric +size +softrnic +sr UDP link +UCX tcp +libfabric [a-z]+ +UDP floor +sr/srUDP +sr/UCX +sr/libfabric +sr/UDP$' "$tmp/out"; then
	ok "table header"
else
	fail "no table header in the output"
fi
num='[0-9]+(\.[0-9]+)?(e-?[0-9]+)?'
for row in 'latency \(us\) +8 B' 'bandwidth \(GB/s\) +8 B' 'msg rate \(Mmsg/s\) +8 B'; do
	if grep -Eq "^$row +$num +$num +- +- +$num +$num +- +- +$num\$" "$tmp/out"; then
		ok "row '$row' has softrnic on both links, UDP and the ratios"
	else
		fail "row '$row': $(grep -E "^$row" "$tmp/out" || echo missing)"
	fi
done
grep -Eq "^idle CPU \(% CPU\) +- +$num " "$tmp/out" && ok "idle CPU row" ||
	fail "idle CPU row: $(grep '^idle' "$tmp/out" || echo missing)"
grep -q 'issue 6 targets' "$tmp/out" && ok "targets section" || fail "no targets section"

# CSV and JSON: well formed, the same cells, numbers > 0, ratio = quotient.
if python3 - "$tmp/t.csv" "$tmp/t.json" <<'EOF'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
want = {("lat", "8"), ("bw", "8"), ("rate", "8"), ("idle", "0")}
got = {(r["metric"], r["size"]) for r in rows}
assert got == want, got
for r in rows:
    sr = float(r["softrnic"])
    assert sr > 0 or r["metric"] == "idle", r
    assert r["ucx"] == "" and r["libfabric"] == "", r
    if r["metric"] != "idle":
        for peer in ("udp", "srudp"):
            v, ratio = float(r[peer]), float(r["softrnic_over_" + peer])
            assert v > 0 and abs(ratio - sr / v) <= 1e-3 * ratio + 1e-9, r
d = json.load(open(sys.argv[2]))
assert d["host"]["nproc"].isdigit() and d["host"]["kernel"], d["host"]
assert len(d["host"]["load_start"].split()) == 3, d["host"]
assert len(d["rows"]) == 4 and len(d["targets"]) >= 3, d
for r in d["rows"]:
    assert len(r["runs"]["softrnic"]) == 1, r
print("csv/json: %d rows" % len(rows))
EOF
then
	ok "CSV and JSON parse and agree"
else
	fail "CSV/JSON check"
fi

# Usage errors exit 2.
bash "$SRN_SRC/bench/compare.sh" --peers bogus >/dev/null 2>&1
[ $? -eq 2 ] && ok "unknown peer: exit 2" || fail "unknown peer: want exit 2"
bash "$SRN_SRC/bench/compare.sh" --sizes 0 >/dev/null 2>&1
[ $? -eq 2 ] && ok "bad size: exit 2" || fail "bad size: want exit 2"

[ "$bad" -eq 0 ] && { echo PASS; exit 0; }
exit 1
