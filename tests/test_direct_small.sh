#!/bin/bash
# Same-host direct placement into regions under 64 KiB (issue 29), each
# mode of test_direct_small three ways: through a mapping of the target's
# pages (the default: small regions move onto a memfd too,
# core/mr_share.c), by cross-memory attach (SOFTRNIC_DIRECT_MAP=0) and on
# the rings (SOFTRNIC_DIRECT=0).  The same checks must pass on every path;
# the counters (SOFTRNIC_STATS=1) must say which one ran:
#   mapped  direct_mapped > 0 (data, dereg, many)
#   copy    direct_mapped = 0, direct_write > 0
#   off     no direct_* at all
#   many    mapped: some Writes by system call too (past the 128 moved
#           small spans, and past the 32 mappings a requester keeps
#           while they are all in use), direct_write > direct_mapped
set -u
bin="${SRN_BUILD:?}/bin/test_direct_small"
source "$SRN_SRC/tests/lib/direct.sh"
fail=0

for mode in data dereg many; do
    for way in mapped copy off; do
        d=1 map=1
        [ "$way" = off ] && d=0
        [ "$way" = copy ] && map=0
        log="$tmp/$mode.$way"
        if ! SOFTRNIC_STATS=1 SOFTRNIC_DIRECT=$d SOFTRNIC_DIRECT_MAP=$map \
            timeout -k 5 150 "$bin" "$mode" >"$log" 2>&1; then
            echo "FAIL: $mode ($way)"
            cat "$log"
            fail=1
            continue
        fi
        w=$(counter "$log" direct_write) r=$(counter "$log" direct_read)
        mp=$(counter "$log" direct_mapped)
        echo "ok: $mode ($way): $(grep '^ok' "$log" | head -1)" \
            "[direct_write $w, direct_read $r, direct_mapped $mp]"
        case $way in
        mapped) if [ "$mp" -lt 1 ]; then
                echo "FAIL: $mode: nothing went through a mapping of the target's pages"
                fail=1
            fi
            if [ "$mode" = many ] && [ "$w" -le "$mp" ]; then
                echo "FAIL: many: every Write was mapped: the limits did not hold"
                fail=1
            fi ;;
        copy) if [ "$mp" -ne 0 ] || [ "$w" -lt 1 ]; then
                echo "FAIL: $mode: SOFTRNIC_DIRECT_MAP=0 must copy by system call"
                fail=1
            fi ;;
        off) if [ $((w + r + mp)) -ne 0 ]; then
                echo "FAIL: $mode: direct placement ran with SOFTRNIC_DIRECT=0"
                fail=1
            fi ;;
        esac
    done
done
exit $fail
