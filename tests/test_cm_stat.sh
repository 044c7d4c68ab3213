#!/bin/bash
# test_cm_stat.sh - the CM's MADs are counted by type in the device
# counters (`softrnic stat`) and show in the pcap trace, where tshark
# decodes them as InfiniBand CM.  rping through `softrnic run`, two
# processes on one host:
#
#   1. server rping -s -P (stays up), client rping -C 3:
#      softrnic stat --dump --pid SERVER shows cm_req_rcvd, cm_rep_sent,
#      cm_rtu_rcvd, cm_dreq_rcvd, cm_drep_sent; the client's exit dump
#      (SOFTRNIC_STATS=1) the other halves it sees before it exits
#   2. server rping -s with SOFTRNIC_PCAP, client rping -C 3: tshark
#      names ConnectRequest, ConnectReply, ReadyToUse, DisconnectRequest
#      and DisconnectReply in the trace
#
# Exit 0 pass, 1 fail, 77 skip.
set -u
command -v rping >/dev/null || { echo "SKIP: rdmacm-utils not installed"; exit 77; }
source "$SRN_SRC/tests/lib/cm_conn.sh"
w=$SRN_CONN_WORK
spid=
trap 'kill $spid 2>/dev/null; rm -rf "$w"' EXIT
fail=0

# counter FILE NAME: its value in a `stat --dump` or SOFTRNIC_STATS dump.
counter() {
	awk -v n="$2" '($5 == n) { print $6; f = 1 } ($3 == n) { print $4; f = 1 } END { if (!f) print 0 }' "$1" | head -1
}

expect() {     # expect FILE WHO NAME...: each counter at least 1
	local f=$1 who=$2 n v
	shift 2
	for n in "$@"; do
		v=$(counter "$f" "$n")
		if [ "${v:-0}" -ge 1 ]; then
			echo "ok: $who $n = $v"
		else
			echo "FAIL: $who $n = ${v:-0}"; fail=1
		fi
	done
}

# 1. Counters.  The persistent server stays up after its client, so its
# counters can be read from outside while it runs.
for ((try = 0; try < 3; try++)); do
	port=$(srn_conn_port)
	srn_conn_rping_server "$w/s" "$port"
	spid=$srn_conn_bg
	srn_conn_run "$w/c" 60 SOFTRNIC_STATS=1 "$SOFTRNIC" run -- \
		rping -c -v -C 3 -a "$SRN_CONN_ADDR" -p "$port"
	wait "$srn_conn_bg" && break
	kill "$spid" 2>/dev/null; { wait "$spid"; } 2>/dev/null
	grep -qE "Address already in use|REJECTED" "$w/s" "$w/c" || break
done
if ! grep -q "rdma-ping-2:" "$w/c"; then
	echo "FAIL: rping did not run:"; cat "$w/s" "$w/c"; exit 1
fi
# softrnic run execs rping: it is timeout's only child.  Its CM answers the
# client's DREQ (cm_drep_sent) right after the client's last word.
sleep 1
"$SOFTRNIC" stat --dump --pid "$(pgrep -P "$spid" | head -1)" >"$w/stat" 2>&1
kill "$spid" 2>/dev/null
{ wait "$spid"; } 2>/dev/null
spid=
expect "$w/stat" server cm_req_rcvd cm_rep_sent cm_rtu_rcvd cm_dreq_rcvd cm_drep_sent
# (The client exits without waiting for the DREP, as rping does.)
expect "$w/c" client cm_req_sent cm_rep_rcvd cm_rtu_sent cm_dreq_sent
if [ "$(counter "$w/stat" cm_malformed)" != 0 ]; then
	echo "FAIL: the server counted malformed MADs"; fail=1
fi

# 2. The trace.
if command -v tshark >/dev/null; then
	pcap=$w/cm.pcap
	srn_conn_pair "rping (pcap)" "rdma-ping-2:" \
		"env SOFTRNIC_PCAP=$pcap rping -s -a $SRN_CONN_ADDR -p @PORT@" \
		"rping -c -v -C 3 -a $SRN_CONN_ADDR -p @PORT@" || fail=1
	tshark -r "$pcap" -Y "infiniband.bth.destqp == 1" 2>/dev/null >"$w/cm.txt"
	for m in ConnectRequest ConnectReply ReadyToUse DisconnectRequest DisconnectReply; do
		if grep -q "CM: $m" "$w/cm.txt"; then
			echo "ok: tshark decodes CM $m"
		else
			echo "FAIL: no CM $m in the trace:"; cat "$w/cm.txt"; fail=1
		fi
	done
else
	echo "note: tshark not installed, trace not checked"
fi
exit $fail
