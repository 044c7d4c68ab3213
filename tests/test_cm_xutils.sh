#!/bin/bash
# test_cm_xutils.sh - rdma_xserver/rdma_xclient and cmtime from Debian's
# unmodified rdmacm-utils, through `softrnic run`, on loopback:
#
#   rdma_xserver -p P (RC)  /  rdma_xclient -s A -p P: rdma_create_ep,
#     rdma_get_request, private data in the accept, one send
#   cmtime -b A -p P (runs until killed)  /  cmtime -s A -p P -c 500:
#     500 ids through resolve, connect and disconnect at once, which
#     needs QP1's queues as deep as the kernel's (a burst of 500 REQs and
#     REPs; a MAD dropped costs a 4.8 s retry, a few make the run time out)
# XRC through the same programs (-c x): test_cm_xrc.sh.
# Every run is bounded; exit 0 pass, 1 fail, 77 skip.
set -u
command -v cmtime >/dev/null || { echo "SKIP: rdmacm-utils not installed"; exit 77; }
source "$SRN_SRC/tests/lib/cm_pair.sh"

a=$(srn_cm_addr) p=$((20000 + RANDOM % 12000))
srn_cm_pair "rdma_xserver/rdma_xclient (RC)" "$a" \
	"env SOFTRNIC_DEVICES=name=softrnic0,addr=$a" "rdma_xserver -p $p" \
	"" "rdma_xclient -s $a -p $p" "rdma_xserver: end 0" "rdma_xclient: end 0"

a=$(srn_cm_addr) p=$((20000 + RANDOM % 12000))
srn_cm_start server "env SOFTRNIC_DEVICES=name=softrnic0,addr=$a" "cmtime -b $a -p $p"
spid=$srn_cm_pid
if srn_cm_wait_dev "" "$a"; then
	sleep 0.5
	# shellcheck disable=SC2046
	env $(srn_cm_env) timeout -k 5 "$SRN_CM_T" "$SOFTRNIC" run -- cmtime -s "$a" -p "$p" -c 500 \
		>"$srn_cm_work/client" 2>&1
	crc=$?
	if srn_cm_check client "$crc" "^disconnect +:" && ! grep -q "error" "$srn_cm_work/client"; then
		echo "ok: cmtime -c 500"
		grep -E "^(connect|disconnect) " "$srn_cm_work/client"
	else
		echo "FAIL: cmtime -c 500"; srn_cm_fail=$((srn_cm_fail + 1))
	fi
else
	echo "FAIL: cmtime: no device on $a"; srn_cm_fail=$((srn_cm_fail + 1))
fi
kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null
[ $srn_cm_fail -eq 0 ]
