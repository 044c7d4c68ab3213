#!/bin/bash
# test_check_fn_length.sh - scripts/check_fn_length.py on a tiny planted
# tree: short functions pass; a planted long one fails and is named; it
# passes with a "Why long:" comment above it (also above a return type on
# its own line) or a pending entry; a comment without the mark, or a
# stale pending entry, fails; braces in comments, strings and
# initializers count for nothing.  Then the repository itself passes.
# Exit 0 pass, 1 fail.
set -u
srcdir=${SRN_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
script=$srcdir/scripts/check_fn_length.py
py=$(python3 -c 'import sys; print(sys.executable)') || { echo "FAIL: no python3"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

t=$tmp/tree
mkdir -p "$t/src/core" "$t/scripts"
: >"$t/scripts/fn_length_pending.txt"
# body N: N lines of statements
body() { for ((i = 0; i < $1; i++)); do echo "	x += $i;"; done; }
{
	echo 'static const int tbl[] = { 1, 2, 3 };   /* { not a function } */'
	echo 'struct s { int a; };'
	echo 'static int shortfn(int x)'
	echo '{'
	echo '	const char *q = "{{{";'
	body 70
	echo '	return x + (q[0] == 0);'
	echo '}'
} >"$t/src/core/ok.c"

# run NAME WANT [ARGS...]: the checker on $t must exit WANT
run() {
	local name=$1 want=$2
	shift 2
	"$py" -S "$script" --root "$t" "$@" src >"$tmp/out" 2>&1
	local rc=$?
	if [ "$rc" -ne "$want" ]; then
		echo "FAIL: $name: exit $rc, want $want"
		sed 's/^/    /' "$tmp/out"
		fail=1
	fi
}

run "clean tree" 0
grep -q "0 function(s) over 80 lines say why, 0 pending" "$tmp/out" ||
	{ echo "FAIL: clean tree: summary: $(cat "$tmp/out")"; fail=1; }

# A long function: 1 name line + { + 80 statements + } = 83 lines.
long() {
	echo "$1"
	echo 'int longfn(int x)'
	echo '{'
	body 80
	echo '}'
}
long '/* Just a comment. */' >"$t/src/core/long.c"
run "long function" 1
grep -q "src/core/long.c:2: longfn() is 83 lines" "$tmp/out" ||
	{ echo "FAIL: long function not named: $(cat "$tmp/out")"; fail=1; }

long '/* Why long: a planted example. */' >"$t/src/core/long.c"
run "long function that says why" 0

{
	echo '/* One table walk,'
	echo ' * Why long: a planted example over two lines. */'
	echo 'static inline int'
	long '' | tail -n +3 | sed '1s/^/longfn2(int x)\n/'
} >"$t/src/core/long.c"
run "why-long comment above a return type on its own line" 0

long '/* Just a comment. */' >"$t/src/core/long.c"
echo 'src/core/long.c longfn' >"$t/scripts/fn_length_pending.txt"
run "long function pending" 0
grep -q "1 pending" "$tmp/out" || { echo "FAIL: pending not counted: $(cat "$tmp/out")"; fail=1; }

long '/* Why long: a planted example. */' >"$t/src/core/long.c"
echo 'src/core/ok.c shortfn' >"$t/scripts/fn_length_pending.txt"
run "stale pending entry" 1
grep -q "ok.c shortfn: not over 80 lines" "$tmp/out" ||
	{ echo "FAIL: stale entry not named: $(cat "$tmp/out")"; fail=1; }
: >"$t/scripts/fn_length_pending.txt"

run "a lower limit" 1 --limit 60
grep -q "shortfn() is 75 lines" "$tmp/out" ||
	{ echo "FAIL: --limit 60: $(cat "$tmp/out")"; fail=1; }

# The repository itself.
"$py" -S "$script" --root "$srcdir" || { echo "FAIL: the repository"; fail=1; }

[ "$fail" = 0 ] && echo "test_check_fn_length: ok"
exit "$fail"
