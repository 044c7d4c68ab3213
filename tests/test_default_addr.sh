#!/bin/bash
# test_default_addr.sh - with no variable set, every process of the host
# shares one device address, as on a NIC (issue 26): rdma_cm servers are
# reachable at 127.0.0.1 whichever process opened its device first, and
# whatever else runs there.
#
#   first  an unrelated softrnic process that does not use rdma_cm
#          (ibv_rc_pingpong waiting for its client) joins first: it may
#          be the group's member 0, and REQs that reach it must still find
#          their listener (link/udp_group_fwd.c, FWD_ROUTE)
#   then   qperf / qperf 127.0.0.1 -cm1 rc_lat (the server opens its
#          device only when the test starts: after the client), rping
#          -s/-c -a 127.0.0.1, ib_send_lat -R, ucmatose, and fio's rdma
#          engine when fio is installed
#   last   the unrelated process's pingpong still completes
#
# Nothing sets SOFTRNIC_DEVICES or SOFTRNIC_CONFIG.  Loopback only; every
# run under timeout.  Exit 0 pass, 1 fail, 77 skip.
set -u
# As root, in a network namespace of its own: the suite's other processes
# share 127.0.0.1 too and come and go; this test counts the members
# beside it.
if [ "$(id -u)" = 0 ] && [ -z "${SRN_DA_NETNS:-}" ] && command -v unshare >/dev/null; then
	exec env SRN_DA_NETNS=1 unshare -n sh -c 'ip link set lo up && exec bash "$0"' "$0"
fi
SOFTRNIC=$SRN_BUILD/bin/softrnic
command -v rping >/dev/null || { echo "SKIP: rdmacm-utils not installed"; exit 77; }
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }
unset SOFTRNIC_DEVICES SOFTRNIC_CONFIG
T=${SRN_CM_TIMEOUT:-40}
envs=()
[ -n "${SRN_ASAN_PRELOAD:-}" ] && envs=(LD_PRELOAD="$SRN_ASAN_PRELOAD" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1)
run() { env "${envs[@]}" timeout -k 5 "$T" "$SOFTRNIC" run -- "$@"; }
port() { echo $((20000 + RANDOM % 12000)); }
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT
fail=0

# listening PORT: does a process of ours hold rdma_cm TCP-space port PORT
# (its port file, cm/ports.c, in the CM directory of link/rundir.h)?
listening() {
	ls /dev/shm/softrnic-cm-"$(id -u)"-*/ "${XDG_RUNTIME_DIR:-/nonexistent}"/softrnic-cm-*/ \
		2>/dev/null | grep -q "^0106-$(printf %05u "$1")-"
}

# pair NAME CLIENT_OK_REGEX [--cm PORT] SERVER_ARGS -- CLIENT_ARGS: the
# server starts first; with --cm the client waits (bounded) until it
# listens: with one address per host, as with a kernel's CM, a REQ for a
# port nobody holds yet is rejected at once, and Debian's perftest 4.5
# crashes in its retry after a REJ (fixed upstream in perftest 3d9d8d0).
# The client is retried (bounded) while the server may not be ready;
# --once: one try, for a server that is ready.
pair() {
	local name=$1 ok=$2 sargs=() cargs=() spid crc try cm= tries=20
	shift 2
	if [ "$1" = --once ]; then tries=1; shift; fi
	if [ "$1" = --cm ]; then cm=$2; shift 2; fi
	while [ $# -gt 0 ] && [ "$1" != -- ]; do sargs+=("$1"); shift; done
	shift
	cargs=("$@")
	run "${sargs[@]}" >"$work/s" 2>&1 &
	spid=$!
	if [ -n "$cm" ]; then
		for ((try = 0; try < 200; try++)); do
			listening "$cm" && break
			sleep 0.05
		done
	fi
	for ((try = 0; try < tries; try++)); do
		sleep 0.3
		run "${cargs[@]}" >"$work/c" 2>&1
		crc=$?
		grep -qE "$ok" "$work/c" && break
		kill -0 "$spid" 2>/dev/null || break
	done
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	if [ "$crc" -ne 0 ] || ! grep -qE "$ok" "$work/c"; then
		echo "FAIL: $name (client rc=$crc)"
		echo "--- server:"; tail -15 "$work/s"; echo "--- client:"; tail -15 "$work/c"
		fail=1
	else
		echo "ok: $name"
	fi
}

# The unrelated process: opens its device at once, waits for a client.
pp=$(port)
env "${envs[@]}" timeout -k 5 $((T * 6)) "$SOFTRNIC" run -- ibv_rc_pingpong -g 0 -p "$pp" -n 50 \
	>"$work/pp.s" 2>&1 &
pids+=($!)
sleep 0.5

p=$(port)
pair "qperf rc_lat -cm1 (the client opens its device first)" "latency *=" \
	qperf -lp "$p" -- qperf 127.0.0.1 -lp "$p" -ip $((p + 1)) -cm1 -t 1 rc_lat
p=$(port)
pair "rping" "rdma-ping-19:" --cm "$p" rping -s -a 127.0.0.1 -p "$p" -C 20 -- \
	rping -c -a 127.0.0.1 -p "$p" -v -C 20
p=$(port)
pair "ib_send_lat -R" "^ *2 +200 " --cm "$p" ib_send_lat -R -p "$p" -n 200 -- \
	ib_send_lat -R -p "$p" -n 200 127.0.0.1
p=$(port)
pair "ucmatose" "test complete" --cm "$p" ucmatose -p "$p" -c 2 -C 10 -- \
	ucmatose -s 127.0.0.1 -p "$p" -c 2 -C 10
if command -v fio >/dev/null && fio --enghelp 2>/dev/null | grep -qw rdma; then
	p=$(port)
	pair "fio rdma engine" "WRITE: bw=" \
		fio --name=s --ioengine=rdma --port="$p" --rw=write --bs=4k --size=1m \
		--verb=write --output-format=normal -- \
		fio --name=c --ioengine=rdma --hostname=127.0.0.1 --port="$p" --rw=write --bs=4k \
		--size=1m --verb=write --iodepth=4
else
	echo "note: fio with the rdma engine not installed: not run"
fi

# Four idle rdma_cm servers beside them, each with a CM of its own.  A
# REQ reaches any member first, and ib_send_lat -R connects its test QP
# while its server is between two listens: the member that got the REQ
# holds it until the listener appears in the server's process and then
# passes it on (cm/held.c).  Each pair once: a REJ fails it.
for k in 1 2 3 4; do
	p=$(port)
	env "${envs[@]}" timeout -k 5 $((T * 6)) "$SOFTRNIC" run -- rping -s -a 127.0.0.1 -p "$p" \
		>/dev/null 2>&1 &
	pids+=($!)
	for ((try = 0; try < 200; try++)); do
		listening "$p" && break
		sleep 0.05
	done
done
for k in 1 2 3 4 5 6; do
	p=$(port)
	pair "ib_send_lat -R beside four CMs ($k)" "^ *2 +200 " --once --cm "$p" \
		ib_send_lat -R -p "$p" -n 200 -- ib_send_lat -R -p "$p" -n 200 127.0.0.1
done

# The unrelated process still works, and every process shared 127.0.0.1.
run ibv_rc_pingpong -g 0 -p "$pp" -n 50 127.0.0.1 >"$work/pp.c" 2>&1
if grep -q "50 iters" "$work/pp.c"; then
	echo "ok: the unrelated ibv_rc_pingpong"
else
	echo "FAIL: the unrelated ibv_rc_pingpong"; tail -5 "$work/pp.c" "$work/pp.s"; fail=1
fi
gid=$(grep -m1 "local address" "$work/pp.c" | sed -n 's/.*GID \(.*\)$/\1/p')
case $gid in
*127.0.0.1 | *:7f00:1 | *:7f00:0001) echo "ok: the client's device is at 127.0.0.1 ($gid)" ;;
*) echo "note: the client's device GID is $gid (127.0.0.1 held by another user?)" ;;
esac
exit $fail
