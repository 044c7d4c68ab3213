#!/bin/bash
# bench.sh - NVMe/RDMA against NVMe/TCP from the same softrnic-nvmf
# target, in one run: 4 KiB random read and write at queue depth 1 and
# 32, one queue (and --queues N for more).  The target serves a RAM
# namespace (the storage is not what is measured) or --ns, polled
# (--poll) or event-driven (--event), on one thread or --cores; perf
# always polls.  Target CPU per I/O is the target process's user + system
# time (all its threads, softrnic's progress thread included) over the
# run, divided by the I/Os.  First, with no target running, `local-perf`
# measures the namespace itself at QD 1 (pread/pwrite on a file, memcpy on
# RAM, the calls the target makes): the `local` rows, and the latency
# NVMe-oF adds to it at the end.
#
#   examples/nvmf/bench.sh [--seconds 2] [--queues 1] [--event] [--shm 0|1] [--spin-us N]
#                          [--netns] [--cores LIST] [--ns FILE|ram:SIZE]
# --spin-us N: perf sleeps once idle for N us (default: spins, like SPDK)
# --netns: target in one network namespace, perf in another, over a veth
#          pair (tests/lib/netns.sh; root): softrnic's UDP link against TCP
# --cores LIST: the target with one pinned I/O thread per core (0,1 or 0-3)
# --ns SPEC: the namespace (default ram:256M); a file of 128 MiB or more to
#          measure a real backing store (its first 128 MiB are used, and
#          local-perf's writes put back what they overwrite)
# Prints one table row per (op, qd, transport), the RDMA/TCP ratios and
# the added latency.
set -eu
B=${SRN_BUILD:-$(dirname "$0")/../../build}/bin
SECS=2 QUEUES=1 TARGS=(--poll) SHM=1 SPIN=-1 NETNS=0 CORES=() NS=ram:256M
while [ $# -gt 0 ]; do
	case $1 in
	--seconds) SECS=$2; shift ;;
	--queues) QUEUES=$2; shift ;;
	--event) TARGS=() ;;
	--shm) SHM=$2; shift ;;
	--spin-us) SPIN=$2; shift ;;
	--netns) NETNS=1 ;;
	--cores) CORES=(--cores "$2"); shift ;;
	--ns) NS=$2; shift ;;
	*) echo "usage: $0 [--seconds S] [--queues N] [--event] [--shm 0|1] [--spin-us N] [--netns]" \
		"[--cores LIST] [--ns FILE|ram:SIZE]"; exit 2 ;;
	esac
	shift
done
A=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).9
PORT=$((20000 + RANDOM % 12000))
NQN=nqn.2014-08.org.softrnic:bench
work=$(mktemp -d) tpid=
TPRE=() CPRE=() CDEV=addr=auto,share=0 SRC=()
if [ $NETNS = 1 ]; then
	SRN_SRC=$(cd "$(dirname "$0")/../.." && pwd)
	source "$SRN_SRC/tests/lib/netns.sh"
	srn_netns_require_root
	srn_netns_setup
	srn_netns_at_exit 'kill $tpid 2>/dev/null; wait; rm -rf "$work"'
	A=$ADDR_A TPRE=(ip netns exec "$NS_A") CPRE=(ip netns exec "$NS_B")
	CDEV=addr=$ADDR_B SRC=(--src "$ADDR_B") SHM=0
else
	trap 'kill $tpid 2>/dev/null; wait; rm -rf "$work"' EXIT
fi
# The baseline, before the target opens the namespace.
declare -A R LOCAL
for op in read write; do
	LOCAL[$op]=$("$B/softrnic-nvmf" local-perf --ns "$NS" --op $op --seconds "$SECS" \
		--size 134217728 | grep '^result') || { echo "local-perf on $NS failed"; exit 1; }
done
"${TPRE[@]}" env SOFTRNIC_SHM=$SHM SOFTRNIC_DEVICES="name=softrnic0,addr=$A" "$B/softrnic" run -- \
	"$B/softrnic-nvmf" target --addr "$A" --port "$PORT" "${TARGS[@]}" "${CORES[@]}" --pidfile "$work/pid" \
	--subsys $NQN --ns "$NS" --allow-any-host 2>"$work/target.log" &
tpid=$!
for ((i = 0; i < 100; i++)); do [ -s "$work/pid" ] && break; sleep 0.05; done
cpu() { awk '{print $14 + $15}' "/proc/$tpid/stat"; }
hz=$(getconf CLK_TCK)
echo "# $(date -u '+%F %T') UTC, load $(cut -d' ' -f1-3 /proc/loadavg), target ${TARGS[*]:---event} ${CORES[*]}, perf --spin-us $SPIN, shm=$SHM, netns=$NETNS, ns=$NS, ${SECS}s per row, queues=$QUEUES"
printf "%-6s %-4s %-5s %10s %9s %9s %12s\n" op qd xport iops p50_us p99_us cpu_us_per_io
field() { sed "s/.* $1=\([0-9.]*\).*/\1/" <<<"$2"; }
for op in read write; do
	printf "%-6s %-4s %-5s %10s %9s %9s %12s\n" $op 1 local "$(field iops "${LOCAL[$op]}")" \
		"$(field p50_us "${LOCAL[$op]}")" "$(field p99_us "${LOCAL[$op]}")" -
done
for op in read write; do
	for qd in 1 32; do
		for x in rdma tcp; do
			pre=("${CPRE[@]}") src=()
			[ $x = rdma ] && pre+=(env "SOFTRNIC_SHM=$SHM" "SOFTRNIC_DEVICES=name=softrnic0,$CDEV" "$B/softrnic" run --) src=("${SRC[@]}")
			c0=$(cpu)
			line=$("${pre[@]}" "$B/softrnic-nvmf" perf -t $x --addr "$A" --port "$PORT" --subnqn $NQN \
				--op $op --qd $qd --queues "$QUEUES" --seconds "$SECS" --size 134217728 --spin-us "$SPIN" "${src[@]}" | grep '^result')
			c1=$(cpu)
			ios=$(field ios "$line") iops=$(field iops "$line")
			p50=$(field p50_us "$line") p99=$(field p99_us "$line")
			grep -q "errors=0 verify_fail=0" <<<"$line" || echo "# errors: $line"
			cpi=$(awk -v a="$c0" -v b="$c1" -v n="$ios" -v hz="$hz" 'BEGIN { printf "%.2f", (b - a) / hz * 1e6 / (n ? n : 1) }')
			printf "%-6s %-4s %-5s %10s %9s %9s %12s\n" $op $qd $x "$iops" "$p50" "$p99" "$cpi"
			R[$op.$qd.$x]="$iops $p50 $cpi"
		done
	done
done
echo "# RDMA / TCP: latency (p50) ratio at qd1, IOPS ratio at qd32, CPU per I/O ratio"
for op in read write; do
	read -r _ lr _ <<<"${R[$op.1.rdma]}"
	read -r _ lt _ <<<"${R[$op.1.tcp]}"
	read -r ir _ cr <<<"${R[$op.32.rdma]}"
	read -r it _ ct <<<"${R[$op.32.tcp]}"
	awk -v op=$op -v lr="$lr" -v lt="$lt" -v ir="$ir" -v it="$it" -v cr="$cr" -v ct="$ct" \
		'BEGIN { printf "%-6s qd1 p50 %.2fx   qd32 IOPS %.2fx   qd32 CPU/IO %.2fx\n", op, lr / lt, ir / it, cr / ct }'
done
echo "# added latency at qd1: NVMe-oF p50 minus the namespace's own (local) p50"
for op in read write; do
	read -r _ lr _ <<<"${R[$op.1.rdma]}"
	read -r _ lt _ <<<"${R[$op.1.tcp]}"
	awk -v op=$op -v lr="$lr" -v lt="$lt" -v l="$(field p50_us "${LOCAL[$op]}")" \
		'BEGIN { printf "%-6s local %.1f us   rdma +%.1f us   tcp +%.1f us\n", op, l, lr - l, lt - l }'
done
