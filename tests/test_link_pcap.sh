#!/bin/bash
# SOFTRNIC_PCAP end to end: Debian's unmodified ibv_rc_pingpong, server and
# client on one host through `softrnic run`, each writing its own trace.
#
#   server (127.0.0.N) <--- RC SENDs + ACKs over UDP 4791 ---> client
#        s.pcap                                                c.pcap
#
# Twice: through the same-host rings (the default; each side traces its
# packets as the UDP link would carry them) and with SOFTRNIC_SHM=0.
#
# Both traces must decode in tshark without a single Malformed frame, every
# frame must carry a BTH opcode, every frame's ICRC must check against the
# captured headers (pcap_icrc_check, independent of the writer), and the
# frame counts must match what 50 iterations of 5000-byte messages at a
# 1024-byte MTU exchange: 5 SEND packets per message each way, ACKs back,
# and the same SEND packets in both traces.
set -u
source "$SRN_SRC/tests/lib/pingpong.sh"
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }
command -v tshark >/dev/null || { echo "SKIP: tshark not installed"; exit 77; }
check=$SRN_BUILD/bin/pcap_icrc_check
[ -x "$check" ] || { echo "FAIL: $check not built"; exit 1; }

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# Each side its own address, so the traces tell them apart (both would
# share 127.0.0.1 by default, as on a NIC).
export SOFTRNIC_DEVICES=name=softrnic0,addr=auto,share=0
iters=50 size=5000 mtu=1024
per_msg=$(( (size + mtu - 1) / mtu ))

# run_case NAME SHM: one ping-pong with both traces, SOFTRNIC_SHM=SHM (the
# same-host rings, traced as the UDP link would carry their packets, or
# the UDP link itself).
run_case() {
    local name=$1 shm=$2 d="$dir/$1"
    mkdir -p "$d"
    srn_pingpong ibv_rc_pingpong "env SOFTRNIC_SHM=$shm SOFTRNIC_PCAP=$d/s.pcap" "env SOFTRNIC_SHM=$shm SOFTRNIC_PCAP=$d/c.pcap" \
        127.0.0.1 -g 0 -n $iters -s $size || return 1

    fail=0
    tshark_r() {
        tshark --disable-protocol rpcordma --disable-protocol infiniband.eoib -r "$@" 2>/dev/null
    }

    for f in s c; do
        p=$d/$f.pcap
        [ -s "$p" ] || { echo "FAIL: $p missing or empty"; fail=1; continue; }
        frames=$(tshark_r "$p" | wc -l)
        malformed=$(tshark_r "$p" | grep -c -i malformed)
        no_opcode=$(tshark_r "$p" -T fields -e infiniband.bth.opcode | grep -c '^$')
        echo "$f.pcap: $frames frames, $malformed malformed, $no_opcode without a BTH opcode"
        [ "$frames" -gt 0 ] && [ "$malformed" -eq 0 ] && [ "$no_opcode" -eq 0 ] || fail=1
        "$check" "$p" || fail=1
    done
    [ $fail -eq 0 ] || { echo "FAIL: decode or ICRC check"; return 1; }

    # Per trace and direction (source IP): SEND packets (opcodes 0..5, RC) and
    # ACKs (0x11).
    count() {  # file src-ip opcode-filter
        tshark_r "$1" -Y "ip.src == $2 && $3" | wc -l
    }
    sip=$(tshark_r "$d/s.pcap" -Y 'infiniband.bth.opcode <= 5' -T fields -e ip.dst | head -1)
    cip=$(tshark_r "$d/s.pcap" -Y 'infiniband.bth.opcode <= 5' -T fields -e ip.src | head -1)
    if [ -z "$sip" ] || [ -z "$cip" ] || [ "$sip" = "$cip" ]; then
        echo "FAIL: cannot tell server ($sip) from client ($cip)"
        return 1
    fi
    want=$((iters * per_msg))
    for f in s c; do
        for who in "$cip client" "$sip server"; do
            set -- $who
            sends=$(count "$d/$f.pcap" "$1" 'infiniband.bth.opcode <= 5')
            acks=$(count "$d/$f.pcap" "$1" 'infiniband.bth.opcode == 0x11')
            echo "$f.pcap: $2 ($1) sent $sends SEND packets (want >= $want) and $acks ACKs"
            [ "$sends" -ge "$want" ] && [ "$acks" -ge 1 ] || fail=1
            eval "sends_${f}_$2=$sends"
        done
    done
    # Each SEND packet is traced once by its sender and once by its receiver.
    if [ "$sends_s_client" -ne "$sends_c_client" ] || [ "$sends_s_server" -ne "$sends_c_server" ]; then
        echo "FAIL: the traces disagree on SEND packets (client $sends_c_client/$sends_s_client," \
             "server $sends_s_server/$sends_c_server)"
        fail=1
    fi
    [ $fail -eq 0 ] && echo "ok ($name): both traces decode, all ICRCs check, counts match"
    return $fail
}

rc=0
run_case rings 1 || rc=1
run_case udp 0 || rc=1
exit $rc
