#!/bin/bash
# test_cm_perftest.sh MODE - Debian's unmodified perftest with -R (QPs
# connected through rdma_cm, and its own exchange over an rdma_cm QP too)
# and qperf -cm1, through `softrnic run`, two processes on one host
# (tests/lib/cm_conn.sh draws them).
#
#   bw     ib_write_bw, ib_read_bw, ib_send_bw (8 B and 64 KiB), ib_atomic_bw
#   lat    ib_write_lat, ib_read_lat, ib_send_lat (8 B and 4 KiB), ib_atomic_lat
#   qperf  qperf -cm1: rc_bw, rc_lat, rc_rdma_write_bw, rc_rdma_read_lat
#
# Small iteration counts: this checks that connection setup, the run and
# the teardown all complete, not how fast.  Exit 0 pass, 1 fail, 77 skip.
set -u
mode=${1:?bw, lat or qperf}
source "$SRN_SRC/tests/lib/cm_conn.sh"
trap 'rm -rf "$SRN_CONN_WORK"' EXIT
fail=0

perftest() {
	local prog=$1
	shift
	srn_conn_pair "$prog -R $*" "^ +[0-9]+ +200 " \
		"$prog -R -p @PORT@ -n 200 $*" "$prog -R -p @PORT@ -n 200 $* $SRN_CONN_ADDR" || fail=1
}

case $mode in
bw | lat)
	command -v ib_write_bw >/dev/null || { echo "SKIP: perftest not installed"; exit 77; }
	big=65536
	[ "$mode" = lat ] && big=4096
	for op in write read send; do
		perftest "ib_${op}_$mode" -s 8
		perftest "ib_${op}_$mode" -s $big
	done
	perftest "ib_atomic_$mode"
	;;
qperf)
	command -v qperf >/dev/null || { echo "SKIP: qperf not installed"; exit 77; }
	# qperf's server takes its tests' parameters from the client over TCP
	# (-lp: its listen port); each test connects a new RC QP with rdma_cm.
	for t in rc_bw rc_lat rc_rdma_write_bw rc_rdma_read_lat; do
		srn_conn_pair "qperf -cm1 $t" "(bw|latency) += " "qperf -lp @PORT@" \
			"qperf -lp @PORT@ -cm1 -t 1 -to 30 $SRN_CONN_ADDR $t quit" || fail=1
	done
	;;
*)
	echo "usage: $0 bw|lat|qperf"; exit 2 ;;
esac
exit $fail
