#!/bin/bash
# Another user takes our rdma_cm port directory's name first (issue 26,
# item 4; link/rundir.h, cm/ports.c).  Before, the squat silently turned
# the cross-process port check off: a second process could listen on a
# port another already held.  Debian's rping in a throwaway namespace
# (tests/lib/squat.sh), after uid 65534 made /dev/shm/softrnic-cm-0-<netns>:
#
#   P1  rping -s -a 127.0.0.1 -p PORT      holds PORT
#   P2  the same, its device on UDP 4792   rdma_bind_addr: EADDRINUSE
#   C   rping -c to P1, its own address    3 pings verified, both exit 0
#
#   a. $XDG_RUNTIME_DIR private: the port files are in
#      $XDG_RUNTIME_DIR/softrnic-cm-<netns>, the device log says so, and the
#      directory is gone once all three exited.
#   b. no $XDG_RUNTIME_DIR (we are root): /run/softrnic-cm-<netns>.
set -u
command -v rping >/dev/null || { echo "SKIP: rdmacm-utils not installed"; exit 77; }
source "$SRN_SRC/tests/lib/squat.sh"
sq_setup
fail=0
bad() { echo "FAIL: $*"; fail=1; }
prim=/dev/shm/softrnic-cm-0-$SQ_NET
sq_squat "$prim"

# round NAME DIR [VAR=VALUE...]: the three processes, DIR the fallback.
round() {
	local name=$1 dir=$2 port i p1 crc src
	shift 2
	port=$((20000 + RANDOM % 12000))
	sq_run "$SQ_W/$name.p1" 30 env "$@" SOFTRNIC_DEVICES="name=softrnic0,addr=127.0.0.1" \
		rping -s -a 127.0.0.1 -p "$port" -C 3
	p1=$sq_bg
	for ((i = 0; i < 100; i++)); do
		compgen -G "$dir/0106-$(printf %05u "$port")-*" >/dev/null && break
		sleep 0.1
	done
	[ $i -lt 100 ] || { bad "$name: P1 never held port $port in $dir"; cat "$SQ_W/$name.p1"; }
	sq_run "$SQ_W/$name.p2" 20 env "$@" SOFTRNIC_DEVICES="name=softrnic0,addr=127.0.0.1,port=4792" \
		rping -s -a 127.0.0.1 -p "$port" -C 3
	wait "$sq_bg"
	if grep -q "rdma_bind_addr: Address already in use" "$SQ_W/$name.p2"; then
		echo "ok: $name. a second listener on 127.0.0.1:$port -> EADDRINUSE"
	else
		bad "$name: a second listener on 127.0.0.1:$port was not refused:"
		cat "$SQ_W/$name.p2"
	fi
	if grep -q "rdma_cm port directory $prim is taken by uid 65534 (directory, mode 0777): using $dir" "$SQ_W/$name.p2"; then
		echo "ok: $name. the device log names the squat and $dir"
	else
		bad "$name: the device log does not name the squat and $dir"
		grep softrnic: "$SQ_W/$name.p2"
	fi
	sq_run "$SQ_W/$name.c" 30 env "$@" SOFTRNIC_DEVICES="name=softrnic0,addr=127.0.0.2" \
		rping -c -a 127.0.0.1 -p "$port" -C 3 -v
	wait "$sq_bg"; crc=$?
	wait "$p1"; src=$?
	sq_bg=""
	if [ $crc -ne 0 ] || [ $src -ne 0 ] || [ "$(grep -c 'ping data' "$SQ_W/$name.c")" -ne 3 ]; then
		bad "$name: rping server rc=$src, client rc=$crc"
		tail -n 5 "$SQ_W/$name.p1" "$SQ_W/$name.c"
	else
		echo "ok: $name. rping through P1: 3 pings, both exit 0"
	fi
	[ -e "$dir" ] && bad "$name: $dir left after its last user exited: $(ls -A "$dir")"
}

round a "$SQ_XDG/softrnic-cm-$SQ_NET" XDG_RUNTIME_DIR="$SQ_XDG"
if [ "$(stat -c '%u %A' /run 2>/dev/null)" = "0 drwxr-xr-x" ]; then
	round b "/run/softrnic-cm-$SQ_NET"
else
	echo "b skipped: /run is not root's alone here"
fi
if [ -n "$(ls -A "$prim")" ] || [ "$(stat -c %u "$prim")" != 65534 ]; then
	bad "the squatted directory changed: $(ls -la "$prim")"
fi
exit $fail
