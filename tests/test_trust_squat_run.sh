#!/bin/bash
# Another user takes the name of `softrnic run`'s user-namespace marker
# first (issue 26, item 4; tools/run_ns.c, link/rundir.h).  A user without
# root gets one user namespace shared by all their runs, found through
# that marker; before, a squat of /dev/shm/softrnic-userns-<uid> made every
# run a namespace of its own, and the same-host rings between them were
# silently lost (the kernel refuses /proc/PID/fd across sibling user
# namespaces): 382 -> 1497 us per iteration.
#
# As uid 65533 in a throwaway namespace (tests/lib/squat.sh), uid 65534
# having made both the old marker name and /dev/shm/softrnic-run-65533:
# Debian's ibv_rc_pingpong, server and client each through `softrnic run`
# on addresses of their own.  Both exit 0, both sent their packets
# through the rings (SOFTRNIC_STATS=1), `run` says where the marker went
# (the name's .alt1), and the squatted directory stays empty.
set -u
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }
source "$SRN_SRC/tests/lib/squat.sh"
sq_setup
SQ_UID=65533
prim=/dev/shm/softrnic-run-$SQ_UID
# The run directory is per user and stays; this test's goes at its end.
trap 'rm -rf "$prim.alt1"; sq_cleanup' EXIT
rm -rf "$prim.alt1"         # uid 65533 is the tests' own: an earlier run's
sq_squat "$prim"
[ -e /dev/shm/softrnic-userns-$SQ_UID ] || sq_squat /dev/shm/softrnic-userns-$SQ_UID
fail=0
bad() { echo "FAIL: $*"; fail=1; }
n=500
tcp=$((20000 + RANDOM % 12000))
sq_run "$SQ_W/s" 60 "$SOFTRNIC" run -- env SOFTRNIC_DEVICES="name=softrnic0,addr=127.0.0.1" \
	ibv_rc_pingpong -p "$tcp" -g 0 -n $n
spid=$sq_bg
sq_wait_listen "$tcp" || bad "server never listened"
if grep -q "cannot create a user namespace" "$SQ_W/s"; then
	echo "SKIP: user namespaces are not allowed here"
	exit 77
fi
sq_run "$SQ_W/c" 60 "$SOFTRNIC" run -- env SOFTRNIC_DEVICES="name=softrnic0,addr=127.0.0.2" \
	ibv_rc_pingpong -p "$tcp" -g 0 -n $n 127.0.0.1
wait "$sq_bg"; crc=$?
wait "$spid"; src=$?
sq_bg=""
shm_s=$(sq_counter "$SQ_W/s" shm_sent_pkts)
shm_c=$(sq_counter "$SQ_W/c" shm_sent_pkts)
if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
	bad "server rc=$src, client rc=$crc"
	tail -n 5 "$SQ_W/s" "$SQ_W/c"
elif [ "$shm_s" -lt $n ] || [ "$shm_c" -lt $n ]; then
	bad "rings not used: server sent $shm_s, client $shm_c packets through them"
elif ! grep -q "run directory $prim is taken by uid 65534 (directory, mode 0777): using $prim.alt1" "$SQ_W/s"; then
	bad "softrnic run does not say where the marker went"
	cat "$SQ_W/s"
elif ! [ -f "$prim.alt1/userns" ]; then
	bad "no marker in $prim.alt1"
else
	echo "ok: $prim squatted: marker in $prim.alt1, $shm_s + $shm_c packets through rings," \
		"$(grep -h 'usec/iter' "$SQ_W/c")"
fi
if [ -n "$(ls -A "$prim")" ] || [ "$(stat -c %u "$prim")" != 65534 ]; then
	bad "the squatted directory changed: $(ls -la "$prim")"
fi
exit $fail
