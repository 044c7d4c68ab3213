#!/bin/bash
# shared_addr_ab.sh - what sharing one device address costs: `softrnic
# perf --loopback` (server and client, two processes, with no variables:
# the default device) with build A next to build B, alternating A B A B
# so a noisy spell hits both alike, medians printed with the ratio A/B.
#
#   bench/shared_addr_ab.sh --a BUILD_A --b BUILD_B [--reps R]
#
# Use it with A = a build where both processes share 127.0.0.1 (the default
# since issue 26) and B = one where each took its own 127.0.0.N; or pass
# --b-env 'SOFTRNIC_DEVICES=addr=auto,share=0' to compare one build with
# itself.  Rows: 8-byte Write latency (t_median, µs) and 64 KiB Write
# bandwidth (MB/s) over the UDP link (SOFTRNIC_SHM=0: the kernel's
# SO_REUSEPORT group and the steering program on every packet), then the
# 8-byte latency over the same-host rings (SOFTRNIC_DIRECT=0) and with
# direct placement.  Loopback only; every run under `timeout`.
set -uo pipefail
cd "$(dirname "$0")/.."
A= B= REPS=5 AENV= BENV=
while [ $# -gt 0 ]; do
	case $1 in
	--a) A=$2; shift 2 ;;
	--b) B=$2; shift 2 ;;
	--a-env) AENV=$2; shift 2 ;;
	--b-env) BENV=$2; shift 2 ;;
	--reps) REPS=$2; shift 2 ;;
	*) echo "usage: $0 --a BUILD --b BUILD [--a-env VAR=V] [--b-env VAR=V] [--reps R]" >&2; exit 2 ;;
	esac
done
[ -x "$A/bin/softrnic" ] && [ -x "$B/bin/softrnic" ] || { echo "need --a and --b builds" >&2; exit 2; }

# one BUILD ENV ROW: the row's figure from one perf run ("" if it failed).
one() {
	local build=$1 extra=$2 row=$3 port=$((20000 + RANDOM % 20000)) args env
	case $row in
	udp_lat) env="SOFTRNIC_SHM=0"; args="-s 8 -n 20000" ;;
	udp_bw) env="SOFTRNIC_SHM=0"; args="-T bw -s 65536 -n 20000" ;;
	rings_lat) env="SOFTRNIC_DIRECT=0"; args="-s 8 -n 20000" ;;
	direct_lat) env=""; args="-s 8 -n 20000" ;;
	esac
	# shellcheck disable=SC2086
	out=$(env $env $extra timeout -k 5 60 "$build/bin/softrnic" perf --loopback -p "$port" $args 2>&1)
	case $row in
	*_lat) awk '$1 == 8 && NF >= 7 { print $4 }' <<<"$out" ;;
	*_bw) awk '$1 == 65536 && NF >= 5 { print $3 }' <<<"$out" ;;
	esac
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "# $(date -u +%F\ %T) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $REPS alternating runs"
echo "# A: $A ${AENV}"
echo "# B: $B ${BENV}"
printf '%-12s %12s %12s %8s\n' row A B A/B
for row in udp_lat udp_bw rings_lat direct_lat; do
	: >/tmp/ab.$$.a
	: >/tmp/ab.$$.b
	for ((r = 0; r < REPS; r++)); do
		one "$A" "$AENV" $row >>/tmp/ab.$$.a
		one "$B" "$BENV" $row >>/tmp/ab.$$.b
	done
	ma=$(median </tmp/ab.$$.a) mb=$(median </tmp/ab.$$.b)
	ratio=$(awk -v a="${ma:-0}" -v b="${mb:-0}" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }')
	printf '%-12s %12s %12s %8s\n' $row "${ma:-failed}" "${mb:-failed}" "$ratio"
done
rm -f /tmp/ab.$$.a /tmp/ab.$$.b
