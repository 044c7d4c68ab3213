#!/bin/bash
# test_cc_line_pace.sh - SOFTRNIC_DCQCN_pace_line_rate holds every RC QP to
# the line rate from its first packet (the incast demo's 100 Mb/s links).
# Two processes (`softrnic perf --loopback` forks the server) over the UDP
# link (SOFTRNIC_SHM=0), 64 KiB RDMA Writes for 3 s:
#   line_rate=40 with pace_line_rate=1: under 1.3 x 40 Mb/s and at least
#     a fifth of it (generous: a busy 2-CPU machine);
#   line_rate=40 without it: not paced, well over 60 Mb/s (the default
#     costs nothing and changes nothing).
set -u
: "${SRN_BUILD:?SRN_BUILD must point at the build directory}"
SOFTRNIC="$SRN_BUILD/bin/softrnic"
command -v python3 >/dev/null || { echo "SKIP: python3 needed"; exit 77; }
unset SOFTRNIC_DEVICES SOFTRNIC_CONFIG SOFTRNIC_PCAP
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
mbps() {  # mbps PACE: Mb/s of a 3 s write stream, or empty
    SOFTRNIC_SHM=0 SOFTRNIC_DCQCN_line_rate=40 SOFTRNIC_DCQCN_pace_line_rate=$1 \
        timeout -k 5 60 "$SOFTRNIC" perf --loopback -T bw -o write -s 65536 -D 3 --json \
        >"$tmp/out.json" 2>"$tmp/err" || { cat "$tmp/err"; return 1; }
    python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["results"][0]["bw_Gbps"]*1000))' \
        "$tmp/out.json"
}
paced=$(mbps 1) || { echo "FAIL: paced run"; exit 1; }
echo "pace_line_rate=1, line_rate=40: $paced Mb/s"
[ "$paced" -le 52 ] && [ "$paced" -ge 8 ] || { echo "FAIL: not held to 40 Mb/s"; fail=1; }
free=$(mbps 0) || { echo "FAIL: unpaced run"; exit 1; }
echo "pace_line_rate=0, line_rate=40: $free Mb/s"
[ "$free" -gt 60 ] || { echo "FAIL: paced without being asked"; fail=1; }
exit $fail
