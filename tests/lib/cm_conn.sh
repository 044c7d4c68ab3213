# Sourceable bash library: run an unmodified rdma_cm program as a server and
# a client, both through `softrnic run`, two processes on one host:
#
#   server: SOFTRNIC_DEVICES=softrnic0 on $SRN_CONN_ADDR (127.x.y.z, its own)
#   client: zero configuration (127.0.0.N); loopback reaches the server
#
#   source "$SRN_SRC/tests/lib/cm_conn.sh"
#   srn_conn_pair NAME OK_REGEX "server args with @PORT@" "client args with @PORT@"
#
# @PORT@ becomes a port below the kernel's ephemeral range.  A server that
# could not bind it (another test holds it) or was not listening yet when
# the client came (a REJECT) costs a retry with another port, at most 3.
# Every run is bounded by timeout.  The logs of the last try stay in
# $SRN_CONN_WORK/{s,c}.  Returns 0 when both exit 0 and the client's output
# matches OK_REGEX.
#
# Under the ASan build (SRN_ASAN_PRELOAD set by scripts/test.sh) the
# uninstrumented Debian program gets the ASan runtime preloaded.

SOFTRNIC=${SOFTRNIC:-$SRN_BUILD/bin/softrnic}
SRN_CONN_T=${SRN_CONN_T:-60}
SRN_CONN_ADDR=${SRN_CONN_ADDR:-127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))}
SRN_CONN_WORK=${SRN_CONN_WORK:-$(mktemp -d)}
srn_conn_env=()
[ -n "${SRN_ASAN_PRELOAD:-}" ] &&
	srn_conn_env=(LD_PRELOAD="$SRN_ASAN_PRELOAD" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1)

srn_conn_port() { echo $((20000 + RANDOM % 12000)); }

# srn_conn_run LOG SECONDS [VAR=VALUE...] PROG ARGS...: run PROG through
# `softrnic run` in the background, bounded, output to LOG; the pid of its
# `timeout` in srn_conn_bg (softrnic run execs PROG: timeout's only child).
srn_conn_run() {
	local log=$1 t=$2
	shift 2
	env "${srn_conn_env[@]}" timeout -k 5 "$t" env "$@" >"$log" 2>&1 &
	srn_conn_bg=$!
}

# srn_conn_rping_server LOG PORT: a persistent rping server (-s -P) on
# its own device at $SRN_CONN_ADDR, bounded to 120 s; its timeout's pid in
# srn_conn_bg.  Waits 1 s for it to listen.
srn_conn_rping_server() {
	srn_conn_run "$1" 120 SOFTRNIC_DEVICES="name=softrnic0,addr=$SRN_CONN_ADDR" \
		"$SOFTRNIC" run -- rping -s -P -a "$SRN_CONN_ADDR" -p "$2"
	sleep 1
}

srn_conn_pair() {
	local name=$1 ok=$2 sargs=$3 cargs=$4 port spid src crc try
	for ((try = 0; try < 3; try++)); do
		port=$(srn_conn_port)
		# shellcheck disable=SC2086
		env "${srn_conn_env[@]}" SOFTRNIC_DEVICES="name=softrnic0,addr=$SRN_CONN_ADDR" \
			timeout -k 5 "$SRN_CONN_T" "$SOFTRNIC" run -- ${sargs//@PORT@/$port} \
			>"$SRN_CONN_WORK/s" 2>&1 &
		spid=$!
		sleep 1
		# shellcheck disable=SC2086
		env "${srn_conn_env[@]}" timeout -k 5 "$SRN_CONN_T" "$SOFTRNIC" run -- \
			${cargs//@PORT@/$port} >"$SRN_CONN_WORK/c" 2>&1
		crc=$?
		wait "$spid"
		src=$?
		if [ $crc -eq 0 ] && [ $src -eq 0 ] && grep -qE "$ok" "$SRN_CONN_WORK/c"; then
			echo "ok: $name :: $(grep -E "$ok" "$SRN_CONN_WORK/c" | head -1)"
			return 0
		fi
		# Another port only for the two known races; anything else fails.
		grep -qE "Address already in use|Cannot assign requested address|REJECTED" \
			"$SRN_CONN_WORK/s" "$SRN_CONN_WORK/c" || break
		echo "note: $name: port $port taken or server late, another port"
	done
	echo "FAIL: $name (server rc=$src, client rc=$crc)"
	echo "--- server:"; tail -20 "$SRN_CONN_WORK/s"
	echo "--- client:"; tail -20 "$SRN_CONN_WORK/c"
	return 1
}
