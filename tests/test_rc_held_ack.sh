#!/bin/bash
# test_rc_held_ack (see its header) under SOFTRNIC_STATS: every send is
# acknowledged although the receiver never answers, and the receiver's
# counters show that it did hold ACKs for a post (acks_held_for_post > 0),
# so the path under test was taken.
# Twice: the receiver destroys its QP at the end, then (--exit) it returns
# from main with everything open.  On the UDP link (SOFTRNIC_SHM=0): ACKs
# are held to save a system call, which same-host rings do not make.
set -u
export SOFTRNIC_SHM=0
for mode in "" --exit; do
    # shellcheck disable=SC2086
    out=$(SOFTRNIC_STATS=1 SOFTRNIC_DIAG=0 timeout -k 5 120 "$SRN_BUILD/bin/test_rc_held_ack" $mode 2>&1)
    rc=$?
    echo "$out"
    [ "$rc" -eq 0 ] || { echo "FAIL: test_rc_held_ack $mode exited $rc"; exit 1; }
    held=$(echo "$out" | awk '$1 == "softrnic" && $3 == "acks_held_for_post" && $4 > m { m = $4 }
                             END { print m + 0 }')
    [ "$held" -gt 0 ] || { echo "FAIL: $mode no ACK was held (acks_held_for_post = 0)"; exit 1; }
    echo "ok: $mode acks_held_for_post = $held"
done
