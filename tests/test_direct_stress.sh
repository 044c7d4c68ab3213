#!/bin/bash
# test_direct_stress (4 processes, 100 000 mixed operations; see the top of
# test_direct_stress.c), then the counters (SOFTRNIC_STATS=1): the two
# same-host requesters placed Writes, Reads and atomics directly.
# SRN_DIRECT_STRESS_OPS overrides the count (the TSan pass uses fewer).
set -u
bin="${SRN_BUILD:?}/bin/test_direct_stress"
source "$SRN_SRC/tests/lib/direct.sh"
ops=${SRN_DIRECT_STRESS_OPS:-100000}
log="$tmp/log"
start=$(date +%s.%N)
if ! SOFTRNIC_STATS=1 timeout -k 5 280 "$bin" --ops "$ops" --timeout 250 >"$log" 2>&1; then
    echo "FAIL: test_direct_stress --ops $ops"
    grep -v '^softrnic ' "$log"
    grep -E 'direct_|retrans|rnr' "$log"
    exit 1
fi
w=$(counter "$log" direct_write) r=$(counter "$log" direct_read) a=$(counter "$log" direct_atomic)
grep '^ok' "$log"
echo "direct_write $w, direct_read $r, direct_atomic $a;" \
    "$(echo "$(date +%s.%N) - $start" | bc) s"
if [ "$w" -lt 100 ] || [ "$r" -lt 100 ] || [ "$a" -lt 100 ]; then
    echo "FAIL: the same-host requesters did not place directly"
    # Which step failed: no ring to the target (shm_*), or direct
    # placement tried and refused (direct_fallback), and any note the
    # devices printed when they opened.
    grep -v '^softrnic ' "$log" | grep -v '^ok' | head -20
    grep -E ' (shm_sent_pkts|shm_rcvd_pkts|direct_fallback|direct_fence_timeouts|sent_pkts) ' "$log"
    exit 1
fi
