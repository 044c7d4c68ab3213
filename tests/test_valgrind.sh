#!/bin/bash
# test_valgrind.sh - Debian's unmodified RDMA programs on softrnic with
# both processes of each pair under valgrind --tool=memcheck (issue 23):
#
#   ibv_rc_pingpong -n 20        Sends, polling
#   ibv_rc_pingpong -e -n 20     completion channel events
#   rping -v -C 3                rdma_cm (our librdmacm), RDMA Read and
#                                Write placed directly in the peer's
#                                memory, Sends; the client prints what
#                                the server wrote into its buffer
#   ucx_perftest tag_bw 64 KiB   UCX 1.13 rc_verbs: eager Sends and
#                                rendezvous RDMA Reads (when ucx-utils
#                                is installed and `softrnic run` can make
#                                UCX's /dev view)
#
# Each pair must pass as it does without valgrind, and each valgrind
# must report no error: no invalid access, no use of an uninitialised
# value, no uninitialised system call argument, no definitely lost block
# (--errors-for-leak-kinds=definite), apart from the program faults
# tests/data/valgrind.supp names (none whose stack is in softrnic).  A pair
# fails on valgrind's exit code (--error-exitcode) and on its log.
#
# Valgrind cannot run sanitizer builds (ASan's shadow memory, TSan's
# runtime): skipped (77) when scripts/test.sh's ASan pass runs
# (SRN_ASAN_PRELOAD) or SRN_BUILD is a sanitizer build, and when
# valgrind is not installed (CI installs it: .ci/run).
#
# Every run is bounded (timeout); under memcheck a program runs 20-50x
# slower, and each process pays 1-3 s to start, so the counts are small:
# 25-35 s in all on a busy 2-CPU machine, about 70 s next to two CPU
# hogs.  Exit 0 pass, 1 fail, 77 skip.
set -u
SOFTRNIC=$SRN_BUILD/bin/softrnic
SUPP=$SRN_SRC/tests/data/valgrind.supp
T=${SRN_VG_TIMEOUT:-90}

if [ -n "${SRN_ASAN_PRELOAD:-}" ] ||
    grep -qE '^SRN_(SANITIZE|TSAN):BOOL=ON' "$SRN_BUILD/CMakeCache.txt" 2>/dev/null ||
    ldd "$SRN_BUILD/lib/libibverbs.so.1" 2>/dev/null | grep -qE 'lib(asan|tsan)\.so'; then
    echo "SKIP: a sanitizer build: valgrind cannot run it"
    exit 77
fi
command -v valgrind >/dev/null || { echo "SKIP: valgrind not installed"; exit 77; }
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }

work=$(mktemp -d)
chmod 755 "$work"
srv=                       # the server running now (killed if we exit)
cleanup() {
    [ -n "$srv" ] && kill "$srv" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
fail=0

# memcheck: every error kind on, definitely lost blocks are errors, and
# the same options for every process.  --fair-sched: valgrind runs one
# thread at a time; a ticket lock makes the progress thread and a
# program thread spinning on a CQ take turns.
VG=(valgrind --tool=memcheck --error-exitcode=99 --track-origins=yes
    --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite
    --fair-sched=yes --num-callers=30 --suppressions="$SUPP")

# vg_ok LOG: valgrind ran and reported no error.  Prints the errors if not.
vg_ok() {
    local log=$1
    if ! grep -q '== Command: ' "$log" 2>/dev/null; then
        echo "  $(basename "$log"): valgrind did not start"
        return 1
    fi
    if grep -q 'ERROR SUMMARY: 0 errors' "$log"; then
        return 0
    fi
    echo "  --- $(basename "$log"): valgrind reported errors:"
    sed -n '/== Parent PID/,/ERROR SUMMARY/p' "$log" | grep -v '^--' | head -80
    return 1
}

# result NAME SRC CRC SOK CREGEX: both exited 0, the client printed CREGEX
# (and the server SOK, if given), and both valgrind logs are clean.
result() {
    local name=$1 src=$2 crc=$3 sok=$4 cok=$5 bad=0
    [ "$src" -eq 0 ] && [ "$crc" -eq 0 ] || bad=1
    grep -qE "$cok" "$work/$name.c.out" || bad=1
    [ -z "$sok" ] || grep -qE "$sok" "$work/$name.s.out" || bad=1
    vg_ok "$work/$name.s.vg" || bad=1
    vg_ok "$work/$name.c.vg" || bad=1
    if [ $bad -eq 0 ]; then
        echo "ok: $name (${SECONDS}s so far)"
        return 0
    fi
    echo "FAIL: $name (server rc=$src, client rc=$crc; 99 = valgrind errors)"
    echo "--- server:"; tail -15 "$work/$name.s.out"
    echo "--- client:"; tail -15 "$work/$name.c.out"
    fail=1
    return 1
}

# wait_for SECONDS PID CMD...: until CMD succeeds (0), the server PID
# exits (1), or SECONDS pass (1).
wait_for() {
    local n=$(($1 * 10)) pid=$2 i
    shift 2
    for ((i = 0; i < n; i++)); do
        "$@" && return 0
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
tcp_listens() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }
# The rdma_cm port a process of ours holds (RDMA_PS_TCP): the file our
# librdmacm writes at rdma_bind_addr (src/cm/ports.c).
cm_port_held() { compgen -G "/dev/shm/softrnic-cm-$(id -u)-*/$(printf '0106-%05u-' "$1")*" >/dev/null; }

# serve NAME READY CMD...: start CMD (on softrnic, under memcheck) as the
# server of pair NAME, every @PORT@ in it a fresh port, and wait (at most
# 40 s) until `READY port` holds.  A server that exits first with a clean
# log most likely found its port taken: another port, 3 tries at most.
# Sets port and srv (the server's pid); 1 (reported) if it never got ready.
serve() {
    local name=$1 ready=$2 try
    shift 2
    for ((try = 0; try < 3; try++)); do
        port=$((20000 + RANDOM % 12000))
        timeout -k 5 "$T" "$SOFTRNIC" run -- "${VG[@]}" --log-file="$work/$name.s.vg" \
            "${@//@PORT@/$port}" >"$work/$name.s.out" 2>&1 &
        srv=$!
        wait_for 40 "$srv" "$ready" "$port" && return 0
        kill "$srv" 2>/dev/null
        wait "$srv"
        srv=
        vg_ok "$work/$name.s.vg" || break
        echo "note: $name: the server did not get port $port ready (try $((try + 1)))"
        tail -3 "$work/$name.s.out"
    done
    echo "FAIL: $name: the server never got ready"
    cat "$work/$name.s.out"
    fail=1
    return 1
}

# client NAME CMD...: run the client of pair NAME to its end, then wait
# for the server; sets crc and src.
client() {
    local name=$1
    shift
    timeout -k 5 "$T" "$SOFTRNIC" run -- "${VG[@]}" --log-file="$work/$name.c.vg" \
        "$@" >"$work/$name.c.out" 2>&1
    crc=$?
    wait "$srv"
    src=$?
    srv=
}

# ibv_rc_pingpong pairs: Sends polled, and with -e through a completion
# channel.
for args in "-n 20" "-n 20 -e"; do
    name=rc_pingpong${args#-n 20}
    name=${name// /}
    # shellcheck disable=SC2086
    serve "$name" tcp_listens ibv_rc_pingpong -g 0 -p @PORT@ $args || continue
    # shellcheck disable=SC2086
    client "$name" ibv_rc_pingpong -g 0 -p "$port" $args 127.0.0.1
    result "$name" "$src" "$crc" "iters in" "iters in"
done

# rping: the server on an address of its own; the client connects once
# the server holds its rdma_cm port, which it listens on a moment later.
# The client prints what the server's RDMA Write put in its buffer.
if command -v rping >/dev/null; then
    addr=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
    if SOFTRNIC_DEVICES="name=softrnic0,addr=$addr" \
        serve rping cm_port_held rping -s -a "$addr" -p @PORT@; then
        sleep 1                   # from rdma_bind_addr to rdma_listen
        client rping rping -c -a "$addr" -p "$port" -v -C 3
        result rping "$src" "$crc" "" "ping data: rdma-ping-2: "
    fi
else
    echo "skip: rping (rdmacm-utils not installed)"
fi

# UCX: `softrnic run` gives ucx_perftest the /dev and /sys view UCX looks
# for (tests/test_ucx.sh); rc_verbs for the data, ud_verbs for wire-up.
# 64 KiB tagged messages: eager Sends and rendezvous RDMA Reads.
if ! command -v ucx_perftest >/dev/null; then
    echo "skip: ucx_perftest (ucx-utils not installed)"
elif ! "$SOFTRNIC" run -- test -c /dev/infiniband/uverbs0 2>/dev/null; then
    echo "skip: ucx_perftest (softrnic run cannot make UCX's /dev view here)"
else
    export UCX_NET_DEVICES=softrnic0:1 UCX_WARN_UNUSED_ENV_VARS=n \
        UCX_TLS=rc_verbs,ud_verbs:aux
    if serve ucx tcp_listens ucx_perftest -p @PORT@; then
        UCX_LOG_LEVEL=info client ucx ucx_perftest 127.0.0.1 -p "$port" \
            -t tag_bw -s 65536 -n 20
        if result ucx "$src" "$crc" "" "^Final:" &&
            ! grep -qF "tag(rc_verbs/softrnic0:1)" "$work/ucx.c.out"; then
            echo "FAIL: ucx: UCX did not use rc_verbs on softrnic0"
            grep ep_cfg "$work/ucx.c.out"
            fail=1
        fi
    fi
fi

echo "done in ${SECONDS}s"
exit $fail
