#!/bin/bash
# test_utils_start.sh - unmodified verbs binaries load softrnic's
# libibverbs.so.1 with immediate binding and start.
#
#  1. Every /usr/bin program of Debian's ibverbs-utils, under
#     LD_LIBRARY_PATH=$SRN_BUILD/lib LD_BIND_NOW=1:
#       - ldd resolves libibverbs.so.1 to ours, and `ldd -r` reports no
#         undefined symbol and no missing version;
#       - it runs (--help, plus a real run for the ones that exit by
#         themselves) within 10 s, without a crash signal, and its stderr
#         has no "symbol lookup error", "undefined symbol" or
#         "version `IBVERBS_...' not found".
#  2. A program linked with Debian's provider libraries (libmlx5.so.1,
#     libefa.so.1, and libmlx4/libmana when present), whose load-time
#     constructors call verbs_register_driver_34, loads against ours, runs
#     ibv_get_device_list, behaves exactly as the same program without the
#     providers, and is not mistaken for an mlx5 device.
#
# Exit 0 pass, 1 fail, 77 skip (utilities or providers not installed).
set -u

build=${SRN_BUILD:?SRN_BUILD not set}
libdir=$build/lib
ours=$libdir/libibverbs.so.1
if [ ! -e "$ours" ]; then
	echo "FAIL: $ours was not built"
	exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# An instrumented build needs its sanitizer runtime loaded first in
# programs that were not built with it; the utilities also leak on exit.
preload=$(ldd "$ours" 2>/dev/null | awk '/lib(asan|tsan)\.so/ { print $3 }' | paste -sd: -)

run_env() {
	env LD_LIBRARY_PATH="$libdir" LD_BIND_NOW=1 LD_PRELOAD="$preload" \
		ASAN_OPTIONS=detect_leaks=0 "$@"
}

fail=0
bad_patterns='symbol lookup error|undefined symbol|version `[A-Z_0-9.]*'"'"' not found|relocation error|cannot open shared object'

# ldd checks for one binary: ours is the libibverbs it gets, nothing unresolved.
check_ldd() {
	local bin=$1 out
	out=$(run_env ldd -r "$bin" 2>&1)
	if ! grep -qF "libibverbs.so.1 => $ours" <<<"$out" &&
	   ! grep -qF "libibverbs.so.1 => $(readlink -f "$ours")" <<<"$out"; then
		echo "FAIL: $bin does not resolve libibverbs.so.1 to $ours:"
		grep libibverbs <<<"$out" | sed 's/^/  /'
		return 1
	fi
	if grep -E "$bad_patterns" <<<"$out"; then
		echo "FAIL: ldd -r $bin reports unresolved symbols (above)"
		return 1
	fi
	return 0
}

# One bounded run; any exit status is fine except a timeout or a crash
# (the utilities themselves exit with 255 on plain errors, so only the
# crash signals count: ILL, ABRT, BUS, FPE, SEGV), and no sanitizer report.
check_run() {
	local rc
	run_env timeout 10 "$@" >"$work/out" 2>"$work/err" </dev/null
	rc=$?
	if [ $rc -eq 124 ]; then
		echo "FAIL: '$*' did not exit within 10 s"
		return 1
	fi
	case $rc in
	132 | 134 | 135 | 136 | 139)
		echo "FAIL: '$*' died with signal $((rc - 128))"
		sed 's/^/  /' "$work/err" | head -20
		return 1 ;;
	esac
	if grep -E 'AddressSanitizer|ThreadSanitizer|runtime error:' "$work/err"; then
		echo "FAIL: '$*' sanitizer report (above)"
		return 1
	fi
	if grep -E "$bad_patterns" "$work/err"; then
		echo "FAIL: '$*' could not bind (above)"
		return 1
	fi
	echo "ok: '$*' (exit $rc)"
	return 0
}

utils=$(dpkg -L ibverbs-utils 2>/dev/null | grep '^/usr/bin/' | sort)
if [ -z "$utils" ]; then
	echo "SKIP: ibverbs-utils is not installed"
	exit 77
fi

for bin in $utils; do
	[ -x "$bin" ] || continue
	check_ldd "$bin" || fail=1
	check_run "$bin" --help || fail=1
	case ${bin##*/} in
	ibv_devices)
		check_run "$bin" || fail=1 ;;
	ibv_devinfo)
		check_run "$bin" -l || fail=1
		check_run "$bin" || fail=1 ;;
	esac
done

# ---- provider libraries -------------------------------------------------

# A provider is present when the linker can find it (gcc's search path
# is the one the link below uses; ldconfig may not be on a user's PATH).
providers=
have_mlx5=0
if command -v gcc >/dev/null; then
	for p in libmlx5.so.1 libefa.so.1 libmlx4.so.1 libmana.so.1; do
		if [ "$(gcc -print-file-name=$p)" != "$p" ]; then
			providers="$providers -l:$p"
			[ $p = libmlx5.so.1 ] && have_mlx5=1
		fi
	done
fi
if ! grep -qE 'libmlx5|libefa' <<<"$providers"; then
	echo "SKIP: provider libraries (ibverbs-providers) or gcc not available"
	[ $fail -ne 0 ] && exit 1
	exit 77
fi

cat >"$work/prov.c" <<'EOF'
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>
#if HAVE_MLX5
#include <infiniband/mlx5dv.h>
#endif

int main(void)
{
	struct ibv_device **list;
	int n = -1;

	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list) {
		printf("list: NULL errno %s\n", strerror(errno));
		return 0;
	}
	printf("list: %d\n", n);
	for (int i = 0; i < n; i++) {
		printf("device: %s\n", ibv_get_device_name(list[i]));
#if HAVE_MLX5
		/* Direct-verbs programs ask this of every device. */
		if (mlx5dv_is_supported(list[i])) {
			printf("taken for an mlx5 device\n");
			return 3;
		}
#endif
	}
	ibv_free_device_list(list);
	return 0;
}
EOF
# --no-as-needed: the providers must be loaded (their constructors run)
# even though the program calls little or nothing in them.
# $providers is a list of linker flags: split on purpose.
# shellcheck disable=SC2086
if ! gcc -std=gnu11 -Wall -Werror -DHAVE_MLX5=$have_mlx5 -o "$work/prov" "$work/prov.c" \
	-Wl,--no-as-needed $providers -libverbs ||
   ! gcc -std=gnu11 -Wall -Werror -DHAVE_MLX5=0 -o "$work/plain" "$work/prov.c" -libverbs; then
	echo "FAIL: could not build the provider test program"
	exit 1
fi

check_ldd "$work/prov" || fail=1
run_env ldd "$work/prov" | grep -E 'libmlx5|libefa|libmlx4|libmana' | sed 's/^/  loaded: /'
if check_run "$work/prov"; then
	cp "$work/out" "$work/prov.out"
	rc_prov=0
else
	rc_prov=1
	fail=1
fi
if check_run "$work/plain" && [ $rc_prov -eq 0 ]; then
	if ! diff -u "$work/out" "$work/prov.out"; then
		echo "FAIL: loading the providers changed what the program sees"
		fail=1
	else
		sed 's/^/  /' "$work/prov.out"
	fi
fi
if [ $rc_prov -eq 0 ] && grep -q 'taken for an mlx5' "$work/prov.out"; then
	echo "FAIL: mlx5dv_is_supported() claims a softrnic device"
	fail=1
fi

exit $fail
