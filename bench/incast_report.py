#!/usr/bin/env python3
"""incast_report.py - the table and plots of bench/incast.sh.

  incast_report.py --rate RATE --kmax KMAX OUTDIR CASE...

Reads, for each case, OUTDIR/CASE/: the switch's stats (every 100 ms) and
summary, the senders' perf JSON and --series, the probe's JSON and every
softrnic process's counters (`softrnic stat --dump`).  Prints one table with
the cases side by side, writes OUTDIR/incast.tsv (the same, for scripts) and
OUTDIR/incast-CASE.svg: rate per flow and egress queue over time.
"""
import json
import os
import re
import sys

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"]


def scaled(s, base):
    m = re.fullmatch(r"([0-9.]+)([kKmMgG]?)", s)
    if not m:
        raise ValueError(s)
    mul = {"": 1, "k": base, "m": base ** 2, "g": base ** 3}[m.group(2).lower()]
    return float(m.group(1)) * mul


def kv(line):
    return dict(re.findall(r"(\w+)=([^\s]+)", line))


def read_lines(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except OSError:
        return []


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


FLOW_RE = re.compile(r"^t=([0-9.]+) flow 10\.79\.0\.1(\d):\d+>[0-9.]+:4791 proto=17 .*mbps=([0-9.]+)")


def load_case(d, egress="pr"):
    c = {"queue": [], "flows": [], "counters": {}, "ok": True}
    clock = {}          # the switch's t= -> CLOCK_MONOTONIC
    at_switch = {i: {} for i in range(1, 5)}    # sender -> {clock: Mb/s}
    for line in read_lines(os.path.join(d, "switch.stats")):
        if f" port={egress} qbytes=" in line:
            v = kv(line)
            clock[v["t"]] = float(v["clock"])
            c["queue"].append((float(v["clock"]), int(v["qbytes"])))
        m = FLOW_RE.match(line)
        if m and m.group(1) in clock and 1 <= int(m.group(2)) <= 4:
            per = at_switch[int(m.group(2))]
            t = clock[m.group(1)]
            per[t] = per.get(t, 0.0) + float(m.group(3))
    for line in read_lines(os.path.join(d, "switch.sum")):
        v = kv(line)
        if f" port={egress} qbytes=" in line:
            c["sw"] = v
        elif re.search(r" port=p\d rx=", line):
            c["overflow"] = c.get("overflow", 0) + int(v["rx_overflow"])
    for i in range(1, 5):
        j = load_json(os.path.join(d, f"flow{i}.json"))
        mbps = j["results"][0]["bw_MBps"] * 8 if j and j.get("results") else None
        # The plot's rate: what left the bottleneck for this sender each
        # 100 ms (the switch's per-flow stats, RoCE only), averaged over
        # 300 ms: a GSO frame of up to 64 KB leaves at once, so single
        # intervals are lumpy.  The sender's own --series stays in the
        # raw files (completions, signalled in batches: lumpier still).
        pts = sorted(at_switch[i].items())
        # The switch prints a flow from its first frame to the end of the
        # run: keep the span in which it sent.
        busy = [k for k, (_, r) in enumerate(pts) if r > 0]
        pts = pts[busy[0]:busy[-1] + 1] if busy else []
        series = [(pts[k][0], sum(r for _, r in pts[max(0, k - 2):k + 1]) / len(pts[max(0, k - 2):k + 1]))
                  for k in range(len(pts))]
        c["flows"].append({"mbps": mbps, "series": series, "raw": pts})
        c["ok"] &= mbps is not None
    j = load_json(os.path.join(d, "probe.json"))
    c["probe"] = j["results"][0] if j and j.get("results") else None
    for line in read_lines(os.path.join(d, "counters.tsv")):
        f = line.split("\t")
        if len(f) >= 6 and f[3] == "dev":
            c["counters"][f[4]] = c["counters"].get(f[4], 0) + int(f[5])
    return c


def fmt(v, spec="{:.0f}"):
    return "-" if v is None else spec.format(v)


def at_switch(c):
    """Each sender's mean rate at the bottleneck while all four ran (the
    window from the last flow's first interval to the first flow's last,
    the first second of it left out for the flows to settle).  None when
    some flow never got through."""
    raws = [f["raw"] for f in c["flows"]]
    if not all(raws):
        return None
    lo = max(r[0][0] for r in raws) + 1.0
    hi = min(r[-1][0] for r in raws)
    if hi <= lo:
        return None
    out = []
    for r in raws:
        v = [m for t, m in r if lo <= t <= hi]
        out.append(sum(v) / len(v) if v else 0.0)
    return out


def rows_for(c, rate, kmax):
    cnt = c["counters"]
    sw = c.get("sw", {})
    rates = at_switch(c)
    agg = sum(rates) if rates else None
    jain = (sum(rates) ** 2 / (len(rates) * sum(r * r for r in rates))) if rates and sum(rates) else None
    fair = agg / len(rates) if rates else None
    worst = max(abs(r - fair) / fair for r in rates) if rates and fair else None
    q = [b for _, b in c["queue"]]
    above = sum(1 for b in q if b > kmax) / len(q) if q else None
    p = c["probe"]
    marks = int(sw.get("marks", 0))
    cnps = cnt.get("np_cnp_sent", 0)
    return [
        ("aggregate Mb/s at switch", fmt(agg, "{:.1f}")),
        ("of the egress rate", fmt(agg / rate * 1e6 * 100 if agg is not None else None, "{:.0f} %")),
        ("per flow Mb/s at switch", " ".join(fmt(r, "{:.1f}") for r in rates) if rates else "-"),
        ("fairness (Jain)", fmt(jain, "{:.2f}")),
        ("worst flow vs fair share", fmt(worst * 100 if worst is not None else None, "{:.0f} %")),
        ("per sender Mb/s (perf)", " ".join(fmt(f["mbps"], "{:.1f}") if f["mbps"] is not None else "failed"
                                           for f in c["flows"])),
        ("switch drops", sw.get("drops", "-")),
        ("ingress overflow", str(c.get("overflow", "-"))),
        ("ECN marks", sw.get("marks", "-")),
        ("Not-ECT RED would mark", sw.get("not_ect", "-")),
        ("queue max KB", fmt(int(sw["qmax"]) / 1024 if "qmax" in sw else None)),
        ("queue mean KB", fmt(sum(q) / len(q) / 1024 if q else None)),
        ("queue above Kmax", fmt(above * 100 if above is not None else None, "{:.0f} %")),
        ("switch pauses", sw.get("pauses", "-")),
        ("paused ms", sw.get("paused_ms", "-")),
        ("retransmits", str(cnt.get("retransmits", 0))),
        ("local_ack_timeout_err", str(cnt.get("local_ack_timeout_err", 0))),
        ("packet_seq_err", str(cnt.get("packet_seq_err", 0))),
        ("rx_pause", str(cnt.get("rx_pause", 0))),
        ("rx_pause_duration ms", fmt(cnt.get("rx_pause_duration", 0) / 1000)),
        ("np_ecn_marked_roce_packets", str(cnt.get("np_ecn_marked_roce_packets", 0))),
        ("np_cnp_sent", str(cnps)),
        ("rp_cnp_handled", str(cnt.get("rp_cnp_handled", 0))),
        ("probe read p50 us", fmt(p["t_median_us"] if p else None)),
        ("probe read p99 us", fmt(p["t_p99_us"] if p else None)),
        ("DCQCN", dcqcn_state(marks, int(sw.get("not_ect", 0)), cnps, cnt.get("rp_cnp_handled", 0))),
        ("diagnosis", diagnose(c)),
    ]


def dcqcn_state(marks, not_ect, cnps, handled):
    """What the counters say about DCQCN in this case."""
    if not marks and not_ect:
        return "not wired (Not-ECT)"
    if marks and not cnps:
        return "not wired (no CNP)"
    if cnps and not handled:
        return "CNPs not handled"
    return "reacting" if cnps else "-"


def diagnose(c):
    """The operator's reading of the counters (issue 16's two storms)."""
    cnt, sw = c["counters"], c.get("sw", {})
    lost = int(sw.get("drops", 0)) + c.get("overflow", 0)
    if cnt.get("rx_pause", 0) and not lost:
        return "PFC pause storm"
    if cnt.get("retransmits", 0) and lost:
        return "retransmission storm"
    if cnt.get("np_cnp_sent", 0):
        return "DCQCN in control"
    return "no congestion"


def svg(path, name, c, rate, kmax):
    w, h, left, right = 820, 460, 70, 20
    top1, h1, top2, h2 = 40, 210, 300, 120
    starts = [f["series"][0][0] for f in c["flows"] if f["series"]] + [t for t, _ in c["queue"][:1]]
    ends = [f["series"][-1][0] for f in c["flows"] if f["series"]] + [t for t, _ in c["queue"][-1:]]
    if not starts:
        return
    t0, t1 = min(starts), max(ends)
    span = max(t1 - t0, 0.1)
    ymax = max([r for f in c["flows"] for _, r in f["series"]] + [rate / 1e6]) * 1.05
    qmax = max([b for _, b in c["queue"]] + [kmax]) * 1.1 / 1024

    def x(t):
        return left + (t - t0) / span * (w - left - right)

    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
         f'<rect width="{w}" height="{h}" fill="white"/>',
         f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="15">4-to-1 incast, {name}: '
         f'rate per flow (at the switch, 300 ms average) and egress queue</text>']
    for top, hh, label, vmax in ((top1, h1, "Mb/s per flow", ymax), (top2, h2, "queue KB", qmax)):
        o.append(f'<rect x="{left}" y="{top}" width="{w - left - right}" height="{hh}" fill="none" stroke="#888"/>')
        o.append(f'<text x="15" y="{top + hh / 2}" transform="rotate(-90 15 {top + hh / 2})" '
                 f'text-anchor="middle">{label}</text>')
        for k in range(5):
            v = vmax * k / 4
            y = top + hh - hh * k / 4
            o.append(f'<line x1="{left - 4}" x2="{left}" y1="{y:.1f}" y2="{y:.1f}" stroke="#888"/>')
            o.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{v:.0f}</text>')
    for k in range(6):
        t = span * k / 5
        o.append(f'<text x="{x(t0 + t):.1f}" y="{top2 + h2 + 16}" text-anchor="middle">{t:.1f} s</text>')
    fair = rate / 1e6 / 4
    yf = top1 + h1 - h1 * fair / ymax
    o.append(f'<line x1="{left}" x2="{w - right}" y1="{yf:.1f}" y2="{yf:.1f}" stroke="#bbb" stroke-dasharray="4 3"/>')
    o.append(f'<text x="{w - right - 4}" y="{yf - 4:.1f}" text-anchor="end" fill="#888">fair share</text>')
    for i, f in enumerate(c["flows"]):
        if not f["series"]:
            continue
        pts = " ".join(f"{x(t):.1f},{top1 + h1 - h1 * min(r, ymax) / ymax:.1f}" for t, r in f["series"])
        o.append(f'<polyline points="{pts}" fill="none" stroke="{COLORS[i]}" stroke-width="1.5"/>')
        o.append(f'<text x="{left + 10 + 90 * i}" y="{top1 + 15}" fill="{COLORS[i]}">sender {i + 1}</text>')
    yk = top2 + h2 - h2 * (kmax / 1024) / qmax
    o.append(f'<line x1="{left}" x2="{w - right}" y1="{yk:.1f}" y2="{yk:.1f}" stroke="#bbb" stroke-dasharray="4 3"/>')
    o.append(f'<text x="{w - right - 4}" y="{yk - 4:.1f}" text-anchor="end" fill="#888">Kmax</text>')
    if c["queue"]:
        pts = " ".join(f"{x(t):.1f},{top2 + h2 - h2 * b / 1024 / qmax:.1f}" for t, b in c["queue"])
        o.append(f'<polyline points="{pts}" fill="none" stroke="#444" stroke-width="1.2"/>')
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def main():
    args = sys.argv[1:]
    rate, kmax = 100e6, 128 * 1024
    while args and args[0].startswith("--"):
        if args[0] == "--rate":
            rate = scaled(args[1], 1000)
        elif args[0] == "--kmax":
            kmax = scaled(args[1].split(",")[0], 1024)
        args = args[2:]
    out, cases = args[0], args[1:]
    data = {name: load_case(os.path.join(out, name)) for name in cases}
    table = {name: rows_for(data[name], rate, kmax) for name in cases}
    labels = [r[0] for r in table[cases[0]]]
    wl = max(len(x) for x in labels)
    wc = max([24] + [len(r[1]) + 2 for name in cases for r in table[name]])
    print(f"4-to-1 incast through softrnic switch, egress {rate / 1e6:.0f} Mb/s")
    print(" " * wl + "".join(f"{name:>{wc}}" for name in cases))
    for i, lab in enumerate(labels):
        print(f"{lab:<{wl}}" + "".join(f"{table[name][i][1]:>{wc}}" for name in cases))
    with open(os.path.join(out, "incast.tsv"), "w") as f:
        f.write("metric\t" + "\t".join(cases) + "\n")
        for i, lab in enumerate(labels):
            f.write(lab + "\t" + "\t".join(table[name][i][1] for name in cases) + "\n")
    for name in cases:
        svg(os.path.join(out, f"incast-{name}.svg"), name, data[name], rate, kmax)
        if not data[name]["ok"]:
            print(f"note: case {name}: a sender did not finish (see {out}/{name}/)")
    print(f"plots: {out}/incast-*.svg; raw data: {out}/<case>/")


if __name__ == "__main__":
    main()
