#!/usr/bin/env python3
"""diff_convert.py - the converter against an earlier revision's, on the fuzz loop's inputs.

    python3 tests/fuzz/diff_convert.py [--before REV] [--iterations N] [--seed S] [--extra F]...
    python3 tests/fuzz/diff_convert.py --fast GPUSIM [--iterations N] [--seed S] [--min-fast N]

A change that must not change any result (a faster reader, say) is checked here: each input,
a mutation of the seed corpus tests/fuzz/corpus/convert/ and of the --extra files (made by
fuzz_convert.py's mutate: byte flips, structural changes re-pickled under a random protocol),
is converted by traces/convert.py of this tree and by the one of git revision REV (default
main), in this process, with --reference; the trace, the reference, stderr and the exit status
must be identical. Each input that differs is printed (and kept beside the corpus' temporary
copy); the exit status is 1 when any differed. Standard library only.

With --fast GPUSIM, the two converters are this tree's, one reading snapshots with the C reader
of GPUSIM (gpusim read-snapshot) where it accepts them, the other always with its own walker
($GPUSIM_SNAPSHOT_READER=none): the C reader must decline whatever it would read otherwise. The
unmutated seeds come first; --min-fast N fails the run unless the C reader accepted at least N
inputs (a reader that declines everything passes every comparison).
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


def run(mod, data, wd, reader=None):
    """(exit status, stderr, trace bytes, reference bytes) of mod.main on data (reader: the
    value of $GPUSIM_SNAPSHOT_READER meanwhile, None to leave it)."""
    if reader is not None:
        os.environ["GPUSIM_SNAPSHOT_READER"] = reader
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
            rc = mod.main([src, "-o", outs[0], "--no-bound", "--reference", outs[1]])
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
    ap.add_argument("--fast", metavar="GPUSIM",
                    help="compare the C snapshot reader of GPUSIM with the converter's own")
    ap.add_argument("--min-fast", type=int, default=0, metavar="N")
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--extra", action="append", default=[], metavar="FILE",
                    help="another seed input (e.g. a small bench/big_snapshot.py snapshot)")
    args = ap.parse_args()
    wd = tempfile.mkdtemp(prefix="diff-convert-")
    after = load("convert_after", os.path.join(ROOT, "traces", "convert.py"))
    if args.fast:
        before = after
        readers = ("none", os.path.abspath(args.fast))
    else:
        old = checkout_traces(args.before, wd)
        before = load("convert_before", os.path.join(old, "convert.py"))
        after = load("convert_after", os.path.join(ROOT, "traces", "convert.py"))
        readers = (None, None)
    seeds = [d for _, d in fz.load_corpus(fz.CORPUS)]
    for path in args.extra:
        with open(path, "rb") as f:
            seeds.append(f.read())
    rng = random.Random(args.seed)
    differed = fast = 0
    inputs = (seeds + [None] * args.iterations) if args.fast else [None] * args.iterations
    for i, data in enumerate(inputs):
        if data is None:
            data = rng.choice(seeds)
            for _ in range(rng.randint(1, 3)):
                data = fz.mutate(data, rng)
        a, b = run(before, data, wd, readers[0]), run(after, data, wd, readers[1])
        if args.fast:
            fast += subprocess.run([readers[1], "read-snapshot", os.path.join(wd, "in.pickle")],
                                   stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL).returncode == 0
        if a != b:
            differed += 1
            keep = os.path.join(wd, f"differs-{i}.pickle")
            with open(keep, "wb") as f:
                f.write(data)
            print(f"input {i} ({keep}): before {a[0]} {a[1][:200]!r}; after {b[0]} "
                  f"{b[1][:200]!r}")
    if args.fast:
        print(f"diff_convert: {len(inputs)} inputs, {differed} differed, the C reader took "
              f"{fast} (of them)")
        return 1 if differed or fast < args.min_fast else 0
    print(f"diff_convert: {args.iterations} inputs, {differed} differed (before: "
          f"{args.before})")
    return 1 if differed else 0


if __name__ == "__main__":
    sys.exit(main())
