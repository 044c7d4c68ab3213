#!/usr/bin/env python3
"""nvmf_pcap.py - what an NVMe-oF host and target said to each other, from a pcap.

Usage: nvmf_pcap.py FILE.pcap [--port 4420] [--seq N]

Reads a classic pcap (Ethernet, IPv4; what nvmf_kernel.sh --capture writes) and
prints, without tshark:
  NVMe/RDMA (RoCEv2, UDP 4791)
    - every rdma_cm REQ / REP / REJ with the NVMe/RDMA private data (recfmt,
      qid, hrqsize, hsqsize; crqsize; reject status) and the IB CM fields a
      target must honour (responder resources, initiator depth, retry counts)
    - RC opcodes per direction (Send vs Send with Invalidate, RDMA Read/Write)
    - the command sequence of the first N (--seq, default 60) capsules per
      connection, and a table: queue kind, opcode, SGL descriptor type, length
  NVMe/TCP (--port)
    - ICReq / ICResp fields, PDU types per direction, the same command table
Standard library only; loss or retransmissions in the capture are not handled
(the bridge in the rxetest namespace does not lose frames).
"""
import argparse
import collections
import struct
import sys

ADMIN = {0x00: "Delete I/O SQ", 0x01: "Create I/O SQ", 0x02: "Get Log Page", 0x04: "Delete I/O CQ",
         0x05: "Create I/O CQ", 0x06: "Identify", 0x08: "Abort", 0x09: "Set Features",
         0x0a: "Get Features", 0x0c: "Async Event Request", 0x18: "Keep Alive", 0x7f: "Fabrics"}
IO = {0x00: "Flush", 0x01: "Write", 0x02: "Read", 0x04: "Write Uncorrectable", 0x05: "Compare",
      0x08: "Write Zeroes", 0x09: "Dataset Management", 0x7f: "Fabrics"}
FCTYPE = {0x00: "Property Set", 0x01: "Connect", 0x04: "Property Get", 0x05: "Authentication Send",
          0x06: "Authentication Receive", 0x08: "Disconnect"}
PROP = {0x0: "CAP", 0x8: "VS", 0xc: "INTMS", 0x10: "INTMC", 0x14: "CC", 0x1c: "CSTS", 0x20: "NSSR"}
RC_OPS = {0: "SEND_FIRST", 1: "SEND_MIDDLE", 2: "SEND_LAST", 3: "SEND_LAST_IMM", 4: "SEND_ONLY",
          5: "SEND_ONLY_IMM", 6: "WRITE_FIRST", 7: "WRITE_MIDDLE", 8: "WRITE_LAST", 9: "WRITE_LAST_IMM",
          10: "WRITE_ONLY", 11: "WRITE_ONLY_IMM", 12: "READ_REQ", 13: "READ_RESP_FIRST",
          14: "READ_RESP_MIDDLE", 15: "READ_RESP_LAST", 16: "READ_RESP_ONLY", 17: "ACK",
          22: "SEND_LAST_INV", 23: "SEND_ONLY_INV", 100: "UD_SEND_ONLY(CM)"}
TCP_PDU = {0: "ICReq", 1: "ICResp", 2: "H2CTermReq", 3: "C2HTermReq", 4: "CapsuleCmd",
           5: "CapsuleResp", 6: "H2CData", 7: "C2HData", 9: "R2T"}
CM_ATTR = {0x10: "REQ", 0x11: "MRA", 0x12: "REJ", 0x13: "REP", 0x14: "RTU", 0x15: "DREQ", 0x16: "DREP"}


def frames(path):
    with open(path, "rb") as f:
        gh = f.read(24)
        if len(gh) < 24:
            return
        endian = "<" if gh[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        n = 0
        while True:
            h = f.read(16)
            if len(h) < 16:
                return
            ts, tu, incl, _ = struct.unpack(endian + "IIII", h)
            d = f.read(incl)
            n += 1
            if len(d) < 34 or d[12:14] != b"\x08\x00":
                continue
            ihl = (d[14] & 15) * 4
            yield n, ts + tu / 1e6, d[14 + 9], d[26:30], d[30:34], d[14 + ihl:]


def ip(b):
    return ".".join(str(x) for x in b)


def describe(sqe, admin):
    """One SQE -> short text (opcode, the cdw10 fields that matter, SGL)."""
    opc, cid = sqe[0], struct.unpack_from("<H", sqe, 2)[0]
    nsid = struct.unpack_from("<I", sqe, 4)[0]
    cdw10, cdw11 = struct.unpack_from("<II", sqe, 40)
    sgl = sqe[24:40]
    sid = sgl[15]
    if sid >> 4 == 4:   # keyed data block: addr 8, len 3, key 4
        sglt = "keyed%s len=%d" % ("+inv" if sid & 0xf == 0xf else "", int.from_bytes(sgl[8:11], "little"))
    elif sid >> 4 == 0:
        sglt = "%s len=%d" % ("in-capsule(offset)" if sid & 0xf == 1 else "data-block", struct.unpack_from("<I", sgl, 8)[0])
    elif sid == 0x5a:   # transport SGL data block, transport specific: NVMe/TCP (R2T / C2HData)
        sglt = "tcp-transport len=%d" % struct.unpack_from("<I", sgl, 8)[0]
    else:
        sglt = "sgl-id=0x%02x" % sid
    if opc == 0x7f:
        fct = sqe[4]
        name = "Fabrics " + FCTYPE.get(fct, "0x%02x" % fct)
        if fct == 0x01:
            recfmt, qid, sqsize, cattr = struct.unpack_from("<HHHB", sqe, 40)
            kato = struct.unpack_from("<I", sqe, 44 + 4)[0]
            name += " qid=%d sqsize=%d cattr=0x%x kato=%dms" % (qid, sqsize, cattr, kato)
        elif fct in (0x00, 0x04):
            attrib, ofst = sqe[40], struct.unpack_from("<I", sqe, 44)[0]
            name += " %s%s" % (PROP.get(ofst, hex(ofst)), " (8 B)" if attrib & 1 else "")
            if fct == 0x00:
                name += " = 0x%x" % struct.unpack_from("<Q", sqe, 48)[0]
        return cid, name, sglt
    if admin:
        name = ADMIN.get(opc, "admin 0x%02x" % opc)
        if opc == 0x06:
            name += " CNS=0x%02x nsid=%d" % (cdw10 & 0xff, nsid)
        elif opc in (0x09, 0x0a):
            name += " FID=0x%02x cdw11=0x%x" % (cdw10 & 0xff, cdw11)
        elif opc == 0x02:
            numdl = (cdw10 >> 16) + 1
            name += " LID=0x%02x bytes=%d%s nsid=0x%x" % (cdw10 & 0xff, numdl * 4,
                                                         " RAE" if cdw10 & 0x8000 else "", nsid)
    else:
        name = IO.get(opc, "io 0x%02x" % opc)
        if opc in (0x01, 0x02, 0x08):
            name += " nlb=%d" % ((struct.unpack_from("<I", sqe, 48)[0] & 0xffff) + 1)
    return cid, name, sglt


def rdma(path, nseq):
    ops = collections.Counter()
    conns = {}          # comm id -> dict
    qp_qid = {}         # target-side QPN -> (conn key, qid)
    seq = collections.defaultdict(list)
    table = collections.Counter()
    first_t = None
    for n, t, proto, src, dst, l4 in frames(path):
        if proto != 17 or len(l4) < 8 + 12 or struct.unpack_from(">H", l4, 2)[0] != 4791:
            continue
        first_t = t if first_t is None else first_t
        b = l4[8:]
        op = b[0]
        dqp = int.from_bytes(b[5:8], "big")
        ops[(ip(src), RC_OPS.get(op, str(op)))] += 1
        if op == 100 and len(b) > 20 + 24:   # UD send: CM MAD
            mad = b[20:]
            attr = struct.unpack_from(">H", mad, 16)[0]
            data = mad[24:]
            kind = CM_ATTR.get(attr, hex(attr))
            if kind == "REQ":
                comm = data[0:4].hex()
                qpn = int.from_bytes(data[32:35], "big")
                rr, idepth = data[35], data[39]
                retry = data[47] & 7
                rnr = data[50] & 7
                mtu = data[50] >> 4
                recfmt, qid, hrq, hsq, cntlid = struct.unpack_from("<HHHHH", data, 140 + 36)
                conns[comm] = {"qid": qid, "host": ip(src)}
                print("%7.3f  CM REQ  %s -> %s  host QPN 0x%06x  responder_resources=%d initiator_depth=%d "
                      "retry=%d rnr_retry=%d path_mtu_code=%d | NVMe: recfmt=%d qid=%d hrqsize=%d hsqsize=%d cntlid=0x%x"
                      % (t - first_t, ip(src), ip(dst), qpn, rr, idepth, retry, rnr, mtu,
                         recfmt, qid, hrq, hsq, cntlid))
            elif kind == "REP":
                comm = data[4:8].hex()
                qpn = int.from_bytes(data[12:15], "big")
                rr, idepth = data[24], data[25]
                recfmt, crq = struct.unpack_from("<HH", data, 36)
                c = conns.get(comm, {"qid": None})
                qp_qid[qpn] = (comm, c["qid"])
                print("%7.3f  CM REP  %s -> %s  target QPN 0x%06x  responder_resources=%d initiator_depth=%d "
                      "| NVMe: recfmt=%d crqsize=%d" % (t - first_t, ip(src), ip(dst), qpn, rr, idepth, recfmt, crq))
            elif kind == "REJ":
                reason = struct.unpack_from(">H", data, 10)[0]
                recfmt, sts = struct.unpack_from("<HH", data, 84)
                print("%7.3f  CM REJ  %s -> %s  reason=%d%s | NVMe: recfmt=%d sts=%d"
                      % (t - first_t, ip(src), ip(dst), reason,
                         " (consumer reject: private data = NVMe status)" if reason == 28 else "", recfmt, sts))
            continue
        if op in (0, 4, 5) and dqp in qp_qid and len(b) >= 12 + 64:
            comm, qid = qp_qid[dqp]
            cid, name, sglt = describe(b[12:12 + 64], qid == 0)
            kind = "admin" if qid == 0 else "io"
            table[(kind, name.split(" qid=")[0].split(" nlb=")[0].split(" FID")[0].split(" CNS")[0]
                   .split(" LID")[0].split(" = ")[0], sglt.split(" len=")[0])] += 1
            if len(seq[comm]) < nseq:
                seq[comm].append("%7.3f  q%d cid=%-5d %-60s %s" % (t - first_t, qid, cid, name, sglt))
    if not ops:
        return
    print("\nRoCE opcodes per sender:")
    for (s, o), c in sorted(ops.items()):
        print("  %-12s %-18s %d" % (s, o, c))
    for comm, lines in seq.items():
        print("\nconnection %s (qid %s): first %d capsules" % (comm, conns.get(comm, {}).get("qid"), len(lines)))
        print("\n".join(lines))
    print("\ncapsules by queue kind / command / SGL:")
    for k, c in sorted(table.items()):
        print("  %-5s %-45s %-20s %d" % (k[0], k[1], k[2], c))


def tcp(path, port, nseq):
    streams = collections.defaultdict(bytearray)   # (src, sport, dst, dport) -> bytes in order
    nxt = {}
    for n, t, proto, src, dst, l4 in frames(path):
        if proto != 6 or len(l4) < 20:
            continue
        sp, dp, sq = struct.unpack_from(">HHI", l4, 0)
        if port not in (sp, dp):
            continue
        off = (l4[12] >> 4) * 4
        pay = l4[off:]
        k = (ip(src), sp, ip(dst), dp)
        if l4[13] & 0x02:       # SYN
            nxt[k] = sq + 1
            continue
        if not pay or k not in nxt:
            continue
        if sq == nxt[k]:
            streams[k] += pay
            nxt[k] = (sq + len(pay)) & 0xffffffff
    if not streams:
        return
    types = collections.Counter()
    table = collections.Counter()
    print("\nNVMe/TCP (port %d):" % port)
    for k, s in streams.items():
        host_side = k[3] == port
        i, shown, qid = 0, 0, None
        while i + 8 <= len(s):
            ty, fl, hlen, pdo, plen = struct.unpack_from("<BBBBI", s, i)
            if plen < 8 or i + plen > len(s):
                break
            types[(k[0], TCP_PDU.get(ty, str(ty)))] += 1
            if ty == 0:
                pfv, hpda, dgst, maxr2t = struct.unpack_from("<HBBI", s, i + 8)
                print("  %s:%d ICReq  pfv=%d hpda=%d digest=0x%x maxr2t=%d" % (k[0], k[1], pfv, hpda, dgst, maxr2t))
            elif ty == 1:
                pfv, cpda, dgst, maxdata = struct.unpack_from("<HBBI", s, i + 8)
                print("  %s:%d ICResp pfv=%d cpda=%d digest=0x%x maxh2cdata=%d" % (k[0], k[1], pfv, cpda, dgst, maxdata))
            elif ty == 4 and host_side:
                sqe = bytes(s[i + 8:i + 72])
                if sqe[0] == 0x7f and sqe[4] == 0x01:
                    qid = struct.unpack_from("<H", sqe, 42)[0]
                incap = plen - hlen if pdo else 0
                cid, name, sglt = describe(sqe, qid == 0)
                table[("admin" if qid == 0 else "io", name.split(" qid=")[0].split(" nlb=")[0].split(" FID")[0]
                       .split(" CNS")[0].split(" LID")[0].split(" = ")[0], sglt.split(" len=")[0],
                       "in-capsule" if incap else "")] += 1
                if shown < nseq and qid == 0:
                    print("    q%s cid=%-5d %-60s %s%s" % (qid, cid, name, sglt,
                                                         " (%d B in capsule)" % incap if incap else ""))
                    shown += 1
            i += plen
    print("  PDU types per sender:")
    for (s, ty), c in sorted(types.items()):
        print("    %-12s %-12s %d" % (s, ty, c))
    print("  capsules by queue kind / command / SGL:")
    for k, c in sorted(table.items()):
        print("    %-5s %-45s %-20s %-10s %d" % (k[0], k[1], k[2], k[3], c))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("pcap")
    ap.add_argument("--port", type=int, default=4420)
    ap.add_argument("--seq", type=int, default=60)
    a = ap.parse_args()
    rdma(a.pcap, a.seq)
    tcp(a.pcap, a.port, a.seq)


if __name__ == "__main__":
    sys.exit(main())
