#!/bin/bash
# test_trust_misc_config.sh - SOFTRNIC_CONFIG names something that is not a
# small text file. Debian's unmodified ibv_devinfo runs through
# `softrnic run` with SOFTRNIC_CONFIG set to:
#   /dev/zero (used to loop forever), a FIFO nobody writes (used to block
#   in open forever), a directory, a file past 64 KiB, a file with a NUL
#   byte, a file with an overlong line;
# each must end within a few seconds with one line saying what is wrong
# with which file. A symlink to a good file is followed (a config is only
# read; see link/config.c) and gives its device.
set -u
: "${SRN_BUILD:?SRN_BUILD must point at the build directory}"
SOFTRNIC="$SRN_BUILD/bin/softrnic"

command -v ibv_devinfo >/dev/null || { echo "SKIP: ibv_devinfo not installed"; exit 77; }
[ -x "$SOFTRNIC" ] || { echo "FAIL: $SOFTRNIC not built"; exit 1; }
unset SOFTRNIC_DEVICES SOFTRNIC_CONFIG SOFTRNIC_PCAP SOFTRNIC_FAULTS

preload=()
[ -n "${SRN_ASAN_PRELOAD:-}" ] && preload=(LD_PRELOAD="$SRN_ASAN_PRELOAD")

d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# devinfo CONFIG: ibv_devinfo with SOFTRNIC_CONFIG=CONFIG, at most 20 s;
# sets rc, out (stdout and stderr) and secs.
devinfo() {
	local t0=$SECONDS
	out=$(SOFTRNIC_CONFIG=$1 timeout 20 env "${preload[@]}" "$SOFTRNIC" run -- ibv_devinfo 2>&1)
	rc=$?
	secs=$((SECONDS - t0))
}

# rejected CASE CONFIG MESSAGE: no device, within the bound, and the
# library said MESSAGE (a fixed string).
rejected() {
	devinfo "$2"
	if [ "$rc" -eq 124 ]; then
		fail "$1: ibv_devinfo still running after 20 s"
	elif [ "$rc" -eq 0 ] || ! grep -qF -- "softrnic: $3" <<<"$out"; then
		echo "$out"
		fail "$1: want rc != 0 and 'softrnic: $3' (rc $rc)"
	else
		echo "ok: $1 (${secs}s): $(grep -F "softrnic: " <<<"$out" | head -1)"
	fi
}

rejected "/dev/zero" /dev/zero "SOFTRNIC_CONFIG: '/dev/zero' is not a regular file (a device)"

mkfifo "$d/fifo"
rejected "FIFO without a writer" "$d/fifo" "SOFTRNIC_CONFIG: '$d/fifo' is not a regular file (a FIFO)"

mkdir "$d/dir"
rejected "directory" "$d/dir" "SOFTRNIC_CONFIG: '$d/dir' is not a regular file (a directory)"

# 65537 bytes: a valid entry, then comment lines.
{ echo "addr=auto"; for _ in $(seq 1024); do printf '#%062d\n' 0; done; } >"$d/big.conf"
truncate -s 65537 "$d/big.conf"
rejected "oversized file" "$d/big.conf" \
	"SOFTRNIC_CONFIG: '$d/big.conf' is 65537 bytes; a device list is at most 65536"

printf 'addr=auto\n# ok\nname=x\0junk,addr=auto\n' >"$d/nul.conf"
rejected "NUL byte" "$d/nul.conf" "$d/nul.conf: line 3: a NUL byte (this is not a text file)"

{ echo "addr=auto"; printf 'name=y,addr=auto,%01100d\n' 0; } >"$d/long.conf"
rejected "overlong line" "$d/long.conf" "$d/long.conf: line 2: line longer than 1023 characters"

# A symlink to a good config is read like the file.
printf '# lab\nname=srnlink,addr=auto\n' >"$d/good.conf"
ln -s "$d/good.conf" "$d/link.conf"
devinfo "$d/link.conf"
if [ "$rc" -ne 0 ] || ! grep -q "hca_id:.*srnlink" <<<"$out"; then
	echo "$out"
	fail "a symlinked config was not used (rc $rc)"
fi

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "PASS: SOFTRNIC_CONFIG accepts only a small regular text file, and says why"
