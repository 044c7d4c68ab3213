#!/bin/bash
# SOFTRNIC_PCAP with same-host direct placement (transport/direct_trace.c):
# test_direct's trace mode, two processes, each tracing to its own file.
#
#   requester (127.0.0.N) -- Writes, Reads, CAS, FAA: placed directly --> target
#     t-<pid>.pcap: each recorded as the packets UDP would carry      t-<pid>.pcap
#       (requests sent, ACK / READ RESPONSE / ATOMIC ACK received),
#       marked SRN_BTH_PLACED (BTH Resv7 0x40)
#                  -- one SEND over the same-host ring, its ACK -->
#
# Checks:
#  (a) the counters: direct placement stayed on with the trace
#      (direct_write 7, direct_read 2, direct_atomic 2, no fallback);
#  (b) tshark decodes every frame of both traces, none Malformed, and
#      every frame's ICRC checks (pcap_icrc_check);
#  (c) the placed packets, per opcode, are exactly those of the operations
#      at a 1024-byte path MTU (Writes of 5000 B, 40000 B and 1 MiB, a list
#      of 4 Writes of 16 B, Reads of 3000 B and 100 B, a CAS, an FAA), with
#      one ACK per AckReq (the last packet and every 32nd); their payloads
#      add up to the direct_*_bytes counters and are 1024 B in FIRST and
#      MIDDLE packets; header-only packets have their fixed lengths; the
#      READ RESPONSE carries the bytes read;
#  (d) PSNs: placed requests lie in the range the QP started at (0x200);
#      the one real SEND reuses 0x200, which the direct operations gave back.
set -u
bin="${SRN_BUILD:?}/bin/test_direct"
source "$SRN_SRC/tests/lib/direct.sh"
command -v tshark >/dev/null || { echo "SKIP: tshark not installed"; exit 77; }
check=$SRN_BUILD/bin/pcap_icrc_check
[ -x "$check" ] || { echo "FAIL: $check not built"; exit 1; }
fail=0

log="$tmp/trace.log"
if ! SOFTRNIC_STATS=1 SOFTRNIC_PCAP="$tmp/t-%p.pcap" timeout -k 5 120 "$bin" trace >"$log" 2>&1; then
    echo "FAIL: test_direct trace"
    cat "$log"
    exit 1
fi
echo "$(grep '^ok' "$log")"

# (a) counters
for want in "direct_write 7" "direct_read 2" "direct_atomic 2" "direct_fallback 0" \
    "direct_write_bytes 1093640" "direct_read_bytes 3100"; do
    set -- $want
    got=$(counter "$log" "$1")
    [ "$got" = "$2" ] || { echo "FAIL: $1 is $got, want $2"; fail=1; }
done

# (b) decode and ICRC, every file
t() { tshark --disable-protocol rpcordma --disable-protocol infiniband.eoib -r "$@" 2>/dev/null; }
req=
for p in "$tmp"/t-*.pcap; do
    frames=$(t "$p" | wc -l)
    malformed=$(t "$p" | grep -ci malformed)
    placed=$(t "$p" -Y 'infiniband.bth.reserved7 == 0x40' | wc -l)
    echo "$(basename "$p"): $frames frames, $malformed malformed, $placed placed"
    [ "$frames" -gt 0 ] && [ "$malformed" -eq 0 ] || fail=1
    "$check" "$p" >/dev/null || { echo "FAIL: ICRC mismatch in $p"; "$check" "$p"; fail=1; }
    [ "$placed" -gt 0 ] && req=$p
done
[ -n "$req" ] || { echo "FAIL: no trace holds placed packets"; exit 1; }

# (c) the placed packets: opcode, UDP length, pad, PSN, one line each.
t "$req" -Y 'infiniband.bth.reserved7 == 0x40' -T fields -e infiniband.bth.opcode \
    -e udp.length -e infiniband.bth.padcnt -e infiniband.bth.psn >"$tmp/placed"
# opcode:count (RC): WRITE FIRST 6, MIDDLE 7, LAST 8, ONLY 10, READ REQUEST
# 12, READ RESPONSE FIRST 13, MIDDLE 14, LAST 15, ONLY 16, ACK 17, ATOMIC
# ACK 18, CAS 19, FAA 20.  MIDDLE: 3 + 38 + 1022; ACK: 1 + 4 + 2 + 32.
want="6:3 7:1063 8:3 10:4 12:2 13:1 14:1 15:1 16:1 17:39 18:2 19:1 20:1"
got=$(awk '{ n[$1]++ } END { for (o in n) print o ":" n[o] }' "$tmp/placed" | sort -n | tr '\n' ' ')
echo "placed packets by opcode: $got"
[ "${got% }" = "$want" ] || { echo "FAIL: want $want"; fail=1; }
# Payload bytes: UDP length - UDP header 8 - BTH and extension headers - ICRC 4 - pad.
read -r wbytes rbytes bad <<<"$(awk '
    BEGIN { split("6:28 7:12 8:12 10:28 13:16 14:12 15:16 16:16", h, " ")
            for (i in h) { split(h[i], kv, ":"); hl[kv[1]] = kv[2] }
            fixed[12] = 40; fixed[17] = 28; fixed[18] = 36; fixed[19] = 52; fixed[20] = 52 }
    $1 in fixed { if ($2 != fixed[$1]) bad++; next }
    { pay = $2 - 8 - hl[$1] - 4 - $3
      if (($1 == 6 || $1 == 7 || $1 == 13 || $1 == 14) && pay != 1024) bad++
      if ($1 <= 10) w += pay; else r += pay }
    END { print w + 0, r + 0, bad + 0 }' "$tmp/placed")"
echo "placed payload: $wbytes bytes written, $rbytes bytes read; $bad packets of a wrong length"
[ "$wbytes" = 1093640 ] && [ "$rbytes" = 3100 ] && [ "$bad" = 0 ] || { echo "FAIL: lengths"; fail=1; }
# The 100-byte Read fetched r_src[4096..], r_src[i] = 7i + 3.
data=$(t "$req" -Y 'infiniband.bth.opcode == 16' -T fields -e data.data | cut -c1-8)
[ "$data" = 030a1118 ] || { echo "FAIL: READ RESPONSE ONLY carries $data..., want 030a1118..."; fail=1; }

# (d) PSNs
out=$(awk '$1 <= 12 || $1 >= 19 { if ($4 < 512 || $4 >= 512 + 1024) n++ } END { print n + 0 }' "$tmp/placed")
[ "$out" = 0 ] || { echo "FAIL: $out placed requests outside PSNs 0x200..0x5ff"; fail=1; }
send=$(t "$req" -Y 'infiniband.bth.opcode == 4' -T fields -e infiniband.bth.psn -e infiniband.bth.reserved7)
echo "the SEND: PSN and Resv7 '$send'"
[ "$send" = "$(printf '512\t0')" ] || { echo "FAIL: the SEND should reuse PSN 0x200, unmarked"; fail=1; }

[ $fail -eq 0 ] && echo "ok: direct placement on with a trace; its packets recorded, decoded, counted"
exit $fail
