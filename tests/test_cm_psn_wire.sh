#!/bin/bash
# test_cm_psn_wire.sh - the Starting PSN of a CM REQ or REP means what the
# kernel's CM makes it mean: the PSN its sender expects to receive first.
# So the passive side's first request carries the REQ's PSN and the active
# side's first request the REP's.  Between two softrnic processes either
# reading works; against the kernel's rdma_cm (rxe) only this one does: with
# it reversed, every Send from softrnic looked like a duplicate to rxe and
# rping ended in RETRY_EXC_ERR.
#
# rping: client and server through `softrnic run`, the server traced
# (SOFTRNIC_PCAP), tshark reads the REQ, the REP and the first RC request of
# each side.  Exit 0 pass, 1 fail, 77 skip.
set -u
SOFTRNIC=$SRN_BUILD/bin/softrnic
command -v rping >/dev/null || { echo "SKIP: rdmacm-utils not installed"; exit 77; }
command -v tshark >/dev/null || { echo "SKIP: tshark not installed"; exit 77; }
T=${SRN_CM_TIMEOUT:-30}
envs=()
[ -n "${SRN_ASAN_PRELOAD:-}" ] && envs=(LD_PRELOAD="$SRN_ASAN_PRELOAD" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
chmod 700 "$work"
saddr=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
caddr=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
[ "$saddr" = "$caddr" ] && caddr=127.0.0.$((RANDOM % 200 + 30))

ok=0
for attempt in 1 2 3; do
	p=$((20000 + RANDOM % 12000))
	env "${envs[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=$saddr" SOFTRNIC_PCAP="$work/s.pcap" \
		timeout -k 5 "$T" "$SOFTRNIC" run -- rping -s -a "$saddr" -p "$p" -C 3 >"$work/s" 2>&1 &
	spid=$!
	sleep 1
	env "${envs[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=$caddr" timeout -k 5 "$T" \
		"$SOFTRNIC" run -- rping -c -a "$saddr" -p "$p" -C 3 -v >"$work/c" 2>&1
	crc=$?
	wait "$spid"; src=$?
	if [ $crc -eq 0 ] && [ $src -eq 0 ]; then ok=1; break; fi
	echo "attempt $attempt: server rc=$src client rc=$crc"; tail -5 "$work/s" "$work/c"
done
[ $ok -eq 1 ] || { echo "FAIL: rping did not complete"; exit 1; }

field() { tshark -r "$work/s.pcap" -Y "$1" -T fields -e "$2" 2>/dev/null | head -1; }
req=$(field "infiniband.cm.req.startpsn" infiniband.cm.req.startpsn)
rep=$(field "infiniband.cm.rep.startpsn" infiniband.cm.rep.startpsn)
# First RC request (not an ACK, opcode 0x11) from each side, QP1 excluded.
first() { field "ip.src==$1 && infiniband.bth.destqp != 1 && infiniband.bth.opcode != 17" infiniband.bth.psn; }
srv=$(first "$saddr"); cli=$(first "$caddr")
echo "REQ starting PSN $req, REP starting PSN $rep; first server request PSN $srv, first client request PSN $cli"
[ -n "$req" ] && [ -n "$rep" ] && [ -n "$srv" ] && [ -n "$cli" ] || { echo "FAIL: trace incomplete"; exit 1; }
fail=0
[ $((req)) -eq $((srv)) ] || { echo "FAIL: the passive side must start sending at the REQ's PSN"; fail=1; }
[ $((rep)) -eq $((cli)) ] || { echo "FAIL: the active side must start sending at the REP's PSN"; fail=1; }
[ $fail -eq 0 ] && echo "ok: both sides start where the other's CM message said"
exit $fail
