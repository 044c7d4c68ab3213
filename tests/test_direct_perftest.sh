#!/bin/bash
# Debian's unmodified perftest through `softrnic run`, both ends on this
# host: ib_write_lat and ib_read_lat (small -n) complete with direct
# placement on, and their Writes/Reads go direct (SOFTRNIC_STATS=1).
# ib_write_lat detects arrival by spinning on memory: without direct
# placement each hop waits for the target's progress thread.
set -u
source "$SRN_SRC/tests/lib/pingpong.sh"
command -v ib_write_lat >/dev/null || { echo "SKIP: perftest not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export SOFTRNIC_DIAG_DIR="$tmp/diag"
mkdir "$SOFTRNIC_DIAG_DIR"
unset SOFTRNIC_DEVICES SOFTRNIC_CONFIG SOFTRNIC_SHM SOFTRNIC_PCAP SOFTRNIC_FAULTS SOFTRNIC_DIRECT
fail=0

counter() {
    awk -v n="$2" '$1 == "softrnic" && $3 == n { v += $4 } END { print v + 0 }' "$1"
}

# run PROG KIND ARGS...: server and client; retried on a port clash.
run() {
    local prog=$1 kind=$2 try port spid src crc
    shift 2
    for ((try = 0; try < 5; try++)); do
        port=$((20000 + (RANDOM % 12000)))
        # shellcheck disable=SC2046
        env SOFTRNIC_STATS=1 $(srn_pp_env) timeout -k 5 60 \
            "$SOFTRNIC" run -- "$prog" -p "$port" "$@" >"$tmp/$prog.srv" 2>&1 &
        spid=$!
        srn_pp_wait_listen "" "$port" && break
        kill "$spid" 2>/dev/null
        wait "$spid" 2>/dev/null
    done
    # shellcheck disable=SC2046
    env SOFTRNIC_STATS=1 $(srn_pp_env) timeout -k 5 60 \
        "$SOFTRNIC" run -- "$prog" -p "$port" "$@" 127.0.0.1 >"$tmp/$prog.cli" 2>&1
    crc=$?
    wait "$spid"
    src=$?
    cat "$tmp/$prog.srv" "$tmp/$prog.cli" >"$tmp/$prog.all"
    if [ "$crc" -ne 0 ] || [ "$src" -ne 0 ]; then
        echo "FAIL: $prog $* (server rc=$src, client rc=$crc)"
        cat "$tmp/$prog.all"
        fail=1
        return
    fi
    local n
    n=$(counter "$tmp/$prog.all" "$kind")
    # Both sides send n iterations; at least that many went direct.
    if [ "$n" -lt 200 ]; then
        echo "FAIL: $prog: $kind $n, expected the iterations to go direct"
        cat "$tmp/$prog.all"
        fail=1
        return
    fi
    echo "ok: $prog $*: $kind $n; $(grep -A1 '#bytes' "$tmp/$prog.cli" | tail -1 | awk '{print "typical " $5 " us"}')"
}

run ib_write_lat direct_write -s 2 -n 200
run ib_read_lat direct_read -s 2 -n 200
exit $fail
