# Sourceable bash library: run an unmodified rdmacm-utils server and client
# (udaddy, mckey, cmtime, ...) through `softrnic run` and check both.
#
#   source "$SRN_SRC/tests/lib/cm_pair.sh"
#   addr=$(srn_cm_addr)                     # a random 127.x.y.z for a server device
#   srn_cm_pair "udaddy" "$addr" \
#       "env SOFTRNIC_DEVICES=name=softrnic0,addr=$addr" "udaddy -b $addr" \
#       "" "udaddy -s $addr" "data transfers complete" "data transfers complete"
#
# The server runs in the background with prefix SPRE (environment,
# namespace); once a process holds a device on WAITADDR (its UDP socket on
# port 4791, seen through SPRE's namespace) the client runs with CPRE.
# Both must exit 0 and print their regex.  Every wait is bounded (each run
# by `timeout`, the readiness wait by a count); logs are printed on failure.
# srn_cm_fail counts failures; a test exits with it.
#
# Under the ASan build (SRN_ASAN_PRELOAD set by scripts/test.sh) the
# uninstrumented Debian programs get the ASan runtime preloaded, leak
# checking off (their leaks are their own).

SOFTRNIC=${SOFTRNIC:-$SRN_BUILD/bin/softrnic}
SRN_CM_T=${SRN_CM_T:-40}
srn_cm_fail=0
srn_cm_work=$(mktemp -d)
trap 'rm -rf "$srn_cm_work"' EXIT

srn_cm_env() {
	if [ -n "${SRN_ASAN_PRELOAD:-}" ]; then
		echo "LD_PRELOAD=$SRN_ASAN_PRELOAD ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"
	fi
}

# A loopback address no other test picks by accident (127.0.0.0/8 minus
# the zero-configuration devices' 127.0.0.N).
srn_cm_addr() {
	echo "127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))"
}

# Wait (at most ~10 s) until a UDP socket is bound to ADDR:4791 in the
# namespace PREFIX runs in: the device of a process that opened it.
srn_cm_wait_dev() {
	local prefix=$1 addr=$2 i
	for ((i = 0; i < 100; i++)); do
		# shellcheck disable=SC2086
		$prefix ss -Hlun 2>/dev/null | grep -qF -e "$addr:4791" -e "[$addr]:4791" && return 0
		sleep 0.1
	done
	return 1
}

# srn_cm_start NAME PREFIX CMD: start CMD in the background (log NAME).
srn_cm_start() {
	local name=$1 prefix=$2 cmd=$3
	# shellcheck disable=SC2086,SC2046
	$prefix env $(srn_cm_env) timeout -k 5 "$SRN_CM_T" "$SOFTRNIC" run -- $cmd \
		>"$srn_cm_work/$name" 2>&1 &
	srn_cm_pid=$!
}

# srn_cm_check NAME RC REGEX: RC is 0 and the log NAME matches REGEX.
srn_cm_check() {
	local name=$1 rc=$2 ok=$3
	[ "$rc" -eq 0 ] && grep -qE "$ok" "$srn_cm_work/$name" && return 0
	echo "--- $name (rc=$rc, wanted /$ok/):"
	tail -25 "$srn_cm_work/$name"
	return 1
}

srn_cm_pair() {
	local name=$1 waddr=$2 spre=$3 scmd=$4 cpre=$5 ccmd=$6 sok=$7 cok=$8 spid src crc
	srn_cm_start server "$spre" "$scmd"
	spid=$srn_cm_pid
	if ! srn_cm_wait_dev "$spre" "$waddr"; then
		echo "FAIL: $name: no device on $waddr"
		kill "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
		cat "$srn_cm_work/server"
		srn_cm_fail=$((srn_cm_fail + 1))
		return 1
	fi
	sleep 0.5                     # from its device to its listen: a few calls
	# shellcheck disable=SC2086,SC2046
	$cpre env $(srn_cm_env) timeout -k 5 "$SRN_CM_T" "$SOFTRNIC" run -- $ccmd \
		>"$srn_cm_work/client" 2>&1
	crc=$?
	wait "$spid"
	src=$?
	local bad=0
	srn_cm_check client "$crc" "$cok" || bad=1
	srn_cm_check server "$src" "$sok" || bad=1
	if [ $bad -eq 0 ]; then
		echo "ok: $name"
		return 0
	fi
	echo "FAIL: $name"
	srn_cm_fail=$((srn_cm_fail + 1))
	return 1
}
