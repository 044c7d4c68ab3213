#!/bin/bash
# test_cm_mcast.sh - multicast joins through rdma_cm with Debian's
# unmodified mckey, through `softrnic run`, on loopback:
#
#   receivers: mckey -m 239.77.x.y -b A   and   -b B   (two processes)
#   sender:    mckey -m 239.77.x.y -b C -s -o          (send-only member)
#
#   Every receiver gets all 10 datagrams (mckey waits for each of them, so
#   a lost one is a timeout); then one receiver and a full-member sender
#   with 20 datagrams of 1024 bytes.  The MGID the event reports is the
#   IPv4-mapped group address, as the kernel's RoCEv2 rdma_cm makes it.
#   Last, both without -b (rdma_resolve_addr to the group alone).
# The receivers post their receives before joining and the sender waits
# 3 s after its join (mckey's own pause), so starting the sender once the
# receivers hold their devices is enough.  Every run is bounded; exit 0
# pass, 1 fail, 77 skip.
set -u
command -v mckey >/dev/null || { echo "SKIP: rdmacm-utils not installed"; exit 77; }
source "$SRN_SRC/tests/lib/cm_pair.sh"

grp=239.77.$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
a=$(srn_cm_addr) b=$(srn_cm_addr) c=$(srn_cm_addr)
srn_cm_start r1 "env SOFTRNIC_DEVICES=name=softrnic0,addr=$a" "mckey -m $grp -b $a -C 10"
p1=$srn_cm_pid
srn_cm_start r2 "env SOFTRNIC_DEVICES=name=softrnic0,addr=$b" "mckey -m $grp -b $b -C 10"
p2=$srn_cm_pid
srn_cm_wait_dev "" "$a" && srn_cm_wait_dev "" "$b" && sleep 0.5
# shellcheck disable=SC2046
env $(srn_cm_env) SOFTRNIC_DEVICES="name=softrnic0,addr=$c" timeout -k 5 "$SRN_CM_T" \
	"$SOFTRNIC" run -- mckey -m "$grp" -b "$c" -s -o -C 10 >"$srn_cm_work/s" 2>&1
src=$?
wait "$p1"; r1=$?
wait "$p2"; r2=$?
bad=0
srn_cm_check s "$src" "^data transfers complete" || bad=1
srn_cm_check r1 "$r1" "joined dgid: ::ffff:$grp" || bad=1
srn_cm_check r1 "$r1" "^data transfers complete" || bad=1
srn_cm_check r2 "$r2" "^data transfers complete" || bad=1
if [ $bad -eq 0 ]; then
	echo "ok: mckey: two receivers, a send-only sender"
else
	echo "FAIL: mckey: two receivers, a send-only sender"
	srn_cm_fail=$((srn_cm_fail + 1))
fi

grp=239.78.$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
a=$(srn_cm_addr) c=$(srn_cm_addr)
srn_cm_pair "mckey: full-member sender, 20 x 1024 bytes" "$a" \
	"env SOFTRNIC_DEVICES=name=softrnic0,addr=$a" "mckey -m $grp -b $a -C 20 -S 1024" \
	"env SOFTRNIC_DEVICES=name=softrnic0,addr=$c" "mckey -m $grp -b $c -s -C 20 -S 1024" \
	"^data transfers complete" "^data transfers complete"

# Without -b: the group is reached through the device of its family (the
# route's interface has none; the kernel would use that interface's).
grp=239.79.$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
a=$(srn_cm_addr)
srn_cm_pair "mckey without a bind address" "$a" \
	"env SOFTRNIC_DEVICES=name=softrnic0,addr=$a" "mckey -m $grp -C 10" \
	"" "mckey -m $grp -s -C 10" "^data transfers complete" "^data transfers complete"
[ $srn_cm_fail -eq 0 ]
