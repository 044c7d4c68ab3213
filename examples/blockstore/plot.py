#!/usr/bin/env python3
"""plot.py CSV MD SVG NOTE - the block store bench (bench.sh) as a markdown
table and an SVG plot.  Standard library only: the SVG is written by hand."""
import csv
import sys

MODES = ["tcp", "shm", "udp", "netns", "tcp-netns"]
NAMES = {"tcp": "TCP twin", "shm": "softrnic rings", "udp": "softrnic UDP",
         "netns": "softrnic 2 netns", "tcp-netns": "TCP 2 netns"}
COLORS = {"tcp": "#888888", "shm": "#1f77b4", "udp": "#2ca02c", "netns": "#9467bd",
          "tcp-netns": "#bbbbbb", "seed TCP": "#d62728", "seed RDMA": "#ff9896"}
OPS = ["write", "read", "read-srv"]


def load(path):
    """One row per (mode, op, qd, clients): of repeated runs, the one with
    the median p50; its p50 range over the runs is kept in "spread"."""
    runs = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            runs.setdefault((r["mode"], r["op"], int(r["qd"]), int(r["clients"])), []).append(r)
    rows = {}
    for k, rs in runs.items():
        rs.sort(key=lambda r: float(r["p50_us"]))
        r = dict(rs[(len(rs) - 1) // 2])
        r["spread"] = "%s-%s" % (rs[0]["p50_us"], rs[-1]["p50_us"]) if len(rs) > 1 else ""
        r["errors"] = str(sum(int(x["errors"]) for x in rs))
        rows[k] = r
    return rows


def cell(r):
    if not r:
        return "-"
    bad = " **%s errors**" % r["errors"] if r["errors"] != "0" else ""
    hits = " (%s%% RDMA Read)" % r["rdma_read_hits_pct"] if r["op"] == "read" and r["mode"] not in ("tcp", "tcp-netns") else ""
    spread = " [p50 %s]" % r["spread"] if r["spread"] else ""
    return "%s / %s us, %.1f k, %s us%s%s%s" % (r["p50_us"], r["p99_us"], float(r["iops"]) / 1e3,
                                                r["cpu_us_per_io"], hits, spread, bad)


def table(rows, note):
    modes = [m for m in MODES if any(k[0] == m for k in rows)]
    out = ["Run: %s." % note, ""]
    # The seed's comparison first: one 4 KiB write at a time.
    w = {m: rows.get((m, "write", 1, 1)) for m in modes}
    out += ["4 KiB write, queue depth 1, one client (the seed: 45 us TCP, 7 us RDMA, "
            "6.4x; about 60 % less server CPU):", "",
            "| | p50 latency | p50 over the runs | p99 | server CPU per write | vs TCP twin (latency, CPU) |",
            "|---|---|---|---|---|---|",
            "| seed, RoCE hardware, TCP | 45 us | | | | |",
            "| seed, RoCE hardware, RDMA | 7 us | | | | 6.4x faster, ~60 % less CPU |"]
    for m in modes:
        r = w[m]
        if not r:
            continue
        base = w.get("tcp-netns" if m == "netns" else "tcp")
        ratio = ""
        if base and m not in ("tcp", "tcp-netns"):
            ratio = "%.2fx faster, CPU %+.0f %%" % (
                float(base["p50_us"]) / max(float(r["p50_us"]), 0.01),
                100 * (float(r["cpu_us_per_io"]) / max(float(base["cpu_us_per_io"]), 0.01) - 1))
        out.append("| %s | %s us | %s | %s us | %s us | %s |" % (
            NAMES[m], r["p50_us"], r["spread"], r["p99_us"], r["cpu_us_per_io"], ratio))
    out += ["", "Every row: p50 / p99 latency, IOPS, server CPU (all threads) per I/O"
            " [p50 range over the runs]:", "",
            "| op | QD per client | clients | " + " | ".join(NAMES[m] for m in modes) + " |",
            "|---|---|---|" + "---|" * len(modes)]
    for clients in (1, 4):
        for qd in (1, 32):
            for op in OPS:
                out.append("| %s | %d | %d | %s |" % (op, qd, clients, " | ".join(
                    cell(rows.get((m, op, qd, clients))) for m in modes)))
    return "\n".join(out) + "\n"


def bars(x0, title, groups, series, values, unit, width=300, height=220):
    """One panel of grouped bars; values[(group, series)] -> number."""
    vmax = max([v for v in values.values() if v] + [1]) * 1.15
    s = ['<text x="%d" y="18" font-size="12" font-weight="bold">%s</text>' % (x0 + 10, title)]
    top, base = 30, 30 + height
    gw = (width - 40) / max(len(groups), 1)
    bw = gw * 0.8 / max(len(series), 1)
    s.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (x0 + 30, base, x0 + width, base))
    for gi, g in enumerate(groups):
        gx = x0 + 30 + gi * gw + gw * 0.1
        for si, ser in enumerate(series):
            v = values.get((g, ser))
            if v is None:
                continue
            h = height * v / vmax
            x = gx + si * bw
            s.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %g %s</title></rect>'
                     % (x, base - h, bw - 1, h, COLORS.get(ser, "#444"), ser, g, v, unit))
            s.append('<text x="%.1f" y="%.1f" font-size="8" text-anchor="middle">%s</text>'
                     % (x + bw / 2, base - h - 2, ("%.0f" % v) if v >= 10 else ("%.1f" % v)))
        s.append('<text x="%.1f" y="%d" font-size="10" text-anchor="middle">%s</text>'
                 % (gx + gw * 0.4, base + 14, g))
    s.append('<text x="%d" y="%d" font-size="9">%s</text>' % (x0 + 30, base + 28, unit))
    return s


def svg(rows, path, note):
    modes = [m for m in MODES if any(k[0] == m for k in rows)]
    def val(m, op, qd, n, key):
        r = rows.get((m, op, qd, n))
        return float(r[key]) if r else None
    lat = {(op, m): val(m, op, 1, 1, "p50_us") for op in OPS for m in modes}
    lat[("write", "seed TCP")] = 45.0
    lat[("write", "seed RDMA")] = 7.0
    iops = {(op, m): (val(m, op, 32, 4, "iops") or 0) / 1e3 for op in OPS for m in modes}
    cpu = {(op, m): val(m, op, 1, 1, "cpu_us_per_io") for op in OPS for m in modes}
    parts = []
    parts += bars(0, "p50 latency, QD 1, 1 client", OPS, modes + ["seed TCP", "seed RDMA"], lat, "us")
    parts += bars(320, "IOPS, QD 32, 4 clients", OPS, modes, iops, "thousand I/Os per second")
    parts += bars(640, "server CPU per I/O, QD 1, 1 client", OPS, modes, cpu, "us of CPU (all server threads)")
    ly = 300
    for i, m in enumerate(modes + ["seed TCP", "seed RDMA"]):
        x = 10 + i * 135
        parts.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/>' % (x, ly, COLORS[m]))
        parts.append('<text x="%d" y="%d" font-size="10">%s</text>' % (x + 14, ly + 9, NAMES.get(m, m)))
    parts.append('<text x="10" y="%d" font-size="9" fill="#555">%s</text>' % (ly + 28, note))
    with open(path, "w") as f:
        f.write('<svg xmlns="http://www.w3.org/2000/svg" width="960" height="340" font-family="sans-serif">\n'
                '<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(parts) + "\n</svg>\n")


def main():
    csv_path, md_path, svg_path, note = sys.argv[1:5]
    rows = load(csv_path)
    with open(md_path, "w") as f:
        f.write(table(rows, note))
    svg(rows, svg_path, note)


if __name__ == "__main__":
    main()
