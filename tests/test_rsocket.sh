#!/bin/bash
# test_rsocket.sh MODE - rsockets (src/rsocket/) through `softrnic run`, two
# processes on one host, Debian's programs unmodified where there are any:
#
#   server: SOFTRNIC_DEVICES=softrnic0 on 127.x.y.z (random, its own)
#   client: zero configuration (127.0.0.N); loopback reaches 127.x.y.z
#
#   rstream    rstream -S 64 / 4096 / 65536 / 100000, blocking (-T b),
#              non-blocking (-T n), rpoll-driven (-T a), with -T v
#              (verify) where it applies, and the default run (every size,
#              latency then bandwidth, two connections)
#   riostream  riostream (riomap + riowrite) at several sizes and modes
#   check      tests/rsocket_check.c: rpoll/rselect with mixed fds, O_NONBLOCK,
#              the writer or the reader closing mid-stream
#   killed     the peer SIGKILLed while we block in rrecv: EOF (its death
#              seen by the CM) or ECONNRESET (the probe), never a hang
#   preload    a plain TCP echo program under Debian's librspreload.so
# Every run is bounded (timeout); exit 0 pass, 1 fail, 77 skip.
set -u
MODE=${1:?mode}
SOFTRNIC=$SRN_BUILD/bin/softrnic
T=${SRN_RS_TIMEOUT:-60}
envs=()
[ -n "${SRN_ASAN_PRELOAD:-}" ] && envs=(LD_PRELOAD="$SRN_ASAN_PRELOAD" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1)
fail=0
addr=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
port() { echo $((20000 + RANDOM % 12000)); }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

# pair NAME "server command" "client command" OK_REGEX [TIMEOUT]: the
# server on its own device, the client a second later; both must exit 0
# and the client's output match.  stdbuf: see progress if one hangs.
pair() {
	local name=$1 scmd=$2 ccmd=$3 ok=$4 t=${5:-$T} src crc spid
	# shellcheck disable=SC2086
	env "${envs[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=$addr" timeout -k 5 "$t" \
		"$SOFTRNIC" run -- stdbuf -oL $scmd >"$work/s" 2>&1 &
	spid=$!
	sleep 1
	# shellcheck disable=SC2086
	env "${envs[@]}" timeout -k 5 "$t" "$SOFTRNIC" run ${client_run_opts:-} -- stdbuf -oL $ccmd >"$work/c" 2>&1
	crc=$?
	wait "$spid"; src=$?
	if [ $crc -ne 0 ] || [ $src -ne 0 ] || ! grep -qE "$ok" "$work/c"; then
		echo "FAIL: $name (server rc=$src, client rc=$crc)"
		echo "--- server:"; tail -20 "$work/s"; echo "--- client:"; tail -20 "$work/c"
		fail=1
	else
		echo "ok: $name"; tail -n +2 "$work/c" | sed 's/^/    /'
	fi
}

# rs_prog NAME PROG "args": PROG as server (-b) and client (-s), same args.
rs_prog() {
	local p; p=$(port)
	pair "$1" "$2 -b $addr -p $p $3" "$2 -s $addr -p $p $3" "${4:-^custom}" "${5:-$T}"
}

case $MODE in
rstream)
	command -v rstream >/dev/null || { echo "SKIP: rdmacm-utils not installed"; exit 77; }
	rs_prog "rstream -S 64 -C 2000" rstream "-S 64 -C 2000"
	rs_prog "rstream -S 4096 -T b -T v" rstream "-S 4096 -C 1000 -T b -T v"
	rs_prog "rstream -S 65536 -T n" rstream "-S 65536 -C 300 -T n"
	# Twice: it caught a slot race (stream.c send_one) one run in five.
	rs_prog "rstream -S 65536 -T a -T v" rstream "-S 65536 -C 300 -T a -T v"
	rs_prog "rstream -S 65536 -T a -T v (again)" rstream "-S 65536 -C 300 -T a -T v"
	rs_prog "rstream -S 100000 -T n -T v" rstream "-S 100000 -C 100 -T n -T v"
	rs_prog "rstream -S 4096 -B 16384 -I 200" rstream "-S 4096 -C 4 -I 200 -B 16384 -T v"
	rs_prog "rstream (default: all sizes)" rstream "" "^1m_bw" 240
	;;
riostream)
	command -v riostream >/dev/null || { echo "SKIP: rdmacm-utils not installed"; exit 77; }
	# Not its default run: its latency steps spin on a byte the peer's
	# progress thread must place, 100000 times over, which two spinning
	# processes on a busy 2-CPU machine starve (bandwidth runs are fine).
	rs_prog "riostream -S 64" riostream "-S 64 -C 1000"
	rs_prog "riostream -S 4096 -T v" riostream "-S 4096 -C 500 -T v"
	rs_prog "riostream -S 65536 -T n -T v" riostream "-S 65536 -C 200 -T n -T v"
	rs_prog "riostream -S 100000 -T a" riostream "-S 100000 -C 100 -T a"
	rs_prog "riostream -S 1000000 -T b -T v" riostream "-S 1000000 -C 20 -T b -T v"
	;;
check)
	p=$(port)
	pair "rsocket_check" "$SRN_BUILD/bin/rsocket_check server $addr $p" \
		"$SRN_BUILD/bin/rsocket_check client $addr $p" "client: ok" 120
	;;
killed)
	p=$(port)
	env "${envs[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=$addr" timeout -k 5 90 \
		"$SOFTRNIC" run -- "$SRN_BUILD/bin/rsocket_check" killed "$addr" "$p" >"$work/s" 2>&1 &
	spid=$!
	sleep 1
	# No timeout(1) around the victim: the kill must reach the program
	# itself (env and `softrnic run` exec it); its alarm() bounds it.
	env "${envs[@]}" "$SOFTRNIC" run -- "$SRN_BUILD/bin/rsocket_check" \
		victim "$addr" "$p" >"$work/c" 2>&1 &
	vpid=$!
	for _ in $(seq 1 60); do grep -q ready "$work/c" && break; sleep 0.5; done
	if ! grep -q ready "$work/c"; then
		echo "FAIL: the victim never connected"; cat "$work/c" "$work/s"; fail=1
	fi
	kill -9 "$vpid" 2>/dev/null; wait "$vpid" 2>/dev/null
	wait "$spid"; src=$?
	if [ $src -eq 0 ] && grep -q "killed: ok" "$work/s"; then
		echo "ok: peer killed -> $(grep 'rrecv returned' "$work/s")"
	else
		echo "FAIL: peer killed (server rc=$src)"; cat "$work/s"; fail=1
	fi
	;;
preload)
	pre=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
	[ -e "$pre" ] || { echo "SKIP: $pre not installed (librdmacm1)"; exit 77; }
	# ASan's runtime must come first; it and the preload do not mix well.
	[ -n "${SRN_ASAN_PRELOAD:-}" ] && { echo "SKIP: preload test not under ASan"; exit 77; }
	p=$(port)
	echo_prog=$SRN_BUILD/bin/rsocket_tcp_echo
	# The server gets the preload by hand, the client by `run --rsocket-preload`.
	client_run_opts=--rsocket-preload
	pair "TCP echo under librspreload" "env LD_PRELOAD=$pre $echo_prog server $addr $p" \
		"$echo_prog client $addr $p" "identical" 120
	if ! grep -q "server transport: rsocket" "$work/s" || ! grep -q "client transport: rsocket" "$work/c"; then
		echo "FAIL: the echo did not go over rsockets"; cat "$work/s" "$work/c"; fail=1
	fi
	;;
*)
	echo "unknown mode $MODE"; exit 2 ;;
esac
exit $fail
