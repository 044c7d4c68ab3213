#!/bin/bash
# shared_many.sh - many processes behind one device address, at MPI-host
# scale: runs the suite's tests/test_shared_many.c with 256 processes (or
# --procs N) --reps times and prints one row per run: how long the group
# took to form, how many processes were killed (the first among them), and
# how many surviving rdma_cm pairs finished their verified round trips.
#
#   bench/shared_many.sh [--build DIR] [--procs N] [--reps R]
#
# Loopback only (a random 127.88.x.y per run).  Each run is bounded by
# the program's own limits and by `timeout`.  Exit 0 when every surviving
# pair of every run finished, 1 otherwise, 2 usage.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${SRN_BUILD:-build}
PROCS=256
REPS=3
while [ $# -gt 0 ]; do
	case $1 in
	--build) BUILD=$2; shift 2 ;;
	--procs) PROCS=$2; shift 2 ;;
	--reps) REPS=$2; shift 2 ;;
	*) echo "usage: $0 [--build DIR] [--procs N] [--reps R]" >&2; exit 2 ;;
	esac
done
PROG=$BUILD/bin/test_shared_many
[ -x "$PROG" ] || { echo "$PROG missing: build first (cmake --build $BUILD)" >&2; exit 2; }

echo "# $(date -u +%F\ %T) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $PROCS processes"
printf '%-4s %-12s %-8s %-10s %-14s %-8s\n' run seed join_ms killed pairs_ok wall_s
status=0
for ((r = 1; r <= REPS; r++)); do
	start=$(date +%s.%N)
	out=$(timeout -k 10 600 "$PROG" "$PROCS" 2>&1)
	rc=$?
	wall=$(echo "$(date +%s.%N) - $start" | bc)
	seed=$(sed -n 's/^seed \([0-9]*\):.*/\1/p' <<<"$out")
	join=$(sed -n 's/^all .* joined in \([0-9]*\) ms/\1/p' <<<"$out")
	killed=$(sed -n 's/^killed \([0-9]*\) of.*/\1/p' <<<"$out")
	pairs=$(sed -n 's/^\([0-9]* of [0-9]*\) surviving pairs.*/\1/p' <<<"$out" | tr ' ' '_')
	printf '%-4s %-12s %-8s %-10s %-14s %-8.1f\n' "$r" "${seed:-?}" "${join:-?}" "${killed:-?}" \
		"${pairs:-?}" "$wall"
	if [ $rc -ne 0 ]; then
		status=1
		echo "run $r failed (exit $rc):"
		grep -v "^seed\|^all\|^killed" <<<"$out" | head -20
	fi
done
exit $status
