#!/bin/bash
# test_check_layers.sh - scripts/check_layers.py on a tiny fake source tree:
# the clean tree passes; each planted violation alone fails and names both
# files (an upward include between folders in each spelling: "dir/x.h",
# "../dir/x.h", <dir/x.h>; an upward include inside an ordered folder, with
# and without a circle; a file missing from the order; a folder missing from
# the layers; an upward call seen only in the built objects); a quoted
# system header and commented-out includes change nothing; --report-folder
# measures a knotted folder without failing.
# Exit 0 pass, 1 fail.
set -u
srcdir=${SRN_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
script=$srcdir/scripts/check_layers.py
# the interpreter itself, once (a pyenv shim costs more than the check);
# -S: the script needs the standard library only
py=$(python3 -c 'import sys; print(sys.executable)') || { echo "FAIL: no python3"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# ---- the clean tree: wire < core < transport (ordered) < engine (knotted)
clean=$tmp/clean
mkdir -p "$clean"/src/{wire,core,transport,engine}
cat >"$clean/layers.txt" <<'EOF'
# lowest first
[layers]
wire
core
transport       # ordered inside
engine          # a knot, not ordered
[order transport]
base
mid side        # same rank
top
EOF
echo '#pragma once' >"$clean/outside.h"
cat >"$clean/src/wire/pkt.h" <<'EOF'
#pragma once
#include <stdint.h>
int wire_fn(void);
EOF
cat >"$clean/src/wire/pkt.c" <<'EOF'
#include "wire/pkt.h"
#include "infiniband/verbs.h"   /* quoted system header: no project file */
#include "sys/not_here.h"
#include <infiniband/verbs.h>
#include "../../outside.h"      /* outside src/: not a layer */
/* commented out: not includes
#include "core/qp.h"
 */
// #include <core/qp.h>
static const char *s = "#include \"core/qp.h\"";
int wire_fn(void) { return s[0]; }
EOF
cat >"$clean/src/core/qp.h" <<'EOF'
#pragma once
#include "wire/pkt.h"
int core_fn(void);
EOF
cat >"$clean/src/core/qp.c" <<'EOF'
#include "qp.h"
#include "../wire/pkt.h"
#include <wire/pkt.h>
int core_fn(void) { return wire_fn(); }
EOF
cat >"$clean/src/transport/base.h" <<'EOF'
#pragma once
#include <core/qp.h>
EOF
cat >"$clean/src/transport/side.h" <<'EOF'
#pragma once
EOF
cat >"$clean/src/transport/mid.h" <<'EOF'
#pragma once
#include "transport/base.h"
int mid_fn(void);
EOF
cat >"$clean/src/transport/mid.c" <<'EOF'
#include "mid.h"
int mid_fn(void) { return core_fn(); }
EOF
cat >"$clean/src/transport/top.h" <<'EOF'
#pragma once
int top_fn(void);
EOF
cat >"$clean/src/transport/top.c" <<'EOF'
#include "transport/top.h"
#include <transport/mid.h>
#include "side.h"
int top_fn(void) { return mid_fn(); }
EOF
# engine/: a.c <-> b.c, a circle the table does not order
cat >"$clean/src/engine/a.h" <<'EOF'
#pragma once
int a_fn(void);
EOF
cat >"$clean/src/engine/b.h" <<'EOF'
#pragma once
int b_fn(void);
EOF
cat >"$clean/src/engine/a.c" <<'EOF'
#include "engine/a.h"
#include "engine/b.h"
int a_fn(void) { return b_fn(); }
EOF
cat >"$clean/src/engine/b.c" <<'EOF'
#include "engine/b.h"
#include "engine/a.h"
#include "transport/top.h"
int b_fn(void) { return top_fn(); }
EOF

run() { # run DIR [args...]: check_layers on DIR's tree; sets out, rc
	local dir=$1; shift
	out=$("$py" -S "$script" --src "$dir/src" --layers "$dir/layers.txt" "$@" 2>&1)
	rc=$?
	if grep -q Traceback <<<"$out"; then
		echo "FAIL: check_layers crashed on $dir:"; echo "$out" | sed 's/^/  /'; fail=1
	fi
}
expect_pass() { # expect_pass NAME DIR [args...]
	local name=$1; shift
	run "$@"
	if [ "$rc" -ne 0 ]; then
		echo "FAIL: $name: exit $rc, expected 0"; echo "$out" | sed 's/^/  /'; fail=1
	else
		echo "ok: $name passes"
	fi
}
expect_fail() { # expect_fail NAME DIR WORDS... -- [args...]: nonzero, output names WORDS
	local name=$1 dir=$2; shift 2
	local words=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do words+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	run "$dir" "$@"
	local bad=0
	if [ "$rc" -ne 1 ]; then echo "FAIL: $name: exit $rc, expected 1"; bad=1; fi
	for w in "${words[@]}"; do
		grep -qF -- "$w" <<<"$out" || { echo "FAIL: $name: output does not name '$w'"; bad=1; }
	done
	if [ $bad -ne 0 ]; then echo "$out" | sed 's/^/  /'; fail=1; else echo "ok: $name fails"; fi
}
plant() { # plant NAME: a fresh copy of the clean tree, echoes its path
	rm -rf "${tmp:?}/$1"; cp -r "$clean" "$tmp/$1"; echo "$tmp/$1"
}

# ---- the clean tree passes, the system headers did not crash it
expect_pass "clean tree" "$clean"
grep -q "no --build: includes only" <<<"$out" ||
	{ echo "FAIL: without --build it should say it checks includes only"; fail=1; }

# ---- upward include between folders, in each spelling
t=$(plant up_plain)
echo '#include "core/qp.h"' >>"$t/src/wire/pkt.c"
expect_fail 'upward "dir/x.h"' "$t" "UPWARD: wire -> core" src/wire/pkt.c src/core/qp.h

t=$(plant up_relative)
echo '#include "../core/qp.h"' >>"$t/src/wire/pkt.h"
expect_fail 'upward "../dir/x.h"' "$t" "UPWARD: wire -> core" src/wire/pkt.h src/core/qp.h

t=$(plant up_angle)
echo '#include <core/qp.h>' >>"$t/src/wire/pkt.c"
expect_fail 'upward <dir/x.h>' "$t" "UPWARD: wire -> core" src/wire/pkt.c src/core/qp.h

t=$(plant up_relative_far)
echo '  #  include "../../src/engine/a.h"' >>"$t/src/core/qp.c"
expect_fail 'upward "../../src/dir/x.h"' "$t" "UPWARD: core -> engine" src/core/qp.c src/engine/a.h

# ---- inside the ordered folder
t=$(plant in_up)
echo '#include "side.h"' >>"$t/src/transport/base.h"
expect_fail "upward inside an ordered folder" "$t" \
	"UPWARD: transport/base -> transport/side" src/transport/base.h src/transport/side.h
grep -q CIRCLE <<<"$out" && { echo "FAIL: base -> side is no circle"; fail=1; }

t=$(plant in_circle)
echo '#include "transport/top.h"' >>"$t/src/transport/mid.h"
expect_fail "upward circle inside an ordered folder" "$t" \
	"UPWARD: transport/mid -> transport/top" src/transport/mid.h src/transport/top.h \
	"CIRCLE in transport/ (2 modules): mid top"

t=$(plant in_same_rank_circle)
echo '#include "transport/side.h"' >>"$t/src/transport/mid.c"
echo '#include "transport/mid.h"' >>"$t/src/transport/side.h"
expect_fail "circle within one rank" "$t" "CIRCLE in transport/ (2 modules): mid side"

t=$(plant unlisted)
echo '#include "transport/base.h"' >"$t/src/transport/extra.c"
expect_fail "file missing from the order" "$t" "UNLISTED: src/transport/extra.[ch]"

t=$(plant unknown_folder)
mkdir "$t/src/newdir"; echo 'int x;' >"$t/src/newdir/x.c"
expect_fail "folder missing from the layers" "$t" "src/newdir not in [layers]"

# ---- report a knotted folder without failing
expect_pass "report engine/" "$clean" --report-folder engine --report-folder transport
for w in "note: circle in engine/ (2 modules): a b" \
	 "engine/: 2 modules, 2 arrows inside, 1 upward, 1 circle(s) holding 2 module(s)" \
	 "transport/: measured against [order transport]" \
	 "transport/: 4 modules, 3 arrows inside, 0 upward, 0 circle(s)"; do
	grep -qF -- "$w" <<<"$out" || { echo "FAIL: report lacks '$w'"; echo "$out" | sed 's/^/  /'; fail=1; }
done

# ---- calls, from objects built into a CMake-like tree
cc=${CC:-cc}
if command -v "$cc" >/dev/null && command -v nm >/dev/null; then
	# the planted system headers, empty, so the fake tree compiles
	mkdir -p "$tmp/sys/sys" "$tmp/sys/infiniband"
	touch "$tmp/sys/sys/not_here.h" "$tmp/sys/infiniband/verbs.h"
	obj() { # obj DIR FILE: compile one .c file where srn_objs would put it
		local o=$1/build/CMakeFiles/srn_objs.dir/${2#"$1"/}.o
		mkdir -p "$(dirname "$o")"
		"$cc" -std=c11 -w -c -I "$1/src" -I "$tmp/sys" "$2" -o "$o" ||
			{ echo "FAIL: cannot compile $2"; fail=1; }
	}
	t=$tmp/calls_clean
	cp -r "$clean" "$t"
	for f in "$t"/src/*/*.c; do obj "$t" "$f" & done
	wait
	expect_pass "clean tree with --build" "$t" --build "$t/build"
	grep -q "includes only" <<<"$out" && { echo "FAIL: --build found no objects"; fail=1; }

	# a call upward with no include to give it away; a static of the same
	# name elsewhere must not be taken for its owner
	t=$tmp/calls_up
	cp -r "$tmp/calls_clean" "$t"
	cat >>"$t/src/wire/pkt.c" <<'EOF'
int core_fn(void);
int wire_up(void) { return core_fn(); }
EOF
	echo 'static int core_fn(void) { return 0; } int side_fn(void) { return core_fn(); }' \
		>"$t/src/core/aa.c"
	obj "$t" "$t/src/wire/pkt.c"
	obj "$t" "$t/src/core/aa.c"
	expect_pass "upward call without --build (includes only)" "$t"
	expect_fail "upward call with --build" "$t" \
		"UPWARD: wire -> core" "src/wire/pkt.c calls core_fn (src/core/qp.c)" -- --build "$t/build"
else
	echo "note: no C compiler or nm: the call check is not exercised"
fi

[ $fail -eq 0 ] && echo "PASS" || echo "FAILED"
exit $fail
