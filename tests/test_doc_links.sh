#!/bin/bash
# test_doc_links.sh - scripts/check_doc_links.py: a tiny planted tree
# passes clean and fails on each planted broken reference (a relative
# link, a backticked repository path, an anchor, a path outside the
# tree), with skipped forms (globs, placeholders, URLs, system headers,
# code blocks) left alone; then the repository's own docs pass.
# Exit 0 pass, 1 fail.
set -u
srcdir=${SRN_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
script=$srcdir/scripts/check_doc_links.py
py=$(python3 -c 'import sys; print(sys.executable)') || { echo "FAIL: no python3"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

t=$tmp/tree
mkdir -p "$t"/docs "$t"/src/core "$t"/bench "$t"/build-x
echo 'int x;' >"$t/src/core/qp.h"
echo 'int main(void) { return 0; }' >"$t/bench/probe.c"
cat >"$t/docs/B.md" <<'MD'
# B

## Two words
MD
cat >"$t/docs/A.md" <<'MD'
# A

See [B](B.md), [its part](B.md#two-words), [top](#a), [web](https://example.com/x),
`src/core/qp.h`, `core/qp.h`, `docs/B.md`, `bench/probe` (a program),
`tests/<area>.cmake`, `build/`, `src/*.c`, `infiniband/verbs.h`, `GB/s`,
`/dev/shm/x`, `link/egress`, `src/core/qp.h:12`.

```
[not a link](nowhere.md) `src/nowhere.c`
```
MD
echo '[broken](nowhere.md)' >"$t/build-x/skip.md"   # build* dirs are skipped

run() { out=$("$py" -S "$script" "$1" 2>&1); rc=$?; }

run "$t"
if [ "$rc" -ne 0 ]; then echo "FAIL: clean tree: exit $rc"; echo "$out" | sed 's/^/  /'; fail=1
else echo "ok: clean tree passes"; fi

plant() { # plant NAME LINE WORD: append LINE to A.md of a copy; must fail naming WORD
	local c=$tmp/$1
	rm -rf "$c"; cp -r "$t" "$c"
	printf '%s\n' "$2" >>"$c/docs/A.md"
	run "$c"
	if [ "$rc" -ne 1 ] || ! grep -qF -- "docs/A.md:" <<<"$out" || ! grep -qF -- "$3" <<<"$out"; then
		echo "FAIL: $1: exit $rc, expected 1 naming docs/A.md and '$3'"; echo "$out" | sed 's/^/  /'; fail=1
	else
		echo "ok: $1 fails"
	fi
}
plant link '[gone](gone.md)' 'gone.md'
plant root_link '[gone](/docs/gone.md)' '/docs/gone.md'
plant path '`src/core/gone.c`' 'src/core/gone.c'
plant src_relative '`core/gone.h`' 'core/gone.h'
plant anchor '[B](B.md#no-such-part)' 'B.md#no-such-part'
plant self_anchor '[here](#nowhere)' '#nowhere'
plant outside '[out](../../etc/passwd)' 'outside the repository'
plant outside_path '`../../x/y.md`' 'outside the repository'

run "$srcdir"
if [ "$rc" -ne 0 ]; then
	echo "FAIL: the repository's docs have broken references:"; echo "$out" | sed 's/^/  /'; fail=1
else
	echo "ok: $out"
fi

[ $fail -eq 0 ] && echo "PASS" || echo "FAILED"
exit $fail
