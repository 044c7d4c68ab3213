#!/bin/bash
# Wireshark's view of the CNPs softrnic builds (wire/cnp.c): a pcap with
# vector E1 (a CNP from a ConnectX-4 Lx) and two CNPs of our own, written
# by test_cc_cnp_wire --pcap.  tshark must decode all three the same way:
# InfiniBand BTH, opcode 129 (0x81, RoCEv2 CNP), BECN (byte 4 = 0x40,
# which Wireshark shows as the reserved byte "40"),
# PSN 0, the QPN we asked for, 16 zero bytes then the ICRC, no Malformed.
# Wireshark 4.0 names only the native-IB CNP opcode 0x80 "CNP" and shows
# 0x81 as "Unknown (129)" - for the hardware's frame as for ours.
set -u
command -v tshark >/dev/null || { echo "SKIP: tshark not installed"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$SRN_BUILD/bin/test_cc_cnp_wire" --pcap "$work/cnp.pcap" || exit 1

fields=$(timeout 60 tshark -r "$work/cnp.pcap" -T fields -E separator=' ' \
    -e udp.dstport -e infiniband.bth.opcode -e infiniband.reserved \
    -e infiniband.bth.destqp -e infiniband.bth.psn -e infiniband.vendor 2>/dev/null)
echo "$fields"
want="4791 129 40 0x000118 0 00000000,0000000000000000000000000000000082fd002a"
fail=0
line() { echo "$fields" | sed -n "${1}p"; }
[ "$(line 1)" = "$want" ] || { echo "FAIL: E1 decodes as '$(line 1)', want '$want'"; fail=1; }
for i in 2 3; do
    l=$(line "$i")
    qpn=$([ "$i" = 2 ] && echo 0xabcdef || echo 0x000042)
    case "$l" in
    "4791 129 40 $qpn 0 00000000,00000000000000000000000000000000"????????) ;;
    *) echo "FAIL: frame $i decodes as '$l'"; fail=1 ;;
    esac
done
malformed=$(timeout 60 tshark -r "$work/cnp.pcap" 2>/dev/null | grep -ci malformed)
[ "$malformed" = 0 ] || { echo "FAIL: $malformed malformed frame(s)"; fail=1; }
# The TOS the CNPs travel with: DSCP 48, ECT(0), as mlx5's cnp_dscp.
dsfield=$(timeout 60 tshark -r "$work/cnp.pcap" -T fields -e ip.dsfield.dscp -e ip.dsfield.ecn 2>/dev/null | sort -u)
[ "$dsfield" = "$(printf '48\t2')" ] || { echo "FAIL: DSCP/ECN '$dsfield'"; fail=1; }
# The ICRC, recomputed from each frame's own headers by an independent reader.
"$SRN_BUILD/bin/pcap_icrc_check" "$work/cnp.pcap" | grep -q "frames=3 good=3 bad=0" ||
    { echo "FAIL: ICRC"; "$SRN_BUILD/bin/pcap_icrc_check" "$work/cnp.pcap"; fail=1; }
[ $fail = 0 ] && echo "ok: 3 CNPs decode alike"
exit $fail
