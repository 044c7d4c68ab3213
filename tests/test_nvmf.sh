#!/bin/bash
# test_nvmf.sh MODE - softrnic-nvmf (examples/nvmf) end to end: one
# target serving two subsystems, over NVMe/RDMA or NVMe/TCP.
#
#   shm   NVMe/RDMA through `softrnic run`, same-host rings; target --poll
#   udp   the same with SOFTRNIC_SHM=0 (RoCEv2 over UDP on loopback);
#         target event-driven
#   tcp   NVMe/TCP from the same target (it runs under softrnic, serving
#         both); clients plain TCP, header and data digests on one run
#   netns, tcp_netns  target in network namespace A, clients in B, over a
#         veth pair (tests/lib/netns.sh): NVMe/RDMA over softrnic's UDP
#         link, or NVMe/TCP; root only, else skipped
#   shm_mt, udp_mt, tcp_mt  shm, udp and tcp with the target on two I/O
#         threads (--cores 0,1): queues spread over both, admin queues and
#         keep-alive on thread 0, teardown across threads
#
# Target: subsystem A (namespace 1 a file, namespace 2 RAM; host h1
# only), subsystem B (RAM; host h2 only).  Checks, each bounded:
#   1. perf, random reads and writes, 2 queues, QD 8, every read verified;
#      the same on A's second namespace
#   2. perf on B, writes without in-capsule data (RDMA Read / R2T path)
#   3. a sequential write pass over the first MiB, then a read pass that
#      checks every block it wrote (self-describing blocks) and the file
#      itself holds them
#   4. probe: bad capsules and Connects get the statuses the spec names;
#      CC.EN cleared with reads in flight closes the I/O queues (on the
#      other thread too), and new ones work after CC.EN again
#   5. host h2 refused by A (Connect status 0x184); discovery for h1
#      lists A and not B
#      (probe also lets a controller's keep-alive timer expire)
#   6. 8 queues at queue depth 128; a host killed mid-run (SIGKILL)
#   7. the target is still alive and answers afterwards; then SIGTERM
#      stops it cleanly (exit 0; with threads, thread 1 served I/O
#      queues), and its log holds no sanitizer report
# Exit 0 pass, 1 fail, 77 skip.
set -u
MODE=${1:?usage: test_nvmf.sh shm|udp|tcp|netns|tcp_netns|shm_mt|udp_mt|tcp_mt}
N=$SRN_BUILD/bin/softrnic-nvmf
SR=$SRN_BUILD/bin/softrnic
[ -x "$N" ] || { echo "SKIP: softrnic-nvmf not built (libibverbs-dev/librdmacm-dev missing)"; exit 77; }
work=$(mktemp -d)
fail=0
tpid=
cleanup() {
	[ -n "$tpid" ] && kill -9 "$tpid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$work"
}
envs=()
[ -n "${SRN_ASAN_PRELOAD:-}" ] && envs=(LD_PRELOAD="$SRN_ASAN_PRELOAD" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1)
shm=1 TARGS=() X=rdma TPRE=() CPRE=() MT=0
A=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
if [ "${MODE%_mt}" != "$MODE" ]; then
	MODE=${MODE%_mt} MT=1 TARGS=(--cores 0,1)
fi
case $MODE in
shm) TARGS+=(--poll) ;;
udp) shm=0 ;;
tcp) X=tcp ;;
netns | tcp_netns)
	[ "$MODE" = tcp_netns ] && X=tcp
	source "$SRN_SRC/tests/lib/netns.sh"
	srn_netns_require_root
	srn_netns_setup
	srn_netns_at_exit cleanup
	A=$ADDR_A
	TPRE=(ip netns exec "$NS_A")
	CPRE=(ip netns exec "$NS_B")
	# Each RDMA client process owns UDP port 4791 on an address of its own.
	for ((i = 20; i < 30; i++)); do
		ip -n "$NS_B" addr add "10.77.0.$i/24" dev "$IF_B" || exit 1
	done
	;;
*) echo "unknown mode $MODE"; exit 2 ;;
esac
[ $MT = 1 ] && MODE=${MODE}_mt
[ "${MODE%netns}" = "$MODE" ] && trap cleanup EXIT
NEXT=0
HA=nqn.2014-08.org.softrnic:test:h1 HB=nqn.2014-08.org.softrnic:test:h2
SA=nqn.2014-08.org.softrnic:test:a SB=nqn.2014-08.org.softrnic:test:b
truncate -s 32M "$work/ns1.img"

# cli NAME ARGS...: one host-side command, output in $work/NAME, bounded
# (CLI_TIMEOUT: timeout's arguments instead of the default bound).
cli() {
	local name=$1
	shift
	local dev="addr=auto,share=0" src=()
	if [ ${#CPRE[@]} -gt 0 ]; then
		dev="addr=10.77.0.$((20 + NEXT % 10))"
		src=(--src "10.77.0.$((20 + NEXT % 10))")
		NEXT=$((NEXT + 1))
	fi
	# shellcheck disable=SC2086 # CLI_TIMEOUT is a list of words
	if [ "$X" = tcp ]; then
		timeout ${CLI_TIMEOUT:--k 5 60} "${CPRE[@]}" "$N" "$@" -t tcp --addr "$A" --port "$PORT" \
			>"$work/$name" 2>&1
	else
		timeout ${CLI_TIMEOUT:--k 5 60} "${CPRE[@]}" env "${envs[@]}" SOFTRNIC_SHM=$shm \
			SOFTRNIC_DEVICES="name=softrnic0,$dev" "$SR" run -- \
			"$N" "$@" -t rdma --addr "$A" --port "$PORT" "${src[@]}" >"$work/$name" 2>&1
	fi
}
perf_ok() { # NAME ARGS...: a clean result line
	local name=$1
	shift
	# Spin 50 us, then sleep: two spinning processes on a loaded 2-CPU
	# machine take turns by the scheduler's tick (ms per I/O).
	cli "$name" perf --spin-us 50 "$@"
	local rc=$?
	if [ $rc -ne 0 ] || ! grep -q "^result .* errors=0 verify_fail=0$" "$work/$name"; then
		echo "FAIL: $MODE: perf $name (rc=$rc)"
		cat "$work/$name"
		fail=1
		return 1
	fi
	echo "ok: $MODE: $name: $(sed -n 's/^result .*\(ios=[0-9]*\).*\(p50_us=[^ ]*\).*/\1 \2/p' "$work/$name")"
}

for ((try = 0; try < 5; try++)); do
	PORT=$((20000 + RANDOM % 12000))
	rm -f "$work/pid"
	"${TPRE[@]}" env "${envs[@]}" SOFTRNIC_SHM=$shm SOFTRNIC_DEVICES="name=softrnic0,addr=$A" "$SR" run -- \
		"$N" target --addr "$A" --port "$PORT" "${TARGS[@]}" --pidfile "$work/pid" \
		--subsys $SA --ns "$work/ns1.img" --ns ram:16M --allow-host $HA \
		--subsys $SB --ns ram:16M --allow-host $HB >>"$work/target.log" 2>&1 &
	tpid=$!
	for ((i = 0; i < 100; i++)); do
		[ -s "$work/pid" ] && break 2
		kill -0 $tpid 2>/dev/null || break
		sleep 0.05
	done
	kill -9 $tpid 2>/dev/null
	wait $tpid 2>/dev/null
	tpid=
done
[ -n "$tpid" ] || { echo "FAIL: $MODE: target did not start"; cat "$work/target.log"; exit 1; }

DG=()
[ "$X" = tcp ] && DG=(--digest)
# 1. and 2.
perf_ok mixed --subnqn $SA --hostnqn $HA --op rw --qd 8 --queues 2 --seconds 0.5 "${DG[@]}"
perf_ok nsid2 --subnqn $SA --hostnqn $HA --nsid 2 --op rw --qd 8 --queues 2 --size 1048576 --seconds 0.3
perf_ok no_incap --subnqn $SB --hostnqn $HB --op rw --qd 4 --seconds 0.5 --no-incap
# 3. a write pass, then a read pass over what it wrote; the file holds it
perf_ok seq_write --subnqn $SA --hostnqn $HA --op write --seq --size 1048576 --qd 4 --seconds 0.5
perf_ok seq_read --subnqn $SA --hostnqn $HA --op read --seq --size 1048576 --qd 4 --seconds 0.5
# Sector 1 of the file starts with its own LBA, 1 (self-describing).
lba1=$(od -An -t u8 -j 512 -N 8 "$work/ns1.img" | tr -d ' ')
if [ "$lba1" != 1 ]; then
	echo "FAIL: $MODE: the file's sector 1 does not hold LBA 1 (got '$lba1')"
	fail=1
fi
# 4. bad input
cli probe probe --subnqn $SA --hostnqn $HA
if [ $? -ne 0 ] || ! grep -q "^probe: [0-9]* passed, 0 failed" "$work/probe"; then
	echo "FAIL: $MODE: probe"
	cat "$work/probe"
	fail=1
else
	echo "ok: $MODE: $(tail -1 "$work/probe")"
fi
if ! grep -q "keep-alive expired" "$work/target.log"; then
	echo "FAIL: $MODE: the target did not expire the silent controller"
	fail=1
fi
# 5. a host not on the allow list; the discovery log per host
cli denied perf --subnqn $SA --hostnqn $HB --seconds 0.2
rc=$?
if [ $rc -ne 3 ] || ! grep -q "status 0x184" "$work/denied"; then
	echo "FAIL: $MODE: host h2 on subsystem A was not refused with 0x184 (rc=$rc)"
	cat "$work/denied"
	fail=1
else
	echo "ok: $MODE: host not on the allow list refused (Connect Invalid Host)"
fi
cli disc discover --hostnqn $HA
if ! grep -q "subnqn=$SA" "$work/disc" || grep -q "subnqn=$SB" "$work/disc" ||
	[ "$(grep -c "^trtype=" "$work/disc")" != 2 ]; then
	echo "FAIL: $MODE: discovery log for h1"
	cat "$work/disc"
	fail=1
else
	echo "ok: $MODE: discovery log lists A on rdma and tcp, not B"
fi
# 6. many queues at queue depth 128; a host killed under load
perf_ok deep --subnqn $SA --hostnqn $HA --op rw --qd 128 --queues 8 --seconds 0.5 --size 8388608
# (`softrnic run` execs the program, so timeout's SIGKILL hits perf itself)
CLI_TIMEOUT="-s KILL 0.6" cli killed perf --spin-us 50 --subnqn $SA --hostnqn $HA --op rw --qd 32 --queues 2 --seconds 5
# 7. still serving; then a clean stop
perf_ok after --subnqn $SA --hostnqn $HA --op rw --qd 1 --seconds 0.3
if kill -0 $tpid 2>/dev/null; then
	kill -TERM $tpid
	for ((i = 0; i < 200; i++)); do kill -0 $tpid 2>/dev/null || break; sleep 0.05; done
	if kill -0 $tpid 2>/dev/null; then
		echo "FAIL: $MODE: target did not stop within 10 s of SIGTERM"
		fail=1
		kill -9 $tpid
	fi
	wait $tpid
	rc=$?
	tpid=
	[ $rc -eq 0 ] || { echo "FAIL: $MODE: target exited with $rc"; fail=1; }
else
	echo "FAIL: $MODE: target died"
	fail=1
fi
if [ $MT = 1 ]; then
	served=$(sed -n 's/^nvmf: thread 1 (cpu [-0-9]*): \([0-9]*\) I\/O queues served$/\1/p' "$work/target.log")
	if [ "${served:-0}" -gt 0 ]; then
		echo "ok: $MODE: thread 1 served $served I/O queues"
	else
		echo "FAIL: $MODE: thread 1 served no I/O queue"
		fail=1
	fi
fi
if grep -Eq "ThreadSanitizer|AddressSanitizer|LeakSanitizer|runtime error:" "$work/target.log"; then
	echo "FAIL: $MODE: a sanitizer report in the target's log"
	fail=1
fi
[ $fail -ne 0 ] && { echo "--- target log"; cat "$work/target.log"; }
exit $fail
