#!/bin/bash
# Another user takes our address-sharing group directory's name first
# (issue 26, item 4; link/rundir.h, link/udp_group.c).  Before, the victim
# could open no device on a shared address ("Failed to open device"),
# for as long as the squat stayed.  Debian's ibv_rc_pingpong, server and
# client both given SOFTRNIC_DEVICES addr=127.0.0.1 (one address, one UDP
# port: they share it) in a throwaway namespace (tests/lib/squat.sh):
#
#   a. root, $XDG_RUNTIME_DIR private: uid 65534 made
#      /dev/shm/softrnic-grp-0-<netns>; the pair runs as members 0 and 1,
#      the log names the squat and $XDG_RUNTIME_DIR/softrnic-grp-<netns>,
#      the squatted directory stays empty, and the fallback is gone once
#      both have exited (its last user removes it).
#   b. uid 65533, no private runtime directory: the name's .alt1 instead.
#   c. uid 65533, the name and .alt1..3 all squatted: the device opens
#      alone on the address (as with share=0), says so, and the pair runs
#      (the client on another address).
set -u
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }
source "$SRN_SRC/tests/lib/squat.sh"
sq_setup
fail=0
bad() { echo "FAIL: $*"; fail=1; }

member_of() {
	local q
	q=$(grep -m1 "local address" "$1" | sed -n 's/.*QPN 0x\([0-9a-f]*\).*/\1/p')
	[ -n "$q" ] && echo $(((0x$q >> 16) & 255))
}

# pair NAME SADDR CADDR [VAR=VALUE...]: the pingpong, both ends bounded.
pair() {
	local name=$1 sa=$2 ca=$3 tcp src crc
	shift 3
	tcp=$((20000 + RANDOM % 12000))
	sq_run "$SQ_W/$name.s" 30 env "$@" SOFTRNIC_DEVICES="name=softrnic0,addr=$sa" \
		ibv_rc_pingpong -p "$tcp" -g 0 -n 200 -s 4096
	local spid=$sq_bg
	sq_wait_listen "$tcp" || bad "$name: server never listened"
	sq_run "$SQ_W/$name.c" 30 env "$@" SOFTRNIC_DEVICES="name=softrnic0,addr=$ca" \
		ibv_rc_pingpong -p "$tcp" -g 0 -n 200 -s 4096 127.0.0.1
	wait "$sq_bg"; crc=$?
	wait "$spid"; src=$?
	sq_bg=""
	if [ $src -ne 0 ] || [ $crc -ne 0 ]; then
		bad "$name: server rc=$src, client rc=$crc"
		tail -n 5 "$SQ_W/$name.s" "$SQ_W/$name.c"
		return 1
	fi
}

# a. root, a private runtime directory.
prim=/dev/shm/softrnic-grp-0-$SQ_NET
fb=$SQ_XDG/softrnic-grp-$SQ_NET
sq_squat "$prim"
if pair a 127.0.0.1 127.0.0.1 XDG_RUNTIME_DIR="$SQ_XDG"; then
	ms=$(member_of "$SQ_W/a.s") mc=$(member_of "$SQ_W/a.c")
	if ! grep -q "group directory $prim is taken by uid 65534 (directory, mode 0777): using $fb" "$SQ_W/a.s"; then
		bad "a: the server's log does not name the squat and $fb"
		grep softrnic "$SQ_W/a.s"
	elif [ "$ms" != 0 ] || [ "$mc" != 1 ]; then
		bad "a: members $ms and $mc, not 0 and 1: the address was not shared"
	else
		echo "ok: a. $prim squatted: members 0 and 1 share 127.0.0.1 through $fb"
	fi
fi
if [ -n "$(ls -A "$prim")" ] || [ "$(stat -c %u "$prim")" != 65534 ]; then
	bad "a: the squatted directory changed: $(ls -la "$prim")"
fi
[ -e "$fb" ] && bad "a: $fb left after its last user exited: $(ls -A "$fb")"

# b. Another uid without a private runtime directory: .alt1.
SQ_UID=65533
prim=/dev/shm/softrnic-grp-65533-$SQ_NET
sq_squat "$prim"
if pair b 127.0.0.1 127.0.0.1; then
	ms=$(member_of "$SQ_W/b.s") mc=$(member_of "$SQ_W/b.c")
	if ! grep -q "group directory $prim is taken by uid 65534 (directory, mode 0777): using $prim.alt1" "$SQ_W/b.s"; then
		bad "b: the server's log does not name the squat and $prim.alt1"
		grep softrnic "$SQ_W/b.s"
	elif [ "$ms" != 0 ] || [ "$mc" != 1 ]; then
		bad "b: members $ms and $mc, not 0 and 1"
	else
		echo "ok: b. uid 65533, $prim squatted: members 0 and 1 share 127.0.0.1 through .alt1"
	fi
fi
[ -e "$prim.alt1" ] && bad "b: $prim.alt1 left after its last user exited"

# c. Every name squatted: the device binds alone and says so.
sq_squat "$prim.alt1" "$prim.alt2" "$prim.alt3"
if pair c 127.0.0.1 127.0.0.2; then
	if grep -q "Failed to open device" "$SQ_W/c.s" ||
		! grep -q "group directory $prim and its fallbacks are taken (the first by uid 65534.*does not share its address" "$SQ_W/c.s"; then
		bad "c: the server's log does not say it shares nothing"
		grep softrnic "$SQ_W/c.s"
	else
		echo "ok: c. all four names squatted: the device opens alone on the address and says why"
	fi
fi
exit $fail
