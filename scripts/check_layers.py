#!/usr/bin/env python3
"""check_layers.py - fail when a layer of src/ reaches up to a layer above it,
or a module of an ordered folder reaches up to a module above it.

DESIGN.md's rule: data flows one way; a layer knows nothing of the layers
above it.  Two kinds of edge are read, so neither can hide the other:

  includes  every `#include` of src/<dir>/**/*.[ch] (from the text, comments
            stripped) that names a project file, in any spelling:
              "dir/file.h"   the compiler's -I src
              "file.h"       next to the including file, else under src/
              "../dir/x.h"   relative to the including file, else to src/
              <dir/file.h>   under src/ only (-I src)
            An include that names no file under src/<dir>/ is a system or
            third-party header ("infiniband/verbs.h", <stdio.h>) and is
            ignored.
  calls     a symbol an object file of src/<dir> uses and an object file
            of another file defines (from `nm` on the built objects, so
            macros and inline helpers in headers do not count, and a call
            through a header of the same layer does); only global symbols
            count, a static of one file never owns another file's call

The table lives in scripts/layers.txt (or --layers FILE):

  [layers]             one folder of src/ per line, lowest first; several
  wire                 folders on one line share a rank.  Every folder of
  diag                 src/ must have a line.
  ...
  [order transport]    optional, one section per folder: its modules,
  ordered_copy qp_count  lowest first, several on a line share a rank.
  cc tx                A module is a file's name without .c/.h (x.h and
  ...                  x.c are one module, "sub/x" for src/transport/sub/x.c).

  [plan transport]     optional, same format: an order that is only
  ...                  measured (--report-folder), never enforced: the
                       target of a folder still being untangled.

  '#' starts a comment.  Between folders, an edge from a folder to a higher
  layer fails.  Inside a folder with an [order], every module must be listed,
  an edge from a module to a module of a higher rank fails, and so does every
  circle (a set of modules that reach each other, found with Tarjan's SCCs),
  even one within a rank.  Folders without an [order] are not checked inside.

Usage: scripts/check_layers.py [--build DIR] [--src DIR] [--layers FILE]
                               [--list] [--report-folder DIR]...
  --build DIR   where the srn_objs / srn_cm_objs object files are (e.g.
                build/); without it only includes are checked, and it says so
  --src DIR     the source tree to check (default src/ of this checkout)
  --layers FILE the table (default scripts/layers.txt next to this script)
  --list        print every edge, not only the upward ones
  --report-folder DIR
                measure the inside of src/DIR without failing: its upward
                arrows (module pairs) against its [order] or [plan], or, if
                it has neither, against the order with the fewest upward
                arrows (printed, ready to paste as a section), and its
                circles.  Repeatable.
Exit 0 when no edge runs upward and no ordered folder has a circle, 1
otherwise (2 for bad arguments or an unreadable table).
"""
import argparse
import os
import re
import subprocess
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# libc functions the library defines over libc's (verbs/verbs_unmap.c: the
# calls that take memory away revoke registrations first).  A lower layer
# calling mmap calls libc; that the dynamic linker routes it through us is
# not a dependency of that layer on verbs/.
LIBC_INTERPOSED = {"mmap", "mmap64", "mremap", "munmap", "mprotect", "shmdt",
                   # verbs/verbs_fdwait.c: the waits on a channel fd
                   "poll", "ppoll", "__poll_chk", "__ppoll_chk", "epoll_ctl", "epoll_wait",
                   "epoll_pwait", "epoll_pwait2"}
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^">\n]+)[">]', re.M)
# Comments, and the literals that may hold comment-like text.
LEXEME = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
EXACT_LIMIT = 16  # circles up to this size get an exact fewest-upward order


class TableError(Exception):
    pass


# ---------------------------------------------------------------- the table

def read_table(path):
    """Return (rank of each folder, {folder: {module: rank}} enforced,
    {folder: {module: rank}} planned)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except OSError as e:
        raise TableError(f"cannot read {path}: {e.strerror}")
    layers, orders, plans, section = {}, {}, {}, None
    rank = 0
    for n, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("["):
            m = re.fullmatch(r"\[\s*(?:(layers)|(order|plan)\s+([A-Za-z0-9_.-]+))\s*\]", line)
            if not m:
                raise TableError(f"{path}:{n}: unknown section {line}")
            if m.group(1):
                section, target = "layers", layers
            else:
                section = f"{m.group(2)} {m.group(3)}"
                other = plans if m.group(2) == "order" else orders
                if m.group(3) in other:
                    raise TableError(f"{path}:{n}: src/{m.group(3)} has both an order and a plan")
                target = (orders if m.group(2) == "order" else plans).setdefault(m.group(3), {})
            if target:
                raise TableError(f"{path}:{n}: section [{section}] given twice")
            rank = 0
            continue
        if section is None:
            raise TableError(f"{path}:{n}: '{line}' before any [section]")
        for name in line.split():
            if name in target:
                raise TableError(f"{path}:{n}: '{name}' listed twice in [{section}]")
            target[name] = rank
        rank += 1
    if not layers:
        raise TableError(f"{path}: no [layers] section")
    return layers, orders, plans


# ------------------------------------------------------------ the sources

def src_files(src):
    """{relative path "dir/.../x.c": absolute path} for .c/.h under src/<dir>/."""
    files = {}
    for d in sorted(os.listdir(src)):
        top = os.path.join(src, d)
        if not os.path.isdir(top):
            continue
        for base, dirs, names in os.walk(top):
            dirs.sort()
            for name in sorted(names):
                if name.endswith((".c", ".h")):
                    path = os.path.join(base, name)
                    files[os.path.relpath(path, src).replace(os.sep, "/")] = path
    return files


def src_dirs(src):
    return sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))


def folder_of(rel):
    return rel.split("/", 1)[0]


def module_of(rel):
    """"transport/rx.c" -> "rx" (x.h and x.c are one module)."""
    inner = rel.split("/", 1)[1]
    return os.path.splitext(inner)[0]


def strip_comments(text):
    def blank(m):
        s = m.group(0)
        if s[0] == "/":
            return re.sub(r"[^\n]", " ", s)  # keep the line numbers
        return s
    return LEXEME.sub(blank, text)


def resolve(src, rel_from, bracket, spelled):
    """The project file (relative to src) an include names, or None.
    "x" is looked up next to the including file, then under src/ (-I src);
    <x> under src/ only.  A file outside src/<dir>/ is not a layer's."""
    cands = []
    if bracket == '"':
        cands.append(os.path.join(src, os.path.dirname(rel_from), spelled))
    cands.append(os.path.join(src, spelled))
    for c in cands:
        if not os.path.isfile(c):
            continue
        n = os.path.relpath(os.path.normpath(c), src).replace(os.sep, "/")
        if n.startswith("../") or "/" not in n:
            return None  # the compiler takes this one: outside src/<dir>/
        return n
    return None


def include_edges(src, files):
    """[(from rel, to rel, text)] for every include of a project file."""
    out = []
    for rel, path in files.items():
        with open(path, encoding="utf-8", errors="replace") as f:
            text = strip_comments(f.read())
        for m in INCLUDE.finditer(text):
            bracket, spelled = m.group(1), m.group(2).strip()
            to = resolve(src, rel, bracket, spelled)
            if to is None or to == rel:
                continue
            line = text.count("\n", 0, m.start()) + 1
            shown = f'"{spelled}"' if bracket == '"' else f"<{spelled}>"
            out.append((rel, to, f"src/{rel}:{line} includes {shown} (src/{to})"))
    return out


# ------------------------------------------------------------ the objects

def object_files(src, build):
    """[(source rel, object path)] for the library's objects under build."""
    objs = []
    for top, _, names in os.walk(build):
        tag = next((t for t in ("srn_objs.dir", "srn_cm_objs.dir")
                    if t in top.split(os.sep)), None)
        if tag is None:
            continue
        for name in names:
            if not name.endswith(".c.o"):
                continue
            path = os.path.join(top, name)
            parts = os.path.relpath(path, top[: top.index(tag) + len(tag)]).split(os.sep)
            # .../srn_objs.dir/src/<dir>/<file>.c.o (CMake mirrors the tree)
            parts = parts[1:] if parts[0] == "src" and len(parts) > 2 else parts[-2:]
            if len(parts) < 2:
                continue
            rel = "/".join(parts)[:-2]
            # Skip objects whose source is gone (a file moved since the
            # last configure leaves its old object behind).
            if os.path.exists(os.path.join(src, rel)):
                objs.append((rel, path))
    return sorted(objs)


def nm(path):
    out = subprocess.run(["nm", "-P", path], capture_output=True, text=True,
                         check=True).stdout
    strong, weak, undefined = set(), set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2 or len(f[1]) != 1:
            continue
        t = f[1]
        if t in "Uvw":
            undefined.add(f[0])
        elif t in "VW":
            weak.add(f[0])
        elif t.isupper() or t in "ui":
            strong.add(f[0])
        # lower case: local to this object, nobody else can call it
    return strong, weak, undefined


def call_edges(src, build):
    """[(from rel, to rel, text)] or None when nothing is built."""
    objs = object_files(src, build)
    if not objs:
        return None
    owner, weak_owner, uses = {}, {}, []
    for rel, path in objs:
        strong, weak, undefined = nm(path)
        for s in strong:
            owner.setdefault(s, rel)
        for s in weak:
            weak_owner.setdefault(s, rel)
        uses.append((rel, undefined))
    out = []
    for rel, undefined in uses:
        for s in sorted(undefined):
            to = owner.get(s) or weak_owner.get(s)
            if to is None or to == rel or s in LIBC_INTERPOSED:
                continue
            out.append((rel, to, f"src/{rel} calls {s} (src/{to})"))
    return out


# ------------------------------------------------------------ graphs

def sccs(nodes, succ):
    """Tarjan's strongly connected components, each sorted, in a stable order."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        # iterative, so deep graphs do not hit the recursion limit
        work = [(v, iter(sorted(succ.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            u, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ.get(w, ())))))
                    break
                if w in on:
                    low[u] = min(low[u], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[u])
                if low[u] == index[u]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == u:
                            break
                    out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out  # dependencies before their users (reverse topological)


def circle_path(comp, succ):
    """One concrete circle through comp[0], as a list of modules."""
    start, inside = comp[0], set(comp)
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for u in frontier:
            for w in sorted(succ.get(u, ())):
                if w == start:
                    path = [u]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return list(reversed(path)) + [start]
                if w in inside and w not in prev:
                    prev[w] = u
                    nxt.append(w)
        frontier = nxt
    return comp


def fewest_upward(comp, succ):
    """Order comp lowest first with the fewest edges pointing up."""
    n = len(comp)
    idx = {v: i for i, v in enumerate(comp)}
    # into[v]: bit set of members with an edge to v (they must sit above v
    # or that edge points up)
    into = [0] * n
    for u in comp:
        for w in succ.get(u, ()):
            if w in idx:
                into[idx[w]] |= 1 << idx[u]
    if n <= EXACT_LIMIT:
        # cost[S]: fewest upward edges with the members of S at the bottom
        full = (1 << n) - 1
        cost = [None] * (1 << n)
        pick = [0] * (1 << n)
        cost[0] = 0
        for s in range(1 << n):
            if cost[s] is None:
                continue
            for v in range(n):
                if s >> v & 1:
                    continue
                # v goes next, above all of S: each u in S with u -> v points up
                c = cost[s] + bin(into[v] & s).count("1")
                t = s | 1 << v
                if cost[t] is None or c < cost[t]:
                    cost[t], pick[t] = c, v
        order, s = [], full
        while s:
            order.append(comp[pick[s]])
            s &= ~(1 << pick[s])
        return list(reversed(order))
    # greedy (Eades, Lin, Smyth) for big knots
    left, low_end, high_end = set(comp), [], []
    while left:
        changed = True
        while changed:
            changed = False
            for v in sorted(left):
                outs = [w for w in succ.get(v, ()) if w in left and w != v]
                ins = [u for u in left if v in succ.get(u, ()) and u != v]
                if not outs:  # uses nothing left: bottom
                    low_end.append(v)
                    left.discard(v)
                    changed = True
                elif not ins:  # used by nothing left: top
                    high_end.append(v)
                    left.discard(v)
                    changed = True
        if left:
            def delta(v):
                outs = sum(1 for w in succ.get(v, ()) if w in left and w != v)
                ins = sum(1 for u in left if v in succ.get(u, ()) and u != v)
                return (ins - outs, v)
            v = max(left, key=delta)  # most users, fewest uses: goes on top
            high_end.append(v)
            left.discard(v)
    return low_end + list(reversed(high_end))


def derived_order(nodes, succ):
    """{module: rank} lowest first: circles ordered inside with the fewest
    upward edges, everything else on the lowest rank it can take."""
    rank = {}
    for comp in sccs(nodes, succ):  # dependencies come first
        inside = set(comp)
        base = 0
        for u in comp:
            for w in succ.get(u, ()):
                if w not in inside:
                    base = max(base, rank[w] + 1)
        order = fewest_upward(comp, succ) if len(comp) > 1 else comp
        for i, v in enumerate(order):
            rank[v] = base + i
    return rank


# ------------------------------------------------------------ checks

def folder_graph(folder, edges, files):
    """Module graph inside folder: (modules, {(a, b): [texts]})."""
    modules = {module_of(r) for r in files if folder_of(r) == folder}
    pairs = defaultdict(list)
    for frm, to, why in edges:
        if folder_of(frm) == folder == folder_of(to):
            a, b = module_of(frm), module_of(to)
            if a != b:
                modules.update((a, b))
                pairs[(a, b)].append(why)
    return modules, pairs


def inside_folder(folder, order, edges, files, show_all, measure_only, kind="order"):
    """Print the inside of one folder against order (derived when None);
    return the number of failures (0 when measure_only)."""
    modules, pairs = folder_graph(folder, edges, files)
    succ = defaultdict(set)
    for a, b in pairs:
        succ[a].add(b)
    bad = 0
    label = "note" if measure_only else "UPWARD"
    if order is None:
        order = derived_order(modules, succ)
        print(f"{folder}/: no [order {folder}] or [plan {folder}]; the order "
              "with the fewest upward arrows, lowest first:")
        for r in sorted(set(order.values())):
            print("    " + " ".join(sorted(m for m in order if order[m] == r)))
    else:
        if measure_only:
            print(f"{folder}/: measured against [{kind} {folder}]")
        unlisted = sorted(modules - set(order))
        for m in unlisted:
            tag = "note: unlisted" if measure_only else "UNLISTED"
            print(f"{tag}: src/{folder}/{m}.[ch] has no place in [{kind} {folder}]")
        if not measure_only:
            bad += len(unlisted)
        for m in sorted(set(order) - modules):
            print(f"note: [{kind} {folder}] lists {m}, no such file in src/{folder}/")
    up = 0
    for (a, b), why in sorted(pairs.items()):
        if a not in order or b not in order:
            continue
        is_up = order[b] > order[a]
        up += is_up
        if is_up or show_all:
            tag = label if is_up else "ok"
            print(f"{tag}: {folder}/{a} -> {folder}/{b} ({len(why)} uses)")
            for w in sorted(why)[: (None if is_up else 3)]:
                print(f"    {w}")
    circles = [c for c in sccs(modules, succ) if len(c) > 1]
    for c in circles:
        tag = "note: circle" if measure_only else "CIRCLE"
        print(f"{tag} in {folder}/ ({len(c)} modules): {' '.join(c)}")
        print(f"    e.g. {' -> '.join(circle_path(c, succ))}")
    if measure_only:
        knotted = sum(len(c) for c in circles)
        print(f"{folder}/: {len(modules)} modules, {len(pairs)} arrows inside, "
              f"{up} upward, {len(circles)} circle(s) holding {knotted} module(s)")
    else:
        bad += up + len(circles)
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--build", default=None)
    ap.add_argument("--src", default=None)
    ap.add_argument("--layers", default=os.path.join(HERE, "layers.txt"))
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--report-folder", action="append", default=[], metavar="DIR")
    args = ap.parse_args()

    def path_arg(p):
        if os.path.isabs(p) or os.path.exists(p):
            return os.path.abspath(p)
        return os.path.join(ROOT, p)

    src = path_arg(args.src) if args.src else os.path.join(ROOT, "src")
    if not os.path.isdir(src):
        print(f"check_layers: no source tree at {src}", file=sys.stderr)
        return 2
    try:
        rank, orders, plans = read_table(path_arg(args.layers))
    except TableError as e:
        print(f"check_layers: {e}", file=sys.stderr)
        return 2

    unknown = [d for d in src_dirs(src) if d not in rank]
    if unknown:
        print(f"check_layers: src/{', src/'.join(unknown)} not in [layers]: "
              "give each folder its place", file=sys.stderr)
        return 1
    for d in list(orders) + list(plans) + args.report_folder:
        if d not in rank:
            print(f"check_layers: src/{d} is not a folder of [layers]", file=sys.stderr)
            return 2

    files = src_files(src)
    edges = include_edges(src, files)
    if args.build is None:
        print("check_layers: no --build: includes only")
    else:
        build = path_arg(args.build)
        calls = call_edges(src, build)
        if calls is None:
            print(f"check_layers: no built objects under {build}: includes only")
        else:
            edges += calls

    # Between folders.
    between = defaultdict(set)
    for frm, to, why in edges:
        a, b = folder_of(frm), folder_of(to)
        if a != b:
            between[(a, b)].add(why)
    bad = 0
    for (frm, to), why in sorted(between.items()):
        up = rank[to] > rank[frm]
        if up:
            bad += 1
        if up or args.list:
            tag = "UPWARD" if up else "ok"
            print(f"{tag}: {frm} -> {to} ({len(why)} uses)")
            for w in sorted(why)[: (None if up else 3)]:
                print(f"    {w}")

    # Inside the ordered folders.
    inside = 0
    for d in sorted(orders):
        inside += inside_folder(d, orders[d], edges, files, args.list, False)
    for d in args.report_folder:
        kind = "order" if d in orders else "plan"
        inside_folder(d, orders.get(d, plans.get(d)), edges, files, args.list, True, kind)

    if bad or inside:
        if bad:
            print(f"check_layers: {bad} upward edge(s); a layer must not use one above it")
        if inside:
            print(f"check_layers: {inside} upward edge(s), circle(s) or unlisted "
                  "module(s) inside ordered folders")
        return 1
    print("check_layers: no upward edges")
    return 0


if __name__ == "__main__":
    sys.exit(main())
