#!/bin/bash
# Many processes behind one device address (link/udp_group.h): Debian's
# unmodified pingpongs through `softrnic run`, several processes given the
# same SOFTRNIC_DEVICES address and port.
#
#   loopback   two processes, one address (a random 127.x.y.z, a random
#              port): RC and UD between them, over the same-host rings;
#              share=0 still refuses a second process, and (as root)
#              another uid cannot join the group.
#   netns      4 processes in each of two namespaces (topology in
#              tests/lib/netns.sh), all on their namespace's one address:
#              4 RC and 4 UD pingpongs at once each way, so every QPN
#              member 0..3 of A talks to one of B and each round pairs
#              them differently; then a round with the steering program
#              off (SOFTRNIC_GROUP_STEER=0), where the kernel's hash
#              puts packets on the wrong process and forwarding must
#              deliver them (grp_forwarded > 0); and rping through
#              rdma_cm to two processes behind one address.
#
# Every process is bounded by timeout; exit 77 = skip.
set -u
SOFTRNIC=${SOFTRNIC:-$SRN_BUILD/bin/softrnic}
mode=${1:-loopback}
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }
W=$(mktemp -d)
T=${SRN_SHARED_T:-90}
# Under the ASan build (scripts/test.sh sets SRN_ASAN_PRELOAD) every
# uninstrumented program this script starts through softrnic needs the
# ASan runtime first (its leaks are its own: not checked).
if [ -n "${SRN_ASAN_PRELOAD:-}" ]; then
	export LD_PRELOAD=$SRN_ASAN_PRELOAD ASAN_OPTIONS=detect_leaks=0
fi
N=4
fail=0

# The member number of the QP a pingpong printed as its local address.
member_of() {
	local q
	q=$(grep -m1 "local address" "$1" | sed -n 's/.*QPN 0x\([0-9a-f]*\).*/\1/p')
	[ -n "$q" ] && echo $(((0x$q >> 16) & 255))
}

# wait_listen PREFIX PORT: bounded wait until a TCP server listens.
wait_listen() {
	local i
	for ((i = 0; i < 200; i++)); do
		$1 ss -Hltn "sport = :$2" 2>/dev/null | grep -q . && return 0
		sleep 0.05
	done
	return 1
}

# round NAME PROG SPREFIX CPREFIX SADDR ARGS...: N servers behind one
# address, N clients behind the other, all at once; each pair its own
# TCP port.  Servers log to $W/NAME.sI, clients to $W/NAME.cI.
round() {
	local name=$1 prog=$2 spre=$3 cpre=$4 saddr=$5 i base rc=0
	shift 5
	local -a sp cp
	base=$((20000 + RANDOM % 11000))
	for ((i = 0; i < N; i++)); do
		$spre timeout -k 5 "$T" "$SOFTRNIC" run -- stdbuf -oL "$prog" -p $((base + i)) "$@" \
			>"$W/$name.s$i" 2>&1 &
		sp[i]=$!
	done
	for ((i = 0; i < N; i++)); do
		wait_listen "$spre" $((base + i)) || { echo "FAIL: $name: server $i not listening"; rc=1; }
	done
	for ((i = 0; i < N; i++)); do
		$cpre timeout -k 5 "$T" "$SOFTRNIC" run -- stdbuf -oL "$prog" -p $((base + i)) "$@" "$saddr" \
			>"$W/$name.c$i" 2>&1 &
		cp[i]=$!
	done
	local -a crc src
	for ((i = 0; i < N; i++)); do
		wait "${cp[i]}"
		crc[i]=$?
		wait "${sp[i]}"
		src[i]=$?
	done
	local ms="" mc=""
	for ((i = 0; i < N; i++)); do
		if ! grep -q "iters in" "$W/$name.s$i" || ! grep -q "iters in" "$W/$name.c$i"; then
			echo "FAIL: $name pair $i (server rc ${src[i]}, client rc ${crc[i]}, logs $W/$name.[sc]$i)"
			echo "--- server:"; tail -n 15 "$W/$name.s$i"
			echo "--- client:"; tail -n 15 "$W/$name.c$i"
			rc=1
		fi
		ms="$ms $(member_of "$W/$name.s$i")"
		mc="$mc $(member_of "$W/$name.c$i")"
	done
	# The servers all wait at once behind their address: distinct
	# members.  A client may be done before the next one starts, and the
	# next then takes the member it freed, so clients need only differ.
	local ds dc
	ds=$(echo $ms | tr ' ' '\n' | sort -u | wc -l)
	dc=$(echo $mc | tr ' ' '\n' | sort -u | wc -l)
	if [ "$ds" -ne $N ] || { [ $N -gt 1 ] && [ "$dc" -lt 2 ]; }; then
		echo "FAIL: $name: members server [$ms ] client [$mc ]: want $N distinct servers"
		rc=1
	fi
	[ $rc -eq 0 ] && echo "ok: $name: $N pairs, members server [$ms ] client [$mc ]"
	return $rc
}

# Sum of one counter over the logs given (SOFTRNIC_STATS=1 prints them).
counter_sum() {
	local c=$1
	shift
	cat "$@" | awk -v c="$c" '$3 == c { s += $4 } END { print s + 0 }'
}

case "$mode" in
debug_rc)   # not registered: repeat one netns RC round (SRN_SHARED_REPEAT, SRN_DBG_ENV)
	source "$SRN_SRC/tests/lib/netns.sh"
	srn_netns_require_root
	srn_netns_setup
	PA="ip netns exec $NS_A env SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR_A SOFTRNIC_STATS=1 ${SRN_DBG_ENV:-}"
	PB="ip netns exec $NS_B env SOFTRNIC_DEVICES=name=softrnic0,addr=$ADDR_B SOFTRNIC_STATS=1 ${SRN_DBG_ENV:-}"
	for ((r = 0; r < ${SRN_SHARED_REPEAT:-5}; r++)); do
		round "dbg$r" ibv_rc_pingpong "$PA" "$PB" "$ADDR_A" -g 0 -n 300 || { fail=1; break; }
	done
	echo "logs in $W"
	;;
loopback)
	source "$SRN_SRC/tests/lib/pingpong.sh"
	ok=0
	for ((try = 0; try < 3 && !ok; try++)); do
		A=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
		P=$((20000 + RANDOM % 11000))
		D="name=softrnic0,addr=$A,port=$P"
		# Nobody else may hold it (another test's device): then another.
		ss -Hlun "sport = :$P" 2>/dev/null | grep -q . || ok=1
	done
	pre="env SOFTRNIC_DEVICES=$D"
	srn_pingpong ibv_rc_pingpong "$pre" "$pre" "$A" -g 0 -n 500 || fail=1
	srn_pingpong ibv_rc_pingpong "$pre" "$pre" "$A" -g 0 -e -s 65536 -n 100 || fail=1
	srn_pingpong ibv_ud_pingpong "$pre" "$pre" "$A" -g 0 -n 500 || fail=1
	# Which members did they hold, and did the rings carry it?
	N=1
	round lo ibv_rc_pingpong "env SOFTRNIC_DEVICES=$D SOFTRNIC_STATS=1" \
		"env SOFTRNIC_DEVICES=$D SOFTRNIC_STATS=1" "$A" -g 0 -n 200 || fail=1
	m0=$(member_of "$W/lo.s0") m1=$(member_of "$W/lo.c0")
	if [ "$m0" = "$m1" ]; then
		echo "FAIL: both processes hold member $m0"; fail=1
	fi
	rings=$(counter_sum shm_sent_pkts "$W/lo.s0" "$W/lo.c0")
	if [ "$rings" -lt 400 ]; then
		echo "FAIL: only $rings packets took the same-host rings"; fail=1
	else
		echo "ok: members $m0 and $m1 behind $A:$P, $rings packets through the rings"
	fi
	# share=0: the address is one process's alone, as before.
	# A pingpong server holds its device while it waits for a client.
	hp=$((20000 + RANDOM % 11000))
	env SOFTRNIC_DEVICES="$D" timeout -k 5 30 "$SOFTRNIC" run -- ibv_rc_pingpong -g 0 -p "$hp" \
		>/dev/null 2>&1 &
	holder=$!
	wait_listen "" "$hp"
	out=$(SOFTRNIC_DEVICES="$D,share=0" timeout -k 5 30 "$SOFTRNIC" devinfo 2>&1)
	if echo "$out" | grep -q "Address already in use"; then
		echo "ok: share=0 refused next to a sharing process"
	else
		echo "FAIL: share=0 next to a sharing process: $out"; fail=1
	fi
	# Another uid cannot join (the kernel's SO_REUSEPORT rule).
	if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
		out=$(SOFTRNIC_DEVICES="$D" timeout -k 5 30 setpriv --reuid=65534 --regid=65534 \
			--clear-groups "$SOFTRNIC" devinfo 2>&1)
		if echo "$out" | grep -qE "Address already in use|Permission denied"; then
			echo "ok: uid 65534 cannot join the group of uid 0"
		else
			echo "FAIL: another uid joined: $out"; fail=1
		fi
	fi
	kill "$holder" 2>/dev/null
	wait "$holder" 2>/dev/null
	;;
netns)
	source "$SRN_SRC/tests/lib/netns.sh"
	srn_netns_require_root
	srn_netns_setup
	srn_netns_at_exit "[ \$fail = 0 ] && rm -rf $W"
	DA="name=softrnic0,addr=$ADDR_A" DB="name=softrnic0,addr=$ADDR_B"
	PA="ip netns exec $NS_A env SOFTRNIC_DEVICES=$DA SOFTRNIC_STATS=1"
	PB="ip netns exec $NS_B env SOFTRNIC_DEVICES=$DB SOFTRNIC_STATS=1"
	# -e: eight processes that all spin would starve each other on two
	# busy CPUs long enough for RC to give up (RETRY_EXC_ERR, also with
	# one address per process).
	round rc_ab ibv_rc_pingpong "$PA" "$PB" "$ADDR_A" -g 0 -e -n 200 || fail=1
	round rc_ba ibv_rc_pingpong "$PB" "$PA" "$ADDR_B" -g 0 -e -s 16384 -n 100 || fail=1
	round ud_ab ibv_ud_pingpong "$PA" "$PB" "$ADDR_A" -g 0 -e -n 200 || fail=1
	round ud_ba ibv_ud_pingpong "$PB" "$PA" "$ADDR_B" -g 0 -e -n 200 || fail=1
	# Steering off: correctness rests on forwarding alone.
	PA0="$PA SOFTRNIC_GROUP_STEER=0" PB0="$PB SOFTRNIC_GROUP_STEER=0"
	# (UD only: an RC round without steering sometimes ends in
	# RETRY_EXC_ERR, not understood yet; see docs/known-issues.md.)
	round ud_nosteer_ab ibv_ud_pingpong "$PA0" "$PB0" "$ADDR_A" -g 0 -e -n 200 || fail=1
	round ud_nosteer_ba ibv_ud_pingpong "$PB0" "$PA0" "$ADDR_B" -g 0 -e -n 200 || fail=1
	fw=$(counter_sum grp_forwarded "$W"/ud_nosteer*)
	fr=$(counter_sum grp_fwd_rcvd "$W"/ud_nosteer*)
	if [ "$fw" -gt 0 ] && [ "$fr" -gt 0 ]; then
		echo "ok: without steering $fw packets forwarded, $fr received forwarded"
	else
		echo "FAIL: without steering nothing was forwarded ($fw/$fr)"; fail=1
	fi
	fs=$(counter_sum grp_forwarded "$W"/rc_ab.* "$W"/rc_ba.* "$W"/ud_ab.* "$W"/ud_ba.*)
	echo "note: with steering $fs packets needed forwarding"
	# rdma_cm: two rping servers behind A's one address, two clients
	# behind B's, at once.  The link routes each MAD to the process it
	# is for (wire/gsi_route.h): no member is special.
	if command -v rping >/dev/null; then
		rping_round() {
			local p1=$((20000 + RANDOM % 11000)) i rc=0 keeper
			local -a sv cl
			# A third server, never used, joins first (member 0) and
			# is killed before the clients connect: the others' MADs
			# must not depend on it (they once all went through it).
			$PA timeout -k 5 "$T" "$SOFTRNIC" run -- rping -s -a "$ADDR_A" -p $((p1 + 2)) \
				>"$W/rping.keeper" 2>&1 &
			keeper=$!
			wait_listen_cm $((p1 + 2)) || true
			for i in 0 1; do
				$PA timeout -k 5 "$T" "$SOFTRNIC" run -- rping -s -a "$ADDR_A" -p $((p1 + i)) \
					>"$W/rping.s$i" 2>&1 &
				sv[i]=$!
			done
			for i in 0 1; do
				wait_listen_cm $((p1 + i)) || true
			done
			kill -KILL "$keeper" 2>/dev/null
			wait "$keeper" 2>/dev/null
			for i in 0 1; do
				$PB timeout -k 5 "$T" "$SOFTRNIC" run -- rping -c -a "$ADDR_A" -p $((p1 + i)) \
					-v -C 20 >"$W/rping.c$i" 2>&1 &
				cl[i]=$!
			done
			for i in 0 1; do
				wait "${cl[i]}" || rc=1
				wait "${sv[i]}" || rc=1
				grep -q "rdma-ping-19:" "$W/rping.c$i" || rc=1
			done
			return $rc
		}
		# A server holds its port in the CM's port files once it listens.
		wait_listen_cm() {
			local i
			for ((i = 0; i < 100; i++)); do
				ip netns exec "$NS_A" ls /dev/shm 2>/dev/null | grep -q softrnic-cm &&
					ip netns exec "$NS_A" sh -c "ls /dev/shm/softrnic-cm-*/ 2>/dev/null" |
					grep -q "^0106-$(printf %05u "$1")-" && return 0
				sleep 0.1
			done
			return 1
		}
		if rping_round; then
			echo "ok: rping to two processes behind $ADDR_A from two behind $ADDR_B, the first member killed"
		else
			echo "FAIL: rping to two processes behind one address"
			for f in "$W"/rping.*; do echo "--- $f"; tail -n 8 "$f"; done
			fail=1
		fi
	else
		echo "note: rdmacm-utils not installed, no rping"
	fi
	;;
*)
	echo "usage: $0 loopback|netns"; exit 2 ;;
esac
[ "$mode" = loopback ] && rm -rf "$W"
exit $fail
