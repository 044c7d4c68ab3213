#!/bin/bash
# The same-host shared-memory link (src/link/shm.h), seen from outside
# through each process's counters (SOFTRNIC_STATS=1):
#   1. two processes on one host exchange every packet through the rings
#      (shm_sent_pkts == sent_pkts on both sides);
#   2. a receiver that sleeps in ibv_get_cq_event (ibv_rc_pingpong -e) is
#      woken by doorbells (shm_doorbells > 0);
#   3. either side with SOFTRNIC_SHM=0 puts both on UDP, and it still works;
#   4. a bandwidth run through a small ring (SOFTRNIC_SHM_RING_KB) fills it:
#      the senders wait
#      (shm_ring_full > 0) and nothing is retransmitted (flow control, not
#      loss), and `softrnic perf` checks every byte;
#   5. a receiver killed with SIGKILL leaves a ring nobody drains: its
#      peer still ends with RETRY_EXC_ERR (bounded; the killed process
#      reaped or still a zombie), and the next device opened on the host
#      removes the dead process's inbox.
set -u
source "$SRN_SRC/tests/lib/pingpong.sh"
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# counter FILE NAME [max|min]: a counter from the SOFTRNIC_STATS lines of
# every process in FILE (largest, or smallest, value; 0 when absent).
counter() {
    awk -v n="$2" -v how="${3:-max}" '$1 == "softrnic" && $3 == n {
            if (!seen || (how == "max" ? $4 > v : $4 < v)) v = $4; seen = 1 }
        END { print (seen ? v : 0) + 0 }' "$1"
}

# pp NAME "SERVER ENV" "CLIENT ENV" ARGS...: ibv_rc_pingpong with stats,
# logs kept in $tmp/NAME.srv and $tmp/NAME.cli.  Returns the client's status.
pp() {
    local name=$1 senv=$2 cenv=$3
    shift 3
    local port=$((20000 + (RANDOM % 12000)))
    # shellcheck disable=SC2046,SC2086
    env SOFTRNIC_STATS=1 $senv $(srn_pp_env) timeout -k 5 60 \
        "$SOFTRNIC" run -- ibv_rc_pingpong -p "$port" -g 0 "$@" >"$tmp/$name.srv" 2>&1 &
    local spid=$!
    srn_pp_wait_listen "" "$port" || { echo "FAIL: $name: server never listened"; return 1; }
    # shellcheck disable=SC2046,SC2086
    env SOFTRNIC_STATS=1 $cenv $(srn_pp_env) timeout -k 5 60 \
        "$SOFTRNIC" run -- ibv_rc_pingpong -p "$port" -g 0 "$@" 127.0.0.1 >"$tmp/$name.cli" 2>&1
    local crc=$?
    wait "$spid"
    local src=$?
    cat "$tmp/$name.srv" "$tmp/$name.cli" >"$tmp/$name.all"
    if [ "$crc" -ne 0 ] || [ "$src" -ne 0 ]; then
        echo "FAIL: $name: ibv_rc_pingpong $* (server rc=$src, client rc=$crc)"
        cat "$tmp/$name.all"
        return 1
    fi
    return 0
}

# 1. Everything through the rings.
if pp both "" "" -n 2000 -s 4096; then
    for side in srv cli; do
        sent=$(counter "$tmp/both.$side" sent_pkts)
        shm=$(counter "$tmp/both.$side" shm_sent_pkts)
        rcvd=$(counter "$tmp/both.$side" shm_rcvd_pkts)
        if [ "$sent" -lt 2000 ] || [ "$shm" -ne "$sent" ] || [ "$rcvd" -lt 2000 ]; then
            echo "FAIL: $side sent $sent packets, $shm through the ring, received $rcvd from it"
            fail=1
        fi
    done
    [ $fail -eq 0 ] && echo "ok: 2000 x 4 KiB ping-pong, every packet through the rings"
else
    fail=1
fi

# 2. A sleeping receiver is rung.
if pp events "" "" -e -n 500; then
    bells=$(counter "$tmp/events.all" shm_doorbells)
    shm=$(counter "$tmp/events.all" shm_sent_pkts min)
    if [ "$bells" -gt 0 ] && [ "$shm" -gt 0 ]; then
        echo "ok: with -e (completion events) doorbells woke the sleeper ($bells)"
    else
        echo "FAIL: -e run: shm_doorbells $bells, shm_sent_pkts (min) $shm"
        fail=1
    fi
else
    fail=1
fi

# 3. One side without the shared-memory link: both on UDP.
for who in server client; do
    senv="" cenv=""
    [ $who = server ] && senv="SOFTRNIC_SHM=0" || cenv="SOFTRNIC_SHM=0"
    if pp "mixed_$who" "$senv" "$cenv" -n 500 -s 1024; then
        shm=$(counter "$tmp/mixed_$who.all" shm_sent_pkts)
        sent=$(counter "$tmp/mixed_$who.all" sent_pkts min)
        if [ "$shm" -eq 0 ] && [ "$sent" -ge 500 ]; then
            echo "ok: SOFTRNIC_SHM=0 on the $who: all $sent+ packets over UDP"
        else
            echo "FAIL: SOFTRNIC_SHM=0 on the $who: shm_sent_pkts $shm, sent_pkts $sent"
            fail=1
        fi
    else
        fail=1
    fi
done

# 4. Flow control: 300 MiB of 1 MiB Writes on 4 QPs, 128 in flight each, through
#    one ring of 128 KiB (SOFTRNIC_SHM_RING_KB; each QP may have 2 MiB in
#    flight, its 512-packet send window).  SOFTRNIC_DIRECT=0: Writes between
#    same-host peers are otherwise placed directly (tests/direct.cmake), and
#    this is about the rings.
if SOFTRNIC_DIRECT=0 SOFTRNIC_SHM_RING_KB=128 SOFTRNIC_STATS=1 timeout -k 5 120 "$SOFTRNIC" perf --loopback --timeout 60 -T bw \
    -s 1048576 -n 300 -q 4 -p $((20000 + (RANDOM % 12000))) >"$tmp/bw.all" 2>&1; then
    full=$(counter "$tmp/bw.all" shm_ring_full)
    rexmit=$(counter "$tmp/bw.all" retransmits)
    tmo=$(counter "$tmp/bw.all" local_ack_timeout_err)
    if [ "$full" -gt 0 ] && [ "$rexmit" -eq 0 ] && [ "$tmo" -eq 0 ]; then
        echo "ok: 300 x 1 MiB Writes on 4 QPs, 128 KiB ring: full $full times, nothing retransmitted"
    else
        echo "FAIL: bw run: shm_ring_full $full, retransmits $rexmit, ack timeouts $tmo"
        cat "$tmp/bw.all"
        fail=1
    fi
else
    echo "FAIL: softrnic perf bw over the rings failed"
    cat "$tmp/bw.all"
    fail=1
fi

# 5. A receiver killed mid-run (test_shm_peer_killed: 64 KiB Writes streamed
#    at a child that is killed; reaped at once, or left a zombie).
# owner_of FILE: the pid in an inbox header (struct inbox_hdr in shm.c:
# magic, layout, nslots, ring_bytes, netns, then owner_pid at byte 32).
owner_of() { od -An -t d4 -j 32 -N 4 "$1" 2>/dev/null | tr -d ' '; }
#    The zombie run uses 128 KiB rings: the sender is waiting on a full one
#    when its owner dies, and must notice (it checks a full ring's owner).
for mode in reap zombie; do
    ring=4096
    [ $mode = zombie ] && ring=128
    # The rings' own recovery (direct placement has its run in test_direct.sh).
    env SOFTRNIC_DIRECT=0 SOFTRNIC_STATS=1 SOFTRNIC_SHM_RING_KB=$ring timeout -k 5 60 \
        "$SRN_BUILD/bin/test_shm_peer_killed" "$mode" >"$tmp/kill.out" 2>&1
    rc=$?
    cpid=$(sed -n 's/^child pid \([0-9]*\)$/\1/p' "$tmp/kill.out")
    shm=$(counter "$tmp/kill.out" shm_sent_pkts)
    if [ "$rc" -eq 0 ] && [ "$shm" -gt 0 ]; then
        echo "ok: peer killed ($mode, ${ring} KiB rings, full $(counter "$tmp/kill.out" shm_ring_full) times):" \
            "$(grep '^ok' "$tmp/kill.out" | cut -d: -f2-)"
    else
        echo "FAIL: peer killed ($mode): rc=$rc, shm_sent_pkts $shm"
        grep -v '^softrnic ' "$tmp/kill.out"
        fail=1
    fi
    # The dead child's inbox is removed by the next device that opens.
    # shellcheck disable=SC2046
    env $(srn_pp_env) "$SOFTRNIC" run -- ibv_devinfo >/dev/null 2>&1
    for f in /dev/shm/softrnic-link-*; do
        if [ -n "$cpid" ] && [ -e "$f" ] && [ "$(owner_of "$f")" = "$cpid" ]; then
            echo "FAIL: the killed child's inbox $f is still in /dev/shm"
            fail=1
        fi
    done
done
exit $fail
