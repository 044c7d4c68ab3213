#!/bin/bash
# A target SIGKILLed mid-stream stops answering at once (issue 27 item 4):
# test_dead_target's 20 runs on each same-host path, chosen here by the
# environment, with the counters (SOFTRNIC_STATS=1, the requesters') saying
# the path ran:
#   mapped  the copy through a mapping of the target's memfd (its 1 MiB
#           region moved there at registration): direct_mapped > 0
#   copy    process_vm_writev (SOFTRNIC_DIRECT_MAP=0): direct_write > 0,
#           direct_mapped 0
#   rings   SOFTRNIC_DIRECT=0: direct_write 0
# Each must show 0 successes for Writes posted more than 1 ms after the
# death, and end in RETRY_EXC_ERR (test_dead_target.c says why the rule
# cannot fail spuriously on a busy machine).  SRN_DEAD_RUNS sets the runs.
set -u
bin="${SRN_BUILD:?}/bin/test_dead_target"
source "$SRN_SRC/tests/lib/direct.sh"
fail=0
runs=${SRN_DEAD_RUNS:-20}
for way in mapped copy rings; do
    d=1 map=1
    [ "$way" = copy ] && map=0
    [ "$way" = rings ] && d=0
    log="$tmp/$way"
    if ! SOFTRNIC_STATS=1 SOFTRNIC_DIRECT=$d SOFTRNIC_DIRECT_MAP=$map \
        timeout -k 5 200 "$bin" "$runs" >"$log" 2>&1; then
        echo "FAIL: $way"
        grep -v '^softrnic ' "$log"
        fail=1
        continue
    fi
    w=$(counter "$log" direct_write) mp=$(counter "$log" direct_mapped)
    echo "$way: $(grep -E '^(ok|FAIL)' "$log") [direct_write $w, direct_mapped $mp]"
    case $way in
    mapped) [ "$mp" -gt 0 ] || { echo "FAIL: mapped: no copy went through a mapping"; fail=1; } ;;
    copy) { [ "$w" -gt 0 ] && [ "$mp" -eq 0 ]; } ||
        { echo "FAIL: copy: not by process_vm_writev alone"; fail=1; } ;;
    rings) [ "$w" -eq 0 ] || { echo "FAIL: rings: direct placement ran"; fail=1; } ;;
    esac
done
exit $fail
