#!/bin/bash
# Every error scenario of test_rc_verbs (the RC error cases) leaves a
# one-line explanation that `softrnic explain` shows after the process has
# exited: which key, address, length and check on the responder side, the
# status and peer on the requester side, retry history for the retry
# errors.  Also `softrnic explain STATUS` for a few statuses.
set -u
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export SOFTRNIC_DIAG_DIR=$dir SOFTRNIC_DIAG_KEEP=1
"$SRN_BUILD/bin/test_rc_verbs" >/dev/null || { echo "FAIL: test_rc_verbs failed"; exit 1; }
out=$("$SRN_BUILD/bin/softrnic" explain 2>&1)
fail=0
expect() {
    if ! grep -Eq -- "$2" <<<"$out"; then
        echo "FAIL: no explanation for $1 (want /$2/)"
        fail=1
    else
        echo "ok: $1"
    fi
}
expect "bad lkey" "LOC_PROT_ERR: SEND .*local key 0x[0-9a-f]+ addr 0x[0-9a-f]+ len 100: stale key"
expect "stale rkey, responder side" "NAK remote access error for RC_RDMA_WRITE_ONLY PSN 0x[0-9a-f]+: RDMA WRITE rkey 0x[0-9a-f]+ va 0x[0-9a-f]+ len 100: stale key"
expect "stale rkey, requester side" "REM_ACCESS_ERR: RDMA_WRITE .*rkey 0x[0-9a-f]+ va 0x[0-9a-f]+ len 100 to QP 0x[0-9a-f]+ at 127\.0\.0\.[0-9]+: the responder answered PSN 0x[0-9a-f]+ with NAK remote access error"
expect "range outside region" "address range outside the region"
expect "receive buffer too small" "LOC_LEN_ERR: RECV .*does not fit the receive buffers \(50 bytes\)"
expect "too long, requester side" "REM_INV_REQ_ERR: SEND .*NAK invalid request"
expect "misaligned atomic" "not 8-byte aligned"
expect "no remote atomic right" "without IBV_ACCESS_REMOTE_ATOMIC"
expect "RNR retries exhausted" "RNR_RETRY_EXC_ERR: SEND .*rnr_retry 1 spent: the peer had no receive posted"
expect "transport retries exhausted" "RETRY_EXC_ERR: SEND .*2 retries spent \(retry_cnt 2, local ACK timeout 1\.0 ms\)"
expect "window bound to another QP" "type 2 memory window bound to another QP"
expect "invalidated window" "memory window not bound \(or invalidated\)"

for st in RETRY_EXC_ERR IBV_WC_REM_ACCESS_ERR 13; do
    if "$SRN_BUILD/bin/softrnic" explain "$st" | grep -qiE "cause|check"; then
        echo "ok: explain $st"
    else
        echo "FAIL: explain $st gives no causes or checks"
        fail=1
    fi
done
exit $fail
