#!/bin/bash
# compare.sh - softrnic against UCX (tcp), libfabric (tcp) and a raw UDP
# floor, on this host's loopback, in one run, printed as one table with
# softrnic's ratio to each peer (issue 6).  See bench/README.md.
#
#   softrnic   `softrnic perf --loopback`: RC RDMA Write latency (half round
#              trip, median), RC Write bandwidth, and the 8-byte Write rate
#              (unsignaled, batched posts); same-host peers, so this is the
#              shared-memory link;
#   sr UDP     the same with SOFTRNIC_SHM=0: softrnic's UDP link (what two
#              hosts would use), against the UDP floor;
#   UCX        `ucx_perftest -t ucp_put_lat|ucp_put_bw`, UCX_TLS=tcp,self on lo;
#   libfabric  `fi_pingpong -p tcp -e msg` on lo (sockets if tcp is missing):
#              a ping-pong, so its "bandwidth" is size / half round trip;
#   UDP floor  bench/udp_pingpong.c: raw UDP, busy-polling, two processes.
#
# Loopback only (127.0.0.1; peers are pinned to lo), every run under
# `timeout`, and a time budget for starting measurements (default 200 s,
# so the whole run, a last straggler included, stays under 5 minutes).
# Peers come from Debian packages (ucx-utils, libfabric-bin), installed with
# apt-get when missing and allowed; a peer that cannot run is skipped with a
# note.  Exit: 0 table printed, 1 softrnic could not be measured, 2 usage.
set -u

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${SRN_BUILD:-$SRC/build}
SIZES="8 4096 65536 1048576"
PEERS="srudp,ucx,libfabric,udp"
REPS=3
QUICK=0
INSTALL=1
CSV_OUT=""
JSON_OUT=""
IDLE_S=5
BUDGET=200
DUR=1            # seconds per streaming bandwidth run
# The 8-byte message rate: unsignaled, 64 WRs per ibv_post_send.
RATE_OPTS="--tx-depth 2048 --post-list 64 --cq-mod 512"

usage() {
	cat <<EOF
Usage: bench/compare.sh [options]
  --quick          one size (8 B), one run, short runs: a smoke test (< 20 s)
  --no-install     never run apt-get; skip peers that are not installed
  --peers LIST     peers next to softrnic, comma-separated: srudp,ucx,libfabric,udp
                   (srudp: softrnic itself on its UDP link, SOFTRNIC_SHM=0)
                   (default $PEERS)
  --sizes LIST     message sizes (default ${SIZES// /,})
  --reps N         runs of each measurement; the table shows the median (default $REPS)
  --build DIR      softrnic build directory (default \$SRN_BUILD or build/)
  --idle SEC       idle-CPU measurement length, 0 to skip (default $IDLE_S)
  --budget SEC     stop starting new measurements after SEC seconds (default $BUDGET)
  --csv FILE       also write the table as CSV
  --json FILE      also write the table, host facts and every run as JSON
EOF
}

while [ $# -gt 0 ]; do
	case "$1" in
	--quick) QUICK=1 ;;
	--no-install) INSTALL=0 ;;
	--peers) PEERS=${2:?}; shift ;;
	--sizes) SIZES=${2:?}; SIZES=${SIZES//,/ }; shift ;;
	--reps) REPS=${2:?}; shift ;;
	--build) BUILD=${2:?}; shift ;;
	--idle) IDLE_S=${2:?}; shift ;;
	--budget) BUDGET=${2:?}; shift ;;
	--csv) CSV_OUT=${2:?}; shift ;;
	--json) JSON_OUT=${2:?}; shift ;;
	-h|--help) usage; exit 0 ;;
	*) echo "compare.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
if [ "$QUICK" = 1 ]; then
	SIZES=8 REPS=1 DUR=0.3 IDLE_S=1
fi
for s in $SIZES; do
	[[ "$s" =~ ^[0-9]+$ ]] && [ "$s" -ge 1 ] && [ "$s" -le 1048576 ] ||
		{ echo "compare.sh: bad size '$s' (1 .. 1048576)" >&2; exit 2; }
done
[[ "$REPS" =~ ^[1-9]$ ]] || { echo "compare.sh: --reps wants 1..9" >&2; exit 2; }
[[ "$IDLE_S" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "compare.sh: bad --idle" >&2; exit 2; }
[[ "$BUDGET" =~ ^[0-9]+$ ]] || { echo "compare.sh: bad --budget" >&2; exit 2; }
want() { [[ ",$PEERS," == *",$1,"* ]]; }
for p in ${PEERS//,/ }; do
	case "$p" in srudp|ucx|libfabric|udp) ;; *) echo "compare.sh: unknown peer '$p'" >&2; exit 2 ;; esac
done
command -v python3 >/dev/null || { echo "compare.sh: python3 is needed" >&2; exit 1; }

tmp=$(mktemp -d /tmp/srn-compare.XXXXXX)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
RAW=$tmp/raw.tsv        # peer metric size rep value
NOTES=$tmp/notes.txt
: >"$RAW"
: >"$NOTES"
note() { echo "$*" >>"$NOTES"; echo "compare.sh: $*" >&2; }
record() { echo "$1	$2	$3	$4	$5" >>"$RAW"; }
num() { [[ "${1:-}" =~ ^[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]]; }
port=$((20000 + RANDOM % 20000))
next_port() { port=$((port + 1)); }

# -- host facts, before we load the machine ----------------------------------
cpu_idle_pct() {   # share of idle CPU time over 1 s, from /proc/stat
	local a b
	read -ra a </proc/stat; sleep 1; read -ra b </proc/stat
	python3 -c '
import sys
a = [int(x) for x in sys.argv[1].split()]; b = [int(x) for x in sys.argv[2].split()]
d = [y - x for x, y in zip(a, b)]
print("%.0f" % (100.0 * (d[3] + d[4]) / max(1, sum(d))))' "${a[*]:1}" "${b[*]:1}"
}
DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
NPROC=$(nproc)
KERNEL=$(uname -r)
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
IDLE0=$(cpu_idle_pct)

# -- peers: install what is missing ------------------------------------------
apt_install() {   # apt_install PKG: as root, or with sudo that needs no password
	local sudo=""
	[ "$INSTALL" = 1 ] || return 1
	if [ "$(id -u)" != 0 ]; then
		sudo -n true 2>/dev/null || return 1
		sudo="sudo -n"
	fi
	if [ ! -e "$tmp/apt-updated" ]; then
		timeout 180 $sudo apt-get update -qq >/dev/null 2>&1 || return 1
		touch "$tmp/apt-updated"
	fi
	DEBIAN_FRONTEND=noninteractive timeout 300 $sudo apt-get install -y -qq \
		--no-install-recommends "$1" >/dev/null 2>&1
}
if want ucx && ! command -v ucx_perftest >/dev/null; then
	apt_install ucx-utils ||
		note "UCX skipped: ucx_perftest missing and ucx-utils could not be installed$([ "$INSTALL" = 0 ] && echo ' (--no-install)')"
fi
if want libfabric && ! command -v fi_pingpong >/dev/null; then
	apt_install libfabric-bin ||
		note "libfabric skipped: fi_pingpong missing and libfabric-bin could not be installed$([ "$INSTALL" = 0 ] && echo ' (--no-install)')"
fi
HAVE_UCX=0; want ucx && command -v ucx_perftest >/dev/null && HAVE_UCX=1
HAVE_SRUDP=0; want srudp && HAVE_SRUDP=1
HAVE_FI=0; want libfabric && command -v fi_pingpong >/dev/null && HAVE_FI=1
FI_PROV=tcp
if [ "$HAVE_FI" = 1 ] && ! fi_info -p tcp -t FI_EP_MSG >/dev/null 2>&1; then
	FI_PROV=sockets
	note "libfabric: no tcp provider, using sockets"
fi

# -- softrnic and the helper programs ----------------------------------------
SOFTRNIC=$BUILD/bin/softrnic
if [ ! -x "$SOFTRNIC" ]; then
	echo "compare.sh: building softrnic in $BUILD" >&2
	{ cmake -S "$SRC" -B "$BUILD" >/dev/null && cmake --build "$BUILD" -j "$NPROC" >/dev/null; } ||
		{ echo "compare.sh: softrnic build failed" >&2; exit 1; }
fi
HAVE_UDP=0
if want udp; then
	if cc -std=gnu11 -O2 -Wall -Wextra -Werror -o "$tmp/udp_pingpong" "$SRC/bench/udp_pingpong.c" 2>"$tmp/cc.err"; then
		HAVE_UDP=1
	else
		note "UDP floor skipped: udp_pingpong does not build: $(head -3 "$tmp/cc.err")"
	fi
fi
HAVE_IDLE=0
if [ "$IDLE_S" != 0 ]; then
	# A sanitizer build of the library needs its runtime in the program too.
	san=""
	ldd "$BUILD/lib/libibverbs.so.1" 2>/dev/null | grep -q libasan && san="-fsanitize=address,undefined"
	ldd "$BUILD/lib/libibverbs.so.1" 2>/dev/null | grep -q libtsan && san="-fsanitize=thread"
	if cc -std=gnu11 -O2 -Wall -Wextra -Werror $san -o "$tmp/idle_qps" "$SRC/bench/idle_qps.c" \
		"$SRC/tools/common/qp_up.c" -I"$SRC/tools" \
		-L"$BUILD/lib" -l:libibverbs.so.1 -Wl,-rpath,"$BUILD/lib" 2>"$tmp/cc.err"; then
		HAVE_IDLE=1
	else
		note "idle CPU skipped: idle_qps does not build: $(head -3 "$tmp/cc.err")"
	fi
fi

START=$SECONDS
in_budget() {   # in_budget WHAT: is there time left to start WHAT?
	if [ $((SECONDS - START)) -ge "$BUDGET" ]; then
		[ -e "$tmp/over" ] || note "time budget ($BUDGET s) spent: later runs skipped, first: $1"
		touch "$tmp/over"
		return 1
	fi
}

# Per-size run lengths: about a second each on this kind of machine.
lat_iters() { case $1 in 1048576) echo 300 ;; 65536) echo 2000 ;; *) echo 10000 ;; esac; }
bw_iters() { case $1 in 1048576) echo 500 ;; 65536) echo 5000 ;; 4096) echo 50000 ;; *) echo 200000 ;; esac; }
if [ "$QUICK" = 1 ]; then
	lat_iters() { echo 500; }
	bw_iters() { echo 5000; }
fi

# json_rows FILE FIELD: "bytes value" per result row of a softrnic perf JSON.
json_rows() {
	python3 - "$1" "$2" <<'EOF'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    print(r["bytes"], r[sys.argv[2]])
EOF
}
# json_field FILE FIELD: one field of a one-object JSON line.
json_field() {
	python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read())[sys.argv[2]])' "$1" "$2" 2>/dev/null
}

# -- softrnic --------------------------------------------------------------
# Each takes REP [WHO SHM]: WHO names the column (softrnic, or srudp for
# the UDP link), SHM is SOFTRNIC_SHM for the run (1 default, 0 UDP only).
sr_lat() {   # one invocation per size, as many round trips as the peers make
	local rep=$1 who=${2:-softrnic} shm=${3:-1} f=$tmp/sr-lat.json size s v
	in_budget "$who lat" || return
	for size in $SIZES; do
		if SOFTRNIC_SHM=$shm timeout -k 5 60 "$SOFTRNIC" perf --loopback --timeout 20 \
			--size "$size" -n "$(lat_iters "$size")" --json >"$f" 2>"$tmp/sr.err"; then
			while read -r s v; do record "$who" lat "$s" "$rep" "$v"; done < <(json_rows "$f" t_median_us)
		else
			note "$who lat $size B run $rep failed (rc $?): $(head -2 "$tmp/sr.err")"
		fi
	done
}
sr_bw() {   # streaming RC Write bandwidth, GB/s (10^9 B/s)
	local rep=$1 who=${2:-softrnic} shm=${3:-1} f=$tmp/sr-bw.json s v
	in_budget "$who bw" || return
	if SOFTRNIC_SHM=$shm timeout -k 5 60 "$SOFTRNIC" perf --loopback --timeout 20 --test bw \
		--sizes "${SIZES// /,}" --duration "$DUR" --json >"$f" 2>"$tmp/sr.err"; then
		while read -r s v; do
			record "$who" bw "$s" "$rep" "$(python3 -c "print($v / 1000)")"
		done < <(json_rows "$f" bw_MBps)
	else
		note "$who bw run $rep failed (rc $?): $(head -2 "$tmp/sr.err")"
	fi
}
sr_rate() {   # 8-byte RC Writes per second, millions
	local rep=$1 who=${2:-softrnic} shm=${3:-1} f=$tmp/sr-rate.json s v
	in_budget "$who rate" || return
	# shellcheck disable=SC2086
	if SOFTRNIC_SHM=$shm timeout -k 5 60 "$SOFTRNIC" perf --loopback --timeout 20 --test bw \
		--size 8 --duration "$DUR" $RATE_OPTS --json >"$f" 2>"$tmp/sr.err"; then
		while read -r s v; do record "$who" rate 8 "$rep" "$v"; done < <(json_rows "$f" msg_rate_Mpps)
	else
		note "$who rate run $rep failed (rc $?): $(head -2 "$tmp/sr.err")"
	fi
}

# -- a server and a client, both bounded -------------------------------------
# wait_listen PORT: until something listens on 127.0.0.1:PORT (at most 5 s).
wait_listen() {
	for _ in $(seq 50); do
		ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return 0
		sleep 0.1
	done
	return 1
}
# pair NAME TIMEOUT "SERVER CMD" "CLIENT CMD": client's stdout in $tmp/NAME.out
pair() {
	local name=$1 t=$2 srv=$3 cli=$4 spid rc
	# shellcheck disable=SC2086
	timeout -k 2 "$t" $srv >"$tmp/$name.srv" 2>&1 &
	spid=$!
	pids+=("$spid")
	if ! wait_listen "$port"; then
		kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null
		echo "server did not listen on port $port: $(head -2 "$tmp/$name.srv")" >"$tmp/$name.err"
		return 1
	fi
	# shellcheck disable=SC2086
	timeout -k 2 "$t" $cli >"$tmp/$name.out" 2>"$tmp/$name.err"
	rc=$?
	# A server whose client is done (or failed) gets 5 s to leave.
	for _ in $(seq 50); do
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.1
	done
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	return $rc
}

# -- UCX: UCP put over tcp -------------------------------------------------
ucx_run() {   # ucx_run TEST SIZE ITERS: prints the final CSV line's fields
	local t=$1 s=$2 n=$3 w
	w=$((n / 10 > 1000 ? 1000 : n / 10 + 1))
	next_port
	UCX_TLS=tcp,self UCX_NET_DEVICES=lo UCX_WARN_UNUSED_ENV_VARS=n \
		pair ucx 40 "ucx_perftest -p $port" \
		"ucx_perftest 127.0.0.1 -p $port -t $t -s $s -n $n -w $w -f -v" || return 1
	# iterations,median_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr
	grep -E '^ *[0-9]+,' "$tmp/ucx.out" | tail -1 | tr -d ' '
}
ucx_lat() {
	local rep=$1 s line
	for s in $SIZES; do
		in_budget "UCX lat $s" || return
		if line=$(ucx_run ucp_put_lat "$s" "$(lat_iters "$s")") && num "$(cut -d, -f2 <<<"$line")"; then
			record ucx lat "$s" "$rep" "$(cut -d, -f2 <<<"$line")"
		else
			note "UCX put lat $s B run $rep failed: $(head -c 200 "$tmp/ucx.err")"
		fi
	done
}
ucx_bw() {   # UCX prints MB/s as 2^20 B/s
	local rep=$1 s line bw
	for s in $SIZES; do
		in_budget "UCX bw $s" || return
		if line=$(ucx_run ucp_put_bw "$s" "$(bw_iters "$s")") && num "$(cut -d, -f6 <<<"$line")"; then
			bw=$(cut -d, -f6 <<<"$line")
			record ucx bw "$s" "$rep" "$(python3 -c "print($bw * 1048576 / 1e9)")"
			[ "$s" = 8 ] && record ucx rate 8 "$rep" "$(python3 -c "print($(cut -d, -f8 <<<"$line") / 1e6)")"
		else
			note "UCX put bw $s B run $rep failed: $(head -c 200 "$tmp/ucx.err")"
		fi
	done
}

# -- libfabric: fi_pingpong, msg endpoint ------------------------------------
fi_all() {
	local rep=$1 s n line
	for s in $SIZES; do
		in_budget "libfabric $s" || return
		n=$(lat_iters "$s")
		next_port
		# bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
		if FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo pair libfabric 40 \
			"fi_pingpong -p $FI_PROV -e msg -I $n -S $s -B $port" \
			"fi_pingpong -p $FI_PROV -e msg -I $n -S $s -P $port 127.0.0.1" &&
			line=$(grep -E '^[0-9]+[kmg]? ' "$tmp/libfabric.out" | tail -1) &&
			num "$(awk '{print $7}' <<<"$line")"; then
			record libfabric lat "$s" "$rep" "$(awk '{print $7}' <<<"$line")"
			record libfabric bw "$s" "$rep" "$(awk '{print $6 / 1000}' <<<"$line")"
			[ "$s" = 8 ] && record libfabric rate 8 "$rep" "$(awk '{print $8}' <<<"$line")"
		else
			note "libfabric $s B run $rep failed: $(head -c 200 "$tmp/libfabric.err")"
		fi
	done
}

# -- raw UDP floor ---------------------------------------------------------
udp_lat() {
	local rep=$1 s f=$tmp/udp.json
	for s in $SIZES; do
		in_budget "UDP lat $s" || return
		if timeout -k 2 40 "$tmp/udp_pingpong" -s "$s" -n "$(lat_iters "$s")" --timeout 30 --json \
			>"$f" 2>"$tmp/udp.err" && num "$(json_field "$f" t_median_us)"; then
			record udp lat "$s" "$rep" "$(json_field "$f" t_median_us)"
		else
			note "UDP lat $s B run $rep failed: $(head -c 200 "$tmp/udp.err")"
		fi
	done
}
udp_bw() {
	local rep=$1 s f=$tmp/udp.json
	for s in $SIZES; do
		in_budget "UDP bw $s" || return
		if timeout -k 2 40 "$tmp/udp_pingpong" -t bw -s "$s" -D "$DUR" --timeout 30 --json \
			>"$f" 2>"$tmp/udp.err" && num "$(json_field "$f" bw_MBps)"; then
			record udp bw "$s" "$rep" "$(python3 -c "print($(json_field "$f" bw_MBps) / 1000)")"
			[ "$s" = 8 ] && record udp rate 8 "$rep" "$(json_field "$f" msg_rate_Mpps)"
		else
			note "UDP bw $s B run $rep failed: $(head -c 200 "$tmp/udp.err")"
		fi
	done
}

# -- idle CPU --------------------------------------------------------------
idle_cpu() {   # the busier of two idle processes with a connected RC QP each
	local f=$tmp/idle.out v
	in_budget "idle CPU" || return
	if timeout -k 2 "$(python3 -c "print(int($IDLE_S) + 30)")" "$tmp/idle_qps" --idle "$IDLE_S" \
		>"$f" 2>"$tmp/idle.err"; then
		v=$(python3 - "$f" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
assert len(rows) == 2
print(max(max(r["cpu_pct"], r["proc_stat_pct"]) for r in rows))
EOF
		) && record softrnic idle 0 1 "$v"
	else
		note "idle CPU run failed: $(head -c 200 "$tmp/idle.err")"
	fi
}

# -- the run ---------------------------------------------------------------
# Tools interleave within each repetition so a noisy spell hits all alike.
running="softrnic"
[ "$HAVE_SRUDP" = 1 ] && running="$running, softrnic on UDP"
[ "$HAVE_UCX" = 1 ] && running="$running, UCX"
[ "$HAVE_FI" = 1 ] && running="$running, libfabric"
[ "$HAVE_UDP" = 1 ] && running="$running, UDP"
echo "compare.sh: $running at ${SIZES// /,} B, $REPS run(s) each" >&2
[ "$HAVE_IDLE" = 1 ] && idle_cpu
for rep in $(seq "$REPS"); do
	sr_lat "$rep"
	[ "$HAVE_SRUDP" = 1 ] && sr_lat "$rep" srudp 0
	[ "$HAVE_UCX" = 1 ] && ucx_lat "$rep"
	[ "$HAVE_FI" = 1 ] && fi_all "$rep"
	[ "$HAVE_UDP" = 1 ] && udp_lat "$rep"
	sr_bw "$rep"
	[ "$HAVE_SRUDP" = 1 ] && sr_bw "$rep" srudp 0
	[ "$HAVE_UCX" = 1 ] && ucx_bw "$rep"
	[ "$HAVE_UDP" = 1 ] && udp_bw "$rep"
	[[ " $SIZES " == *" 8 "* ]] && sr_rate "$rep"
	[[ " $SIZES " == *" 8 "* ]] && [ "$HAVE_SRUDP" = 1 ] && sr_rate "$rep" srudp 0
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
ELAPSED=$((SECONDS - START))

# -- the table -------------------------------------------------------------
META="date=$DATE|nproc=$NPROC|kernel=$KERNEL|load_start=$LOAD0|load_end=$LOAD1|idle_start=$IDLE0"
META="$META|reps=$REPS|elapsed=$ELAPSED|sizes=$SIZES|fi_prov=$FI_PROV"
META="$META|peers=$([ $HAVE_SRUDP = 1 ] && echo -n srudp,)$([ $HAVE_UCX = 1 ] && echo -n ucx,)$([ $HAVE_FI = 1 ] && echo -n libfabric,)$([ $HAVE_UDP = 1 ] && echo -n udp)"
python3 - "$RAW" "$NOTES" "$META" "$CSV_OUT" "$JSON_OUT" <<'EOF'
import csv, json, statistics, sys

raw_path, notes_path, meta_s, csv_out, json_out = sys.argv[1:6]
meta = dict(kv.split("=", 1) for kv in meta_s.split("|"))
sizes = [int(s) for s in meta["sizes"].split()]
notes = [l.rstrip("\n") for l in open(notes_path) if l.strip()]
runs = {}
for line in open(raw_path):
    peer, metric, size, rep, value = line.rstrip("\n").split("\t")
    runs.setdefault((metric, int(size), peer), []).append(float(value))

PEERS = [("srudp", "sr UDP link", "srUDP"), ("ucx", "UCX tcp", "UCX"),
         ("libfabric", "libfabric " + meta["fi_prov"], "libfabric"), ("udp", "UDP floor", "UDP")]
ROWS = [("lat", "us", "lower", s) for s in sizes] + [("bw", "GB/s", "higher", s) for s in sizes]
if 8 in sizes:
    ROWS.append(("rate", "Mmsg/s", "higher", 8))
ROWS.append(("idle", "% CPU", "lower", 0))
LABEL = {"lat": "latency", "bw": "bandwidth", "rate": "msg rate", "idle": "idle CPU"}

def med(metric, size, peer):
    v = runs.get((metric, size, peer))
    return statistics.median(v) if v else None

def human(size):
    if size == 0:
        return "-"
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= div and size % div == 0:
            return "%d %s" % (size // div, unit)
    return "%d B" % size

def fmt(v):
    if v is None:
        return "-"
    return "%.3g" % v if v < 100 else "%.0f" % v

table = []
for metric, unit, better, size in ROWS:
    sr = med(metric, size, "softrnic")
    row = {"metric": metric, "size": size, "unit": unit, "better": better, "softrnic": sr,
           "runs": {p: runs.get((metric, size, p), []) for p in ["softrnic"] + [k for k, _, _ in PEERS]}}
    for key, _, _ in PEERS:
        pv = med(metric, size, key)
        row[key] = pv
        row["softrnic_over_" + key] = sr / pv if sr is not None and pv else None
    table.append(row)

out = []
out.append("softrnic vs. UCX / libfabric / raw UDP on loopback (127.0.0.1) - %s" % meta["date"])
out.append("host: %s CPUs, kernel %s; load average %s at start, %s at end; CPU idle at start %s%%"
           % (meta["nproc"], meta["kernel"], meta["load_start"], meta["load_end"], meta["idle_start"]))
out.append("median of %s run(s) per cell, %s s of measuring; a shared machine is noisy: expect "
           "run-to-run spread, compare columns of the same run" % (meta["reps"], meta["elapsed"]))
out.append("")
hdr = ["metric", "size", "softrnic"] + [n for _, n, _ in PEERS] + ["sr/" + a for _, _, a in PEERS]
lines = [hdr]
for r in table:
    name = "%s (%s)" % (LABEL[r["metric"]], r["unit"])
    lines.append([name, human(r["size"]), fmt(r["softrnic"])] + [fmt(r[k]) for k, _, _ in PEERS] +
                 [("%.2f" % r["softrnic_over_" + k]) if r["softrnic_over_" + k] else "-" for k, _, _ in PEERS])
w = [max(len(l[i]) for l in lines) for i in range(len(hdr))]
for i, l in enumerate(lines):
    out.append("  ".join(c.ljust(w[j]) if j < 2 else c.rjust(w[j]) for j, c in enumerate(l)))
    if i == 0:
        out.append("  ".join("-" * x for x in w))
out.append("")
out.append("softrnic: two processes on this host, so the shared-memory link; sr UDP link: the same")
out.append("with SOFTRNIC_SHM=0, the path two hosts take (sr/srUDP: what the rings gain).")
out.append("latency: RC RDMA Write / UCP put / fi_pingpong / UDP echo, half round trip, median.")
out.append("bandwidth: streaming, 10^9 B/s; libfabric's is its ping-pong's (size / half round trip).")
out.append("msg rate: 8 B messages/s; softrnic unsignaled, 64 WRs per post; libfabric: ping-pong.")
out.append("idle CPU: two processes with a connected RC QP each, sleeping; the busier one.")
out.append("sr/X = softrnic / X: below 1 is better for latency and idle CPU, above 1 for bandwidth and rate.")

def cell(metric, size, peer="softrnic"):
    return med(metric, size, peer)

targets = []
def target(text, value, ok, shown):
    targets.append({"target": text, "value": value, "met": ok})
    out.append("  %-62s %-22s %s" % (text, shown, "n/a" if ok is None else ("met" if ok else "NOT met")))

out.append("")
out.append("issue 6 targets, read from this run:")
lat8, udp8, ucx8 = cell("lat", 8), cell("lat", 8, "udp"), cell("lat", 8, "ucx")
r = lat8 / udp8 if lat8 and udp8 else None
target("RC Write 8 B latency <= 1.2 x UDP floor", r, None if r is None else r <= 1.2,
       "-" if r is None else "%.2f x" % r)
sr8 = cell("lat", 8, "srudp")
r = sr8 / udp8 if sr8 and udp8 else None
target("  the same on softrnic's UDP link (SOFTRNIC_SHM=0)", r, None if r is None else r <= 1.2,
       "-" if r is None else "%.2f x" % r)
r = lat8 / ucx8 if lat8 and ucx8 else None
target("RC Write 8 B latency <= 0.5 x UCX tcp put", r, None if r is None else r <= 0.5,
       "-" if r is None else "%.2f x" % r)
UDP_LINK = "  the same on softrnic's UDP link"
v = cell("lat", 4096)
target("RC Write 4 KiB latency <= 7 us", v, None if v is None else v <= 7,
       "-" if v is None else "%.2f us" % v)
v = cell("lat", 4096, "srudp")
if v is not None:
    target(UDP_LINK, v, v <= 7, "%.2f us" % v)
for s in [s for s in sizes if s >= 65536]:
    peers = [p for p in (cell("bw", s, "ucx"), cell("bw", s, "libfabric")) if p]
    best = max(peers) if peers else None
    for peer in ("softrnic", "srudp"):
        v = cell("bw", s, peer)
        if peer == "srudp" and v is None:
            continue
        target("RC Write %s bandwidth >= 4 GB/s" % human(s) if peer == "softrnic" else UDP_LINK,
               v, None if v is None else v >= 4, "-" if v is None else "%.2f GB/s" % v)
        target("RC Write %s bandwidth >= best TCP peer" % human(s) if peer == "softrnic" else UDP_LINK,
               v and best and v / best, None if v is None or best is None else v >= best,
               "-" if v is None or best is None else "%.2f x" % (v / best))
v = cell("rate", 8)
target("8 B Writes/s on one QP >= 1.5 M", v, None if v is None else v >= 1.5,
       "-" if v is None else "%.2f M/s" % v)
v = cell("rate", 8, "srudp")
if v is not None:
    target(UDP_LINK, v, v >= 1.5, "%.2f M/s" % v)
v = cell("idle", 0)
target("idle process (connected QP) < 1 % of a core", v, None if v is None else v < 1,
       "-" if v is None else "%.2f %%" % v)
noisy = []
for r in table:
    for peer, vals in r["runs"].items():
        if len(vals) >= 2 and min(vals) > 0 and max(vals) > 2 * min(vals):
            noisy.append("%s %s %s: %s" % (peer, LABEL[r["metric"]], human(r["size"]),
                                           ", ".join(fmt(v) for v in vals)))
if noisy:
    out.append("")
    out.append("noisy cells (the runs differ by more than 2x; the table shows their median):")
    out.extend("  " + n for n in noisy)
if notes:
    out.append("")
    out.append("notes:")
    out.extend("  " + n for n in notes)
print("\n".join(out))

if csv_out:
    with open(csv_out, "w", newline="") as f:
        c = csv.writer(f)
        c.writerow(["metric", "size", "unit", "better", "softrnic"] + [k for k, _, _ in PEERS] +
                   ["softrnic_over_" + k for k, _, _ in PEERS])
        for r in table:
            c.writerow([r["metric"], r["size"], r["unit"], r["better"]] +
                       ["" if r[k] is None else "%.6g" % r[k] for k in
                        ["softrnic"] + [k for k, _, _ in PEERS] + ["softrnic_over_" + k for k, _, _ in PEERS]])
if json_out:
    with open(json_out, "w") as f:
        json.dump({"tool": "bench/compare.sh", "host": meta, "rows": table,
                   "targets": targets, "noisy": noisy, "notes": notes}, f, indent=1)
        f.write("\n")
EOF
rc=$?
[ "$rc" -eq 0 ] || { echo "compare.sh: building the table failed" >&2; exit 1; }
grep -Eq '^softrnic	(lat|bw|rate)	' "$RAW" || { echo "compare.sh: no softrnic perf run succeeded" >&2; exit 1; }
exit 0
