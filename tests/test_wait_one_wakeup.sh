#!/bin/bash
# One wake-up per completion event (engine/wait.c): Debian's unmodified
# ibv_rc_pingpong -e sleeps in ibv_get_cq_event, and that thread must serve
# the NIC itself: the packet that ends its sleep wakes it and nothing else,
# not the progress thread first and the application second.
#
#   server (127.0.0.N)  <-- rings, or UDP with SOFTRNIC_SHM=0 -->  client (127.0.0.M)
#
# Each side's counters (SOFTRNIC_STATS=1), ITERS round trips of 4 KiB
# messages (-m 4096: one packet each, so the count does not depend on
# GSO batching a message's packets):
#   wake-ups (progress_thread_wakeups + event_waiter_wakeups)
#       <= 1.1 * completion events + 50: each wake-up hands the program an
#       event, never two wake-ups (progress thread, then application) for
#       one event, none for nothing;
#   progress_thread_wakeups <= ITERS / 10 + 50: the progress thread
#       stood aside (it woke up to 65 times beside CPU hogs, for timers
#       and held ACKs; about once per event if it served the socket);
#   event_waits_serving_nic >= 0.5 * ITERS: the blocked calls served the
#       NIC themselves (some find the packet already there and need not
#       sleep: event_waiter_wakeups alone fell to 0.498 * ITERS beside
#       CPU hogs);
#   comp_events_in_app_thread >= 0.9 * completion events.
# Wake-ups per iteration are printed, not bounded: each hop is the peer's
# held ACK, then its Send, one burst, but the ACK leaves alone when the
# reply is not posted within its hold (20 us: a loaded machine, the ASan
# build), and over UDP the kernel delivers a burst datagram by datagram
# where the rings publish it at once: the sleeper may wake on the ACK
# alone, whose send completion is an event the program returns for.
# Measured (wake-ups / iteration): rings 0.5 to 1.28 (1.28 under ASan),
# UDP 1.01 to 1.56, from run to run: a race, not a count.
# Counts only, no clocks.  Voluntary context switches of each process (all
# its threads: the parent's rusage of the child) are printed, not checked:
# the scheduler, not softrnic, owns that number.
#
# The test's environment picks the link: SOFTRNIC_SHM=0 (tests/wait.cmake)
# is the UDP run, otherwise the rings; both sides inherit it.
set -u
source "$SRN_SRC/tests/lib/pingpong.sh"
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }

ITERS=${SRN_WAIT_ITERS:-2000}
link=rings
[ "${SOFTRNIC_SHM:-}" = 0 ] && link=udp
# Whatever else would change the path or the wake-ups (faults and traces
# force UDP, a spin time changes the progress thread's sleeps, no GSO
# splits bursts).
unset SOFTRNIC_DEVICES SOFTRNIC_CONFIG SOFTRNIC_FAULTS SOFTRNIC_PCAP SOFTRNIC_SPIN_US \
    SOFTRNIC_NO_GSO
# Each side its own 127.0.0.N: on the host's shared address the socket
# also brings other processes' packets that steering sent astray while
# they join and leave (forwarded on), wake-ups that are not this pair's.
export SOFTRNIC_DEVICES=name=softrnic0,addr=auto,share=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# with_rusage FILE CMD...: run CMD; write "voluntary involuntary" context
# switches of it and all its descendants' threads (what the kernel sums
# into the waiting parent, so nothing has to be sampled before exit).
with_rusage() {
    local out=$1
    shift
    if ! command -v python3 >/dev/null; then
        echo "- -" >"$out"
        "$@"
        return
    fi
    python3 -c 'import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
u = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as f:
    f.write("%d %d\n" % (u.ru_nvcsw, u.ru_nivcsw))
sys.exit(rc if rc >= 0 else 128 - rc)' "$out" "$@"
}

# counter FILE NAME: a SOFTRNIC_STATS counter of the one device in FILE.
counter() {
    awk -v n="$2" '$1 == "softrnic" && $3 == n { v += $4 } END { print v + 0 }' "$1"
}

# pp SIDE [SERVER-ADDR]: one ibv_rc_pingpong -e with stats and rusage.
pp() {
    local side=$1
    shift
    # shellcheck disable=SC2046
    with_rusage "$tmp/$side.csw" env SOFTRNIC_STATS=1 $(srn_pp_env) \
        timeout -k 5 "$SRN_PP_TIMEOUT" "$SOFTRNIC" run -- \
        ibv_rc_pingpong -g 0 -e -n "$ITERS" -s 4096 -m 4096 -p "$port" "$@" >"$tmp/$side.log" 2>&1
}

# The server on a free port (as tests/lib/pingpong.sh: bounded retries
# when another test holds the port).
for ((try = 0; try < 5; try++)); do
    port=$((20000 + (RANDOM % 12000)))
    pp srv &
    spid=$!
    srn_pp_wait_listen "" "$port" && break
    kill "$spid" 2>/dev/null   # timeout (60 s) ends what it started
    wait "$spid"
    grep -q "Couldn't listen" "$tmp/srv.log" && continue
    echo "FAIL: server never listened on $port"
    cat "$tmp/srv.log"
    exit 1
done
[ "$try" -lt 5 ] || { echo "FAIL: no free port in 5 tries"; exit 1; }
pp cli 127.0.0.1
crc=$?
wait "$spid"
src=$?
if [ "$crc" -ne 0 ] || [ "$src" -ne 0 ] || ! grep -q "iters in" "$tmp/srv.log" ||
    ! grep -q "iters in" "$tmp/cli.log"; then
    echo "FAIL: ibv_rc_pingpong -e over $link (server rc=$src, client rc=$crc)"
    echo "--- server:"; cat "$tmp/srv.log"
    echo "--- client:"; cat "$tmp/cli.log"
    exit 1
fi

fail=0
# check STATUS MESSAGE: the status of the test just before; fails the side.
check() {
    [ "$1" -eq 0 ] || { echo "FAIL: $side: $2"; fail=1; }
}
for side in srv cli; do
    f=$tmp/$side.log
    bg=$(counter "$f" progress_thread_wakeups)
    ww=$(counter "$f" event_waiter_wakeups)
    serving=$(counter "$f" event_waits_serving_nic)
    by_bg=$(counter "$f" comp_events_by_progress_thread)
    by_app=$(counter "$f" comp_events_in_app_thread)
    shm=$(counter "$f" shm_sent_pkts)
    read -r vcsw icsw <"$tmp/$side.csw"
    events=$((by_bg + by_app))
    wake=$((bg + ww))
    echo "$side ($link): $ITERS iters, progress_thread_wakeups $bg, event_waiter_wakeups $ww" \
        "($(awk -v w="$wake" -v n="$ITERS" 'BEGIN { printf "%.2f", w / n }') wake-ups in all per iteration)," \
        "event_waits_serving_nic $serving, events $events ($by_app in app threads)," \
        "shm_sent_pkts $shm, ctxt switches voluntary $vcsw involuntary $icsw"
    [ "$wake" -le $((events + events / 10 + 50)) ]
    check $? "$wake wake-ups for $events completion events: some events took two"
    [ "$bg" -le $((ITERS / 10 + 50)) ]
    check $? "the progress thread woke $bg times: it did not stand aside"
    [ "$serving" -ge $((ITERS / 2)) ]
    check $? "only $serving blocked calls served the NIC"
    [ "$events" -gt 0 ] && [ $((by_app * 10)) -ge $((events * 9)) ]
    check $? "$by_app of $events completion events made in the application's threads"
    # The link the run was meant to test.
    if { [ $link = rings ] && [ "$shm" -eq 0 ]; } || { [ $link = udp ] && [ "$shm" -ne 0 ]; }; then
        echo "FAIL: $side: shm_sent_pkts $shm on the $link run"
        fail=1
    fi
done
[ $fail -eq 0 ] && echo "ok: over the $link, one wake-up per completion event, made by the waiter"
exit $fail
