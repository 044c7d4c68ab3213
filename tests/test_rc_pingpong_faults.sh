#!/bin/bash
# Debian's unmodified ibv_rc_pingpong through `softrnic run` with the link
# fault injector dropping 5% of the data packets on each side (tx and rx,
# different seeds, so the two sides lose different packets): NAK-sequence,
# go-back-N, the local ACK timeout and retry_cnt must hide the loss from
# the program completely.
#
# Only SEND packets are dropped, not ACKs: ibv_rc_pingpong exits as soon as
# its last receive and send completed, so an ACK lost on its way to the peer
# that finishes last can never be repeated (the QP that would answer the
# retransmission is gone) and that peer ends in RETRY_EXC_ERR - as it would
# on a real lossy fabric.  With plain drop=5 on both sides (ACKs included)
# a run ends that way about one time in ten; ACK loss is covered by
# test_rc_stress, whose processes stay up until both are done.
#
# ibv_rc_pingpong uses timeout 14 (4.096 us * 2^14 = 67 ms per lost packet
# that nothing later reveals) and retry_cnt 7, so -n stays modest: about
# 20 s in all.
set -u
source "$SRN_SRC/tests/lib/pingpong.sh"
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }

data="opcode=0x00|0x01|0x02|0x03|0x04|0x05"   # SEND first/middle/last(+imm)/only(+imm)
srv="env SOFTRNIC_FAULTS=seed=7,drop=5,$data"
cli="env SOFTRNIC_FAULTS=seed=8,drop=5,$data"
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
