#!/usr/bin/env python3
"""check_layers.py - fail when a layer of src/ reaches up to a layer above it.

DESIGN.md's rule: data flows one way; a layer knows nothing of the layers
above it.  Two kinds of edge are read, so neither can hide the other:

  includes  `#include "dir/file.h"` in src/<dir>/*.[ch] (from the text)
  calls     a symbol an object file of src/<dir> uses and an object file
            of another folder defines (from `nm` on the built objects, so
            macros and inline helpers in headers do not count, and a call
            through a header of the same layer does)

Usage: scripts/check_layers.py [--build DIR] [--list]
  --build DIR  where the srn_objs object files are (default build/); without
               built objects only includes are checked, and it says so
  --list       print every cross-folder edge, not only the upward ones
Exit 0 when no edge runs upward, 1 otherwise.
"""
import argparse
import os
import re
import subprocess
import sys
from collections import defaultdict

# Lowest first.  A folder may use its own layer and every layer below it.
LAYERS = [
    ("wire",),              # pure header/ICRC functions
    ("diag",),              # counters, logs, segment, the clock
    ("link",),              # sockets, rings, pcap, transmit queue (counts into diag)
    ("core",),              # object state
    ("transport",),         # requester, responder, completer
    ("engine",),            # the NIC's run loop: progress, lifecycle
    ("verbs",),             # ibv_* entry points
    ("cm",),                # connection manager: QP1, CM MADs, rdma_cm ids (librdmacm.so.1)
    ("rdmacm",),            # rdma_* entry points and librdmacm's version map
    ("rsocket",),           # rsockets (r* calls of librdmacm) on the rdma_* API
    ("abi",),               # symbol-version shims so binaries load
]
RANK = {d: i for i, group in enumerate(LAYERS) for d in group}
# libc functions the library defines over libc's (verbs/verbs_unmap.c: the
# calls that take memory away revoke registrations first).  A lower layer
# calling mmap calls libc; that the dynamic linker routes it through us is
# not a dependency of that layer on verbs/.
LIBC_INTERPOSED = {"mmap", "mmap64", "mremap", "munmap", "mprotect", "shmdt"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)


def src_dirs(root):
    src = os.path.join(root, "src")
    return sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))


def include_edges(root):
    edges = defaultdict(set)  # (from_dir, to_dir) -> {"file: include"}
    for d in src_dirs(root):
        folder = os.path.join(root, "src", d)
        for name in sorted(os.listdir(folder)):
            if not name.endswith((".c", ".h")):
                continue
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                text = f.read()
            for m in INCLUDE.finditer(text):
                to = m.group(1)
                if to != d:
                    edges[(d, to)].add(f"src/{d}/{name} includes {to}/")
    return edges


def object_files(root, build):
    objs = []
    for top, _, files in os.walk(build):
        tag = next((t for t in ("srn_objs.dir", "srn_cm_objs.dir") if t in top), None)
        if tag is None:
            continue
        for name in files:
            if name.endswith(".o"):
                path = os.path.join(top, name)
                rel = path.split(tag + os.sep, 1)[1]
                parts = rel.split(os.sep)
                # .../srn_objs.dir/<dir>/<file>.c.o (CMake mirrors src/)
                # Skip objects whose source is gone (a file moved since the
                # last configure leaves its old object behind).
                src = os.path.join(root, "src", parts[-2], parts[-1][:-2])
                if len(parts) >= 2 and os.path.exists(src):
                    objs.append((parts[-2], parts[-1][:-4], path))
    return objs


def nm(path):
    out = subprocess.run(["nm", "-P", path], capture_output=True, text=True,
                         check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        (undefined if f[1] == "U" else defined).add(f[0])
    return defined, undefined


def call_edges(root, build):
    objs = object_files(root, build)
    if not objs:
        return None
    owner = {}
    uses = []
    for d, name, path in objs:
        defined, undefined = nm(path)
        for s in defined:
            owner[s] = (d, name)
        uses.append((d, name, undefined))
    edges = defaultdict(set)
    for d, name, undefined in uses:
        for s in undefined:
            if s in owner and owner[s][0] != d and s not in LIBC_INTERPOSED:
                to, to_file = owner[s]
                edges[(d, to)].add(f"src/{d}/{name} calls {s} (src/{to}/{to_file})")
    return edges


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    build = args.build if os.path.isabs(args.build) else os.path.join(root, args.build)

    unknown = [d for d in src_dirs(root) if d not in RANK]
    if unknown:
        print(f"check_layers: src/{', src/'.join(unknown)} not in LAYERS: "
              "give each folder its place", file=sys.stderr)
        return 1
    edges = include_edges(root)
    calls = call_edges(root, build)
    if calls is None:
        print(f"check_layers: no built objects under {build}: includes only")
    else:
        for k, v in calls.items():
            edges[k] |= v

    bad = 0
    for (frm, to), why in sorted(edges.items()):
        up = RANK[to] > RANK[frm]
        if up:
            bad += 1
        if up or args.list:
            tag = "UPWARD" if up else "ok"
            print(f"{tag}: {frm} -> {to} ({len(why)} uses)")
            for w in sorted(why)[: (None if up else 3)]:
                print(f"    {w}")
    if bad:
        print(f"check_layers: {bad} upward edge(s); a layer must not use one above it")
        return 1
    print("check_layers: no upward edges")
    return 0


if __name__ == "__main__":
    sys.exit(main())
