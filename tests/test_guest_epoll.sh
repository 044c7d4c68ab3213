#!/bin/bash
# test_guest_epoll.sh - the progress thread on a host where epoll_pwait2
# fails (test_guest.c's epoll_* modes, through epoll_fail_preload.so):
# with ENOSYS it falls back to epoll_wait and says nothing on stderr;
# with EBADF it stops, says so on stderr and sends IBV_EVENT_DEVICE_FATAL.
set -u
: "${SRN_BUILD:?SRN_BUILD must point at the build directory}"
LIB="$SRN_BUILD/lib/libepoll_fail_preload.so"
[ -e "$LIB" ] || { echo "FAIL: $LIB not built"; exit 1; }
unset SOFTRNIC_DEVICES SOFTRNIC_CONFIG SOFTRNIC_PCAP SOFTRNIC_FAULTS SOFTRNIC_LOG
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Under ASan the sanitizer runtime has to come first (scripts/test.sh).
preload="${SRN_ASAN_PRELOAD:+$SRN_ASAN_PRELOAD:}$LIB"
bad=0

# SOFTRNIC_FDWAIT=0: the program's poll on its channel would serve the
# device itself (verbs/verbs_fdwait.c); this run is about the progress
# thread's fallback when epoll fails.
EPOLL_FAIL_ERRNO=ENOSYS SOFTRNIC_STATS=1 SOFTRNIC_FDWAIT=0 LD_PRELOAD="$preload" timeout -k 5 60 \
	"$SRN_BUILD/bin/test_guest" epoll_enosys >"$tmp/enosys.out" 2>"$tmp/enosys.err"
rc=$?
cat "$tmp/enosys.out" "$tmp/enosys.err"
[ "$rc" -eq 0 ] || { echo "FAIL: epoll_enosys exited $rc"; bad=1; }
grep -q fatal "$tmp/enosys.err" && { echo "FAIL: a fatal line with a working fallback"; bad=1; }
# The program slept: the progress thread made its one completion event.
grep -Eq 'comp_events_by_progress_thread +1$' "$tmp/enosys.err" ||
	{ echo "FAIL: the event was not counted as the progress thread's"; bad=1; }

EPOLL_FAIL_ERRNO=EBADF LD_PRELOAD="$preload" timeout -k 5 60 \
	"$SRN_BUILD/bin/test_guest" epoll_fatal >"$tmp/fatal.out" 2>"$tmp/fatal.err"
rc=$?
cat "$tmp/fatal.out" "$tmp/fatal.err"
[ "$rc" -eq 0 ] || { echo "FAIL: epoll_fatal exited $rc"; bad=1; }
grep -q "fatal: the progress thread stopped (epoll_wait: Bad file descriptor)" "$tmp/fatal.err" ||
	{ echo "FAIL: no fatal line on stderr"; bad=1; }

[ "$bad" -eq 0 ] && echo "PASS"
exit "$bad"
