#!/bin/bash
# Same-host direct atomics (transport/direct.c, core/mr_share.h): each
# mode of test_direct_atomic with SOFTRNIC_DIRECT on (the default) and
# off; the same semantic checks pass on both paths, and the counters
# (SOFTRNIC_STATS=1) say which path carried the atomics:
#   exact          direct_atomic > 0 on (the file-backed word's take the
#                  rings, so direct_fallback > 0 too); 0 off
#   rereg          direct_fallback > 0 on: after the rereg the atomics
#                  take the rings (the region no longer shares its pages)
#   errors, dereg, unmap: the semantic check alone
set -u
bin="${SRN_BUILD:?}/bin/test_direct_atomic"
source "$SRN_SRC/tests/lib/direct.sh"
fail=0

for mode in exact errors dereg unmap rereg; do
    for d in 1 0; do
        log="$tmp/$mode.$d"
        if ! SOFTRNIC_STATS=1 SOFTRNIC_DIRECT=$d timeout -k 5 200 "$bin" "$mode" >"$log" 2>&1; then
            echo "FAIL: $mode (SOFTRNIC_DIRECT=$d)"
            cat "$log"
            fail=1
            continue
        fi
        a=$(counter "$log" direct_atomic) fb=$(counter "$log" direct_fallback)
        echo "ok: $mode (SOFTRNIC_DIRECT=$d): $(grep '^ok' "$log" | head -1)" \
            "[direct_atomic $a, direct_fallback $fb]"
        if [ "$d" = 0 ] && [ $((a + fb)) -ne 0 ]; then
            echo "FAIL: $mode: direct placement ran with SOFTRNIC_DIRECT=0"
            fail=1
        fi
        if [ "$d" = 1 ] && [ "$mode" != errors ] && [ "$a" -lt 500 ]; then
            echo "FAIL: $mode: the atomics did not go direct (direct_atomic $a)"
            fail=1
        fi
        if [ "$d" = 1 ] && [ "$mode" = rereg ] && [ "$fb" -lt 1 ]; then
            echo "FAIL: rereg: the atomics after the rereg did not take the rings"
            fail=1
        fi
        # The file-backed word's 4 checks run with nothing outstanding.
        if [ "$d" = 1 ] && [ "$mode" = exact ] && [ "$fb" -lt 4 ]; then
            echo "FAIL: exact: the file-backed word's atomics should take the rings" \
                "(direct_fallback $fb)"
            fail=1
        fi
    done
done
exit $fail
