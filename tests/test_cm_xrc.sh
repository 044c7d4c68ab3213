#!/bin/bash
# test_cm_xrc.sh - XRC through rdma_cm: Debian's unmodified rdma_xserver /
# rdma_xclient with -c x (RDMA_PS_IB, IBV_QPT_XRC_RECV / XRC_SEND) through
# `softrnic run`, on loopback, two processes:
#
#   rdma_xserver -c x: rdma_create_ep (passive), rdma_get_request makes the
#     XRC receive QP in the device's XRC domain, rdma_create_srq makes an
#     XRC SRQ, its number goes to the client in the accept's private data
#   rdma_xclient -c x: rdma_create_ep makes an XRC send QP, rdma_connect,
#     one Send to the SRQ the server named, which the server receives
#
# The server is traced and tshark checks the REQ, the REP and the Send
# (tests/lib/cm_xrc.sh).  RC through the same programs: test_cm_xutils.sh;
# IPv6 and two hosts: test_cm_xrc_netns.sh.
# Every run is bounded; exit 0 pass, 1 fail, 77 skip.
set -u
command -v rdma_xserver >/dev/null || { echo "SKIP: rdmacm-utils not installed"; exit 77; }
source "$SRN_SRC/tests/lib/cm_pair.sh"
source "$SRN_SRC/tests/lib/cm_xrc.sh"

s=$(srn_cm_addr) c=$(srn_cm_addr)
[ "$s" = "$c" ] && c=127.0.0.$((RANDOM % 200 + 30))
pcap=$srn_cm_work/s.pcap
dev() { echo "env SOFTRNIC_DEVICES=name=softrnic0,addr=$1"; }
xrc_pair "rdma_xserver/rdma_xclient -c x over 127/8" "$s" "$(dev "$s") SOFTRNIC_PCAP=$pcap" "$(dev "$c")" ||
	{ echo "FAIL: XRC over IPv4 loopback"; exit 1; }
fail=0
xrc_trace_check "$pcap" "$c" || fail=1
exit $fail
