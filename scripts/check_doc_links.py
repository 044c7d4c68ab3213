#!/usr/bin/env python3
"""check_doc_links.py - every reference in the repository's Markdown resolves.

Usage: check_doc_links.py [ROOT]   (ROOT defaults to the repository holding
this script).  Reads every *.md under ROOT (skipping .git and build*
directories) and checks:

  - Markdown links and images, [text](target) and [ref]: target: a relative
    target must exist inside ROOT (a leading '/' is ROOT); http(s), mailto
    and other schemes are not checked.  A '#anchor' on a .md target (or
    alone, for the same file) must name one of its headings, slugged as
    GitHub does.
  - Paths in backticks, `like/this.c`: only a token with a '/' and no
    spaces, globs or placeholders (< > * ? [ ] { } $ ~ quotes), not ending
    in '/' and not absolute, and then only when
      * it starts with a top-level folder of ROOT (src/, docs/, tests/,
        scripts/, bench/, tools/, examples/, cmake/) or with ./ or ../:
        it must exist (file or folder); or
      * it ends in a known source extension and its first folder exists
        next to the document, at ROOT, or under src/, tools/ or tests/
        (docs name `core/qp.h` for src/core/qp.h): it must exist under
        one of those.
    A top-level path with no extension may name the program built from
    PATH.c (`bench/idle_qps`).
    Anything else (`infiniband/verbs.h`, `GB/s`, `link/egress`) is not a
    repository path and is left alone.  A trailing :LINE or :LINE:COL is
    ignored.

Code in fenced blocks is skipped.  Prints one line per broken reference,
FILE:LINE: TARGET (and why, for anchors), and exits 1 if there was any,
else 0.  Standard library only.
"""

import os
import re
import sys

TOP_DIRS = ("src", "docs", "tests", "scripts", "bench", "tools", "examples", "cmake")
EXTS = (".c", ".h", ".md", ".sh", ".py", ".cmake", ".txt", ".map", ".json",
        ".csv", ".svg", ".S", ".cc", ".cpp", ".in", ".conf", ".yml", ".yaml",
        ".toml", ".tsv")
# folders (besides the document's own and ROOT) that docs name paths from
SUB_BASES = ("src", "tools", "tests")
BAD_CHARS = set("<>*?[]{}$~|\"'`\\")

CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)")
MD_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
LINE_SUFFIX = re.compile(r":\d+(?::\d+)?$")
FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def md_files(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != ".git" and not x.startswith("build"))
        for f in sorted(files):
            if f.endswith(".md"):
                yield os.path.join(d, f)


def read_lines(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().split("\n")


def prose_lines(lines):
    """(line number, text) of the lines outside fenced code blocks."""
    fence = None
    for i, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        yield i, line


def slug(text):
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to -."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text only
    text = text.lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


_anchor_cache = {}


def anchors(path):
    if path not in _anchor_cache:
        seen = {}
        out = set()
        for _, line in prose_lines(read_lines(path)):
            m = HEADING.match(line)
            if not m:
                continue
            s = slug(m.group(2))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else "%s-%d" % (s, n))
        _anchor_cache[path] = out
    return _anchor_cache[path]


def inside(root, path):
    root = os.path.realpath(root)
    path = os.path.realpath(path)
    return path == root or path.startswith(root + os.sep)


def check_anchor(target_file, anchor):
    """None if fine, else why not."""
    if not anchor or not target_file.endswith(".md") or not os.path.isfile(target_file):
        return None
    if anchor.lower() in anchors(target_file):
        return None
    return "no heading for #" + anchor


def check_link(root, doc, target):
    """None if the link resolves, else a reason."""
    if not target or SCHEME.match(target):
        return None  # empty, or http(s)/mailto/...: not checked
    path, _, anchor = target.partition("#")
    if not path:
        return check_anchor(doc, anchor)
    path = path.split("?", 1)[0]
    if path.startswith("/"):
        full = os.path.join(root, path.lstrip("/"))
    else:
        full = os.path.join(os.path.dirname(doc), path)
    if not inside(root, full):
        return "outside the repository"
    if not os.path.exists(full):
        return "no such file"
    return check_anchor(full, anchor)


def check_code_path(root, doc, token):
    """None if the backticked token is no repository path or it resolves."""
    token = token.strip()
    if not token or "/" not in token or any(c.isspace() for c in token):
        return None
    if any(c in BAD_CHARS for c in token) or "://" in token or "..." in token:
        return None
    token = LINE_SUFFIX.sub("", token)
    path, _, anchor = token.partition("#")
    if not path or path.endswith("/") or path.startswith("/"):
        return None
    docdir = os.path.dirname(doc)
    first = path.split("/", 1)[0]
    if first in (".", ".."):
        full = os.path.normpath(os.path.join(docdir, path))
        if not inside(root, full):
            return "outside the repository"
        return None if os.path.exists(full) else "no such file"
    if first in TOP_DIRS:
        for base in (root, docdir):
            full = os.path.join(base, path)
            if os.path.exists(full):
                return check_anchor(full, anchor)
            if not os.path.splitext(path)[1] and os.path.isfile(full + ".c"):
                return None  # a program built from PATH.c (`bench/idle_qps`)
        return "no such file"
    if not path.endswith(EXTS):
        return None
    bases = [docdir, root] + [os.path.join(root, b) for b in SUB_BASES]
    if not any(os.path.isdir(os.path.join(b, first)) for b in bases):
        return None  # not a repository path (a system header, a unit)
    for b in bases:
        full = os.path.join(b, path)
        if os.path.exists(full):
            return check_anchor(full, anchor)
    return "no such file"


def check_file(root, doc):
    problems = []
    for n, line in prose_lines(read_lines(doc)):
        for m in CODE_SPAN.finditer(line):
            why = check_code_path(root, doc, m.group(2))
            if why:
                problems.append((n, m.group(2).strip(), why))
        text = CODE_SPAN.sub("", line)
        targets = [m.group(1) for m in MD_LINK.finditer(text)]
        m = REF_DEF.match(text)
        if m:
            targets.append(m.group(1))
        for t in targets:
            why = check_link(root, doc, t)
            if why:
                problems.append((n, t, why))
    return problems


def main(argv):
    if len(argv) > 2 or (len(argv) == 2 and argv[1] in ("-h", "--help")):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.abspath(argv[1] if len(argv) == 2 else os.path.join(here, ".."))
    if not os.path.isdir(root):
        print("check_doc_links: no such directory: " + root, file=sys.stderr)
        return 2
    bad = 0
    files = 0
    for doc in md_files(root):
        files += 1
        rel = os.path.relpath(doc, root)
        for n, target, why in check_file(root, doc):
            print("%s:%d: %s (%s)" % (rel, n, target, why))
            bad += 1
    if bad:
        print("check_doc_links: %d broken reference(s) in %d file(s) read" % (bad, files),
              file=sys.stderr)
        return 1
    print("check_doc_links: %d Markdown files, every reference resolves" % files)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
