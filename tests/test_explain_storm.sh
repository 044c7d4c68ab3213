#!/bin/bash
# `softrnic explain` diagnoses a retransmission storm provoked for real:
# Debian's unmodified ibv_rc_pingpong through `softrnic run`, the fault
# injector dropping 8 % of each side's data packets (SEND FIRST/MIDDLE
# only, so the NAK-sequence path recovers every loss: see
# test_rc_pingpong_faults.sh).  The same run without faults is the
# control: no diagnosis.
#
#   ibv_rc_pingpong server ──(rings, SOFTRNIC_FAULTS tx.drop)── client
#        └── segments in $SOFTRNIC_DIAG_DIR, kept ──> softrnic explain
set -u
source "$SRN_SRC/tests/lib/pingpong.sh"
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export SOFTRNIC_DIAG_KEEP=1
fail=0

export SOFTRNIC_DIAG_DIR=$dir/clean
mkdir "$SOFTRNIC_DIAG_DIR"
srn_pingpong ibv_rc_pingpong "" "" 127.0.0.1 -g 0 -n 60 -s 65536 -m 1024 || exit 1
out=$(timeout 60 "$SOFTRNIC" explain 2>&1)
if grep -q "diagnosis:" <<<"$out"; then
    echo "FAIL: a loss-free run was diagnosed:"; echo "$out"; fail=1
else
    echo "ok: no diagnosis for a loss-free run"
fi

export SOFTRNIC_DIAG_DIR=$dir/lossy
mkdir "$SOFTRNIC_DIAG_DIR"
data="opcode=0x00|0x01"
srn_pingpong ibv_rc_pingpong "env SOFTRNIC_FAULTS=seed=3,tx.drop=8,$data" \
    "env SOFTRNIC_FAULTS=seed=4,tx.drop=8,$data" 127.0.0.1 -g 0 -n 60 -s 65536 -m 1024 ||
    exit 1
out=$(timeout 60 "$SOFTRNIC" explain 2>&1)
echo "$out" | grep -A12 "diagnosis:" | head -40
expect() {
    if grep -Eq -- "$2" <<<"$out"; then
        echo "ok: $1"
    else
        echo "FAIL: $1 (want /$2/)"; fail=1
    fi
}
expect "a storm is named" "^diagnosis: retransmission storm: pid [0-9]+ \(ibv_rc_pingpong\)"
expect "with its numbers" "[0-9]+ go-back-N restarts for [0-9]+ packets sent \([0-9.]+ per 1000\)"
expect "the QP that suffers" "qp 0x[0-9a-f]{6} to QP 0x[0-9a-f]{6} at 127\.0\.0\.[0-9]+: [1-9][0-9]* restarts"
expect "the cause" "cause: the fault injector \(SOFTRNIC_FAULTS\)"
expect "what to do" "what to do: RoCE needs a network that does not drop"
exit $fail
