#!/usr/bin/env python3
"""check_fn_length.py - fail on a function longer than 80 lines that does
not say why it must be long, in the library, the tools, the benchmarks and
the examples (src/, tools/, bench/, examples/; the tests are left alone).

A function's length runs from the line with its name to its closing brace.
One over the limit passes when the comment just above it (above its
return-type and attribute lines, if they stand apart) holds "Why long:"
and the reason, e.g.

    /* Why long: one case per opcode, each a few lines; split, the
     * table would be read in five places. */
    static int opcode_for(...)

or when scripts/fn_length_pending.txt names it: files others are changing
at the moment, whose long functions wait for their split or comment.  Each
pending line is "path function"; an entry whose function is no longer
long (or is gone) fails as stale, so the list only shrinks.

  check_fn_length.py [--root DIR] [--limit N] [--pending FILE] [DIR...]

DIRs (default: those four) are relative to the root (default: this script's
repository).  The scanner strips comments, strings and preprocessor lines
and takes a brace at file level that follows a parameter list as a
function body.  Exit 0 pass, 1 fail, 2 usage.
"""
import argparse
import os
import re
import sys

MARK = "Why long:"


def strip_c(src):
    """src with comments, string and character literals and preprocessor
    lines blanked out (newlines kept, so offsets and lines still match)."""
    out = []
    i, n = 0, len(src)
    bol = True
    while i < n:
        c = src[i]
        if bol and c in " \t":
            out.append(c)
            i += 1
            continue
        if bol and c == "#":
            while i < n and src[i] != "\n":
                if src[i] == "\\" and i + 1 < n and src[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        bol = False
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        if c in "\"'":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            out.append(c + re.sub(r"[^\n]", " ", src[i + 1:j]) + c)
            i = j + 1
            continue
        if c == "\n":
            bol = True
        out.append(c)
        i += 1
    return "".join(out)


def _open_paren(s, close):
    """Index of the '(' matching the ')' at close, or -1."""
    depth = 0
    for j in range(close, -1, -1):
        if s[j] == ")":
            depth += 1
        elif s[j] == "(":
            depth -= 1
            if depth == 0:
                return j
    return -1


def functions(text):
    """(name, first line, last line) of every function defined in text."""
    s = strip_c(text)
    found = []
    depth, i, n = 0, 0, len(s)
    while i < n:
        c = s[i]
        if c == "}":
            depth -= 1
        elif c == "{" and depth > 0:
            depth += 1
        elif c == "{":
            name, start = _function_name(s, i)
            if not name:
                depth += 1
                i += 1
                continue
            d, j = 0, i
            while j < n:
                if s[j] == "{":
                    d += 1
                elif s[j] == "}":
                    d -= 1
                    if d == 0:
                        break
                j += 1
            found.append((name, s.count("\n", 0, start) + 1, s.count("\n", 0, j) + 1))
            i = j
        i += 1
    return found


def _function_name(s, brace):
    """The function whose body opens at brace, with the offset of its
    name; (None, 0) for a struct, an initializer or anything else."""
    k = brace - 1
    while k >= 0 and s[k].isspace():
        k -= 1
    while k >= 0 and s[k] == ")":
        j = _open_paren(s, k)
        if j < 0:
            return None, 0
        m = re.search(r"([A-Za-z_]\w*)\s*$", s[:j])
        if not m:
            return None, 0
        if m.group(1) in ("__attribute__", "__attribute"):
            k = m.start() - 1          # attributes after the parameters
            while k >= 0 and s[k].isspace():
                k -= 1
            continue
        if m.group(1) in ("if", "while", "for", "switch", "sizeof", "return"):
            return None, 0
        return m.group(1), m.start()
    return None, 0


def why_long(lines, first):
    """Whether the comment above line `first` (1-based) holds MARK.  The
    lines between the comment and the name (return type, attributes) may
    stand apart; a blank line ends the search."""
    k = first - 2
    while k >= 0 and lines[k].strip() and not lines[k].rstrip().endswith("*/"):
        k -= 1
    if k < 0 or not lines[k].rstrip().endswith("*/"):
        return False
    block = []
    while k >= 0:
        block.append(lines[k])
        if "/*" in lines[k]:
            break
        k -= 1
    return MARK in " ".join(l.strip(" \t*/") for l in block)


def read_pending(path):
    entries = {}
    if not path or not os.path.exists(path):
        return entries
    with open(path) as f:
        for no, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2:
                sys.exit(f"{path}:{no}: expected 'path function', got '{line}'")
            entries[(parts[0], parts[1])] = no
    return entries


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--root", default=os.path.dirname(here))
    ap.add_argument("--limit", type=int, default=80)
    ap.add_argument("--pending", help="default: ROOT/scripts/fn_length_pending.txt")
    ap.add_argument("dirs", nargs="*", default=["src", "tools", "bench", "examples"])
    a = ap.parse_args()
    pending_path = a.pending or os.path.join(a.root, "scripts", "fn_length_pending.txt")
    pending = read_pending(pending_path)

    bad, stale, explained, waiting = [], [], 0, 0
    seen_long = set()
    for d in a.dirs:
        top = os.path.join(a.root, d)
        if not os.path.isdir(top):
            print(f"check_fn_length: no folder {top}", file=sys.stderr)
            return 2
        for dp, dn, fn in os.walk(top):
            dn.sort()
            for f in sorted(fn):
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.join(dp, f)
                rel = os.path.relpath(path, a.root)
                with open(path, errors="replace") as fh:
                    text = fh.read()
                lines = text.split("\n")
                for name, first, last in functions(text):
                    length = last - first + 1
                    if length <= a.limit:
                        continue
                    seen_long.add((rel, name))
                    if why_long(lines, first):
                        explained += 1
                    elif (rel, name) in pending:
                        waiting += 1
                    else:
                        bad.append(f"{rel}:{first}: {name}() is {length} lines "
                                   f"(limit {a.limit}): split it, or say above it "
                                   f"'{MARK} ...'")
    for (rel, name), no in sorted(pending.items(), key=lambda e: e[1]):
        if (rel, name) not in seen_long:
            stale.append(f"{os.path.relpath(pending_path, a.root)}:{no}: {rel} {name}: "
                         f"not over {a.limit} lines any more (or gone): remove the line")
    for m in bad + stale:
        print(m)
    if bad or stale:
        return 1
    print(f"check_fn_length: ok: {explained} function(s) over {a.limit} lines say why, "
          f"{waiting} pending ({os.path.relpath(pending_path, a.root)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
