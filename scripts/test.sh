#!/bin/bash
# scripts/test.sh - build softrnic and run the whole test suite twice:
#
#   build/       RelWithDebInfo, warnings are errors
#   build-asan/  the same with AddressSanitizer + UndefinedBehaviorSanitizer
#
# Both passes run even if the first has failures, so one run reports
# everything; the exit status is non-zero if either failed.  A build error
# stops at once.
#
# Unmodified Debian binaries (ibv_devinfo, ibv_rc_pingpong, ...) are not
# instrumented, so when they load the instrumented libibverbs.so.1 from
# build-asan/lib the ASan runtime must be loaded first: the ASan pass
# exports SRN_ASAN_PRELOAD (the path of libasan.so) and script tests put it
# in LD_PRELOAD for such binaries.
#
# A third, smaller pass builds build-tsan/ with ThreadSanitizer (see below).
# After the first pass, scripts/check_layers.py checks its objects for
# calls and includes that run up the layers.
#
# Environment: JOBS (default 2), SRN_SKIP_ASAN=1 / SRN_SKIP_TSAN=1 to skip
# those passes, SRN_CTEST_BUDGET seconds allowed per ctest pass (default 600),
# BUILD_DIR / ASAN_BUILD_DIR to build elsewhere than build/ and
# build-asan/, CC as usual.
set -euo pipefail
cd "$(dirname "$0")/.."

JOBS=${JOBS:-2}
BUILD_DIR=${BUILD_DIR:-build}
ASAN_BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}
BUDGET=${SRN_CTEST_BUDGET:-600}
CC=${CC:-gcc}
export CC

# run_pass DIR CMAKE_ARGS...: configure, build, test; returns ctest's status.
run_pass() {
	local dir=$1 start=$SECONDS rc=0
	shift
	echo "=== $dir: configure and build"
	# `exit`, not set -e: errexit is off in a function called from `||`.
	cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSRN_WERROR=ON "$@" ||
		exit 1
	cmake --build "$dir" -j"$JOBS" || exit 1
	echo "=== $dir: ctest (budget ${BUDGET}s)"
	timeout -k 10 "$BUDGET" ctest --test-dir "$dir" --output-on-failure \
		-j"$JOBS" --timeout 300 || rc=$?
	[ "$rc" -eq 124 ] && echo "=== $dir: ctest exceeded its ${BUDGET}s budget"
	echo "=== $dir: done in $((SECONDS - start))s, status $rc"
	return "$rc"
}

status=0
# Structure checks: no raw exit from the NIC lock outside the engine.
./scripts/check_unlock.sh || status=1
run_pass "$BUILD_DIR" || status=1

# No layer of src/ may use one above it (DESIGN.md, "Layers"): includes
# from the text, calls from the objects this build just made.
echo "=== $BUILD_DIR: layer check"
python3 scripts/check_layers.py --build "$BUILD_DIR" || status=1

if [ "${SRN_SKIP_ASAN:-0}" != 1 ]; then
	SRN_ASAN_PRELOAD=$("$CC" -print-file-name=libasan.so)
	if [ ! -e "$SRN_ASAN_PRELOAD" ]; then
		echo "error: $CC has no libasan.so (got '$SRN_ASAN_PRELOAD')" >&2
		exit 1
	fi
	export SRN_ASAN_PRELOAD
	export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
	export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
	run_pass "$ASAN_BUILD_DIR" -DSRN_SANITIZE=ON || status=1
fi

# ThreadSanitizer: the progress thread against application threads, on
# the tests whose memory checks synchronise through verbs (a completion
# polled under the NIC lock).  Tests that look at memory a peer wrote after
# an out-of-band barrier (passive targets, RDMA Write targets) are races by
# design for TSan, as they would be against a hardware NIC.  The selected
# tests carry the ctest label tsan (tests/<area>.cmake).
if [ "${SRN_SKIP_TSAN:-0}" != 1 ]; then
	unset SRN_ASAN_PRELOAD ASAN_OPTIONS UBSAN_OPTIONS
	export TSAN_OPTIONS=halt_on_error=1
	echo "=== build-tsan: configure and build"
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSRN_WERROR=ON -DSRN_TSAN=ON ||
		exit 1
	cmake --build build-tsan -j"$JOBS" || exit 1
	echo "=== build-tsan: ctest (label tsan)"
	timeout -k 10 "$BUDGET" ctest --test-dir build-tsan --output-on-failure -j"$JOBS" \
		--timeout 300 -L tsan ||
		status=1
fi

[ "$status" -eq 0 ] && echo "=== all tests passed" || echo "=== FAILURES (see above)"
exit "$status"
