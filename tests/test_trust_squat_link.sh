#!/bin/bash
# Another user takes every /dev/shm name of an inbox locator first (issue
# 26, item 4; link/shm_file.c, link/rundir.h).  Before, with the name and
# its -alt1..3 taken, the device received over UDP only.  As root with a
# private $XDG_RUNTIME_DIR, in a throwaway namespace (tests/lib/squat.sh),
# uid 65534 having made all four names of 127.0.0.1:4791's inbox and the
# user's inbox directory /dev/shm/softrnic-inbox-0-<netns>: Debian's
# ibv_rc_pingpong, server on 127.0.0.1, client on 127.0.0.2.  Both exit
# 0, the client sent through the server's ring (its locator under
# $XDG_RUNTIME_DIR/softrnic-inbox-<netns>/), the server's log says so, the
# squatted names stay empty, and the directory is gone after the run.
set -u
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }
source "$SRN_SRC/tests/lib/squat.sh"
sq_setup
fail=0
bad() { echo "FAIL: $*"; fail=1; }
name=softrnic-link-$SQ_NET-127.0.0.1-4791
sq_squat "/dev/shm/$name" "/dev/shm/$name-alt1" "/dev/shm/$name-alt2" "/dev/shm/$name-alt3" \
	"/dev/shm/softrnic-inbox-0-$SQ_NET"
dir=$SQ_XDG/softrnic-inbox-$SQ_NET
n=500
tcp=$((20000 + RANDOM % 12000))
sq_run "$SQ_W/s" 30 env XDG_RUNTIME_DIR="$SQ_XDG" SOFTRNIC_DEVICES="name=softrnic0,addr=127.0.0.1" \
	ibv_rc_pingpong -p "$tcp" -g 0 -n $n
spid=$sq_bg
sq_wait_listen "$tcp" || bad "server never listened"
sq_run "$SQ_W/c" 30 env XDG_RUNTIME_DIR="$SQ_XDG" SOFTRNIC_DEVICES="name=softrnic0,addr=127.0.0.2" \
	ibv_rc_pingpong -p "$tcp" -g 0 -n $n 127.0.0.1
wait "$sq_bg"; crc=$?
wait "$spid"; src=$?
sq_bg=""
shm_s=$(sq_counter "$SQ_W/s" shm_sent_pkts)
shm_c=$(sq_counter "$SQ_W/c" shm_sent_pkts)
if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
	bad "server rc=$src, client rc=$crc"
	tail -n 5 "$SQ_W/s" "$SQ_W/c"
elif [ "$shm_c" -lt $n ] || [ "$shm_s" -lt $n ]; then
	bad "rings not used: client sent $shm_c, server $shm_s packets through them"
elif ! grep -q "inbox name $name is taken by uid 65534 (directory, mode 0777): using $dir/$SQ_NET-127.0.0.1-4791" "$SQ_W/s"; then
	bad "the server's log does not say where its locator went"
	grep softrnic: "$SQ_W/s"
else
	echo "ok: all four inbox names squatted: locator in $dir, $shm_c + $shm_s packets through rings"
fi
for f in "/dev/shm/$name" "/dev/shm/$name"-alt{1,2,3}; do
	if [ -n "$(ls -A "$f")" ] || [ "$(stat -c %u "$f")" != 65534 ]; then
		bad "$f changed: $(ls -la "$f")"
	fi
done
[ -e "$dir" ] && bad "$dir left after its last user exited: $(ls -A "$dir")"
exit $fail
