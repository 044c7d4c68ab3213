#!/usr/bin/env python3
"""Helper of test_cc_ports_loop.sh: read a softrnic trace (classic pcap,
Ethernet + IPv4 + UDP) and check the UDP source ports of RoCE packets.

  cc_ports_pcap.py FILE on NQP     each RC QP sends from its own port, the
                                   kernel rxe's 0xC000 + hash_32(qpn, 14)
  cc_ports_pcap.py FILE off        every packet from the device port 4791

A QP's own number is not in the packets it sends (their BTH names the
peer's QP), but its peer's packets name it: the QPNs addressed to a host
are that host's QPs, and the ports that host sends from must be their
formula ports, one port per QP (a flow never changes port). Every packet
goes to port 4791. Prints a summary; exit 0 pass, 1 fail."""
import struct
import sys


def rxe_port(qpn):
    # hash_32(val, 14) of linux/hash.h: multiply by GOLDEN_RATIO_32, top 14 bits
    return 0xC000 + (((qpn * 0x61C88647) & 0xFFFFFFFF) >> 18)


def frames(path):
    with open(path, "rb") as f:
        gh = f.read(24)
        magic = struct.unpack("<I", gh[:4])[0]
        end = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
        while True:
            h = f.read(16)
            if len(h) < 16:
                return
            incl = struct.unpack(end + "IIII", h)[2]
            yield f.read(incl)


def main():
    path, mode = sys.argv[1], sys.argv[2]
    sent = {}     # source IP -> {source port: set of destination QPNs}
    to_host = {}  # destination IP -> set of destination QPNs
    bad_dport = 0
    n = 0
    for fr in frames(path):
        if len(fr) < 14 + 20 + 8 + 12 or fr[12:14] != b"\x08\x00":
            continue
        ip = fr[14:]
        ihl = (ip[0] & 15) * 4
        if ip[9] != 17:
            continue
        src, dst = ip[12:16], ip[16:20]
        sport, dport = struct.unpack(">HH", ip[ihl:ihl + 4])
        bth = ip[ihl + 8:]
        dqpn = int.from_bytes(bth[5:8], "big")
        n += 1
        if dport != 4791:
            bad_dport += 1
        sent.setdefault(src, {}).setdefault(sport, set()).add(dqpn)
        to_host.setdefault(dst, set()).add(dqpn)
    fail = 0
    print(f"{n} RoCE packets")
    if n == 0 or bad_dport:
        print(f"FAIL: {bad_dport} packets not to port 4791 (or no packets)")
        return 1
    for src, ports in sorted(sent.items()):
        host = ".".join(map(str, src))
        qpns = sorted(to_host.get(src, set()))
        print(f"{host} sends from {sorted(ports)}; its QPs {[hex(q) for q in qpns]}")
        if mode == "off":
            if set(ports) != {4791}:
                print(f"FAIL: {host}: source ports {sorted(ports)} with the option off")
                fail = 1
            continue
        want = int(sys.argv[3])
        if len(qpns) != want:
            print(f"FAIL: {host}: {len(qpns)} QPs addressed, expected {want}")
            fail = 1
        expect = {rxe_port(q) for q in qpns}
        if set(ports) != expect:
            print(f"FAIL: {host}: ports {sorted(ports)} != rxe formula {sorted(expect)}")
            fail = 1
        if len(set(ports)) != len(expect):
            print(f"FAIL: {host}: {len(set(ports))} distinct ports, formula gives {len(expect)}")
            fail = 1
        for p, d in ports.items():
            if len(d) != 1:
                print(f"FAIL: {host}: port {p} carries packets to {len(d)} QPs")
                fail = 1
    return fail


sys.exit(main())
