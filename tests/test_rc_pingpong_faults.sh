#!/bin/bash
# Debian's unmodified ibv_rc_pingpong through `softrnic run` with the link
# fault injector dropping 5% of the data packets at each sender: NAK-
# sequence, go-back-N and retry_cnt must hide the loss from the program
# completely.
#
# Only packets that a later packet of the same message reveals are dropped
# (SEND FIRST and MIDDLE; ibv_rc_pingpong's messages are 4 to 64 packets):
# the responder NAKs the gap when the next packet arrives and the requester
# goes back at once.  The program's timeout is fixed at 14 (67 ms) with
# retry_cnt 7, 0.54 s in all, and each local ACK timeout is a retry spent
# while the peer may be starved of CPU: when the last packet of a message
# (or an ACK) could be lost, every loss waited for the timer, and on a
# loaded 2-CPU machine a peer unscheduled for a few hundred ms then spent
# the rest ("retry counter exceeded").  Now a retry goes to the timer only
# when a resent packet is lost again (5% of the NAKs); otherwise a stall of
# the peer costs no more than in a loss-free run.  Tail loss, ACK loss and the timer are covered by
# test_rc_stress, whose timeout is long enough for a starved peer.
#
# ACKs are never dropped for another reason too: ibv_rc_pingpong exits as
# soon as its last receive and send completed, so an ACK lost on its way
# to the peer that finishes last can never be repeated (the QP that would
# answer the retransmission is gone) and that peer ends in RETRY_EXC_ERR,
# as it would on a real lossy fabric.
set -u
source "$SRN_SRC/tests/lib/pingpong.sh"
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }

data="opcode=0x00|0x01"   # SEND first, middle: never the last packet of a message
srv="env SOFTRNIC_FAULTS=seed=7,tx.drop=5,$data"
cli="env SOFTRNIC_FAULTS=seed=8,tx.drop=5,$data"
fail=0
while read -r args; do
    start=$SECONDS
    # shellcheck disable=SC2086
    srn_pingpong ibv_rc_pingpong "$srv" "$cli" 127.0.0.1 -g 0 $args || fail=1
    echo "   ($((SECONDS - start)) s)"
done <<'LIST'
-n 500
-n 100 -s 65536 -m 4096
-n 50 -s 65536 -m 1024
LIST
exit $fail
