#!/usr/bin/env python3
"""ecn_udp.py - a UDP blaster and counter for the switch tests.

  ecn_udp.py send ADDR PORT COUNT SIZE TOS   send COUNT datagrams with IP_TOS
  ecn_udp.py recv ADDR PORT READY_FILE       count datagrams and their ECN
                                             bits (IP_RECVTOS) until 3 s pass
                                             without one (at most 60 s)

recv prints "received=N ect0=N ect1=N ce=N not_ect=N".  Every wait is bounded.
"""
import socket
import sys
import time

IP_RECVTOS = getattr(socket, "IP_RECVTOS", 13)


def send(addr, port, count, size, tos):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    payload = b"\x5a" * size
    sent = 0
    for _ in range(count):
        try:
            s.sendto(payload, (addr, port))
            sent += 1
        except OSError:
            time.sleep(0.001)  # a full device queue: the switch's drop, not ours
    print(f"sent={sent}")


def recv(addr, port, ready):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.setsockopt(socket.IPPROTO_IP, IP_RECVTOS, 1)
    s.bind((addr, port))
    s.settimeout(3.0)
    open(ready, "w").close()
    counts = {0: 0, 1: 0, 2: 0, 3: 0}
    n = 0
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            _, anc, _, _ = s.recvmsg(70000, socket.CMSG_SPACE(4))
        except socket.timeout:
            if n:
                break
            continue
        n += 1
        for level, kind, data in anc:
            if level == socket.IPPROTO_IP and kind == socket.IP_TOS and data:
                counts[data[0] & 3] += 1
    print(f"received={n} ect0={counts[2]} ect1={counts[1]} ce={counts[3]} not_ect={counts[0]}")


if __name__ == "__main__":
    if sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6], 0))
    else:
        recv(sys.argv[2], int(sys.argv[3]), sys.argv[4])
