#!/bin/bash
# test_cm_peer_killed.sh - one side of a connected rping is killed with
# SIGKILL; the other side's rdma_cm must say DISCONNECTED promptly (the CM
# watches a same-host peer's process: src/cm/peer_watch.c), not after its
# DREQ retries (15 × 4.8 s).  Both directions, two processes on one host:
#
#   server: rping -s on 127.x.y.z (its own device), -v
#   client: rping -c -v (endless pings) from 127.0.0.N
#
# The bound (SRN_CM_KILL_BOUND, 20 s) is far below the 77 s of the timers
# and far above what the watch takes (milliseconds); it is not a timing
# measurement.  Exit 0 pass, 1 fail, 77 skip.
set -u
command -v rping >/dev/null || { echo "SKIP: rdmacm-utils not installed"; exit 77; }
source "$SRN_SRC/tests/lib/cm_conn.sh"
trap 'rm -rf "$SRN_CONN_WORK"' EXIT
bound=${SRN_CM_KILL_BOUND:-20}
fail=0

# The program behind `timeout PID`: softrnic run execs it, so it is
# timeout's only child.
prog_pid() { pgrep -P "$1" | head -1; }

# wait_for FILE REGEX SECONDS: 0 when REGEX shows up in FILE in time.
wait_for() {
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		grep -qE "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# run VICTIM: start a pair, let pings flow, SIGKILL VICTIM (server or
# client), expect "<survivor> DISCONNECT EVENT" from the survivor.
run() {
	local victim=$1 survivor port s c spid cpid vpid start try
	survivor=client
	[ "$victim" = client ] && survivor=server
	for ((try = 0; try < 3; try++)); do
		port=$(srn_conn_port)
		# The last run's logs would satisfy wait_for before this run's
		# client has truncated its own: the kill then hit a connect.
		rm -f "$SRN_CONN_WORK/s" "$SRN_CONN_WORK/c"
		srn_conn_run "$SRN_CONN_WORK/s" 120 SOFTRNIC_DEVICES="name=softrnic0,addr=$SRN_CONN_ADDR" \
			"$SOFTRNIC" run -- rping -s -v -a "$SRN_CONN_ADDR" -p "$port"
		spid=$srn_conn_bg
		sleep 1
		srn_conn_run "$SRN_CONN_WORK/c" 120 "$SOFTRNIC" run -- rping -c -v -a "$SRN_CONN_ADDR" -p "$port"
		cpid=$srn_conn_bg
		wait_for "$SRN_CONN_WORK/c" "ping data: rdma-ping-20" 30 && break
		kill "$spid" "$cpid" 2>/dev/null
		{ wait "$spid" "$cpid"; } 2>/dev/null
		grep -qE "Address already in use|Cannot assign requested address|REJECTED" \
			"$SRN_CONN_WORK/s" "$SRN_CONN_WORK/c" || try=3
	done
	if [ "$try" -ge 3 ]; then
		echo "FAIL: $victim killed: the pair never ran"
		tail -5 "$SRN_CONN_WORK/s" "$SRN_CONN_WORK/c"
		fail=1
		return
	fi
	s=$SRN_CONN_WORK/s c=$SRN_CONN_WORK/c
	vpid=$(prog_pid "$spid")
	[ "$victim" = client ] && vpid=$(prog_pid "$cpid")
	start=$SECONDS
	kill -9 "$vpid"
	local log=$c
	[ "$survivor" = server ] && log=$s
	if wait_for "$log" "$survivor DISCONNECT EVENT" "$bound"; then
		echo "ok: $victim killed -> $survivor DISCONNECTED after about $((SECONDS - start)) s"
	else
		echo "FAIL: $victim killed, $survivor saw no DISCONNECTED in $bound s"
		tail -5 "$log"
		fail=1
	fi
	kill "$spid" "$cpid" 2>/dev/null
	{ wait "$spid" "$cpid"; } 2>/dev/null
}

run client
run server
exit $fail
