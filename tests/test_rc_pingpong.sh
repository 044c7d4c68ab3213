#!/bin/bash
# Debian's unmodified ibv_rc_pingpong, server and client on one host, both
# through `softrnic run` (zero configuration: each process gets its own
# loopback address).  Every variant of the foundation issue's list, plus
# --new_send (the ibv_wr_* API) and -t (completion timestamps, ibv_cq_ex).
set -u
source "$SRN_SRC/tests/lib/pingpong.sh"
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }

fail=0
while read -r args; do
    # shellcheck disable=SC2086
    srn_pingpong ibv_rc_pingpong "" "" 127.0.0.1 -g 0 $args || fail=1
done <<'LIST'

-e
-s 1
-s 4096
-s 65536
-m 256
-m 4096
-n 10000
-c
-e -s 65536 -m 256 -n 200
-N
-t
-N -t -e -s 8192
LIST
exit $fail
