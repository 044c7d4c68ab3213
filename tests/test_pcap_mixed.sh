#!/bin/bash
# Packet traces of mixed traffic decode cleanly: RC of every kind
# (test_rc_verbs: SEND, WRITE, READ, atomics, NAKs, RNR, memory windows,
# Send with Invalidate), UD unicast (Debian's ibv_ud_pingpong) and UD
# multicast (test_ud_mcast), each process tracing to its own file
# (SOFTRNIC_PCAP with %p).  Every file: zero frames tshark calls
# Malformed, a BTH opcode in every frame but CNPs, and every frame's ICRC
# matches (pcap_icrc_check recomputes it from the captured headers).
set -u
source "$SRN_SRC/tests/lib/pingpong.sh"
command -v tshark >/dev/null || { echo "SKIP: tshark not installed"; exit 77; }
check=$SRN_BUILD/bin/pcap_icrc_check
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export SOFTRNIC_DIAG=0

SOFTRNIC_PCAP=$dir/rc-%p.pcap "$SRN_BUILD/bin/test_rc_verbs" >/dev/null || { echo "FAIL: test_rc_verbs"; exit 1; }
SOFTRNIC_PCAP=$dir/mc-%p.pcap "$SRN_BUILD/bin/test_ud_mcast" >/dev/null || { echo "FAIL: test_ud_mcast"; exit 1; }
if command -v ibv_ud_pingpong >/dev/null; then
    srn_pingpong ibv_ud_pingpong "env SOFTRNIC_PCAP=$dir/ud-s.pcap" "env SOFTRNIC_PCAP=$dir/ud-c.pcap" \
        127.0.0.1 -g 0 -n 100 -s 1000 >/dev/null || { echo "FAIL: ud pingpong"; exit 1; }
fi

fail=0
n=0
for p in "$dir"/*.pcap; do
    n=$((n + 1))
    # Payload heuristics misread some SEND payloads as other protocols
    # (docs: rpcordma, eoib; here also the 0x9000 "loop" ethertype).
    t() { tshark --disable-protocol rpcordma --disable-protocol infiniband.eoib \
            --disable-protocol loop -r "$p" "$@" 2>/dev/null; }
    frames=$(t | wc -l)
    malformed=$(t | grep -ci malformed)
    no_opcode=$(t -T fields -e infiniband.bth.opcode | grep -c '^$')
    kinds=$(t -T fields -e infiniband.bth.opcode | sort -u | tr '\n' ' ')
    echo "$(basename "$p"): $frames frames, $malformed malformed, $no_opcode without opcode; opcodes: $kinds"
    [ "$frames" -gt 0 ] && [ "$malformed" -eq 0 ] && [ "$no_opcode" -eq 0 ] || fail=1
    "$check" "$p" >/dev/null || { echo "FAIL: ICRC mismatch in $p"; fail=1; }
done
[ $n -ge 5 ] || { echo "FAIL: only $n trace files"; fail=1; }
# The RC trace must contain reads, atomics and NAKs, the UD ones UD sends.
all=$(for p in "$dir"/*.pcap; do tshark -r "$p" -T fields -e infiniband.bth.opcode 2>/dev/null; done | sort -u | tr '\n' ' ')
for want in 12 16 19 20 17 18 100 23; do   # READ req/resp, CAS, FAA, ACK, atomic ACK, UD SEND, SEND_ONLY_INV
    grep -qw "$want" <<<"$all" || { echo "FAIL: no opcode $want in any trace"; fail=1; }
done
[ $fail -eq 0 ] && echo "ok: $n traces of mixed RC/UD traffic decode and every ICRC checks"
exit $fail
