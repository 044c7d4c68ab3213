#!/bin/bash
# test_cm_ephemeral.sh - ephemeral rdma_cm ports across processes, as the
# kernel's one port space per network namespace gives them:
#
#   A: test_cm_ephemeral hold 700 300    B: test_cm_ephemeral hold 700 300
#      (started together: each binds 700 ids to port 0 and resolves 300,
#       an implicit bind, at the same time as the other)
#
# No port may be held by both (two processes drawing 1000 ports each from
# the 28232 of the range at random would share ~35).  Then a third process
# binding one of A's ports explicitly is refused, and, once A and B have
# exited without destroying their ids, binding it again works (the dead
# holders' files are cleared).  Exit 0 pass, 1 fail; every wait bounded.
set -u
bin=$SRN_BUILD/bin/test_cm_ephemeral
work=$(mktemp -d)
pa="" pb=""
trap 'touch "$work/stop"; kill $pa $pb 2>/dev/null; rm -rf "$work"' EXIT
r() { echo "127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))"; }
a=$(r) b=$(r)
[ "$a" = "$b" ] && b=127.0.0.$((RANDOM % 200 + 30))
run() {   # run NAME ADDR ARGS...: in the background, its own device on ADDR
	local name=$1 addr=$2
	shift 2
	SOFTRNIC_DEVICES="name=softrnic0,addr=$addr" timeout -k 5 120 "$bin" "$@" >"$work/$name" 2>&1 &
}
run a "$a" hold 700 300 "$a" "$work/go" "$work/stop"; pa=$!
run b "$b" hold 700 300 "$b" "$work/go" "$work/stop"; pb=$!
touch "$work/go"
for ((i = 0; i < 900; i++)); do
	grep -q ready "$work/a" && grep -q ready "$work/b" && break
	kill -0 "$pa" 2>/dev/null && kill -0 "$pb" 2>/dev/null || break
	sleep 0.1
done
if ! grep -q ready "$work/a" || ! grep -q ready "$work/b"; then
	echo "FAIL: the holders did not get their ports"; tail -3 "$work/a" "$work/b"; exit 1
fi
fail=0
na=$(grep -c '^port ' "$work/a") nb=$(grep -c '^port ' "$work/b")
both=$(cat "$work/a" "$work/b" | grep '^port ' | sort | uniq -d | wc -l)
echo "A holds $na ports, B $nb, held by both: $both"
[ "$na" -eq 1000 ] && [ "$nb" -eq 1000 ] || { echo "FAIL: 1000 ports each"; fail=1; }
[ "$both" -eq 0 ] || { echo "FAIL: two processes got the same ephemeral port"; fail=1; }
[ "$(sort "$work/a" | uniq -d | wc -l)" -eq 0 ] || { echo "FAIL: A got one port twice"; fail=1; }

port=$(grep -m1 '^port ' "$work/a" | cut -d' ' -f2)
SOFTRNIC_DEVICES="name=softrnic0,addr=$(r)" timeout -k 5 60 "$bin" bind "$port" >"$work/c" 2>&1
echo "explicit bind of A's port $port while A holds it: $(cat "$work/c")"
grep -qE "^refused (98|99)$" "$work/c" || { echo "FAIL: must be EADDRINUSE/EADDRNOTAVAIL"; fail=1; }

touch "$work/stop"
wait "$pa"; ra=$?
wait "$pb"; rb=$?
pa="" pb=""
[ $ra -eq 0 ] && [ $rb -eq 0 ] || { echo "FAIL: holders exited $ra $rb"; fail=1; }
SOFTRNIC_DEVICES="name=softrnic0,addr=$(r)" timeout -k 5 60 "$bin" bind "$port" >"$work/c" 2>&1
echo "explicit bind of port $port after A exited: $(cat "$work/c")"
grep -q "^bound$" "$work/c" || { echo "FAIL: a dead holder's port must be free"; fail=1; }
[ $fail -eq 0 ] && echo "ok: ephemeral ports are unique across processes"
exit $fail
