#!/bin/bash
# bench.sh - the storage case's table: the block store over TCP and over
# softrnic, 4 KiB random writes and reads at queue depth 1 and 32 with 1
# and 4 clients, latency, IOPS and the server's CPU time per I/O.
#
#   examples/blockstore/bench.sh [--build DIR] [--seconds S] [--out DIR]
#                                [--reps N] [--poll-us US]
#                                [--modes "tcp shm udp netns tcp-netns"]
#
#   tcp        the TCP twin, 127.0.0.1
#   shm        softrnic, same host: shared-memory rings
#   udp        softrnic, same host, SOFTRNIC_SHM=0: RoCEv2 over UDP loopback
#   netns      softrnic between two network namespaces (veth), root only
#   tcp-netns  the TCP twin between the same two namespaces, root only
#
# Rows per mode: write; read (RDMA Read of the cache slot when the client
# knows it, else the server answers); read-srv (always the server:
# --no-rdma-read, what TCP does).  Each client has its own 2048-block
# range; 4 clients run at once.  Per row: IOPS (sum over clients), p50
# (mean of the clients' medians), p99 (worst client), server CPU (user +
# system, all its threads, getrusage through `blockstore stats` before
# and after) divided by the I/Os the clients completed.  With --reps N
# each row runs N times in a row and the table keeps the run with the
# median p50.  --poll-us: how long server and clients spin before they
# sleep (default 1000; 0: purely event-driven), the same for both
# transports (this machine is shared: single runs swing by 100x when a
# spinning process and its peer share a CPU for a time slice).
#
# Writes $OUT/bench.csv, $OUT/bench.md (the table) and $OUT/bench.svg
# (plot.py).  Every run is bounded by timeout; traffic stays on loopback
# or in the namespaces this script creates.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD=${SRN_BUILD:-$SRC/build}
SECONDS_RUN=2
REPS=1
POLL_US=1000
OUT=$PWD/blockstore-bench
MODES="tcp shm udp netns tcp-netns"
while [ $# -gt 0 ]; do
	case $1 in
	--build) BUILD=$2; shift ;;
	--seconds) SECONDS_RUN=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--poll-us) POLL_US=$2; shift ;;
	--out) OUT=$2; shift ;;
	--modes) MODES=$2; shift ;;
	*) echo "usage: $0 [--build DIR] [--seconds S] [--out DIR] [--reps N] [--poll-us US] [--modes LIST]" >&2; exit 2 ;;
	esac
	shift
done
B=$BUILD/bin/blockstore
SR=$BUILD/bin/softrnic
[ -x "$B" ] && [ -x "$SR" ] || { echo "build first: $B, $SR" >&2; exit 1; }
mkdir -p "$OUT"
work=$(mktemp -d)
spid=
NETNS_READY=0
cleanup() {
	[ -n "$spid" ] && kill -9 "$spid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

if [[ " $MODES " == *" netns"* || " $MODES " == *"tcp-netns"* ]]; then
	if [ "$(id -u)" = 0 ] && (source "$SRC/tests/lib/netns.sh" && srn_netns_require_root) 2>/dev/null; then
		source "$SRC/tests/lib/netns.sh"
		srn_netns_setup
		srn_netns_at_exit cleanup
		for ((i = 20; i < 30; i++)); do ip -n "$NS_B" addr add "10.77.0.$i/24" dev "$IF_B"; done
		NETNS_READY=1
	else
		echo "note: no network namespaces here (root needed): netns modes skipped" >&2
	fi
fi

# sexec / cexec MODE N PROG...: exec PROG as the server / as client N.
sexec() {
	local mode=$1
	shift
	case $mode in
	tcp) exec "$@" --tcp --addr 127.0.0.1 ;;
	shm | udp) exec env SOFTRNIC_SHM=$([ "$mode" = shm ] && echo 1 || echo 0) \
		SOFTRNIC_DEVICES="name=softrnic0,addr=$SADDR" "$SR" run -- "$@" --addr "$SADDR" ;;
	netns) exec ip netns exec "$NS_A" env SOFTRNIC_DEVICES="name=softrnic0,addr=$ADDR_A" \
		"$SR" run -- "$@" --addr "$ADDR_A" ;;
	tcp-netns) exec ip netns exec "$NS_A" "$@" --tcp --addr "$ADDR_A" ;;
	esac
}
cexec() {
	local mode=$1 n=$2
	shift 2
	local a=10.77.0.$((20 + n))
	case $mode in
	tcp) exec "$@" --tcp --addr 127.0.0.1 ;;
	shm | udp) exec env SOFTRNIC_SHM=$([ "$mode" = shm ] && echo 1 || echo 0) \
		"$SR" run -- "$@" --addr "$SADDR" ;;
	netns) exec ip netns exec "$NS_B" env SOFTRNIC_DEVICES="name=softrnic0,addr=$a" \
		"$SR" run -- "$@" --addr "$ADDR_A" --src "$a" ;;
	tcp-netns) exec ip netns exec "$NS_B" "$@" --tcp --addr "$ADDR_A" --src "$a" ;;
	esac
}

start_server() {
	local mode=$1 try i
	for ((try = 0; try < 5; try++)); do
		PORT=$((20000 + RANDOM % 12000))
		rm -f "$work/pid" "$work/dev.img" "$work/dev.img.journal"
		sexec "$mode" timeout -k 5 900 "$B" server --port "$PORT" --dev "$work/dev.img" \
			--blocks 8192 --slots 12288 --poll-us "$POLL_US" --pidfile "$work/pid" >>"$work/server.log" 2>&1 &
		spid=$!
		for ((i = 0; i < 200; i++)); do
			[ -s "$work/pid" ] && { spid=$(cat "$work/pid"); return 0; }
			kill -0 "$spid" 2>/dev/null || break
			sleep 0.05
		done
		kill -9 "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
	done
	spid=
	return 1
}

stats() { (cexec "$1" 9 timeout -k 5 30 "$B" stats --port "$PORT") | sed -n 's/.* cpu_us=\([0-9]*\) io_cpu_us=\([0-9]*\).*/\1 \2/p'; }

echo "mode,op,qd,clients,iops,p50_us,p99_us,cpu_us_per_io,io_thread_us_per_io,rdma_read_hits_pct,errors" >"$OUT/bench.csv"
uname_line="$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at start, ${SECONDS_RUN} s per run, $REPS run(s) per row, spin ${POLL_US} us before sleeping"

for mode in $MODES; do
	if [[ $mode == *netns* ]] && [ $NETNS_READY = 0 ]; then continue; fi
	SADDR=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
	if ! start_server "$mode"; then
		echo "$mode: server did not start" >&2
		tail -5 "$work/server.log" >&2
		continue
	fi
	for clients in 1 4; do
		for qd in 1 32; do
			for op in write read read-srv; do
			for ((rep = 0; rep < REPS; rep++)); do
				extra=()
				bop=$op
				[ "$op" = read-srv ] && { bop=read; extra=(--no-rdma-read); }
				read -r cpu0 io0 < <(stats "$mode")
				rm -f "$work"/c[0-9]
				pids=()
				for ((k = 0; k < clients; k++)); do
					cexec "$mode" "$k" timeout -k 5 120 "$B" bench --port "$PORT" --op "$bop" \
						--qd "$qd" --seconds "$SECONDS_RUN" --start $((k * 2048)) --count 2048 \
						--writer $((k + 1)) --poll-us "$POLL_US" "${extra[@]}" >"$work/c$k" 2>&1 &
					pids+=($!)
				done
				for p in "${pids[@]}"; do wait "$p"; done
				read -r cpu1 io1 < <(stats "$mode")
				cat "$work"/c[0-9] | grep -v '^result' | head -3 >&2
				cat "$work"/c[0-9] | grep '^result' |
					awk -v mode="$mode" -v op="$op" -v qd="$qd" -v n="$clients" \
						-v cpu=$((${cpu1:-0} - ${cpu0:-0})) -v iot=$((${io1:-0} - ${io0:-0})) '
					function f(k,   i, a) { for (i = 1; i <= NF; i++) { split($i, a, "="); if (a[1] == k) return a[2] } return 0 }
					{ ops += f("ops"); iops += f("iops"); p50 += f("p50_us"); p99 = f("p99_us") + 0 > p99 ? f("p99_us") + 0 : p99
					  hits += f("rdma_read_hits"); err += f("errors") + f("verify_fail"); got++ }
					END { if (got != n) err += n - got
					      printf "%s,%s,%d,%d,%.0f,%.1f,%.1f,%.2f,%.2f,%.0f,%d\n", mode, op, qd, n, iops,
						got ? p50 / got : 0, p99, ops ? cpu / ops : 0, ops ? iot / ops : 0,
						ops ? 100 * hits / ops : 0, err }' | tee -a "$OUT/bench.csv"
			done
			done
		done
	done
	# Every block whole at the end of the mode's runs.
	if (cexec "$mode" 9 timeout -k 5 120 "$B" bench --port "$PORT" --verify-all --qd 32) >"$work/v" 2>&1 &&
		grep -q "errors=0 verify_fail=0" "$work/v"; then
		echo "$mode: whole device verified" >&2
	else
		echo "$mode: VERIFY FAILED" >&2
		cat "$work/v" >&2
	fi
	kill -TERM "$spid" 2>/dev/null
	for ((i = 0; i < 200; i++)); do kill -0 "$spid" 2>/dev/null || break; sleep 0.05; done
	spid=
	wait 2>/dev/null
done

python3 "$HERE/plot.py" "$OUT/bench.csv" "$OUT/bench.md" "$OUT/bench.svg" "$uname_line"
cat "$OUT/bench.md"
