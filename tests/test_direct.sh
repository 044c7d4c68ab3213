#!/bin/bash
# Same-host direct placement (transport/direct.c), each mode of
# test_direct three ways: direct through a mapping of the target's pages
# (the default: its regions of 64 KiB and more are shared, core/mr_share.h),
# direct by cross-memory attach (SOFTRNIC_DIRECT_MAP=0) and off
# (SOFTRNIC_DIRECT=0).  The same semantic checks must pass on every path,
# and the counters (SOFTRNIC_STATS=1) must say which path carried the
# Writes and Reads:
#   data    direct_write and direct_read > 0 direct; 0 off
#   (all)   direct_mapped > 0 mapped (data, imm, dereg, unmap); 0 copy
#   errors  every refused request took the rings (direct_fallback > 0 on)
#   imm     the Write-with-immediate data went direct (direct_write > 0 on)
#   qp_err, dereg, killed, order, unmap, reopen: the semantic check alone
set -u
bin="${SRN_BUILD:?}/bin/test_direct"
source "$SRN_SRC/tests/lib/direct.sh"
fail=0

for mode in data errors qp_err dereg killed order imm unmap last_byte stale_span reopen; do
    for way in mapped copy off; do
        d=1 map=1
        [ "$way" = off ] && d=0
        [ "$way" = copy ] && map=0
        # process_vm_writev's copy is the kernel's (one rep movsb on x86),
        # whose stores are not architecturally in order: last_byte checks
        # only the paths that order the last bytes themselves.
        [ "$mode" = last_byte ] && [ "$way" = copy ] && continue
        log="$tmp/$mode.$way"
        if ! SOFTRNIC_STATS=1 SOFTRNIC_DIRECT=$d SOFTRNIC_DIRECT_MAP=$map \
            timeout -k 5 150 "$bin" "$mode" >"$log" 2>&1; then
            echo "FAIL: $mode ($way)"
            cat "$log"
            fail=1
            continue
        fi
        w=$(counter "$log" direct_write) r=$(counter "$log" direct_read)
        fb=$(counter "$log" direct_fallback) mp=$(counter "$log" direct_mapped)
        echo "ok: $mode ($way): $(grep '^ok' "$log" | head -1)" \
            "[direct_write $w, direct_read $r, direct_mapped $mp, direct_fallback $fb]"
        if [ "$way" = copy ] && [ "$mp" -ne 0 ]; then
            echo "FAIL: $mode: a copy went through a mapping with SOFTRNIC_DIRECT_MAP=0"
            fail=1
        fi
        case "$mode" in data|imm|dereg|unmap|last_byte)
            if [ "$way" = mapped ] && [ "$mp" -lt 1 ]; then
                echo "FAIL: $mode: nothing was copied through a mapping of the target's pages"
                fail=1
            fi ;;
        esac
        if [ "$d" = 0 ] && [ $((w + r + fb)) -ne 0 ]; then
            echo "FAIL: $mode: direct placement ran with SOFTRNIC_DIRECT=0"
            fail=1
        fi
        if [ "$d" = 1 ] && [ "$mode" = data ] && { [ "$w" -lt 1000 ] || [ "$r" -lt 100 ]; }; then
            echo "FAIL: data: Writes/Reads did not go direct (write $w, read $r)"
            cat "$log"
            fail=1
        fi
        if [ "$d" = 1 ] && [ "$mode" = errors ] && { [ "$fb" -lt 5 ] || [ "$w" -lt 4 ]; }; then
            echo "FAIL: errors: expected 4 direct Writes and 5 fallbacks (write $w, fallback $fb)"
            fail=1
        fi
        if [ "$d" = 1 ] && [ "$mode" = imm ] && [ "$w" -lt 20 ]; then
            echo "FAIL: imm: the Write-with-immediate data did not go direct (write $w)"
            fail=1
        fi
        if [ "$d" = 1 ] && { [ "$mode" = dereg ] || [ "$mode" = unmap ]; } && [ "$w" -lt 1 ]; then
            echo "FAIL: $mode: the stream never went direct"
            fail=1
        fi
    done
done
# The target killed while Writes stream at it (test_shm_peer_killed, run
# by test_shm_link.sh on the rings): the direct copies fail, the Writes
# fall back to the rings, the ring's dead owner is noticed, and the
# requester still ends in RETRY_EXC_ERR in bounded time.
log="$tmp/target_killed"
if SOFTRNIC_STATS=1 timeout -k 5 60 "$SRN_BUILD/bin/test_shm_peer_killed" reap >"$log" 2>&1 &&
    [ "$(counter "$log" direct_write)" -gt 0 ]; then
    echo "ok: target killed mid-stream: $(grep '^ok' "$log" | cut -d: -f2-)" \
        "[direct_write $(counter "$log" direct_write)]"
else
    echo "FAIL: target killed mid-stream (direct_write $(counter "$log" direct_write))"
    grep -v '^softrnic ' "$log"
    fail=1
fi
exit $fail
