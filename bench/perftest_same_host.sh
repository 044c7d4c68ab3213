#!/bin/bash
# perftest_same_host.sh - what a perftest user sees on one host (issue 14):
# Debian's unmodified ib_* programs, both ends through `softrnic run`, with
# same-host direct placement (the default) and on the rings
# (SOFTRNIC_DIRECT=0), the two alternating within each repetition so a
# noisy spell hits both.  Prints one table: typical latency (perftest's
# t_typical), average bandwidth, and the passive target's CPU time over
# each bandwidth run (getrusage of the server process).
#
#   bench/perftest_same_host.sh [--reps N] [--seconds S] [--iters N] [--build DIR]
#
# --iters: iterations of each latency run (default 2000).  On the rings
# ib_write_lat takes milliseconds an iteration on 2 CPUs (both ends spin
# and the target's progress thread waits for a CPU), so a smoke run
# wants few.
#
# Loopback only; every run under `timeout`.  Needs perftest and python3.
set -u
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${SRN_BUILD:-$SRC/build}
REPS=3
SECS=3
ITERS=2000
while [ $# -gt 0 ]; do
	case $1 in
	--reps) REPS=$2; shift ;;
	--seconds) SECS=$2; shift ;;
	--iters) ITERS=$2; shift ;;
	--build) BUILD=$2; shift ;;
	*) echo "usage: $0 [--reps N] [--seconds S] [--iters N] [--build DIR]" >&2; exit 2 ;;
	esac
	shift
done
SR=$BUILD/bin/softrnic
[ -x "$SR" ] || { echo "build first: $SR" >&2; exit 1; }
command -v ib_write_lat >/dev/null || { echo "perftest is not installed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A sanitized build's library needs the ASan runtime loaded first
# (scripts/test.sh sets SRN_ASAN_PRELOAD); perftest's leaks are not ours.
RUN=("$SR" run --)
[ -n "${SRN_ASAN_PRELOAD:-}" ] &&
	RUN=(env LD_PRELOAD="$SRN_ASAN_PRELOAD" ASAN_OPTIONS=detect_leaks=0 "$SR" run --)

# with_cpu FILE CMD...: run CMD; write its CPU seconds (user + system,
# getrusage of the finished child) to FILE.
with_cpu() {
	python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[2:])
r = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write("%.3f\n" % (r.ru_utime + r.ru_stime))' "$@" >"$tmp/server.out" 2>&1
}

# one MODE PROGRAM ARGS...: "value cpu" of one server/client pair.  The
# value is t_typical (latency) or BW average MB/s (bandwidth).
one() {
	local mode=$1 prog=$2 port=$((20000 + RANDOM % 10000)) direct=1
	shift 2
	[ "$mode" = rings ] && direct=0
	rm -f "$tmp/cpu"
	SOFTRNIC_DIRECT=$direct with_cpu "$tmp/cpu" timeout -k 5 60 "${RUN[@]}" "$prog" -p "$port" "$@" &
	local spid=$!
	# The server may take a moment to listen: the client tries again
	# (bounded) while the server is alive and the client did not connect.
	local try
	for ((try = 0; try < 10; try++)); do
		sleep 0.3
		SOFTRNIC_DIRECT=$direct timeout -k 5 60 "${RUN[@]}" "$prog" -p "$port" "$@" \
			127.0.0.1 >"$tmp/client.out" 2>&1 && break
		grep -q "Couldn't connect\|Unable to open file descriptor" "$tmp/client.out" &&
			kill -0 "$spid" 2>/dev/null || break
	done
	wait "$spid"
	local v
	case $prog in
	*_lat) v=$(awk '$1 ~ /^[0-9]+$/ && NF >= 5 { print $5 }' "$tmp/client.out" | tail -1) ;;
	*) v=$(awk '$1 ~ /^[0-9]+$/ && NF >= 4 { print $4 }' "$tmp/client.out" | tail -1) ;;
	esac
	echo "${v:-fail} $(cat "$tmp/cpu" 2>/dev/null || echo -)"
}

ROWS=(
	"ib_write_lat -s 2 typical (us)|ib_write_lat -s 2 -n $ITERS"
	"ib_read_lat -s 2 typical (us)|ib_read_lat -s 2 -n $ITERS"
	"ib_atomic_lat typical (us)|ib_atomic_lat -n $ITERS"
	"ib_write_bw 64 KiB (MB/s)|ib_write_bw -s 65536 -D $SECS"
	"ib_write_bw 1 MiB (MB/s)|ib_write_bw -s 1048576 -D $SECS"
	"ib_read_bw 1 MiB (MB/s)|ib_read_bw -s 1048576 -D $SECS"
)
echo "perftest on one host, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg) at start, $REPS run(s) per cell"
printf '%-32s %-24s %-24s %s\n' "row" "direct placement" "rings" "target CPU (s) direct / rings"
for row in "${ROWS[@]}"; do
	name=${row%%|*}
	read -r -a cmd <<<"${row#*|}"
	d_vals=() r_vals=() d_cpu=() r_cpu=()
	for ((i = 0; i < REPS; i++)); do
		read -r v c < <(one direct "${cmd[@]}")
		d_vals+=("$v") d_cpu+=("$c")
		read -r v c < <(one rings "${cmd[@]}")
		r_vals+=("$v") r_cpu+=("$c")
	done
	cpu="-"
	[[ $name == *_bw* ]] && cpu="${d_cpu[*]} / ${r_cpu[*]}"
	printf '%-32s %-24s %-24s %s\n' "$name" "${d_vals[*]}" "${r_vals[*]}" "$cpu"
done
