#!/usr/bin/env python3
"""events_table.py - renders bench/compare.sh's event-driven latency table.

  events_table.py RAW NOTES META CSV_OUT JSON_OUT MERGE

RAW: "section row rep value" lines (section host or link; value in us);
NOTES: what failed or was skipped; META: "key=value|..." facts of the run.
Prints the table: one row per thing that ran, for each section its value
(median of the repetitions) and the ratios to kernel TCP and to the
section's sleeping floor (medians of the per-repetition ratios: the rows
of one repetition ran within seconds of each other).  Writes the CSV and
JSON when their paths are not empty; MERGE=1 adds an "events" key to the
JSON compare_table.py already wrote instead of writing a new one.
"""
import csv
import json
import statistics
import sys

raw_path, notes_path, meta_s, csv_out, json_out, merge = sys.argv[1:7]
meta = dict(kv.split("=", 1) for kv in meta_s.split("|"))
notes = [line.rstrip("\n") for line in open(notes_path) if line.strip()]
ns = meta["link"] == "ns"

by_rep = {}     # (section, row) -> {rep: value}
for line in open(raw_path):
    sec, row, rep, value = line.rstrip("\n").split("\t")
    by_rep.setdefault((sec, row), {})[rep] = float(value)

# key: (label, what ran)
ROWS = {
    "rc_lat": ("sr rc_lat, events",
               "qperf -cm1 rc_lat: RC Send/Receive ping-pong, each side waiting on its "
               "completion channel (qperf's default)"),
    "rc_write": ("sr rc_rdma_write_lat, events",
                 "qperf -cm1 rc_rdma_write_lat: RDMA Write-with-immediate ping-pong, "
                 "the same waiting"),
    "rc_read": ("sr rc_rdma_read_lat, events *",
                "qperf -cm1 rc_rdma_read_lat: one 8 B RDMA Read after another, the "
                "client waiting on its channel"),
    "rc_poll": ("sr rc_lat -cp1, polled",
                "qperf -cm1 -cp1 rc_lat: the Send/Receive ping-pong, both sides polling "
                "the CQ"),
    "tcp": ("TCP tcp_lat, blocking", "qperf tcp_lat: kernel TCP, blocking send/recv"),
    "efd": ("eventfd floor, blocking",
            "bench/eventfd_pingpong: a token through two blocking eventfds (%s round "
            "trips)" % meta["efd_iters"]),
    "udpb": ("UDP floor, blocking recv",
             "bench/udp_pingpong --block: 8 B UDP echo, both ends in a blocking recv() "
             "(%s round trips)" % meta["udp_iters"]),
}
SECTIONS = [
    ("host", "one host", "two processes on this host, %s and %s (softrnic's default "
     "same-host path: shared-memory rings, direct placement)" % tuple(meta["host_addrs"].split()),
     ["rc_lat", "rc_write", "rc_read", "rc_poll", "tcp", "efd", "udpb"], "efd"),
    ("link", "2 netns" if ns else "UDP lo",
     meta["link_desc"] + (" (softrnic: RoCEv2 over UDP on the veth)" if ns else ""),
     ["rc_lat", "rc_write", "rc_read", "rc_poll", "tcp", "udpb"], "udpb"),
]
# qperf's rc_rdma_read_lat is the whole Read: held against whole round trips.
SCALE = {"rc_read": 2.0}


def med(sec, row):
    v = by_rep.get((sec, row), {})
    return statistics.median(v.values()) if v else None


def paired(sec, row, ref):
    """row / ref for one section, the reference scaled to the row's kind of
    latency: the median of the per-repetition ratios, else of the medians."""
    if row == ref:
        return None
    ra, rb = by_rep.get((sec, row), {}), by_rep.get((sec, ref), {})
    k = SCALE.get(row, 1.0) / SCALE.get(ref, 1.0)
    q = [ra[r] / (rb[r] * k) for r in ra if r in rb and rb[r]]
    if q:
        return statistics.median(q)
    return None


def fmt(v):
    return "-" if v is None else ("%.3g" % v if v < 100 else "%.0f" % v)


table = []
for sec, title, where, rows, floor in SECTIONS:
    for row in rows:
        runs = [by_rep[(sec, row)][r] for r in sorted(by_rep.get((sec, row), {}))]
        table.append({"section": sec, "row": row, "label": ROWS[row][0], "unit": "us",
                      "kind": "whole_read" if row in SCALE else "half_round_trip",
                      "value": med(sec, row), "runs": runs,
                      "median_of_floor_runs": med(sec, row + "_med") if row in ("efd", "udpb")
                      else None,
                      "over_tcp": paired(sec, row, "tcp"),
                      "over_floor": paired(sec, row, floor), "floor": floor})

out = []
out.append("event-driven (sleeping) latency, 8 B - %s" % meta["date"])
out.append("host: %s CPUs, kernel %s; load average %s at the start of this table, %s at its "
           "end" % (meta["nproc"], meta["kernel"], meta["load_start"], meta["load_end"]))
out.append("median of %s run(s) per cell, the rows alternating within each run, %s s of "
           "measuring; qperf -t %s" % (meta["reps"], meta["elapsed"], meta["qperf_secs"]))
out.append("")
hdr = ["event-driven, 8 B (us)"]
for sec, title, where, rows, floor in SECTIONS:
    hdr += [title, "/TCP", "/floor"]
lines = [hdr, "-"]
for row in ROWS:
    cells = [ROWS[row][0]]
    for sec, title, where, rows, floor in SECTIONS:
        if row not in rows:
            cells += ["n/a", "", ""]
            continue
        r = [x for x in table if x["section"] == sec and x["row"] == row][0]
        cells += [fmt(r["value"]), fmt(r["over_tcp"]), fmt(r["over_floor"])]
    lines.append(cells)
w = [max(len(x[i]) for x in lines if x != "-") for i in range(len(hdr))]
for x in lines:
    if x == "-":
        out.append("  ".join("-" * n for n in w))
    else:
        out.append("  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i])
                             for i, c in enumerate(x)).rstrip())
out.append("")
for sec, title, where, rows, floor in SECTIONS:
    out.append("%-8s %s; floor: %s" % (title + ":", where, ROWS[floor][0].split(",")[0]))
for row, (label, what) in ROWS.items():
    out.append("  %-30s %s" % (label, what))
out.append("us: qperf's latency (a mean: time over messages; half the round trip, except *);")
out.append("  the floors' mean half round trip, like for like (their medians: %s)" % ", ".join(
    "%s %s %s" % (title, ROWS[r][0].split(",")[0], fmt(med(sec, r + "_med")))
    for sec, title, _, rows, _ in SECTIONS for r in ("efd", "udpb") if r in rows))
out.append("/TCP, /floor: the row over TCP tcp_lat and over the section's floor, the median of "
           "the per-run ratios;")
out.append("  * rc_rdma_read_lat is the whole Read (request and response): its ratios are to "
           "twice the")
out.append("  TCP and floor values, whole round trips. n/a: the eventfd floor is for one host "
           "only (an eventfd")
out.append("  does not cross a network link).")

noisy = []
for r in table:
    v = r["runs"]
    if len(v) >= 2 and min(v) > 0 and max(v) > 2 * min(v):
        noisy.append("%s %s: %s" % (dict((s[0], s[1]) for s in SECTIONS)[r["section"]],
                                    r["label"], ", ".join(fmt(x) for x in v)))
if noisy:
    out.append("")
    out.append("noisy cells (the runs differ by more than 2x; the table shows their median):")
    out.extend("  " + n for n in noisy)
if notes:
    out.append("")
    out.append("notes:")
    out.extend("  " + n for n in notes)
print("\n".join(out))

if csv_out:
    with open(csv_out, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["section", "row", "label", "kind", "unit", "value", "over_tcp",
                     "over_floor", "floor", "runs"])
        for r in table:
            wr.writerow([r["section"], r["row"], r["label"], r["kind"], r["unit"],
                         "" if r["value"] is None else "%.6g" % r["value"],
                         "" if r["over_tcp"] is None else "%.6g" % r["over_tcp"],
                         "" if r["over_floor"] is None else "%.6g" % r["over_floor"],
                         r["floor"], " ".join("%.6g" % x for x in r["runs"])])
if json_out:
    ev = {"host": meta, "rows": table, "what": {k: v[1] for k, v in ROWS.items()},
          "sections": {s[0]: {"label": s[1], "where": s[2], "floor": s[4]} for s in SECTIONS},
          "noisy": noisy, "notes": notes}
    if merge == "1":
        d = json.load(open(json_out))
        d["events"] = ev
    else:
        d = dict(ev, tool="bench/compare.sh --events")
    with open(json_out, "w") as f:
        json.dump(d, f, indent=1)
        f.write("\n")
