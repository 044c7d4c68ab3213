#!/bin/bash
# Debian's unmodified ibv_rc_pingpong through `softrnic run` with the link
# fault injector dropping 5% of the datagrams on each side (different
# seeds, so the two sides lose different packets): go-back-N, the local ACK
# timeout and retry_cnt must hide the loss from the program completely.
#
# ibv_rc_pingpong sets timeout 14 (4.096 us * 2^14 = 67 ms per lost
# request or ACK that nothing later reveals) and retry_cnt 7, so -n stays
# modest: 500 round trips with ~10% loss per message hop cost a few
# seconds.  Until the injector exists, SOFTRNIC_FAULTS is ignored and this
# is a plain loopback run.
set -u
source "$SRN_SRC/tests/lib/pingpong.sh"
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }

fail=0
data="opcode=0x00|0x01|0x02|0x03|0x04|0x05"   # SEND first/middle/last(+imm)/only(+imm)
srv="env SOFTRNIC_FAULTS=seed=7,drop=5,$data"
cli="env SOFTRNIC_FAULTS=seed=8,drop=5,$data"
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
