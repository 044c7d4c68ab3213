#!/bin/bash
# compare.sh - softrnic next to the transports a user would otherwise pick,
# like against like, in one run printed as one table (issues 6, 13, 14):
#
#   same host   softrnic with direct placement (default) and on its rings
#               (SOFTRNIC_DIRECT=0); UCX posix and cma; libfabric shm; and
#               the middleware over softrnic: UCX rc_verbs and ud_verbs,
#               libfabric verbs;ofi_rxd, through `softrnic run`;
#   UDP link    softrnic's UDP link (SOFTRNIC_SHM=0), UCX tcp, libfabric tcp,
#               the raw UDP floor (bench/udp_pingpong), UCX rc_verbs over
#               softrnic and libfabric verbs MSG over softrnic: between two
#               network namespaces joined by a veth pair when root, else on
#               loopback addresses (where libfabric's MSG cannot run).
#
# Rows: latency (8 B), Write/put bandwidth (64 KiB, 1 MiB), Read/get
# bandwidth at the largest size, the 8 B message rate; a cell a tool cannot
# measure is "n/a" with the reason below the table.  Within each repetition
# every column runs once per cell before the next cell, so a noisy spell hits
# all columns alike; the table shows medians.  See bench/README.md.
#
# Then a second table, event-driven (sleeping) latency (issue 24; --events
# runs it alone, --no-events leaves it out): qperf's rc_lat,
# rc_rdma_write_lat and rc_rdma_read_lat over softrnic's librdmacm (-cm1;
# qperf waits on a completion channel unless -cp1), rc_lat -cp1 (polled)
# for reference, qperf tcp_lat over kernel TCP and the sleeping floors
# (bench/eventfd_pingpong, bench/udp_pingpong --block): on one host, and
# between the two namespaces (else on loopback with SOFTRNIC_SHM=0).
#
# Loopback and namespaces it makes only; every run under `timeout`; no new
# measurement starts after --budget seconds (the event-driven table: after
# --events-budget seconds of its own).  Exit: 0 table(s) printed,
# 1 softrnic could not be measured, 2 usage.
set -u

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${SRN_BUILD:-$SRC/build}
LAT_SIZES="8"
BW_SIZES="65536 1048576"
SAME_COLS="softrnic rings ucxposix ucxcma fishm ucxrc ucxud firxd"
LINK_COLS="srudp ucx libfabric udp ucxrcudp fiverbs"
PEERS="all"
LINK=auto
REPS=3
QUICK=0
INSTALL=1
CSV_OUT=""
JSON_OUT=""
IDLE_S=5
BUDGET=900
DUR=1            # seconds per softrnic / UDP streaming run
EVENTS=auto      # the event-driven table: auto (full runs), only, no
EV_SECS=2        # seconds per qperf run (qperf takes whole seconds)
EV_BUDGET=300
# The 8-byte message rate: unsignaled, 64 WRs per ibv_post_send.
RATE_OPTS="--tx-depth 2048 --post-list 64 --cq-mod 512"

usage() {
	cat <<EOF
Usage: bench/compare.sh [options]
  --quick          8 B latency and 64 KiB bandwidth of every column, one run,
                   short runs: the smoke test (under a minute)
  --no-install     never run apt-get; skip peers that are not installed
  --peers LIST     columns next to softrnic, comma-separated (default: all):
                   same host: rings ucxposix ucxcma fishm ucxrc ucxud firxd
                   UDP link:  srudp ucx libfabric udp ucxrcudp fiverbs
  --link ns|lo     UDP link between two network namespaces (root) or on
                   loopback addresses (default: ns when root can make them)
  --lat-sizes LIST latency sizes (default ${LAT_SIZES// /,})
  --bw-sizes LIST  bandwidth sizes; Read at the largest (default ${BW_SIZES// /,})
  --sizes LIST     both of the above
  --reps N         runs of each measurement; the table shows the median (default $REPS)
  --build DIR      softrnic build directory (default \$SRN_BUILD or build/)
  --idle SEC       idle-CPU measurement length, 0 to skip (default $IDLE_S)
  --budget SEC     stop starting new measurements after SEC seconds (default $BUDGET)
  --csv FILE       also write the table as CSV
  --json FILE      also write the table, host facts and every run as JSON
event-driven latency (qperf over softrnic next to TCP and sleeping floors):
  --events         only this table (with --quick: one short run of each row)
  --no-events      leave it out (a full run includes it; --quick and --peers
                   leave it out unless --events)
  --events-time S  seconds per qperf run, whole seconds (default $EV_SECS)
  --events-budget SEC  no new event-driven run after SEC seconds (default $EV_BUDGET)
  With --events, --csv and --json hold this table; in a run with both,
  the JSON gets an "events" key and the CSV's events go to FILE.events.csv.
EOF
}

sizes_ok() {
	local s
	for s in $1; do
		[[ "$s" =~ ^[0-9]+$ ]] && [ "$s" -ge 1 ] && [ "$s" -le 1048576 ] ||
			{ echo "compare.sh: bad size '$s' (1 .. 1048576)" >&2; exit 2; }
	done
}
lat_set=0 bw_set=0 peers_set=0 ev_secs_set=0
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) QUICK=1 ;;
	--no-install) INSTALL=0 ;;
	--peers) PEERS=${2:?}; peers_set=1; shift ;;
	--link) LINK=${2:?}; shift ;;
	--lat-sizes) LAT_SIZES=${2//,/ }; lat_set=1; shift ;;
	--bw-sizes) BW_SIZES=${2//,/ }; bw_set=1; shift ;;
	--sizes) LAT_SIZES=${2//,/ }; BW_SIZES=$LAT_SIZES; lat_set=1 bw_set=1; shift ;;
	--reps) REPS=${2:?}; shift ;;
	--build) BUILD=${2:?}; shift ;;
	--idle) IDLE_S=${2:?}; shift ;;
	--budget) BUDGET=${2:?}; shift ;;
	--csv) CSV_OUT=${2:?}; shift ;;
	--json) JSON_OUT=${2:?}; shift ;;
	--events) EVENTS=only ;;
	--no-events) EVENTS=no ;;
	--events-time) EV_SECS=${2:?}; ev_secs_set=1; shift ;;
	--events-budget) EV_BUDGET=${2:?}; shift ;;
	-h|--help) usage; exit 0 ;;
	*) echo "compare.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
if [ "$QUICK" = 1 ]; then
	REPS=1 DUR=0.3 IDLE_S=1
	[ "$lat_set" = 1 ] || LAT_SIZES=8
	[ "$bw_set" = 1 ] || BW_SIZES=65536
	[ "$ev_secs_set" = 1 ] || EV_SECS=1
fi
# MAIN: the two-section table; EV: the event-driven one.
MAIN=1 EV=0
case "$EVENTS" in
only) MAIN=0 EV=1 ;;
auto) [ "$QUICK" = 0 ] && [ "$peers_set" = 0 ] && EV=1 ;;
esac
[[ "$EV_SECS" =~ ^[1-9][0-9]?$ ]] || { echo "compare.sh: --events-time wants 1..99 whole seconds" >&2; exit 2; }
[[ "$EV_BUDGET" =~ ^[0-9]+$ ]] || { echo "compare.sh: bad --events-budget" >&2; exit 2; }
sizes_ok "$LAT_SIZES"
sizes_ok "$BW_SIZES"
[ -n "${LAT_SIZES// /}" ] && [ -n "${BW_SIZES// /}" ] || { echo "compare.sh: empty size list" >&2; exit 2; }
[[ "$REPS" =~ ^[1-9]$ ]] || { echo "compare.sh: --reps wants 1..9" >&2; exit 2; }
[[ "$IDLE_S" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "compare.sh: bad --idle" >&2; exit 2; }
[[ "$BUDGET" =~ ^[0-9]+$ ]] || { echo "compare.sh: bad --budget" >&2; exit 2; }
case "$LINK" in auto|ns|lo) ;; *) echo "compare.sh: --link wants ns or lo" >&2; exit 2 ;; esac
[ "$PEERS" = all ] && PEERS=$(echo $SAME_COLS $LINK_COLS | tr ' ' ,)
for p in ${PEERS//,/ }; do
	[[ " $SAME_COLS $LINK_COLS " == *" $p "* ]] ||
		{ echo "compare.sh: unknown peer '$p'" >&2; exit 2; }
done
COLS="softrnic"
for c in $SAME_COLS $LINK_COLS; do
	[ "$c" != softrnic ] && [[ ",$PEERS," == *",$c,"* ]] && COLS="$COLS $c"
done
[ "$MAIN" = 1 ] || COLS="" IDLE_S=0
READ_SIZE=$(tr ' ' '\n' <<<"$BW_SIZES" | sort -n | tail -1)
command -v python3 >/dev/null || { echo "compare.sh: python3 is needed" >&2; exit 1; }

tmp=$(mktemp -d /tmp/srn-compare.XXXXXX)
chmod 755 "$tmp"     # `softrnic run` as another user must reach the programs
pids=()
NS=0
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	[ "$NS" = 1 ] && srn_netns_cleanup
	rm -rf "$tmp"
}
trap cleanup EXIT
RAW=$tmp/raw.tsv        # column metric size rep value
NA=$tmp/na.tsv          # column metric reason: cannot be measured
NOTES=$tmp/notes.txt
: >"$RAW"
: >"$NA"
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
uses() { [[ " $COLS " == *" $1 "* ]]; }
uses_any() { local c; for c in "$@"; do uses "$c" && return 0; done; return 1; }
UCX_COLS="ucxposix ucxcma ucxrc ucxud ucx ucxrcudp"
FI_COLS="fishm firxd libfabric fiverbs"
if uses_any $UCX_COLS && ! command -v ucx_perftest >/dev/null; then
	apt_install ucx-utils || true
fi
if uses_any $FI_COLS && ! command -v fi_pingpong >/dev/null; then
	apt_install libfabric-bin || true
fi
if [ "$EV" = 1 ] && ! command -v qperf >/dev/null; then
	apt_install qperf || true
fi
drop() {   # drop COL WHY: a column that cannot run at all
	COLS=$(tr ' ' '\n' <<<"$COLS" | grep -vx "$1" | tr '\n' ' ')
	note "$1 skipped: $2"
}
for c in $UCX_COLS; do
	uses "$c" && ! command -v ucx_perftest >/dev/null &&
		drop "$c" "ucx_perftest missing (ucx-utils)$([ "$INSTALL" = 0 ] && echo ', --no-install')"
done
for c in $FI_COLS; do
	uses "$c" && ! command -v fi_pingpong >/dev/null &&
		drop "$c" "fi_pingpong missing (libfabric-bin)$([ "$INSTALL" = 0 ] && echo ', --no-install')"
done
FI_PROV=tcp
if uses libfabric && ! fi_info -p tcp -t FI_EP_MSG >/dev/null 2>&1; then
	FI_PROV=sockets
	note "libfabric: no tcp provider, using sockets"
fi
if uses fishm && ! fi_info -p shm -t FI_EP_RDM >/dev/null 2>&1; then
	drop fishm "libfabric has no shm provider here"
fi

# -- softrnic and the helper programs ----------------------------------------
SOFTRNIC=$BUILD/bin/softrnic
if [ ! -x "$SOFTRNIC" ]; then
	echo "compare.sh: building softrnic in $BUILD" >&2
	{ cmake -S "$SRC" -B "$BUILD" >/dev/null && cmake --build "$BUILD" -j "$NPROC" >/dev/null; } ||
		{ echo "compare.sh: softrnic build failed" >&2; exit 1; }
fi
# Middleware through `softrnic run` needs its /dev and /sys view.
if uses_any ucxrc ucxud firxd ucxrcudp fiverbs &&
	! "$SOFTRNIC" run -- test -c /dev/infiniband/uverbs0 2>/dev/null; then
	for c in ucxrc ucxud firxd ucxrcudp fiverbs; do
		uses "$c" && drop "$c" "softrnic run cannot make its /dev view here"
	done
fi
# Under an ASan build the uninstrumented UCX/libfabric programs need the
# runtime first (scripts/test.sh sets SRN_ASAN_PRELOAD); their leaks are
# not ours to report.
ASAN_ENV=""
[ -n "${SRN_ASAN_PRELOAD:-}" ] &&
	ASAN_ENV="env LD_PRELOAD=$SRN_ASAN_PRELOAD ASAN_OPTIONS=detect_leaks=0"
RUN="$ASAN_ENV $SOFTRNIC run --"
if uses udp; then
	if ! cc -std=gnu11 -O2 -Wall -Wextra -Werror -o "$tmp/udp_pingpong" \
		"$SRC/bench/udp_pingpong.c" 2>"$tmp/cc.err"; then
		drop udp "udp_pingpong does not build: $(head -3 "$tmp/cc.err")"
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

# -- the UDP link: two namespaces, or loopback addresses ---------------------
if [ "$LINK" != lo ] && { uses_any $LINK_COLS || [ "$EV" = 1 ]; }; then
	# shellcheck source=../tests/lib/netns.sh
	source "$SRC/tests/lib/netns.sh"
	if (srn_netns_require_root) >/dev/null 2>&1; then
		# Jumbo frames, as RoCE fabrics run, so softrnic's path MTU is
		# 4096 as on loopback; TCP and UDP get the same veth.
		SRN_NETNS_MTU=9000 srn_netns_setup >/dev/null 2>&1 && NS=1
		trap cleanup EXIT   # srn_netns_setup took the EXIT trap
		[ "$NS" = 1 ] || { srn_netns_cleanup; note "network namespaces failed: UDP link on loopback"; }
	elif [ "$LINK" = ns ]; then
		echo "compare.sh: --link ns needs root and network namespaces" >&2
		exit 2
	fi
fi
if [ "$NS" = 1 ]; then
	LINK_DESC="two network namespaces, veth $ADDR_A <-> $ADDR_B, MTU 9000"
	INA="ip netns exec $NS_A"
	INB="ip netns exec $NS_B"
	SRA="$INA env SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR_A"
	SRB="$INB env SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR_B"
else
	LINK_DESC="loopback: softrnic on 127.0.0.N with SOFTRNIC_SHM=0, the others on 127.0.0.1"
	uses fiverbs && drop fiverbs "libfabric's verbs MSG endpoint skips loopback interfaces: needs --link ns (root)"
fi

START=$SECONDS
in_budget() {   # in_budget WHAT: is there time left to start WHAT?
	if [ $((SECONDS - START)) -ge "$BUDGET" ]; then
		[ -e "$tmp/over" ] || note "time budget ($BUDGET s) spent: later runs skipped, first: $1"
		touch "$tmp/over"
		return 1
	fi
}

# Run lengths: about a second each on this kind of machine; fi_pingpong
# over softrnic's ofi_rxd or a sleeping progress loop is far slower per
# round trip, so libfabric gets fewer.
lat_iters() { case $1 in 1048576) echo 300 ;; 65536) echo 2000 ;; *) echo 10000 ;; esac; }
bw_iters() { case $1 in 1048576) echo 500 ;; 65536) echo 5000 ;; 4096) echo 50000 ;; *) echo 200000 ;; esac; }
fi_iters() { case $1 in 1048576) echo 100 ;; 65536) echo 500 ;; *) echo 2000 ;; esac; }
if [ "$QUICK" = 1 ]; then
	lat_iters() { echo 300; }
	bw_iters() { echo 300; }
	fi_iters() { echo 50; }
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
div() { python3 -c "print($1 / $2)"; }

# -- a server and a client, both bounded -------------------------------------
# wait_listen NS PORT: until something listens on PORT in NS ("" = here),
# or the server died (at most 20 s: `softrnic run` starts slowly when busy).
wait_listen() {
	local i
	for i in $(seq 200); do
		$1 ss -Hltn "sport = :$2" 2>/dev/null | grep -q . && return 0
		kill -0 "$3" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
# pair NAME TIMEOUT SRVNS "SERVER CMD" "CLIENT CMD": @PORT@ in the commands
# becomes a fresh port (one retry on a clash); the client's stdout lands in
# $tmp/NAME.out, its stderr in $tmp/NAME.err.
pair() {
	local name=$1 t=$2 sns=$3 srv cli spid rc try
	for try in 1 2; do
		next_port
		srv=${4//@PORT@/$port}
		cli=${5//@PORT@/$port}
		# shellcheck disable=SC2086
		timeout -k 2 "$t" $srv >"$tmp/$name.srv" 2>&1 &
		spid=$!
		pids+=("$spid")
		wait_listen "$sns" "$port" "$spid" && break
		kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null
		echo "server did not listen on port $port: $(head -c 300 "$tmp/$name.srv")" >"$tmp/$name.err"
		[ "$try" = 2 ] && return 1
	done
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

# -- softrnic perf -----------------------------------------------------------
# sr_perf COL ARGS...: the JSON of one `softrnic perf` run in $tmp/sr.json;
# the column says which path: direct (default), rings, or the UDP link.
sr_perf() {
	local col=$1; shift
	case "$col" in
	softrnic) timeout -k 5 60 "$SOFTRNIC" perf --loopback --timeout 20 "$@" --json ;;
	rings) SOFTRNIC_DIRECT=0 timeout -k 5 60 "$SOFTRNIC" perf --loopback --timeout 20 "$@" --json ;;
	srudp)
		if [ "$NS" = 1 ]; then
			pair srperf 60 "$INA" "$SRA $SOFTRNIC perf -p @PORT@ --timeout 20" \
				"$SRB $SOFTRNIC perf $ADDR_A -p @PORT@ --timeout 20 $* --json" ||
				{ head -c 300 "$tmp/srperf.err" "$tmp/srperf.srv" >&2; return 1; }
			cat "$tmp/srperf.out"
		else
			SOFTRNIC_SHM=0 timeout -k 5 60 "$SOFTRNIC" perf --loopback --timeout 20 "$@" --json
		fi ;;
	esac >"$tmp/sr.json" 2>"$tmp/sr.err"
}
sr_measure() {   # sr_measure COL METRIC SIZE: prints the value
	local col=$1 m=$2 s=$3 f=$tmp/sr.json
	case "$m" in
	lat) sr_perf "$col" --size "$s" -n "$(lat_iters "$s")" &&
		json_rows "$f" t_median_us | awk '{print $2}' ;;
	bw) sr_perf "$col" --test bw --size "$s" --duration "$DUR" &&
		div "$(json_rows "$f" bw_MBps | awk '{print $2}')" 1000 ;;
	read) sr_perf "$col" --op read --test bw --size "$s" --duration "$DUR" &&
		div "$(json_rows "$f" bw_MBps | awk '{print $2}')" 1000 ;;
	rate) # shellcheck disable=SC2086
		sr_perf "$col" --test bw --size 8 --duration "$DUR" $RATE_OPTS &&
		json_rows "$f" msg_rate_Mpps | awk '{print $2}' ;;
	esac
}

# -- UCX: ucx_perftest -------------------------------------------------------
# ucx_line COL ARGS...: the final CSV line of one server/client pair:
# iterations,median_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr
ucx_line() {
	local col=$1 srv cli sns="" env="UCX_WARN_UNUSED_ENV_VARS=n" target=127.0.0.1; shift
	local rc_tls="UCX_TLS=rc_verbs,ud_verbs:aux UCX_NET_DEVICES=softrnic0:1"
	case "$col" in
	ucxposix) srv="env $env UCX_TLS=posix,self ucx_perftest" ;;
	ucxcma) srv="env $env UCX_TLS=cma ucx_perftest" ;;
	ucxrc) srv="env $env $rc_tls $RUN ucx_perftest" ;;
	ucxud) srv="env $env UCX_TLS=ud_verbs UCX_NET_DEVICES=softrnic0:1 $RUN ucx_perftest" ;;
	ucx)
		if [ "$NS" = 1 ]; then
			srv="$INA env $env UCX_TLS=tcp,self UCX_NET_DEVICES=$IF_A ucx_perftest"
			cli="$INB env $env UCX_TLS=tcp,self UCX_NET_DEVICES=$IF_B ucx_perftest"
		else
			srv="env $env UCX_TLS=tcp,self UCX_NET_DEVICES=lo ucx_perftest"
		fi ;;
	ucxrcudp)
		if [ "$NS" = 1 ]; then
			srv="$SRA $env $rc_tls $RUN ucx_perftest"
			cli="$SRB $env $rc_tls $RUN ucx_perftest"
		else
			srv="env SOFTRNIC_SHM=0 $env $rc_tls $RUN ucx_perftest"
		fi ;;
	esac
	if [ "$NS" = 1 ] && [[ "$col" == ucx || "$col" == ucxrcudp ]]; then
		sns=$INA target=$ADDR_A
	fi
	pair ucx 60 "$sns" "$srv -p @PORT@" "${cli:-$srv} $target -p @PORT@ $* -f -v" || return 1
	grep -E '^ *[0-9]+,' "$tmp/ucx.out" | tail -1 | tr -d ' '
}
# ucx_measure COL METRIC SIZE: UCP put (one-sided, like an RDMA Write) and
# get (like a Read); cma has no active messages, so UCP cannot wire it up
# alone: it runs at the UCT level (zero-copy put and get).
ucx_measure() {
	local col=$1 m=$2 s=$3 line test
	local uct=""
	[ "$col" = ucxcma ] && uct="-x cma -d memory -D zcopy"
	case "$m" in
	lat) test=$([ -n "$uct" ] && echo put_lat || echo ucp_put_lat)
		line=$(ucx_line "$col" -t "$test" $uct -s "$s" -n "$(lat_iters "$s")") || return 1
		cut -d, -f2 <<<"$line" ;;
	bw|read)
		if [ "$m" = bw ]; then
			test=$([ -n "$uct" ] && echo put_bw || echo ucp_put_bw)
		else
			test=$([ -n "$uct" ] && echo get || echo ucp_get)
		fi
		line=$(ucx_line "$col" -t "$test" $uct -s "$s" -n "$(bw_iters "$s")") || return 1
		# UCX prints MB/s as 2^20 B/s.
		python3 -c "print($(cut -d, -f6 <<<"$line") * 1048576 / 1e9)" ;;
	esac
}

# -- libfabric: fi_pingpong --------------------------------------------------
# fi_measure COL METRIC SIZE: fi_pingpong is a ping-pong only: latency is
# its usec/xfer, "bandwidth" its MB/s (size / half round trip, one message
# in flight); the table marks those cells.
fi_measure() {
	local col=$1 m=$2 s=$3 srv cli sns="" target=127.0.0.1 line n
	n=$(fi_iters "$s")
	local args="-I $n -S $s"
	case "$col" in
	fishm) srv="fi_pingpong -p shm -e rdm $args" ;;
	firxd) srv="env FI_PROVIDER=verbs,ofi_rxd $RUN fi_pingpong -p verbs;ofi_rxd -e rdm $args" ;;
	libfabric)
		if [ "$NS" = 1 ]; then
			srv="$INA env FI_TCP_IFACE=$IF_A FI_SOCKETS_IFACE=$IF_A fi_pingpong -p $FI_PROV -e msg $args"
			cli="$INB env FI_TCP_IFACE=$IF_B FI_SOCKETS_IFACE=$IF_B fi_pingpong -p $FI_PROV -e msg $args"
			sns=$INA target=$ADDR_A
		else
			srv="env FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo fi_pingpong -p $FI_PROV -e msg $args"
		fi ;;
	fiverbs)
		srv="$SRA FI_PROVIDER=verbs $RUN fi_pingpong -p verbs -e msg $args"
		cli="$SRB FI_PROVIDER=verbs $RUN fi_pingpong -p verbs -e msg $args"
		sns=$INA target=$ADDR_A ;;
	esac
	# bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
	pair libfabric 90 "$sns" "$srv -B @PORT@" "${cli:-$srv} -P @PORT@ $target" || return 1
	line=$(grep -E '^[0-9]+[kmg]? ' "$tmp/libfabric.out" | tail -1)
	case "$m" in
	lat) awk '{print $7}' <<<"$line" ;;
	bw) awk '{print $6 / 1000}' <<<"$line" ;;
	esac
}

# -- raw UDP floor -------------------------------------------------------------
udp_measure() {
	local m=$1 s=$2 f=$tmp/udp.json pre="" where=""
	if [ "$NS" = 1 ]; then
		pre=$INA
		where="--addr $ADDR_A --peer-addr $ADDR_B --peer-netns $NS_B"
	fi
	case "$m" in
	lat) # shellcheck disable=SC2086
		timeout -k 2 40 $pre "$tmp/udp_pingpong" -s "$s" -n "$(lat_iters "$s")" --timeout 30 \
			$where --json >"$f" 2>"$tmp/udp.err" && json_field "$f" t_median_us ;;
	bw|rate) # shellcheck disable=SC2086
		timeout -k 2 40 $pre "$tmp/udp_pingpong" -t bw -s "$s" -D "$DUR" --timeout 30 \
			$where --json >"$f" 2>"$tmp/udp.err" || return 1
		if [ "$m" = rate ]; then json_field "$f" msg_rate_Mpps; else div "$(json_field "$f" bw_MBps)" 1000; fi ;;
	esac
}

# -- which column measures what ----------------------------------------------
# can COL METRIC: 0 if the column measures it, else the reason on stdout.
can() {
	case "$2:$1" in
	read:fishm|read:firxd|read:libfabric|read:fiverbs) echo "fi_pingpong has no RMA test" ;;
	read:udp) echo "UDP has no one-sided read" ;;
	rate:softrnic|rate:rings|rate:srudp|rate:udp) return 0 ;;
	rate:*) echo "the rate is measured for softrnic and the UDP floor only" ;;
	*) return 0 ;;
	esac
	return 1
}
measure() {   # measure COL METRIC SIZE REP
	local col=$1 m=$2 s=$3 rep=$4 v why err try
	if ! why=$(can "$col" "$m"); then
		grep -q "^$col	$m	" "$NA" || echo "$col	$m	$why" >>"$NA"
		return
	fi
	# --quick: Read and the message rate only for softrnic itself.
	[ "$QUICK" = 1 ] && [[ "$m" == read || "$m" == rate ]] && [ "$col" != softrnic ] && return
	# A failed run is noted and tried once more: on this loaded machine a
	# starved progress thread can exhaust an RC QP's retries (seen at load
	# 20), which is worth reporting but should not cost the cell.
	for try in 1 2; do
		in_budget "$col $m $s" || return
		case "$col" in
		softrnic|rings|srudp) v=$(sr_measure "$col" "$m" "$s"); err=$tmp/sr.err ;;
		ucx*) v=$(ucx_measure "$col" "$m" "$s"); err=$tmp/ucx.err ;;
		fi*|libfabric) v=$(fi_measure "$col" "$m" "$s"); err=$tmp/libfabric.err ;;
		udp) v=$(udp_measure "$m" "$s"); err=$tmp/udp.err ;;
		esac
		if num "$v"; then
			record "$col" "$m" "$s" "$rep" "$v"
			return
		fi
		note "$col $m $s B run $rep try $try failed: $(head -c 300 "$err" 2>/dev/null | tr '\n' ' ')"
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

# -- event-driven latency (issue 24) ---------------------------------------
# Rows, each a half round trip of 8 bytes in us unless marked:
#   rc_lat     qperf -cm1 rc_lat: RC Send/Receive ping-pong, each side waits
#              on its completion channel (qperf's default, -cp 0)
#   rc_write   qperf -cm1 rc_rdma_write_lat: RDMA Write with immediate
#              ping-pong, the same waiting
#   rc_read    qperf -cm1 rc_rdma_read_lat: one Read after another, the
#              client waiting on its channel; qperf prints the whole Read
#              (request and response), not half of it
#   rc_poll    qperf -cm1 -cp1 rc_lat: the same ping-pong, both sides polling
#   tcp        qperf tcp_lat: kernel TCP, blocking send/recv
#   efd        bench/eventfd_pingpong: two processes, two blocking eventfds
#              (one host only: eventfds do not cross namespaces)
#   udpb       bench/udp_pingpong --block: UDP echo, both ends in blocking recv
# qperf prints a mean (time / messages), so the floors' means are the
# cells; their medians are kept as efd_med / udpb_med.
EV_HOST_ROWS="rc_lat rc_write rc_read rc_poll tcp efd udpb"
EV_LINK_ROWS="rc_lat rc_write rc_read rc_poll tcp udpb"
EVRAW=$tmp/ev_raw.tsv     # section row rep value
EVNOTES=$tmp/ev_notes.txt
: >"$EVRAW"
: >"$EVNOTES"
ev_note() { echo "$*" >>"$EVNOTES"; echo "compare.sh: $*" >&2; }
# One host: two addresses of a /24 picked at random in 127/8, away from
# 127.0.0.N where softrnic's automatic addresses (and other tests here)
# live; the loopback UDP link when there are no namespaces: two more.
ev_net="127.$((RANDOM % 200 + 30)).$((RANDOM % 250 + 1))"
EV_HA=$ev_net.1 EV_HB=$ev_net.2 EV_LA=$ev_net.3 EV_LB=$ev_net.4
EV_ITERS_EFD=50000 EV_ITERS_UDP=20000
[ "$QUICK" = 1 ] && EV_ITERS_EFD=2000 EV_ITERS_UDP=1000
ev_setup() {
	if ! command -v qperf >/dev/null; then
		ev_note "qperf missing (Debian package qperf)$([ "$INSTALL" = 0 ] && echo ', --no-install'): no qperf rows"
		EV_QPERF=0
	else
		EV_QPERF=1
	fi
	if [ ! -x "$tmp/udp_pingpong" ] && ! cc -std=gnu11 -O2 -Wall -Wextra -Werror \
		-o "$tmp/udp_pingpong" "$SRC/bench/udp_pingpong.c" 2>"$tmp/cc.err"; then
		ev_note "udp_pingpong does not build: $(head -3 "$tmp/cc.err" | tr '\n' ' ')"
	fi
	if ! cc -std=gnu11 -O2 -Wall -Wextra -Werror -o "$tmp/eventfd_pingpong" \
		"$SRC/bench/eventfd_pingpong.c" 2>"$tmp/cc.err"; then
		ev_note "eventfd_pingpong does not build: $(head -3 "$tmp/cc.err" | tr '\n' ' ')"
	fi
}
EV_START=$SECONDS
ev_in_budget() {
	if [ $((SECONDS - EV_START)) -ge "$EV_BUDGET" ]; then
		[ -e "$tmp/ev_over" ] || ev_note "events budget ($EV_BUDGET s) spent: later runs skipped, first: $1"
		touch "$tmp/ev_over"
		return 1
	fi
}
# qperf_us FILE POLL: the latency qperf printed, in us; POLL 1 checks the
# run polled (qperf -vvu prints poll_mode only when it is set).
qperf_us() {
	python3 - "$1" "$2" <<'EOF'
import re, sys
txt = open(sys.argv[1]).read()
m = re.search(r"^\s*latency\s*=\s*([0-9][0-9,]*(?:\.[0-9]*)?)\s*(ns|us|ms|sec|s)\b", txt, re.M)
if not m:
    sys.exit("no latency line")
polled = re.search(r"^\s*poll_mode\s*=\s*1\b", txt, re.M) is not None
if polled != (sys.argv[2] == "1"):
    sys.exit("poll_mode is not what was asked")
scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "sec": 1e6, "s": 1e6}[m.group(2)]
print("%.6g" % (float(m.group(1).replace(",", "")) * scale))
EOF
}
# ev_qperf SECTION ROW: one qperf client/server pair; prints the latency (us).
ev_qperf() {
	local sec=$1 row=$2 test poll=0 opts srv cli sns="" target sa sb
	case "$row" in
	rc_lat) test=rc_lat ;;
	rc_write) test=rc_rdma_write_lat ;;
	rc_read) test=rc_rdma_read_lat ;;
	rc_poll) test=rc_lat poll=1 ;;
	tcp) test=tcp_lat ;;
	esac
	opts="-m 8 -t $EV_SECS -vvu"
	[ "$test" = tcp_lat ] || opts="$opts -cm1 -cp $poll"
	if [ "$sec" = host ]; then
		sa="" sb="" target=$EV_HA
	elif [ "$NS" = 1 ]; then
		sa=$INA sb=$INB sns=$INA target=$ADDR_A
	else
		sa="env SOFTRNIC_SHM=0" sb="env SOFTRNIC_SHM=0" target=$EV_LA
	fi
	if [ "$test" = tcp_lat ]; then
		srv="$sa qperf" cli="$sb qperf"
	else
		local da=$EV_HA db=$EV_HB
		if [ "$sec" = link ]; then
			if [ "$NS" = 1 ]; then da=$ADDR_A db=$ADDR_B; else da=$EV_LA db=$EV_LB; fi
		fi
		srv="$sa $ASAN_ENV $SOFTRNIC run --no-sysfs --devices name=softrnic0,addr=$da -- qperf"
		cli="$sb $ASAN_ENV $SOFTRNIC run --no-sysfs --devices name=softrnic0,addr=$db -- qperf"
	fi
	# `quit` ends the server with the client.
	pair qperf $((EV_SECS + 40)) "$sns" "$srv -lp @PORT@" \
		"$cli $target -lp @PORT@ $opts $test quit" || return 1
	qperf_us "$tmp/qperf.out" "$poll" 2>>"$tmp/qperf.err"
}
# ev_floor SECTION ROW: the floor's mean and median half round trip (us).
ev_floor() {
	local sec=$1 row=$2 f=$tmp/floor.json pre="" where=""
	if [ "$row" = efd ]; then
		timeout -k 2 40 "$tmp/eventfd_pingpong" -n "$EV_ITERS_EFD" --timeout 30 --json \
			>"$f" 2>"$tmp/floor.err" || return 1
	else
		if [ "$sec" = link ] && [ "$NS" = 1 ]; then
			pre=$INA
			where="--addr $ADDR_A --peer-addr $ADDR_B --peer-netns $NS_B"
		fi
		# shellcheck disable=SC2086
		timeout -k 2 40 $pre "$tmp/udp_pingpong" --block -n "$EV_ITERS_UDP" --timeout 30 \
			$where --json >"$f" 2>"$tmp/floor.err" || return 1
	fi
	echo "$(json_field "$f" t_avg_us) $(json_field "$f" t_median_us)"
}
ev_measure() {   # ev_measure SECTION ROW REP
	local sec=$1 row=$2 rep=$3 v try err
	case "$row" in
	efd|udpb) [ -x "$tmp/$([ "$row" = efd ] && echo eventfd || echo udp)_pingpong" ] || return ;;
	*) [ "$EV_QPERF" = 1 ] || return ;;
	esac
	for try in 1 2; do
		ev_in_budget "$sec $row" || return
		case "$row" in
		efd|udpb) v=$(ev_floor "$sec" "$row"); err=$tmp/floor.err ;;
		*) v=$(ev_qperf "$sec" "$row"); err=$tmp/qperf.err ;;
		esac
		if num "${v%% *}"; then
			echo "$sec	$row	$rep	${v%% *}" >>"$EVRAW"
			[[ "$v" == *" "* ]] && num "${v#* }" && echo "$sec	${row}_med	$rep	${v#* }" >>"$EVRAW"
			return
		fi
		ev_note "$sec $row run $rep try $try failed: $( { cat "$err"
			[ "$err" = "$tmp/qperf.err" ] && head -c 300 "$tmp/qperf.srv"; } 2>/dev/null |
			head -c 400 | tr '\n' ' ')"
		: >"$err"
	done
}
ev_run() {
	local rep sec rows i
	ev_setup
	EV_LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
	EV_START=$SECONDS
	echo "compare.sh: event-driven latency, $REPS run(s) of each row, qperf -t $EV_SECS" >&2
	for rep in $(seq "$REPS"); do
		for sec in host link; do
			if [ "$sec" = host ]; then read -ra rows <<<"$EV_HOST_ROWS"; else read -ra rows <<<"$EV_LINK_ROWS"; fi
			# The order rotates between repetitions, as in the first table.
			for i in $(seq 0 $((${#rows[@]} - 1))); do
				ev_measure "$sec" "${rows[$(((i + rep - 1) % ${#rows[@]}))]}" "$rep"
			done
		done
	done
	EV_LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
	EV_ELAPSED=$((SECONDS - EV_START))
}
ev_table() {
	local meta csv=$CSV_OUT merge=0
	if [ "$MAIN" = 1 ]; then
		[ -n "$csv" ] && csv="${csv%.csv}.events.csv"
		merge=1
	fi
	meta="date=$DATE|nproc=$NPROC|kernel=$KERNEL|load_start=$EV_LOAD0|load_end=$EV_LOAD1"
	meta="$meta|reps=$REPS|elapsed=$EV_ELAPSED|qperf_secs=$EV_SECS|quick=$QUICK"
	meta="$meta|host_addrs=$EV_HA $EV_HB|link=$([ "$NS" = 1 ] && echo ns || echo lo)"
	meta="$meta|link_desc=$([ "$NS" = 1 ] && echo "$LINK_DESC" || echo "loopback $EV_LA <-> $EV_LB, softrnic with SOFTRNIC_SHM=0")"
	meta="$meta|efd_iters=$EV_ITERS_EFD|udp_iters=$EV_ITERS_UDP"
	python3 "$SRC/bench/events_table.py" "$EVRAW" "$EVNOTES" "$meta" "$csv" "$JSON_OUT" "$merge"
}

# -- the run ---------------------------------------------------------------
# Cells in order; within a repetition every column runs once per cell, and
# the column order rotates between repetitions so no column always runs
# first after a slow one.
rc=0
if [ "$MAIN" = 1 ]; then
	CELLS=""
	for s in $LAT_SIZES; do CELLS="$CELLS lat:$s"; done
	for s in $BW_SIZES; do CELLS="$CELLS bw:$s"; done
	CELLS="$CELLS read:$READ_SIZE rate:8"
	read -ra colv <<<"$COLS"
	echo "compare.sh: ${#colv[@]} columns (${COLS// /,}), $REPS run(s) each; UDP link: $LINK_DESC" >&2
	[ "$HAVE_IDLE" = 1 ] && idle_cpu
	for rep in $(seq "$REPS"); do
		for cell in $CELLS; do
			m=${cell%%:*} s=${cell#*:}
			for i in $(seq 0 $((${#colv[@]} - 1))); do
				measure "${colv[$(((i + rep - 1) % ${#colv[@]}))]}" "$m" "$s" "$rep"
			done
		done
	done
	LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
	ELAPSED=$((SECONDS - START))

	# -- the table -----------------------------------------------------
	META="date=$DATE|nproc=$NPROC|kernel=$KERNEL|load_start=$LOAD0|load_end=$LOAD1|idle_start=$IDLE0"
	META="$META|reps=$REPS|elapsed=$ELAPSED|lat_sizes=$LAT_SIZES|bw_sizes=$BW_SIZES|read_size=$READ_SIZE"
	META="$META|fi_prov=$FI_PROV|link=$([ "$NS" = 1 ] && echo ns || echo lo)|link_desc=$LINK_DESC"
	META="$META|columns=$COLS|quick=$QUICK"
	python3 "$SRC/bench/compare_table.py" "$RAW" "$NA" "$NOTES" "$META" "$CSV_OUT" "$JSON_OUT" ||
		{ echo "compare.sh: building the table failed" >&2; exit 1; }
	grep -Eq '^softrnic	(lat|bw|rate)	' "$RAW" || { echo "compare.sh: no softrnic perf run succeeded" >&2; rc=1; }
fi
if [ "$EV" = 1 ]; then
	ev_run
	[ "$MAIN" = 1 ] && echo
	ev_table || { echo "compare.sh: building the event-driven table failed" >&2; exit 1; }
	# Only the event-driven table: it must hold at least one softrnic row.
	[ "$MAIN" = 1 ] || grep -Eq '^(host|link)	rc_' "$EVRAW" ||
		{ echo "compare.sh: no qperf run over softrnic succeeded" >&2; rc=1; }
fi
exit $rc
