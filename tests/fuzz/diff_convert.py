#!/usr/bin/env python3
"""diff_convert.py - the converter against an earlier revision's, on the fuzz loop's inputs.

    python3 tests/fuzz/diff_convert.py [--before REV] [--iterations N] [--seed S] [--extra F]...

A change that must not change any result (a faster reader, say) is checked here: each input,
a mutation of the seed corpus tests/fuzz/corpus/convert/ and of the --extra files (made by
fuzz_convert.py's mutate: byte flips, structural changes re-pickled under a random protocol),
is converted by traces/convert.py of this tree and by the one of git revision REV (default
main), in this process, with --reference; the trace, the reference, stderr and the exit status
must be identical. Each input that differs is printed (and kept beside the corpus' temporary
copy); the exit status is 1 when any differed. Standard library only.
"""
import argparse
import contextlib
import importlib.util
import io
import os
import random
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import fuzz_convert as fz  # noqa: E402  (its mutations and corpus)


def load(name, path):
    """The converter at path, with a package of its own: the gsconvert an earlier one imported
    is let go of first (each loaded converter keeps its modules), so two revisions' packages are
    never one."""
    for k in [k for k in sys.modules if k == "gsconvert" or k.startswith("gsconvert.")]:
        del sys.modules[k]
    # its folder first on the path: convert.py adds it only when it is not there at all, and
    # fuzz_convert put this tree's there already (the earlier revision's package was imported
    # for this tree's convert.py, which failed once a module was added)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def checkout_traces(rev, into):
    """traces/ as it was at git revision rev, into into/traces (the converter was one file
    before gsconvert/, a package, came beside it: either is taken whole)."""
    tar = subprocess.run(["git", "-C", ROOT, "archive", "--format=tar", rev, "traces"],
                         capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=tar, check=True)
    return os.path.join(into, "traces")


def run(mod, data, wd):
    """(exit status, stderr, trace bytes, reference bytes) of mod.main on data."""
    src = os.path.join(wd, "in.pickle")
    with open(src, "wb") as f:
        f.write(data)
    outs = [os.path.join(wd, "o.gstrace"), os.path.join(wd, "r.json")]
    for p in outs:
        if os.path.exists(p):
            os.unlink(p)
    err = io.StringIO()
    signal.alarm(60)
    try:
        with contextlib.redirect_stderr(err):
            rc = mod.main([src, "-o", outs[0], "--reference", outs[1]])
    except Exception as e:  # noqa: BLE001 - a difference to report, not a crash of this loop
        rc = f"exception {e!r}"
    finally:
        signal.alarm(0)
    got = []
    for p in outs:
        try:
            with open(p, "rb") as f:
                got.append(f.read())
        except OSError:
            got.append(None)
    return (rc, err.getvalue(), *got)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", default="main", metavar="REV")
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--extra", action="append", default=[], metavar="FILE",
                    help="another seed input (e.g. a small bench/big_snapshot.py snapshot)")
    args = ap.parse_args()
    wd = tempfile.mkdtemp(prefix="diff-convert-")
    old = checkout_traces(args.before, wd)
    before = load("convert_before", os.path.join(old, "convert.py"))
    after = load("convert_after", os.path.join(ROOT, "traces", "convert.py"))
    seeds = [d for _, d in fz.load_corpus(fz.CORPUS)]
    for path in args.extra:
        with open(path, "rb") as f:
            seeds.append(f.read())
    rng = random.Random(args.seed)
    differed = 0
    for i in range(args.iterations):
        data = rng.choice(seeds)
        for _ in range(rng.randint(1, 3)):
            data = fz.mutate(data, rng)
        a, b = run(before, data, wd), run(after, data, wd)
        if a != b:
            differed += 1
            keep = os.path.join(wd, f"differs-{i}.pickle")
            with open(keep, "wb") as f:
                f.write(data)
            print(f"input {i} ({keep}): before {a[0]} {a[1][:200]!r}; after {b[0]} "
                  f"{b[1][:200]!r}")
    print(f"diff_convert: {args.iterations} inputs, {differed} differed (before: "
          f"{args.before})")
    return 1 if differed else 0


if __name__ == "__main__":
    sys.exit(main())
