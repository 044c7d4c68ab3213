#!/usr/bin/env python3
"""compare_table.py - turns bench/compare.sh's raw runs into its table.

  compare_table.py RAW NA NOTES META CSV_OUT JSON_OUT

RAW: "column metric size rep value" lines; NA: "column metric reason" for
cells a tool cannot measure; NOTES: what failed or was skipped; META:
"key=value|..." host facts.  Prints the table (two sections: same host and
the UDP link, each column against the others of its section), the targets
of issues 6 and 14 read from the same run, noisy cells and notes; writes
the CSV and JSON when their paths are not empty.  Medians only: the runs
alternated between columns, so the ratios within a run are what count.
"""
import csv
import json
import statistics
import sys

raw_path, na_path, notes_path, meta_s, csv_out, json_out = sys.argv[1:7]
meta = dict(kv.split("=", 1) for kv in meta_s.split("|"))
lat_sizes = [int(s) for s in meta["lat_sizes"].split()]
bw_sizes = [int(s) for s in meta["bw_sizes"].split()]
read_size = int(meta["read_size"])
ran = set(meta["columns"].split())
quick = meta["quick"] == "1"
ns = meta["link"] == "ns"
notes = [line.rstrip("\n") for line in open(notes_path) if line.strip()]

runs = {}
by_rep = {}     # (column, metric, size) -> {rep: value}: for paired ratios
for line in open(raw_path):
    col, metric, size, rep, value = line.rstrip("\n").split("\t")
    runs.setdefault((col, metric, int(size)), []).append(float(value))
    by_rep.setdefault((col, metric, int(size)), {})[rep] = float(value)
na = {}
for line in open(na_path):
    col, metric, reason = line.rstrip("\n").split("\t", 2)
    na[(col, metric)] = reason

# key: (header label, what ran)
COLUMNS = {
    "softrnic": ("sr direct", "`softrnic perf --loopback`, RC Write/Read; same-host peers place "
                 "Writes and Reads directly in each other's memory (the default)"),
    "rings": ("sr rings", "the same with SOFTRNIC_DIRECT=0: RoCEv2 packets through the "
              "shared-memory rings"),
    "ucxposix": ("UCX posix", "ucx_perftest, UCP put / get, UCX_TLS=posix,self"),
    "ucxcma": ("UCX cma", "ucx_perftest -x cma, UCT put / get zero-copy "
               "(process_vm_writev/readv; UCP cannot run on cma alone)"),
    "fishm": ("fi shm", "fi_pingpong -p shm -e rdm"),
    "ucxrc": ("UCX rc/sr", "softrnic run -- ucx_perftest, UCP put / get, "
              "UCX_TLS=rc_verbs,ud_verbs:aux"),
    "ucxud": ("UCX ud/sr", "the same with UCX_TLS=ud_verbs"),
    "firxd": ("fi rxd/sr", "softrnic run -- fi_pingpong -p 'verbs;ofi_rxd' -e rdm "
              "(RDM over the verbs DGRAM endpoint)"),
    "srudp": ("sr UDP", "softrnic perf, RC Write/Read as RoCEv2 over UDP"
              + ("" if ns else " (SOFTRNIC_SHM=0, 127.0.0.N)")),
    "ucx": ("UCX tcp", "ucx_perftest, UCP put / get, UCX_TLS=tcp,self"),
    "libfabric": ("fi " + meta["fi_prov"], "fi_pingpong -p %s -e msg" % meta["fi_prov"]),
    "udp": ("UDP floor", "bench/udp_pingpong: raw UDP, both ends busy-polling"),
    "ucxrcudp": ("UCX rc/sr", "softrnic run -- ucx_perftest, UCX_TLS=rc_verbs,ud_verbs:aux"
                 + ("" if ns else ", SOFTRNIC_SHM=0")),
    "fiverbs": ("fi verbs/sr", "softrnic run -- fi_pingpong -p verbs -e msg (rdma_cm wire-up)"),
}
# (title, where, columns, softrnic's column, the native peers it is held against)
SECTIONS = [
    ("same host", "two processes on this host",
     ["softrnic", "rings", "ucxposix", "ucxcma", "fishm", "ucxrc", "ucxud", "firxd"],
     "softrnic", ["ucxposix", "ucxcma", "fishm"]),
    ("UDP link", meta["link_desc"],
     ["srudp", "ucx", "libfabric", "udp", "ucxrcudp", "fiverbs"],
     "srudp", ["ucx", "libfabric"]),
]
PINGPONG = {"fishm", "firxd", "libfabric", "fiverbs"}   # fi_pingpong: one message in flight
METRICS = {"lat": ("latency", "us", "lower"), "bw": ("write", "GB/s", "higher"),
           "read": ("read", "GB/s", "higher"), "rate": ("rate", "Mmsg/s", "higher")}
ROWS = ([("lat", s) for s in lat_sizes] + [("bw", s) for s in bw_sizes] +
        [("read", read_size), ("rate", 8)])


def med(col, metric, size):
    v = runs.get((col, metric, size))
    return statistics.median(v) if v else None


def paired(a, b, metric, size):
    """a / b for one cell: the median of the per-run ratios (the columns of
    one run were measured minutes apart at most, so a noisy spell cancels),
    else the ratio of the medians."""
    ra, rb = by_rep.get((a, metric, size), {}), by_rep.get((b, metric, size), {})
    q = [ra[k] / rb[k] for k in ra if k in rb and rb[k]]
    if q:
        return statistics.median(q)
    va, vb = med(a, metric, size), med(b, metric, size)
    return va / vb if va is not None and vb else None


def human(size):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= div and size % div == 0:
            return "%d %s" % (size // div, unit)
    return "%d B" % size


def fmt(v):
    return "%.3g" % v if v < 100 else "%.0f" % v


def better(metric, a, b):
    return a < b if METRICS[metric][2] == "lower" else a > b


def best_of(cols, metric, size):
    """The best native peer's (value, column) for a cell, or (None, None)."""
    best = (None, None)
    for c in cols:
        v = med(c, metric, size)
        if v is not None and (best[0] is None or better(metric, v, best[0])):
            best = (v, c)
    return best


table = []
for title, _where, cols, ref, natives in SECTIONS:
    for metric, size in ROWS:
        row = {"section": title, "metric": metric, "size": size, "unit": METRICS[metric][1],
               "better": METRICS[metric][2], "cells": {}, "runs": {}, "na": {}}
        for c in cols:
            row["cells"][c] = med(c, metric, size)
            row["runs"][c] = runs.get((c, metric, size), [])
            if (c, metric) in na:
                row["na"][c] = na[(c, metric)]
        bv, bc = best_of(natives, metric, size)
        rv = row["cells"][ref]
        row["ref"] = ref
        row["best_peer"] = bc
        row["ref_over_best"] = paired(ref, bc, metric, size) if rv is not None and bv else None
        if title == "UDP link":
            row["ref_over_floor"] = paired(ref, "udp", metric, size)
        table.append(row)

out = []
out.append("softrnic next to UCX, libfabric and raw UDP, like against like - %s" % meta["date"])
out.append("host: %s CPUs, kernel %s; load average %s at start, %s at end; CPU idle at start %s%%"
           % (meta["nproc"], meta["kernel"], meta["load_start"], meta["load_end"],
              meta["idle_start"]))
out.append("median of %s run(s) per cell, the columns alternating within each run, %s s of "
           "measuring; compare columns of one section of this run" % (meta["reps"], meta["elapsed"]))
lines = []
for title, where, cols, ref, natives in SECTIONS:
    hdr = [title] + [COLUMNS[c][0] for c in cols] + ["sr/best"]
    if title == "UDP link":
        hdr.append("sr/floor")
    lines.append(None)
    lines.append(hdr)
    lines.append("-")
    for row in (r for r in table if r["section"] == title):
        name = "%s %s (%s)" % (METRICS[row["metric"]][0], human(row["size"]), row["unit"])
        cells = []
        for c in cols:
            v = row["cells"][c]
            if c in row["na"]:
                cells.append("n/a")
            elif v is None:
                cells.append("-")
            else:
                star = "*" if c in PINGPONG and row["metric"] == "bw" else ""
                cells.append(fmt(v) + star)
        r = row["ref_over_best"]
        cells.append("-" if r is None else "%.3g %s" % (r, COLUMNS[row["best_peer"]][0]))
        if title == "UDP link":
            f = row["ref_over_floor"]
            cells.append("-" if f is None else "%.3g" % f)
        lines.append([name] + cells)
# One set of widths per section, so each reads as its own block.
block = []
for item in lines + [None]:
    if item is None:
        if block:
            w = [max(len(x[i]) for x in block if x != "-") for i in range(len(block[0]))]
            for x in block:
                if x == "-":
                    out.append("  ".join("-" * n for n in w))
                else:
                    out.append("  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i])
                                         for i, c in enumerate(x)))
            block = []
        out.append("")
        continue
    block.append(item)
out.pop()

out.append("")
for title, where, cols, ref, natives in SECTIONS:
    out.append("%s: %s" % (title, where))
    for c in cols:
        out.append("  %-11s %s%s" % (COLUMNS[c][0], COLUMNS[c][1],
                                     "" if c in ran else "  [not run: see notes]"))
out.append("latency: half the round trip, median (RDMA Write / UCP put ping-pong; fi_pingpong's "
           "send/receive; a UDP echo)")
out.append("write, read: one direction, streaming, 10^9 B/s (RC Write or Read / UCP put or get); "
           "* fi_pingpong only ping-pongs:")
out.append("  its number is size / half round trip with one message in flight, not a stream")
out.append("rate: 8 B Writes per second, unsignaled, 64 per post; the UDP floor: one datagram "
           "per message")
out.append("sr/best: softrnic / the best of its section's own transports (same host: UCX posix, "
           "UCX cma, fi shm;")
out.append("  UDP link: UCX tcp, fi %s); sr/floor: softrnic's UDP link / raw UDP; below 1 is "
           "better for latency," % meta["fi_prov"])
out.append("  above 1 for write, read and rate. The rc/sr, ud/sr, rxd/sr and verbs/sr columns are "
           "that middleware")
out.append("  running over softrnic: read them against the same middleware's own transports.")
out.append("Ratios and targets are the median of the per-run ratios (a run measures its columns "
           "together).")
reasons = {}
for (c, metric), why in sorted(na.items()):
    reasons.setdefault((metric, why), []).append(COLUMNS[c][0])
for (metric, why), labels in sorted(reasons.items()):
    # Sections share labels (UCX rc/sr): name each once.
    out.append("n/a %s: %s (%s)" % (METRICS[metric][0], why, ", ".join(dict.fromkeys(labels))))
if quick:
    out.append("--quick: read and rate for softrnic direct only; the others show '-'")
idle = med("softrnic", "idle", 0)
out.append("idle CPU: %s (two processes with a connected RC QP each, sleeping; the busier one)"
           % ("-" if idle is None else "%.3g %% of a core" % idle))

targets = []


def target(text, value, ok, shown):
    targets.append({"target": text, "value": value, "met": ok})
    out.append("  %-58s %-18s %s" % (text, shown, "n/a" if ok is None else
                                     ("met" if ok else "NOT met")))


def ratio_target(text, a, b, want, metric, size):
    r = paired(a, b, metric, size)
    target(text, r, None if r is None else r >= want, "-" if r is None else "%.2f x" % r)


out.append("")
out.append("targets (issues 6 and 14), read from this run:")
r = paired("srudp", "udp", "lat", 8)
target("UDP link: RC Write 8 B latency <= 1.2 x UDP floor", r, None if r is None else r <= 1.2,
       "-" if r is None else "%.2f x" % r)
for s in [s for s in bw_sizes if s >= 65536]:
    _, peer = best_of(["ucx", "libfabric"], "bw", s)
    ratio_target("UDP link: RC Write %s >= best TCP peer" % human(s), "srudp", peer, 1.0, "bw", s)
v = med("softrnic", "rate", 8)
target("same host: 8 B Writes/s on one QP >= 1.5 M", v, None if v is None else v >= 1.5,
       "-" if v is None else "%.2f M/s" % v)
v = med("srudp", "rate", 8)
target("UDP link: 8 B Writes/s on one QP >= 1.5 M", v, None if v is None else v >= 1.5,
       "-" if v is None else "%.2f M/s" % v)
target("idle process (connected QP) < 1 % of a core", idle, None if idle is None else idle < 1,
       "-" if idle is None else "%.2f %%" % idle)
big = max(bw_sizes)
for metric, word in (("bw", "Write"), ("read", "Read")):
    s = big if metric == "bw" else read_size
    ratio_target("same host: %s %s direct >= 1.5 x rings" % (word, human(s)), "softrnic",
                 "rings", 1.5, metric, s)
    ratio_target("same host: %s %s direct >= UCX cma" % (word, human(s)), "softrnic",
                 "ucxcma", 1.0, metric, s)

noisy = []
for row in table:
    for c, vals in row["runs"].items():
        if len(vals) >= 2 and min(vals) > 0 and max(vals) > 2 * min(vals):
            noisy.append("%s %s %s: %s" % (COLUMNS[c][0], METRICS[row["metric"]][0],
                                           human(row["size"]), ", ".join(fmt(v) for v in vals)))
if noisy:
    out.append("")
    out.append("noisy cells (the runs differ by more than 2x; the table shows their median):")
    out.extend("  " + n for n in noisy)
if notes:
    out.append("")
    out.append("notes:")
    out.extend("  " + n for n in notes)
print("\n".join(out))

KEYS = [c for _, _, cols, _, _ in SECTIONS for c in cols]
if csv_out:
    with open(csv_out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["section", "metric", "size", "unit", "better"] + KEYS +
                   ["best_peer", "sr_over_best", "sr_over_floor"])
        for r in table:
            cells = ["" if r["cells"].get(k) is None else "%.6g" % r["cells"][k] for k in KEYS]
            ratios = [r["ref_over_best"], r.get("ref_over_floor")]
            w.writerow([r["section"], r["metric"], r["size"], r["unit"], r["better"]] + cells +
                       [r["best_peer"] or ""] + ["" if x is None else "%.6g" % x for x in ratios])
if json_out:
    with open(json_out, "w") as f:
        json.dump({"tool": "bench/compare.sh", "host": meta,
                   "columns": {k: {"label": v[0], "what": v[1], "ran": k in ran}
                               for k, v in COLUMNS.items()},
                   "rows": table, "targets": targets, "noisy": noisy, "notes": notes},
                  f, indent=1)
        f.write("\n")
