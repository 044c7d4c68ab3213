#!/bin/bash
# `softrnic stat --json`, read from another process while a benchmark runs,
# shows the benchmark's counters increasing: two samples a second apart,
# the second with more packets sent than the first, for the same pid.
set -u
dir=$(mktemp -d)
export SOFTRNIC_DIAG_DIR=$dir
trap 'kill $bench 2>/dev/null; rm -rf "$dir"' EXIT
# Packets on the rings, as before same-host Writes were placed directly
# (then only the requester's direct_write moves, and the run ended between
# two samples once in three at load 20).
SOFTRNIC_DIRECT=0 "$SRN_BUILD/bin/softrnic" perf --loopback -T bw --size 4096 -D 6 >/dev/null 2>&1 &
bench=$!
sample() {
    "$SRN_BUILD/bin/softrnic" stat --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
live = [x for x in d["devices"] if x["state"] == "running"]
print(sum(x["counters"].get("sent_pkts", 0) for x in live), len(live))'
}
a=""
# Wait (bounded: 60 s, or the benchmark's end) until both ends run: at
# load 30 the two processes took more than the 4 s once allowed to start.
for _ in $(seq 300); do
    kill -0 $bench 2>/dev/null || break
    a=$(sample)
    [ "${a#* }" -ge 2 ] 2>/dev/null && [ "${a% *}" -gt 0 ] && break
    sleep 0.1
done
# Sample again until the count rises, for as long as the benchmark runs:
# a fixed wait could outlast the benchmark on a loaded machine, where each
# sample (a process and a python) may itself take a second.
# What each running process costs: its CPU and its progress thread's
# (the rings' target spends its time there), read from /proc by stat.
cpu=$("$SRN_BUILD/bin/softrnic" stat --json | python3 -c '
import json, sys
live = [x for x in json.load(sys.stdin)["devices"] if x["state"] == "running"]
ok = live and all(isinstance(x.get("process_cpu_s"), (int, float)) and
                  isinstance(x.get("progress_thread_cpu_s"), (int, float)) and
                  0 <= x["progress_thread_cpu_s"] <= x["process_cpu_s"] + 0.01 for x in live)
print("%s %.2f" % ("ok" if ok else "bad", sum(x.get("process_cpu_s", 0) for x in live)))')
b=$a
for _ in $(seq 60); do
    sleep 0.2
    kill -0 $bench 2>/dev/null || break
    b=$(sample)
    [ "${b% *}" -gt "${a% *}" ] 2>/dev/null && break
done
echo "sent_pkts of the running processes: ${a% *} then ${b% *} (${b#* } processes)"
wait $bench || { echo "FAIL: benchmark failed"; exit 1; }
[ "${a#* }" -ge 2 ] || { echo "FAIL: benchmark processes not seen running"; exit 1; }
[ "${b% *}" -gt "${a% *}" ] || { echo "FAIL: counters did not increase"; exit 1; }
[ "${cpu% *}" = ok ] || { echo "FAIL: stat --json lacks process_cpu_s / progress_thread_cpu_s: $cpu"; exit 1; }
echo "ok: counters read live from outside the processes increase; their CPU ${cpu#* } s"
