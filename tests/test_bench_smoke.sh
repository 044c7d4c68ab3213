#!/bin/bash
# test_bench_smoke.sh - keeps bench/compare.sh from rotting: runs it in its
# smallest mode (--quick: every column once at 8 B latency and 64 KiB
# bandwidth, softrnic's Read and message rate, a 1 s idle-CPU probe, no
# apt-get) and checks that the table, the CSV and the JSON come out, that
# every column that could run produced a number, and that a column that did
# not run says why.  Not a timing test: no value is compared with a target,
# only with zero.
#
#   compare.sh --quick --no-install
#     same host: softrnic perf --loopback (direct, SOFTRNIC_DIRECT=0),
#       ucx_perftest posix / cma, fi_pingpong shm, and through softrnic run:
#       ucx_perftest rc_verbs / ud_verbs, fi_pingpong verbs;ofi_rxd
#     UDP link (two namespaces when root, else loopback): softrnic perf,
#       ucx_perftest tcp, fi_pingpong tcp, udp_pingpong, and through
#       softrnic run: ucx_perftest rc_verbs, fi_pingpong verbs MSG (ns only)
#     idle_qps (built from bench/, linked with $SRN_BUILD/lib)
#   the sleeping floors once each, small counts: bench/eventfd_pingpong and
#     bench/udp_pingpong --block
#   bench/post_cost (linked like idle_qps), 2000 timed direct Writes with the
#     target sleeping, then spinning
#   compare.sh --events --quick --no-install (when qperf is installed): the
#     event-driven table, one short run of each row (qperf over softrnic on
#     one host and across the namespaces or loopback, qperf tcp_lat, the
#     floors), its CSV and JSON
#
# UCX and libfabric columns need ucx-utils and libfabric-bin; without them
# the columns are reported as skipped, which this test accepts.
# Skips (77) without cc, python3 or ss, which the script needs.
set -u
: "${SRN_BUILD:?SRN_BUILD must point at the build directory}"
: "${SRN_SRC:?SRN_SRC must point at the source directory}"
[ -x "$SRN_BUILD/bin/softrnic" ] || { echo "FAIL: $SRN_BUILD/bin/softrnic not built"; exit 1; }
for t in cc python3 ss; do
	command -v "$t" >/dev/null || { echo "SKIP: $t not installed"; exit 77; }
done
unset SOFTRNIC_DEVICES SOFTRNIC_CONFIG SOFTRNIC_PCAP SOFTRNIC_FAULTS SOFTRNIC_SHM SOFTRNIC_DIRECT

bad=0
fail() { echo "FAIL: $*"; bad=1; }
ok() { echo "ok: $*"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

start=$SECONDS
# About 50 s on a loaded 2-CPU machine; the bound is for an ASan build.
timeout -k 5 240 bash "$SRN_SRC/bench/compare.sh" --quick --no-install \
	--build "$SRN_BUILD" --csv "$tmp/t.csv" --json "$tmp/t.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
took=$((SECONDS - start))
cat "$tmp/out"
if [ "$rc" -ne 0 ]; then
	fail "compare.sh exited $rc after $took s: $(tail -5 "$tmp/err")"
	exit 1
fi
ok "compare.sh --quick finished in $took s"

# The table: both sections' headers, then rows whose softrnic cells are numbers.
if grep -Eq '^same host +sr direct +sr rings +UCX posix +UCX cma +fi shm +UCX rc/sr +UCX ud/sr +fi rxd/sr +sr/best$' "$tmp/out"; then
	ok "same-host header"
else
	fail "no same-host header in the output"
fi
if grep -Eq '^UDP link +sr UDP +UCX tcp +fi [a-z]+ +UDP floor +UCX rc/sr +fi verbs/sr +sr/best +sr/floor$' "$tmp/out"; then
	ok "UDP-link header"
else
	fail "no UDP-link header in the output"
fi
num='[0-9]+(\.[0-9]+)?(e-?[0-9]+)?'
for row in 'latency 8 B \(us\)' 'write 64 KiB \(GB/s\)'; do
	n=$(grep -Ec "^$row +$num " "$tmp/out")
	[ "$n" = 2 ] && ok "row '$row' in both sections starts with a number" ||
		fail "row '$row': $(grep -E "^$row" "$tmp/out" || echo missing)"
done
for row in 'read 64 KiB \(GB/s\)' 'rate 8 B \(Mmsg/s\)'; do
	grep -Eq "^$row +$num " "$tmp/out" && ok "row '$row': softrnic direct" ||
		fail "row '$row': $(grep -E "^$row" "$tmp/out" || echo missing)"
done
grep -Eq "^idle CPU: $num % of a core" "$tmp/out" && ok "idle CPU line" ||
	fail "idle CPU line: $(grep '^idle' "$tmp/out" || echo missing)"
grep -q '^targets (issues 6 and 14)' "$tmp/out" && ok "targets section" || fail "no targets section"
if command -v fi_pingpong >/dev/null; then
	grep -q '^n/a read: fi_pingpong has no RMA test' "$tmp/out" && ok "n/a cells say why" ||
		fail "no reason for libfabric's read cells"
fi

# CSV and JSON: every column that ran has a positive number at 8 B latency
# and 64 KiB bandwidth, the CSV says the same, a column that did not run is
# in the notes, and the ratio is the quotient it claims.
if python3 - "$tmp/t.csv" "$tmp/t.json" <<'EOF'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
d = json.load(open(sys.argv[2]))
assert d["host"]["nproc"].isdigit() and d["host"]["kernel"], d["host"]
assert len(d["host"]["load_start"].split()) == 3, d["host"]
assert len(d["rows"]) == 8 and len(rows) == 8, (len(d["rows"]), len(rows))
assert len(d["targets"]) >= 5, d["targets"]
notes = "\n".join(d["notes"])
cell = {(r["section"], r["metric"], r["size"]): r for r in d["rows"]}
ran = 0
for key, col in d["columns"].items():
    section = "same host" if key in cell[("same host", "lat", 8)]["cells"] else "UDP link"
    if not col["ran"]:
        assert "%s skipped" % key in notes, (key, notes)
        print("  %-9s not run: %s" % (key, [n for n in d["notes"] if n.startswith(key)][0]))
        continue
    ran += 1
    for metric, size in (("lat", 8), ("bw", 65536)):
        r = cell[(section, metric, size)]
        v = r["cells"][key]
        assert v is not None and v > 0, (key, metric, size, r["runs"][key], notes)
        assert len(r["runs"][key]) == 1, (key, r["runs"][key])
        c = [x for x in rows if x["section"] == section and x["metric"] == metric and
             x["size"] == str(size)][0]
        assert abs(float(c[key]) - v) <= 1e-4 * v, (key, c[key], v)
    print("  %-9s %s: lat %.3g us, bw %.3g GB/s" % (key, section,
          cell[(section, "lat", 8)]["cells"][key], cell[(section, "bw", 65536)]["cells"][key]))
assert ran >= 2, "softrnic direct and rings at least"
for r in d["rows"]:
    ref, best, q = r["ref"], r["best_peer"], r["ref_over_best"]
    if q is not None:
        assert abs(q - r["cells"][ref] / r["cells"][best]) <= 1e-6 * q, r
assert cell[("same host", "read", 65536)]["cells"]["softrnic"] > 0
assert cell[("same host", "rate", 8)]["cells"]["softrnic"] > 0
print("csv/json: %d rows, %d columns ran" % (len(rows), ran))
EOF
then
	ok "CSV and JSON parse, agree, and every column that ran has its numbers"
else
	fail "CSV/JSON check"
fi

# The sleeping floors, once each with a small count: they build, they
# block instead of spinning (as their JSON says), they give a positive time.
for prog in eventfd_pingpong udp_pingpong; do
	cc -std=gnu11 -O2 -Wall -Wextra -Werror -o "$tmp/$prog" "$SRN_SRC/bench/$prog.c" 2>"$tmp/cc.err" ||
		{ fail "$prog does not build: $(head -3 "$tmp/cc.err")"; continue; }
done
if [ -x "$tmp/eventfd_pingpong" ] && [ -x "$tmp/udp_pingpong" ]; then
	timeout -k 2 30 "$tmp/eventfd_pingpong" -n 200 --timeout 20 --json >"$tmp/efd.json" 2>&1 &&
		timeout -k 2 30 "$tmp/udp_pingpong" --block -n 200 --timeout 20 --json >"$tmp/udpb.json" 2>&1
	if python3 - "$tmp/efd.json" "$tmp/udpb.json" <<'EOF'
import json, sys
for path in sys.argv[1:]:
    d = json.loads(open(path).read())
    assert d["wait"] == "block" and d["iters"] == 200, d
    assert 0 < d["t_min_us"] <= d["t_median_us"] <= d["t_max_us"], d
    assert d["t_avg_us"] > 0, d
    print("  %-16s half RTT median %.3g us, mean %.3g us" % (d["tool"], d["t_median_us"], d["t_avg_us"]))
EOF
	then
		ok "eventfd_pingpong and udp_pingpong --block: 200 blocking round trips each"
	else
		fail "sleeping floors: $(head -c 300 "$tmp/efd.json" "$tmp/udpb.json")"
	fi
	"$tmp/udp_pingpong" -t bw --block >/dev/null 2>&1
	[ $? -eq 2 ] && ok "udp_pingpong -t bw --block: exit 2" || fail "udp_pingpong -t bw --block: want exit 2"
fi

# The poster's cost (issue 29): post_cost builds against this build's
# library and times 2000 direct Writes, spinning target and sleeping.
san=""
ldd "$SRN_BUILD/lib/libibverbs.so.1" 2>/dev/null | grep -q libasan && san="-fsanitize=address,undefined"
if cc -std=gnu11 -O2 -Wall -Wextra -Werror $san -o "$tmp/post_cost" "$SRN_SRC/bench/post_cost.c" \
	"$SRN_SRC/tools/common/qp_up.c" -I"$SRN_SRC/tools" -L"$SRN_BUILD/lib" -l:libibverbs.so.1 \
	-Wl,-rpath,"$SRN_BUILD/lib" 2>"$tmp/cc.err"; then
	if timeout -k 2 60 "$tmp/post_cost" -n 2000 >"$tmp/pc.json" 2>&1 &&
		timeout -k 2 60 "$tmp/post_cost" --spin -n 2000 >>"$tmp/pc.json" 2>&1 &&
		python3 - "$tmp/pc.json" <<'EOF'
import json, sys
lines = open(sys.argv[1]).read().split("\n")
runs = [json.loads(l) for l in lines if l.startswith("{")]
assert len(runs) == 2, lines
for d in runs:
    assert d["iters"] == 2000, d
    for k in ("post_ns", "poll_ns"):
        v = d[k]
        assert 0 < v["min"] <= v["p10"] <= v["p50"] <= v["p90"] and v["mean10_90"] > 0, d
    print("  post_cost (target %s): post p50 %.0f ns, poll p50 %.0f ns" %
          (d["target"], d["post_ns"]["p50"], d["poll_ns"]["p50"]))
EOF
	then
		ok "post_cost: 2000 timed direct Writes, sleeping and spinning target"
	else
		fail "post_cost: $(head -c 300 "$tmp/pc.json")"
	fi
else
	fail "post_cost does not build: $(head -3 "$tmp/cc.err")"
fi

# The event-driven table (issue 24), in its quick form: every row once.
# Not in the sanitizer pass: qperf is timed there against an instrumented
# library, and the table's own code is the same in both passes.
if [ -n "${SRN_ASAN_PRELOAD:-}" ]; then
	ok "compare.sh --events: not run in the sanitizer pass"
elif command -v qperf >/dev/null; then
	start=$SECONDS
	timeout -k 5 180 bash "$SRN_SRC/bench/compare.sh" --events --quick --no-install \
		--build "$SRN_BUILD" --csv "$tmp/ev.csv" --json "$tmp/ev.json" >"$tmp/ev.out" 2>"$tmp/ev.err"
	rc=$?
	cat "$tmp/ev.out"
	if [ "$rc" -ne 0 ]; then
		fail "compare.sh --events --quick exited $rc after $((SECONDS - start)) s: $(tail -5 "$tmp/ev.err")"
	else
		ok "compare.sh --events --quick finished in $((SECONDS - start)) s"
		grep -Eq '^event-driven, 8 B \(us\) +one host +/TCP +/floor +(2 netns|UDP lo) +/TCP +/floor$' \
			"$tmp/ev.out" && ok "event-driven header" || fail "no event-driven header in the output"
		if python3 - "$tmp/ev.csv" "$tmp/ev.json" <<'EOF'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
d = json.load(open(sys.argv[2]))
assert len(d["host"]["load_start"].split()) == 3, d["host"]
assert len(rows) == len(d["rows"]) == 13, (len(rows), len(d["rows"]))
notes = "\n".join(d["notes"])
got = {(r["section"], r["row"]): r for r in d["rows"]}
for (sec, row), r in got.items():
    # Every row ran once and has a positive time; a row that failed is in
    # the notes (the table is not a timing test).
    if r["value"] is None:
        assert "%s %s" % (sec, row) in notes, (sec, row, notes)
        print("  %s %s: failed, noted" % (sec, row))
        continue
    assert r["value"] > 0 and len(r["runs"]) == 1, r
    c = [x for x in rows if x["section"] == sec and x["row"] == row][0]
    assert abs(float(c["value"]) - r["value"]) <= 1e-4 * r["value"], (c, r)
    if r["over_floor"] is not None and r["row"] != "rc_read":
        ref = got[(sec, r["floor"])]["value"]
        assert abs(r["over_floor"] - r["value"] / ref) <= 1e-6 * r["over_floor"], r
for sec in ("host", "link"):
    assert any(got[(sec, k)]["value"] for k in ("rc_lat", "rc_write", "rc_read", "rc_poll")), \
        (sec, notes)
    assert got[(sec, "tcp")]["value"] and got[(sec, "udpb")]["value"], (sec, notes)
assert got[("host", "efd")]["value"], notes
print("events csv/json: %d rows" % len(rows))
EOF
		then
			ok "events CSV and JSON parse, agree, and both sections have softrnic, TCP and floor rows"
		else
			fail "events CSV/JSON check"
		fi
	fi
else
	echo "note: qperf not installed: the event-driven table is not exercised"
fi

# Usage errors exit 2.
bash "$SRN_SRC/bench/compare.sh" --peers bogus >/dev/null 2>&1
[ $? -eq 2 ] && ok "unknown peer: exit 2" || fail "unknown peer: want exit 2"
bash "$SRN_SRC/bench/compare.sh" --sizes 0 >/dev/null 2>&1
[ $? -eq 2 ] && ok "bad size: exit 2" || fail "bad size: want exit 2"
bash "$SRN_SRC/bench/compare.sh" --link wire >/dev/null 2>&1
[ $? -eq 2 ] && ok "bad --link: exit 2" || fail "bad --link: want exit 2"
bash "$SRN_SRC/bench/compare.sh" --events --events-time 0.5 >/dev/null 2>&1
[ $? -eq 2 ] && ok "fractional --events-time: exit 2" || fail "bad --events-time: want exit 2"

[ "$bad" -eq 0 ] && { echo PASS; exit 0; }
exit 1
