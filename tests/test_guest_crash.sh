#!/bin/bash
# test_guest_crash.sh - a crash inside softrnic's thread is diagnosable.
# test_guest crash makes a target's srn-progress fault while placing a
# peer's RDMA Write (into memory made inaccessible behind the library's back); the
# target's segment outlives it, and `softrnic explain` must name the
# thread, the stage, the QP and the operation.
set -u
: "${SRN_BUILD:?SRN_BUILD must point at the build directory}"
unset SOFTRNIC_DEVICES SOFTRNIC_CONFIG SOFTRNIC_PCAP SOFTRNIC_FAULTS SOFTRNIC_LOG
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export SOFTRNIC_DIAG_DIR=$tmp SOFTRNIC_SHM=0
# The sanitizer reports the fault and aborts: still a death by signal.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:abort_on_error=1"
timeout -k 5 60 "$SRN_BUILD/bin/test_guest" crash >"$tmp/out" 2>"$tmp/err"
rc=$?
cat "$tmp/out"
[ "$rc" -eq 0 ] || { tail -20 "$tmp/err"; echo "FAIL: test_guest crash exited $rc"; exit 1; }
read -r _ pid qpn _ < <(grep '^target ' "$tmp/out")
[ -n "${pid:-}" ] || { echo "FAIL: no target line"; exit 1; }
"$SRN_BUILD/bin/softrnic" explain --pid "$pid" >"$tmp/explain" 2>&1
cat "$tmp/explain"
bad=0
for want in "pid $pid" "killed, or crashed" "its srn-progress thread" \
	"the responder, executing a peer's request" "QP $qpn, RC RDMA_WRITE_ONLY" "4096 bytes"; do
	grep -qF -- "$want" "$tmp/explain" || { echo "FAIL: explain does not say '$want'"; bad=1; }
done
[ "$bad" -eq 0 ] && echo PASS
exit "$bad"
