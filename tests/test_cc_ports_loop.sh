#!/bin/bash
# Per-QP UDP source ports on loopback, two processes, the UDP link only
# (SOFTRNIC_SHM=0):
#
#   softrnic perf client (4 RC QPs) ── 127.0.0.x:0xC000+h(qpn) ──► server :4791
#                                   ◄── ACKs from the server QPs' own ports ──
#
#  1. with a trace (SOFTRNIC_PCAP): each QP sends from the port the kernel's
#     rxe would give it (0xC000 + hash_32(qpn, 14)), one port per QP, every
#     packet to 4791, every ICRC in the trace right (pcap_icrc_check);
#  2. without a trace (the sendmmsg/GSO path): the run completes and no
#     receiver counts a bad ICRC;
#  3. Debian's ibv_rc_pingpong works with the ports on;
#  4. SOFTRNIC_SRC_PORTS=0: every packet from 4791, the run still works.
set -u
SOFTRNIC=$SRN_BUILD/bin/softrnic
source "$SRN_SRC/tests/lib/pingpong.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
# Each side its own address: the trace check counts QPs per address.
export SOFTRNIC_DEVICES=name=softrnic0,addr=auto,share=0

asan_env() {
    [ -n "${SRN_ASAN_PRELOAD:-}" ] && echo "LD_PRELOAD=$SRN_ASAN_PRELOAD ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"
}

# perf TAG ENV...: a 4-QP write bandwidth run, both ends here, log in
# $work/TAG.log; retried on another TCP port (bounded).
perf() {
    local tag=$1 try
    shift
    for ((try = 0; try < 3; try++)); do
        # shellcheck disable=SC2046
        env $(asan_env) SOFTRNIC_SHM=0 SOFTRNIC_STATS=1 "$@" timeout -k 5 120 \
            "$SOFTRNIC" perf --loopback -T bw -q 4 -s 16384 -n 2000 \
            -p $((20000 + RANDOM % 12000)) >"$work/$tag.log" 2>&1 && return 0
    done
    echo "FAIL: $tag: softrnic perf failed"
    cat "$work/$tag.log"
    return 1
}

bad_icrc() {
    awk '$3 == "bad_icrc" { s += $4 } END { print s + 0 }' "$1"
}

# 1. The trace.
mkdir "$work/on"
perf on SOFTRNIC_PCAP="$work/on/t.%p.pcap" || fail=1
for f in "$work"/on/*.pcap; do
    [ -e "$f" ] || { echo "FAIL: no trace written"; fail=1; break; }
    python3 "$SRN_SRC/tests/helpers/cc_ports_pcap.py" "$f" on 4 || fail=1
    "$SRN_BUILD/bin/pcap_icrc_check" "$f" | grep -q " bad=0 " ||
        { echo "FAIL: ICRC in $f"; "$SRN_BUILD/bin/pcap_icrc_check" "$f"; fail=1; }
done

# 2. The batched path.
perf gso || fail=1
[ "$(bad_icrc "$work/gso.log")" = 0 ] || { echo "FAIL: bad ICRCs on the GSO path"; fail=1; }

# 3. A Debian program.
srn_pingpong ibv_rc_pingpong "env SOFTRNIC_SHM=0" "env SOFTRNIC_SHM=0" 127.0.0.1 \
    -g 0 -s 4096 -n 200 || fail=1

# 4. Off.
mkdir "$work/off"
perf off SOFTRNIC_SRC_PORTS=0 SOFTRNIC_PCAP="$work/off/t.%p.pcap" || fail=1
for f in "$work"/off/*.pcap; do
    [ -e "$f" ] || { echo "FAIL: no trace written"; fail=1; break; }
    python3 "$SRN_SRC/tests/helpers/cc_ports_pcap.py" "$f" off || fail=1
done
exit $fail
