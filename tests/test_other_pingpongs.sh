#!/bin/bash
# Debian's unmodified ibv_uc_pingpong, ibv_ud_pingpong, ibv_srq_pingpong and
# ibv_xsrq_pingpong (XRC)
# through `softrnic run`: on one host (zero configuration), and across two
# network namespaces when root (topology in tests/lib/netns.sh).
set -u
source "$SRN_SRC/tests/lib/pingpong.sh"
command -v ibv_ud_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }

fail=0
while read -r prog args; do
    [ -n "$prog" ] || continue
    # shellcheck disable=SC2086
    srn_pingpong "$prog" "" "" 127.0.0.1 -g 0 $args || fail=1
done <<'LIST'
ibv_uc_pingpong
ibv_uc_pingpong -s 65536 -m 256 -n 200
ibv_uc_pingpong -e
ibv_ud_pingpong
ibv_ud_pingpong -s 4000
ibv_ud_pingpong -e -s 64
ibv_srq_pingpong
ibv_srq_pingpong -q 4 -s 8192 -e
ibv_xsrq_pingpong
ibv_xsrq_pingpong -s 10000 -m 1024 -n 20 -e
LIST

if [ "$(id -u)" = 0 ]; then
    source "$SRN_SRC/tests/lib/netns.sh"
    ( srn_netns_require_root ) >/dev/null 2>&1 || exit $fail
    srn_netns_setup
    A="ip netns exec $NS_A env SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR_A"
    B="ip netns exec $NS_B env SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR_B"
    srn_pingpong ibv_uc_pingpong "$A" "$B" "$ADDR_A" -g 0 || fail=1
    srn_pingpong ibv_ud_pingpong "$A" "$B" "$ADDR_A" -g 0 -s 1024 || fail=1
    srn_pingpong ibv_srq_pingpong "$A" "$B" "$ADDR_A" -g 0 || fail=1
    srn_pingpong ibv_xsrq_pingpong "$A" "$B" "$ADDR_A" -g 0 -m 1024 || fail=1
fi
exit $fail
