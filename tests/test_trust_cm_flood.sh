#!/bin/bash
# test_trust_cm_flood.sh - a remote peer, the least trusted party, floods
# a shared address's QP1 with CM REQs for ports nobody listens on: the
# paths that hold such a REQ (cm/held.c: at most 32 per CM, REJ after
# 1 s; link/udp_group_fwd.c: the stash kept for a reroute) must stay
# bounded and must not turn the flood into more traffic, while a
# legitimate client still connects.  docs/DESIGN.md, Many processes
# behind one address.
#
#   behind ADDR (one random 127.x.y.z, three processes, one group):
#     rping -s -P -p P1   the real server (a CM)
#     rping -s -p P2      an idle second CM; nobody connects to it
#     ibv_rc_pingpong     an idle member without a CM: REQs the kernel
#                         hashes to it go on to a CM (FWD_ROUTE)
#   behind CADDR, another address: rping -s -p P3, a listener outside
#     the group; 15% of the attacker's packets are REQs naming CADDR:P3
#     in their IP CM header, so the link finds a port holder that is no
#     member (udp_group_fwd.c member_of_pid) and the CM holds them all
#     the same (SRN_CF_FOREIGN=0 leaves them out, for comparison)
#   attacker: test_trust_cm_flood (plain UDP sockets; checks the REJs)
#   clients: rping -c from CADDR to ADDR:P1
#
# 1. warm-up: the flood below once, and a client, so what the members
#    touch once (QP1's 512 receive buffers, rings, tables, caches) is in
#    their VmRSS before the baseline;
# 2. the flood (4000 packets in 3 s, 2.5 s of listening, then the probes
#    of test_trust_cm_flood.c), with an rping client of 100 verified
#    round trips started 0.7 s into it, and another right after it;
# 3. all three members alive, their VmRSS grown by < 512 KiB since the
#    baseline: nothing in these paths may allocate per REQ (the held
#    table, the stash and the CM's address-handle cache are fixed
#    arrays), and a leak of as little as one 256-byte MAD per REQ would
#    pass 800 KiB over the flood's ~3300 valid REQ copies; what stays
#    below is page-level noise and the server's two rping connections
#    (seen: 0-10 kB for the idle members, 190-220 kB for the server);
#    not judged under ASan, whose quarantine keeps what is freed;
# 4. the members' counters (`softrnic stat`): REJs sent no more than the
#    REQ copies the attacker sent, bad ICRCs and malformed MADs counted.
#
# As root the test runs in a network namespace of its own.  Every
# process is under timeout; exit 0 pass, 1 fail, 77 skip.
set -u
if [ "$(id -u)" = 0 ] && [ -z "${SRN_CF_NETNS:-}" ] && command -v unshare >/dev/null; then
	exec env SRN_CF_NETNS=1 unshare -n sh -c 'ip link set lo up && exec bash "$0"' "$0"
fi
SOFTRNIC=$SRN_BUILD/bin/softrnic
ATTACKER=$SRN_BUILD/bin/test_trust_cm_flood
command -v rping >/dev/null || { echo "SKIP: rdmacm-utils not installed"; exit 77; }
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }
[ -x "$ATTACKER" ] || { echo "FAIL: $ATTACKER not built"; exit 1; }
unset SOFTRNIC_DEVICES SOFTRNIC_CONFIG
T=${SRN_CF_TIMEOUT:-120}
envs=()
[ -n "${SRN_ASAN_PRELOAD:-}" ] && envs=(LD_PRELOAD="$SRN_ASAN_PRELOAD" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1)
rand_addr() { echo "127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))"; }
ADDR=$(rand_addr)
CADDR=$(rand_addr)
while [ "$CADDR" = "$ADDR" ]; do CADDR=$(rand_addr); done
P1=$((20000 + RANDOM % 12000))
P2=$((P1 + 1))
TP=$((P1 + 2))
P3=$((P1 + 3))
w=$(mktemp -d)
tpids=()
trap 'kill "${tpids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$w"' EXIT
fail=0

# member NAME PROG ARGS...: a process behind ADDR, bounded; its timeout's
# pid in tpids (softrnic run execs PROG: timeout's only child).
member() {
	local name=$1
	shift
	env "${envs[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=$ADDR" \
		timeout -k 5 "$T" "$SOFTRNIC" run -- "$@" >"$w/$name.log" 2>&1 &
	tpids+=($!)
}

# listening PORT: does a process hold rdma_cm TCP-space port PORT (its
# port file, cm/ports.c)?
listening() {
	ls /dev/shm/softrnic-cm-"$(id -u)"-*/ "${XDG_RUNTIME_DIR:-/nonexistent}"/softrnic-cm-*/ \
		2>/dev/null | grep -q "^0106-$(printf %05u "$1")-"
}

# client LOG COUNT: an rping client from CADDR to the real server.
client() {
	env "${envs[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=$CADDR" timeout -k 5 60 \
		"$SOFTRNIC" run -- rping -c -a "$ADDR" -p "$P1" -C "$2" -v >"$1" 2>&1
}

client_ok() {  # client_ok LOG COUNT RC WHAT
	if [ "$3" -eq 0 ] && grep -q "rdma-ping-$(($2 - 1)):" "$1"; then
		echo "ok: $4: $2 verified round trips"
	else
		echo "FAIL: $4 (rc $3):"; tail -n 15 "$1"; fail=1
	fi
}

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
# CPU time (user + system) in clock ticks; the name field has no spaces.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# counter FILE NAME: its value in a `stat --dump` (0 if absent).
counter() {
	awk -v n="$2" '($5 == n) { print $6; f = 1 } ($3 == n) { print $4; f = 1 } END { if (!f) print 0 }' "$1" | head -1
}

member server rping -s -P -a "$ADDR" -p "$P1"
member idle_cm rping -s -a "$ADDR" -p "$P2"
member idle_verbs ibv_rc_pingpong -g 0 -p "$TP"
# A listener outside the group, at the client's address: REQs to ADDR
# that name it in their IP CM header find a port holder that is no member.
env "${envs[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=$CADDR" \
	timeout -k 5 "$T" "$SOFTRNIC" run -- rping -s -a "$CADDR" -p "$P3" >"$w/outsider.log" 2>&1 &
tpids+=($!)
for ((i = 0; i < 200; i++)); do
	listening "$P1" && listening "$P2" && listening "$P3" && ss -Hltn "sport = :$TP" 2>/dev/null | grep -q . && break
	sleep 0.05
done
pids=()
for t in "${tpids[@]}"; do pids+=("$(pgrep -P "$t" | head -1)"); done
for ((i = 0; i < 4; i++)); do
	if [ -z "${pids[i]}" ] || ! kill -0 "${pids[i]}" 2>/dev/null; then
		echo "FAIL: process $i did not start"; tail -n 5 "$w"/*.log; exit 1
	fi
done
listening "$P1" && listening "$P2" && listening "$P3" ||
	{ echo "FAIL: the rping servers do not listen"; tail -n 5 "$w"/*.log; exit 1; }
FOREIGN_ARGS=(-f "$CADDR:$P3")
[ "${SRN_CF_FOREIGN:-1}" = 0 ] && FOREIGN_ARGS=()
echo "ok: three members behind $ADDR (pids ${pids[*]}), real server port $P1"

# 1. Warm-up.
"$ATTACKER" ${FOREIGN_ARGS[@]+"${FOREIGN_ARGS[@]}"} "$ADDR" 2 3 4000 "$P1" "$P2" >"$w/warm.out" 2>&1
rc=$?
cat "$w/warm.out"
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || { echo "FAIL: warm-up flood"; fail=1; }
client "$w/c0.log" 100
client_ok "$w/c0.log" 100 $? "client after the warm-up"
sleep 1
declare -a rss0 cpu0
for ((i = 0; i < 3; i++)); do rss0[i]=$(rss_kb "${pids[i]}"); cpu0[i]=$(cpu_ticks "${pids[i]}"); done

# 2. The flood, a client during it and one after.
"$ATTACKER" ${FOREIGN_ARGS[@]+"${FOREIGN_ARGS[@]}"} "$ADDR" 2 3 4000 "$P1" "$P2" >"$w/flood.out" 2>&1 &
apid=$!
sleep 0.7
client "$w/c1.log" 100
crc=$?
kill -0 $apid 2>/dev/null && during="during" || during="(the flood had ended!)"
client_ok "$w/c1.log" 100 $crc "client $during the flood"
wait $apid
rc=$?
cat "$w/flood.out"
[ $rc -eq 0 ] || { echo "FAIL: the flood's checks (rc $rc)"; fail=1; }
client "$w/c2.log" 100
client_ok "$w/c2.log" 100 $? "client right after the flood"

# 3. Alive, memory flat.
sleep 1
names=(server idle_cm idle_verbs)
for ((i = 0; i < 3; i++)); do
	if ! kill -0 "${pids[i]}" 2>/dev/null; then
		echo "FAIL: ${names[i]} (pid ${pids[i]}) died:"; tail -n 15 "$w/${names[i]}.log"; fail=1
		continue
	fi
	r1=$(rss_kb "${pids[i]}")
	echo "${names[i]}: VmRSS ${rss0[i]} -> $r1 kB, CPU $(( ($(cpu_ticks "${pids[i]}") - cpu0[i]) * 1000 / $(getconf CLK_TCK) )) ms in the flood"
	# Under ASan freed memory waits in its quarantine: RSS is ASan's.
	if [ -z "${SRN_ASAN_PRELOAD:-}" ] && [ $((r1 - rss0[i])) -ge 512 ]; then
		echo "FAIL: ${names[i]} grew $((r1 - rss0[i])) kB during the flood"; fail=1
	fi
done

# 4. Counters.
rej=0 bad_icrc=0 malformed=0
for ((i = 0; i < 3; i++)); do
	"$SOFTRNIC" stat --dump --pid "${pids[i]}" >"$w/stat$i" 2>&1
	line="${names[i]}:"
	for c in cm_req_rcvd cm_rej_sent cm_malformed bad_icrc qkey_violation grp_forwarded grp_fwd_rcvd; do
		line="$line $c=$(counter "$w/stat$i" $c)"
	done
	echo "$line"
	rej=$((rej + $(counter "$w/stat$i" cm_rej_sent)))
	bad_icrc=$((bad_icrc + $(counter "$w/stat$i" bad_icrc)))
	malformed=$((malformed + $(counter "$w/stat$i" cm_malformed)))
done
# REQ copies the attacker sent, both runs: distinct + retransmissions.
copies=$(cat "$w/warm.out" "$w/flood.out" |
	sed -n 's/^flood: distinct=\([0-9]*\) retx=\([0-9]*\).*/\1 \2/p' | awk '{ s += $1 + $2 } END { print s + 0 }')
if [ "$rej" -gt "$copies" ] || [ "$copies" -eq 0 ]; then
	echo "FAIL: the members sent $rej REJs for $copies REQ copies"; fail=1
else
	echo "ok: the members sent $rej REJs for $copies REQ copies"
fi
if [ "$bad_icrc" -eq 0 ] || [ "$malformed" -eq 0 ]; then
	echo "FAIL: bad ICRCs ($bad_icrc) and malformed MADs ($malformed) should be counted"; fail=1
fi
[ $fail -eq 0 ] && echo "PASS"
exit $fail
