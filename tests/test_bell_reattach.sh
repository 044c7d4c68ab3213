#!/bin/bash
# test_bell_reattach.sh - a same-host sender rings a sleeping receiver's
# eventfd bell (link/shm_bell.h), also for the second process it meets
# behind the same address.
#
#   server: rping -s -P (persistent) on 127.x.y.z, its own device
#   client 1, then client 2: rping -c -C 100 with zero configuration
#     (the shared default address); client 2 comes after client 1 left.
#
# The server's ring to a client goes to the client's inbox; its doorbell,
# when the client sleeps in ibv_get_cq_event, is the client's eventfd
# copied once per peer.  The copy was remembered as "tried" past the
# peer's detach, so every later process behind that address was rung by
# datagram: on a shared address that meant opening the group's files on
# every doorbell (the block store's server: 80 % of its CPU).  Counted,
# not timed: of the server's doorbells (`shm_doorbells`) at most a few
# may go by datagram (a client's first, before its bell exists).
# Exit 0 pass, 1 fail, 77 skip.
set -u
command -v rping >/dev/null || { echo "SKIP: rdmacm-utils not installed"; exit 77; }
source "$SRN_SRC/tests/lib/cm_conn.sh"
spid=
trap '[ -n "$spid" ] && kill "$spid" 2>/dev/null; rm -rf "$SRN_CONN_WORK"' EXIT
fail=0

# counter PID NAME: the device counter of process PID (0 if absent).
counter() {
	"$SOFTRNIC" stat --pid "$1" --dump 2>/dev/null |
		awk -v n="$2" '$4 == "dev" && $5 == n { v += $6 } END { print v + 0 }'
}

for ((try = 0; try < 3; try++)); do
	port=$(srn_conn_port)
	srn_conn_rping_server "$SRN_CONN_WORK/s" "$port"
	spid=$srn_conn_bg
	ok=1
	for c in 1 2; do
		srn_conn_run "$SRN_CONN_WORK/c$c" 60 "$SOFTRNIC" run -- \
			rping -c -C 100 -a "$SRN_CONN_ADDR" -p "$port"
		wait "$srn_conn_bg" || ok=0
	done
	[ $ok = 1 ] && break
	kill "$spid" 2>/dev/null
	{ wait "$spid"; } 2>/dev/null
	spid=
	grep -qE "Address already in use|Cannot assign requested address|REJECTED|rdma_connect" \
		"$SRN_CONN_WORK"/c* "$SRN_CONN_WORK/s" || try=3
done
if [ "$ok" != 1 ]; then
	echo "FAIL: the two rping clients did not both finish"
	tail -3 "$SRN_CONN_WORK/s" "$SRN_CONN_WORK"/c*
	exit 1
fi
rp=$(pgrep -P "$spid" | head -1)
all=$(counter "$rp" shm_doorbells)
efd=$(counter "$rp" shm_doorbells_eventfd)
echo "server (pid $rp): $all doorbells, $efd by eventfd"
if [ "$all" -lt 50 ]; then
	echo "FAIL: the server rang its sleeping clients $all times: the bell path was not tested"
	fail=1
elif [ $((all - efd)) -gt 10 ]; then
	echo "FAIL: $((all - efd)) of $all doorbells went by datagram (a client's bell not taken)"
	fail=1
fi
kill "$spid" 2>/dev/null
{ wait "$spid"; } 2>/dev/null
spid=
[ $fail = 0 ] && echo "PASS"
exit $fail
