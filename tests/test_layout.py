#!/usr/bin/env python3
"""test_layout.py SRCDIR - the size guard: one job per file, and functions a reader can hold;
every source file of the product named in the layout of the source tree (docs/layout.md); no
loop of files in sim/ or plots/; no folder's meson.build naming another folder's library, whose
dependencies come from the layers table of the top-level meson.build alone.

Outside tests/, no C file passes 900 lines, no C function 120 lines, no Python module 1,200
lines, unless tests/data/size-allowlist.txt names it with one line of why ("PATH why" for a
file, "PATH:FUNCTION why" for a function). An entry that no longer needs its place fails too,
so the list only shrinks. A C function is counted from the line that opens its body, a '{' in
column 0 after its signature, to the '}' in column 0 that closes it (the project's style:
a function's braces on lines of their own). Standard library only.
"""
import os
import re
import subprocess
import sys

C_FILE_MAX, C_FUNC_MAX, PY_FILE_MAX = 900, 120, 1200
LAYOUT = "docs/layout.md"
# the folders of the product, whose every source file the layout (docs/layout.md) names
PRODUCT = ("util", "backends", "core", "policies", "traces", "sim", "report", "plots", "cli",
           "torch")
SIG = re.compile(r"^[A-Za-z_][\w \t\*]*?\b(\w+)\s*\(")


def tracked(src):
    try:
        out = subprocess.run(["git", "-C", src, "ls-files"], capture_output=True, text=True,
                             check=True).stdout.split("\n")
        return [f for f in out if f]
    except (OSError, subprocess.CalledProcessError):
        found = []
        for root, dirs, files in os.walk(src):
            dirs[:] = [d for d in dirs if not d.startswith((".", "build"))]
            found += [os.path.relpath(os.path.join(root, f), src) for f in files]
        return found


def functions(lines):
    """(name, length) of each function body: a '{' in column 0 to its '}' in column 0."""
    out, name, start = [], None, None
    for i, line in enumerate(lines):
        if start is None:
            if line.startswith("{") and i > 0:
                # the name: the nearest signature line above
                for j in range(i - 1, max(-1, i - 8), -1):
                    m = SIG.match(lines[j])
                    if m:
                        name = m.group(1)
                        break
                else:
                    name = f"line {i + 1}"
                start = i
        elif line.startswith("}"):
            out.append((name, i - start + 1))
            start = None
    return out


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    allow_path = os.path.join(src, "tests", "data", "size-allowlist.txt")
    allowed = {}
    with open(allow_path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, _, why = line.partition(" ")
            if not why.strip():
                print(f"FAIL: {allow_path}:{n}: {key} has no why")
                return 1
            allowed[key] = why
    over, used = [], set()
    for rel in tracked(src):
        if rel.startswith("tests/") or not os.path.isfile(os.path.join(src, rel)):
            continue
        if rel.endswith((".c", ".h", ".py")):
            with open(os.path.join(src, rel), encoding="utf-8", errors="replace") as f:
                lines = f.read().split("\n")
            limit = PY_FILE_MAX if rel.endswith(".py") else C_FILE_MAX
            if len(lines) > limit:
                (used.add(rel) if rel in allowed else over.append(f"{rel}: {len(lines)} lines (> {limit})"))
            if rel.endswith(".c"):
                for name, length in functions(lines):
                    key = f"{rel}:{name}"
                    if length > C_FUNC_MAX:
                        (used.add(key) if key in allowed else
                         over.append(f"{key}: {length} lines (> {C_FUNC_MAX})"))
    # Every source file of the product's folders is named in the layout of the source tree,
    # docs/layout.md (the block of lines from "    util/" to the first blank line after it), by
    # its file name. The README, for users, no longer holds it.
    layout_path = os.path.join(src, LAYOUT)
    try:
        with open(layout_path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        print(f"FAIL: {LAYOUT}: {e.strerror}: the layout of the source tree is missing")
        return 1
    at = text.find("\n    util/ ")
    if at < 0:
        print(f"FAIL: {LAYOUT}: no layout block (a line starting '    util/ ')")
        return 1
    layout = text[at:text.find("\n\n", at)]
    unnamed = []
    for rel in tracked(src):
        top = rel.split("/", 1)[0]
        if top in PRODUCT and rel.endswith((".c", ".h", ".py", ".cpp", ".map", ".sh")) and \
                os.path.basename(rel) not in layout:
            unnamed.append(rel)
    for u in unnamed:
        print(f"FAIL: {u}: not named in {LAYOUT}'s layout (the block from '    util/')")
    # No loop of files inside sim/ or plots/: module X (X.c and X.h) depends on Y when either
    # includes Y.h of the same folder; the dependencies must form no cycle (replay.c included
    # clients.h, whose clients.h included replay.h).
    loops = []
    for folder in ("sim", "plots"):
        deps = {}
        for rel in tracked(src):
            d, _, name = rel.partition("/")
            if d != folder or "/" in name or not name.endswith((".c", ".h")):
                continue
            mod = name[:-2]
            with open(os.path.join(src, rel), encoding="utf-8", errors="replace") as f:
                for inc in re.findall(r'^#include "([\w-]+)\.h"', f.read(), re.M):
                    if inc != mod and os.path.exists(os.path.join(src, folder, inc + ".h")):
                        deps.setdefault(mod, set()).add(inc)
        state = {}

        def visit(m, path):
            state[m] = 1
            for n in sorted(deps.get(m, ())):
                if state.get(n) == 1:
                    loops.append(f"{folder}/: " + " -> ".join(path[path.index(n):] + [n]))
                elif not state.get(n):
                    visit(n, path + [n])
            state[m] = 2
        for m in sorted(deps):
            if not state.get(m):
                visit(m, [m])
    for lp in loops:
        print(f"FAIL: a loop of files: {lp}")
    # The layers are stated once, in the top-level meson.build's table: a folder's meson.build
    # gets its dependencies on the folders below as layer_deps and names none of them itself
    # (sim/meson.build listing traces_dep beside layer_deps would build on traces whatever the
    # table said, and the table's probes would not see it).
    bypass = []
    names = "|".join(PRODUCT)
    for folder in PRODUCT:
        path = os.path.join(src, folder, "meson.build")
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                code = line.split("#", 1)[0]
                for m in re.finditer(rf"\b({names})_dep\b", code):
                    if m.group(1) != folder:
                        bypass.append(f"{folder}/meson.build:{n}: {m.group(0)}")
    for b in bypass:
        print(f"FAIL: {b}: a folder's dependencies on the others come from the layers table of "
              "meson.build (layer_deps), not from its own meson.build")
    stale = sorted(set(allowed) - used)
    for o in over:
        print(f"FAIL: {o}: split it, or name it in tests/data/size-allowlist.txt with why")
    for s in stale:
        print(f"FAIL: {s}: within the limits now; take it off tests/data/size-allowlist.txt")
    if over or stale or unnamed or loops or bypass:
        return 1
    print(f"layout: ok ({len(used)} allowed by name)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
