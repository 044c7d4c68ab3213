#!/bin/bash
# test_cm_symbols.sh - softrnic's librdmacm.so.1 exports every symbol and
# version node of Debian's (rdma-core 44), and every rdmacm-utils binary
# loads it with immediate binding and starts (--help / -h within 10 s, no
# symbol lookup error, no crash signal).
# Exit 0 pass, 1 fail, 77 skip (no Debian librdmacm or rdmacm-utils).
set -u
build=${SRN_BUILD:?SRN_BUILD not set}
ours=$build/lib/librdmacm.so.1
debian=/usr/lib/x86_64-linux-gnu/librdmacm.so.1
[ -e "$debian" ] && command -v objdump >/dev/null && command -v rping >/dev/null ||
	{ echo "SKIP: librdmacm1/rdmacm-utils or objdump not installed"; exit 77; }
[ -e "$ours" ] || { echo "FAIL: $ours was not built"; exit 1; }
syms() { objdump -T "$1" | awk '/^[0-9a-f]+ / && !/\*UND\*/ && NF >= 2 { print $(NF-1), $NF }' | sort -u; }
fail=0
missing=$(comm -23 <(syms "$debian" | grep -E '^\(?RDMACM') <(syms "$ours"))
if [ -n "$missing" ]; then echo "FAIL: missing from ours:"; echo "$missing"; fail=1; fi
extra=$(syms "$ours" | grep -vE '^\(?RDMACM' || true)
if [ -n "$extra" ]; then echo "FAIL: ours exports more than RDMACM nodes:"; echo "$extra"; fail=1; fi
preload=${SRN_ASAN_PRELOAD:-}
bad='symbol lookup error|undefined symbol|version `[A-Z_0-9.]*'"'"' not found|cannot open shared object'
for bin in $(dpkg -L rdmacm-utils | grep '^/usr/bin/'); do
	out=$(env LD_LIBRARY_PATH="$build/lib" LD_BIND_NOW=1 LD_PRELOAD="$preload" ldd -r "$bin" 2>&1)
	if ! grep -q "librdmacm.so.1 => $build/lib" <<<"$out" ||
	   grep -qE "$bad" <<<"$out"; then
		echo "FAIL: ldd -r $bin"; echo "$out" | sed 's/^/  /'; fail=1; continue
	fi
	out=$(env LD_LIBRARY_PATH="$build/lib" LD_BIND_NOW=1 LD_PRELOAD="$preload" ASAN_OPTIONS=detect_leaks=0 \
		timeout 10 "$bin" -h 2>&1 </dev/null); rc=$?
	if [ $rc -ge 124 ] || grep -qE "$bad" <<<"$out"; then
		echo "FAIL: $bin -h (rc=$rc)"; echo "$out" | head -5 | sed 's/^/  /'; fail=1
	else
		echo "ok: $(basename "$bin") starts (rc=$rc)"
	fi
done
exit $fail
