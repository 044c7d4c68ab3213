# Sourceable bash library: run one of Debian's unmodified pingpong programs
# (ibv_rc_pingpong, ibv_ud_pingpong, ...) as a server and a client, both
# through `softrnic run`, and check that both finish successfully.
#
#   source "$SRN_SRC/tests/lib/pingpong.sh"
#   srn_pingpong ibv_rc_pingpong "" "" 127.0.0.1 -g 0 -s 4096
#   srn_pingpong ibv_rc_pingpong "ip netns exec A env SOFTRNIC_DEVICES=..." \
#                "ip netns exec B env SOFTRNIC_DEVICES=..." 10.77.0.1 -g 0
#
# The second and third arguments are command prefixes for the server and
# the client (namespaces, environment).  Each run uses its own TCP port for
# the programs' out-of-band exchange, so tests can run in parallel; every
# wait is bounded.
#
# Under the ASan build (SRN_ASAN_PRELOAD set by scripts/test.sh) the
# uninstrumented Debian program needs the ASan runtime preloaded; leak
# checking is off for it because the leaks would be the program's own.

SOFTRNIC=${SOFTRNIC:-$SRN_BUILD/bin/softrnic}
SRN_PP_TIMEOUT=${SRN_PP_TIMEOUT:-60}

srn_pp_env() {
    if [ -n "${SRN_ASAN_PRELOAD:-}" ]; then
        echo "LD_PRELOAD=$SRN_ASAN_PRELOAD ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"
    fi
}

# Wait until something listens on TCP port $2 (as seen through prefix $1).
srn_pp_wait_listen() {
    local prefix=$1 port=$2 i
    for ((i = 0; i < 100; i++)); do
        $prefix ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && return 0
        sleep 0.05
    done
    return 1
}

srn_pingpong() {
    local prog=$1 spre=$2 cpre=$3 saddr=$4
    shift 4
    local port slog clog spid src crc try
    slog=$(mktemp) clog=$(mktemp)
    # Below the kernel's ephemeral range (32768-60999), so a test's port is
    # not some connection's local port; a port another test holds makes the
    # server say "Couldn't listen": take another one (bounded).
    for ((try = 0; try < 5; try++)); do
        port=$((20000 + (RANDOM % 12000)))
        # shellcheck disable=SC2046
        $spre env $(srn_pp_env) timeout -k 5 "$SRN_PP_TIMEOUT" \
            "$SOFTRNIC" run -- "$prog" -p "$port" "$@" >"$slog" 2>&1 &
        spid=$!
        srn_pp_wait_listen "$spre" "$port" && break
        kill "$spid" 2>/dev/null
        wait "$spid" 2>/dev/null
        grep -q "Couldn't listen" "$slog" && continue
        echo "FAIL: $prog server never listened on $port" >&2
        cat "$slog" >&2
        return 1
    done
    if [ "$try" -eq 5 ]; then
        echo "FAIL: $prog server: no free port in 5 tries" >&2
        return 1
    fi
    # shellcheck disable=SC2046
    $cpre env $(srn_pp_env) timeout -k 5 "$SRN_PP_TIMEOUT" \
        "$SOFTRNIC" run -- "$prog" -p "$port" "$@" "$saddr" >"$clog" 2>&1
    crc=$?
    wait "$spid"
    src=$?
    # What each program prints when it got through (xsrq prints no timing).
    local ok="iters in"
    [ "$prog" = ibv_xsrq_pingpong ] && ok="^success"
    if [ "$crc" -ne 0 ] || [ "$src" -ne 0 ] || ! grep -q "$ok" "$clog" ||
        ! grep -q "$ok" "$slog"; then
        echo "FAIL: $prog $* (server rc=$src, client rc=$crc)" >&2
        echo "--- server:" >&2; cat "$slog" >&2
        echo "--- client:" >&2; cat "$clog" >&2
        rm -f "$slog" "$clog"
        return 1
    fi
    echo "ok: $prog $* :: $(grep "$ok" "$clog" | head -1)"
    rm -f "$slog" "$clog"
    return 0
}
