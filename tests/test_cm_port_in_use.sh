#!/bin/bash
# test_cm_port_in_use.sh - rdma_cm ports are held across processes, as the
# kernel's one port space per network namespace holds them
# (src/cm/ports.c).  Unmodified rdmacm-utils through `softrnic run`:
#
#   P1: rping -s -a A -p PORT      device A on UDP 4791: holds A:PORT
#   P2: rping -s -a A -p PORT      device A on UDP 4792 (same address):
#                                  rdma_bind_addr fails EADDRINUSE
#   P3: ucmatose -p PORT           wildcard bind on its own device B:
#                                  EADDRNOTAVAIL, the kernel's answer when
#                                  either address is the wildcard
#   P1 killed with SIGKILL; P4 = P2 again: binds (the dead holder's file
#   is found unlocked and removed)
#
# And the files: the directory 0700, each reservation 0600, ours.
# Exit 0 pass, 1 fail, 77 skip.
set -u
command -v rping >/dev/null || { echo "SKIP: rdmacm-utils not installed"; exit 77; }
source "$SRN_SRC/tests/lib/cm_conn.sh"
trap 'kill $p1 $p4 2>/dev/null; rm -rf "$SRN_CONN_WORK"' EXIT
A=$SRN_CONN_ADDR
B=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
w=$SRN_CONN_WORK
fail=0 p1= p4=
dir=/dev/shm/softrnic-cm-$(id -u)-$(printf %x "$(stat -L -c %i /proc/self/ns/net)")

# reserved PORT TIMEOUT_PID: wait (bounded) until the program behind
# `timeout` (softrnic run execs it: timeout's only child) holds PORT in a
# reservation file of its own.
reserved() {
	local i pid
	for ((i = 0; i < 100; i++)); do
		pid=$(pgrep -P "$2" | head -1)
		[ -n "$pid" ] && compgen -G "$dir/0106-$(printf %05u "$1")-$pid-*" >/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# P1: a port nobody holds (retry on the rare clash with another test).
for ((try = 0; try < 5; try++)); do
	port=$(srn_conn_port)
	env "${srn_conn_env[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=$A" \
		timeout -k 5 120 "$SOFTRNIC" run -- rping -s -a "$A" -p "$port" >"$w/p1" 2>&1 &
	p1=$!
	reserved "$port" "$p1" && break
	kill "$p1" 2>/dev/null; { wait "$p1"; } 2>/dev/null
done
if [ "$try" -eq 5 ]; then
	echo "FAIL: no rping server came up"; cat "$w/p1"; exit 1
fi

env "${srn_conn_env[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=$A,port=4792" \
	timeout -k 5 20 "$SOFTRNIC" run -- rping -s -a "$A" -p "$port" >"$w/p2" 2>&1
if grep -q "rdma_bind_addr: Address already in use" "$w/p2"; then
	echo "ok: second listener on $A:$port -> EADDRINUSE"
else
	echo "FAIL: second listener on $A:$port:"; cat "$w/p2"; fail=1
fi

env "${srn_conn_env[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=$B" \
	timeout -k 5 20 "$SOFTRNIC" run -- ucmatose -p "$port" >"$w/p3" 2>&1
if grep -q "Cannot assign requested address" "$w/p3"; then
	echo "ok: wildcard listener on port $port -> EADDRNOTAVAIL"
else
	echo "FAIL: wildcard listener on port $port:"; cat "$w/p3"; fail=1
fi

# The files: a directory only we can enter, records only we can read.
st=$(stat -c '%a %u' "$dir")
bad=$(find "$dir" -mindepth 1 \( ! -perm 600 -o ! -user "$(id -u)" -o ! -type f \) -print)
if [ "$st" = "700 $(id -u)" ] && [ -z "$bad" ]; then
	echo "ok: $dir is 0700 and its files 0600, ours"
else
	echo "FAIL: $dir is '$st', odd files: $bad"; fail=1
fi

# The holder dies without a word: its port is free again.
kill -9 "$(pgrep -P "$p1" | head -1)"
{ wait "$p1"; } 2>/dev/null
p1=
env "${srn_conn_env[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=$A,port=4792" \
	timeout -k 5 120 "$SOFTRNIC" run -- rping -s -a "$A" -p "$port" >"$w/p4" 2>&1 &
p4=$!
if reserved "$port" "$p4" && kill -0 "$p4" 2>/dev/null && ! grep -q "rdma_bind_addr" "$w/p4"; then
	echo "ok: after the holder was killed, $A:$port binds again"
else
	echo "FAIL: $A:$port after its holder died:"; cat "$w/p4"; fail=1
fi
exit $fail
