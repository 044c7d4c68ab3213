#!/bin/bash
# test_ibv_devices.sh - Debian's unmodified ibv_devices, run through
# `softrnic run`, lists exactly one device, softrnic0, with a non-zero
# node GUID.  The host has no RDMA devices of its own (the system
# libibverbs fails with ENOSYS), so any device listed comes from softrnic.
#
# Under ASan (scripts/test.sh exports SRN_ASAN_PRELOAD) the uninstrumented
# ibv_devices needs the ASan runtime preloaded to load our instrumented
# library.
set -u
: "${SRN_BUILD:?SRN_BUILD must point at the build directory}"
SOFTRNIC="$SRN_BUILD/bin/softrnic"

fail() { echo "FAIL: $*"; exit 1; }

command -v ibv_devices >/dev/null ||
	{ echo "SKIP: ibv_devices not installed (ibverbs-utils)"; exit 77; }
[ -x "$SOFTRNIC" ] || fail "$SOFTRNIC not built"
unset SOFTRNIC_DEVICES SOFTRNIC_PCAP   # the default device only

preload=()
[ -n "${SRN_ASAN_PRELOAD:-}" ] && preload=(LD_PRELOAD="$SRN_ASAN_PRELOAD")

# stderr goes to the log, not into the parsed output.
out=$(timeout 60 env "${preload[@]}" "$SOFTRNIC" run -- ibv_devices)
rc=$?
echo "$out"
[ "$rc" -eq 0 ] || fail "ibv_devices exited $rc"

# Output: two header lines ("device / node GUID", dashes), then one line
# per device: name and 16 hex digits.
devices=$(awk 'NR > 2 && NF' <<<"$out")
[ "$(wc -l <<<"$devices")" -eq 1 ] || fail "expected exactly one device"
read -r name guid <<<"$devices"
[ "$name" = softrnic0 ] || fail "device is '$name', expected softrnic0"
[[ "$guid" =~ ^[0-9a-f]{16}$ ]] || fail "GUID '$guid' is not 16 hex digits"
[[ "$guid" =~ ^0+$ ]] && fail "GUID is zero"
echo "PASS: ibv_devices lists softrnic0 with GUID $guid"
exit 0
