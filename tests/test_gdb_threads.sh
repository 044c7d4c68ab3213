#!/bin/bash
# test_gdb_threads.sh - softrnic's threads carry their names in a debugger
# (issue 23): Debian's unmodified programs on softrnic under
# `gdb -batch`, stopped at a breakpoint in our library once the device
# is open, and `info threads` must show
#
#   ibv_rc_pingpong  at ibv_create_qp:   srn-progress (the device's progress thread)
#   rping -s         at rdma_create_id:  srn-progress and srn-cm (our librdmacm's CM thread)
#
# The names are set where the threads start (src/diag/thread.h); gdb
# reads them from /proc.  The program is killed at the breakpoint.
# Skipped (77) without gdb, or where ptrace is not allowed.
# Exit 0 pass, 1 fail, 77 skip.
set -u
SOFTRNIC=$SRN_BUILD/bin/softrnic
command -v gdb >/dev/null || { echo "SKIP: gdb not installed"; exit 77; }
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }
# Under the ASan build the uninstrumented program needs the ASan runtime
# first: given to the program only (gdb's `set environment`), not to gdb.
preload=()
[ -n "${SRN_ASAN_PRELOAD:-}" ] && preload=(
    -ex "set environment LD_PRELOAD=$SRN_ASAN_PRELOAD"
    -ex "set environment ASAN_OPTIONS=detect_leaks=0:abort_on_error=1")
fail=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# threads NAME BREAK WANT... -- PROG ARGS...: run PROG on softrnic under
# gdb to BREAK; `info threads` must name every WANT.
threads() {
    local name=$1 brk=$2 want=() w
    shift 2
    while [ "$1" != -- ]; do want+=("$1"); shift; done
    shift
    # -nx: no gdbinit; debuginfod off: nothing fetched from the network.
    timeout -k 5 60 "$SOFTRNIC" run -- gdb -nx -batch \
        -ex "set debuginfod enabled off" -ex "set pagination off" \
        -ex "set breakpoint pending on" "${preload[@]}" \
        -ex "break $brk" -ex run -ex "info threads" -ex kill \
        --args "$@" >"$out" 2>&1
    if grep -qiE "ptrace: operation not permitted|could not attach|couldn't get registers" "$out"; then
        echo "SKIP: gdb cannot trace a process here:"
        grep -iE "ptrace|attach|registers" "$out" | head -3
        exit 77
    fi
    if ! grep -q "hit Breakpoint" "$out"; then
        echo "FAIL: $name: gdb never stopped at $brk"
        tail -20 "$out"
        fail=1
        return
    fi
    for w in "${want[@]}"; do
        if ! grep -E '^\*? +[0-9]+ +Thread ' "$out" | grep -qF "\"$w\""; then
            echo "FAIL: $name: no thread named $w at $brk:"
            sed -n '/Target Id/,$p' "$out" | head -12
            fail=1
            return
        fi
    done
    echo "ok: $name: $(grep -E '^\*? +[0-9]+ +Thread ' "$out" | grep -oE '"[^"]*"' | paste -sd' ')"
}

threads ibv_rc_pingpong ibv_create_qp srn-progress -- \
    ibv_rc_pingpong -g 0 -p $((20000 + RANDOM % 12000))
if command -v rping >/dev/null; then
    addr=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
    SOFTRNIC_DEVICES="name=softrnic0,addr=$addr" \
        threads rping rdma_create_id srn-progress srn-cm -- \
        rping -s -a "$addr" -p $((20000 + RANDOM % 12000))
else
    echo "skip: rping (rdmacm-utils not installed)"
fi
exit $fail
