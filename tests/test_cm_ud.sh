#!/bin/bash
# test_cm_ud.sh - UD ids through rdma_cm (SIDR_REQ / SIDR_REP) with
# Debian's unmodified udaddy, both roles, through `softrnic run`:
#
#   server: SOFTRNIC_DEVICES=softrnic0 on 127.x.y.z   udaddy -b A -c 3
#   client: zero configuration (127.0.0.N)            udaddy -s A -c 3
#
#   3 ids, 20 messages of 1024 bytes each way: CONNECT_REQUEST, accept,
#   ESTABLISHED with the server's QPN and Q_Key, sends to it, replies to
#   the address handle made from the completion.
#   udaddy -s to a live device with no UDP listener: SIDR_REP status 1,
#   UNREACHABLE with status 1 (as the kernel's rdma_cm reports it).
# Every run is bounded (timeout); exit 0 pass, 1 fail, 77 skip.
set -u
command -v udaddy >/dev/null || { echo "SKIP: rdmacm-utils not installed"; exit 77; }
source "$SRN_SRC/tests/lib/cm_pair.sh"

a=$(srn_cm_addr)
srn_cm_pair "udaddy: 3 ids, 20 x 1024 bytes" "$a" \
	"env SOFTRNIC_DEVICES=name=softrnic0,addr=$a" "udaddy -b $a -c 3 -C 20 -S 1024" \
	"" "udaddy -s $a -c 3 -C 20 -S 1024" "^return status 0" "^data transfers complete"

# No UDP listener on the port: the device answers for the service ID.
a=$(srn_cm_addr)
srn_cm_start holder "env SOFTRNIC_DEVICES=name=softrnic0,addr=$a" "rping -s -a $a -p 7174"
hpid=$srn_cm_pid
if srn_cm_wait_dev "" "$a"; then
	sleep 0.5
	# shellcheck disable=SC2046
	env $(srn_cm_env) timeout -k 5 20 "$SOFTRNIC" run -- udaddy -s "$a" >"$srn_cm_work/c" 2>&1
	if grep -q "RDMA_CM_EVENT_UNREACHABLE, error: 1" "$srn_cm_work/c"; then
		echo "ok: no UDP listener -> UNREACHABLE (1)"
	else
		echo "FAIL: no UDP listener:"; cat "$srn_cm_work/c"; srn_cm_fail=$((srn_cm_fail + 1))
	fi
else
	echo "FAIL: no device on $a"; cat "$srn_cm_work/holder"; srn_cm_fail=$((srn_cm_fail + 1))
fi
kill "$hpid" 2>/dev/null; wait "$hpid" 2>/dev/null
[ $srn_cm_fail -eq 0 ]
