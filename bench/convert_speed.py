#!/usr/bin/env python3
"""convert_speed.py - CPU time and peak memory of the converter, against an earlier one.

    python3 bench/convert_speed.py SNAPSHOT [--runs N] [--before REV [--before-gpusim GPUSIM]]
                                   [--out NAME]
    python3 bench/convert_speed.py SNAPSHOT --c-reader GPUSIM [--runs N] [--out NAME]
    python3 bench/convert_speed.py SNAPSHOT --stages
    python3 bench/convert_speed.py TRACE.gstrace.gz --gzip-levels

Converts SNAPSHOT (e.g. one written by bench/big_snapshot.py) with traces/convert.py of this
tree and with the one of git revision REV (default: main), N times each (default 3), the two
alternating so that a change in the machine's load falls on both; each run is a process of
its own, measured by os.wait4 (user + system CPU seconds and peak RSS, as /usr/bin/time -v
reports them). Prints every run, then per converter the median with its range. The outputs of
the two are compared (cmp) on the first run: a difference is an error (exit 1). CPU time, not
wall time, is the figure: on a shared machine wall time moves several-fold between identical
runs. --stages instead converts once in this process with this tree's converter and prints
the CPU time of each stage (reading the snapshot, pool and empty_cache inference, merging
devices, building the trace, writing it: rendering and gzip, done together as the file is
written) and the peak RSS after each. --gzip-levels compresses the text of a converted trace
(gzip) as the converter does (raw deflate, zlib.compressobj) at levels 6 to 9, N times each,
and prints the median CPU time with its range and the size at each. --c-reader GPUSIM
compares this tree's converter with itself instead: reading snapshots with its own walker
($GPUSIM_SNAPSHOT_READER=none) and with GPUSIM's C reader (gpusim read-snapshot; its CPU is
counted, as a child of the converter). --before-gpusim GPUSIM: a gpusim built at REV, which
the converter of REV then runs as this tree's runs build/gpusim (its snapshot reader in C, the
bound it stores); without it that converter finds none. --out NAME: the outputs' name (default out.gstrace.gz;
NAME.gsbin for the binary format, as whatif's conversion). Standard library only.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(convert, snapshot, out, reader=None):
    """(cpu seconds, user, sys, peak RSS in MiB) of one conversion in a process of its own
    (reader: its $GPUSIM_SNAPSHOT_READER, None to leave the environment as it is)."""
    env = dict(os.environ, GPUSIM_SNAPSHOT_READER=reader) if reader is not None else None
    p = subprocess.Popen([sys.executable, convert, snapshot, "-o", out, "--quiet"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"convert_speed.py: {convert} failed: {err.strip()}")
    return ru.ru_utime + ru.ru_stime, ru.ru_utime, ru.ru_stime, ru.ru_maxrss / 1024


def stages(snapshot):
    """CPU seconds of each stage of one conversion, in this process."""
    import contextlib
    import importlib.util
    import io
    import time
    spec = importlib.util.spec_from_file_location(
        "convert", os.path.join(ROOT, "traces", "convert.py"))
    conv = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conv)
    import resource
    spent = {}
    peak = {}

    # the stages are called from the package's cli module (a converter of one file, as an
    # earlier revision was: from the module itself)
    caller = getattr(conv, "cli", conv)

    def timed(name):
        f = getattr(caller, name)

        def g(*a, **k):
            t = time.process_time()
            try:
                return f(*a, **k)
            finally:
                spent[name] = spent.get(name, 0.0) + time.process_time() - t
                peak[name] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        setattr(caller, name, g)
    for name in ("read_snapshot", "infer_all_pools", "infer_all_empty_cache", "merge_devices",
                 "build_trace", "render_trace", "write_chunks", "maybe_gzip"):
        if hasattr(caller, name):
            timed(name)
    out = os.path.join(tempfile.mkdtemp(prefix="convert-speed-"), "out.gstrace.gz")
    t = time.process_time()
    with contextlib.redirect_stderr(io.StringIO()):
        if conv.main([snapshot, "-o", out, "--quiet"]) != 0:
            sys.exit("convert_speed.py: the conversion failed")
    total = time.process_time() - t
    print(" ".join(f"{k} {v:.2f} s (peak RSS {peak[k]:.0f} MiB)" for k, v in spent.items()) +
          f"; total {total:.2f} s CPU")


def gzip_levels(trace, runs):
    """CPU seconds and compressed size of the trace's text at gzip levels 6-9."""
    import gzip
    import time
    import zlib
    with gzip.open(trace, "rb") as f:
        raw = f.read()
    print(f"{len(raw)} bytes of text")
    for level in (6, 7, 8, 9):
        ts = []
        for _ in range(runs):
            t = time.process_time()
            c = zlib.compressobj(level, zlib.DEFLATED, -15)
            n = len(c.compress(raw)) + len(c.flush())
            ts.append(time.process_time() - t)
        print(f"level {level}: CPU median {statistics.median(ts):.2f} s (range {min(ts):.2f} - "
              f"{max(ts):.2f}), {n} bytes")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("snapshot")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--before", default="main", metavar="REV")
    ap.add_argument("--stages", action="store_true")
    ap.add_argument("--gzip-levels", action="store_true")
    ap.add_argument("--c-reader", metavar="GPUSIM")
    ap.add_argument("--before-gpusim", metavar="GPUSIM")
    ap.add_argument("--out", default="out.gstrace.gz", metavar="NAME")
    args = ap.parse_args()
    if args.gzip_levels:
        gzip_levels(args.snapshot, args.runs)
        return
    if args.stages:
        stages(args.snapshot)
        return
    tmp = tempfile.mkdtemp(prefix="convert-speed-")
    here = os.path.join(ROOT, "traces", "convert.py")
    if args.c_reader:
        converters = [("the walker", here, "none"),
                      ("the C reader", here, os.path.abspath(args.c_reader))]
    else:
        # traces/ as it was at REV, whole: the converter with its package (gsconvert/) if it
        # had one
        tar = subprocess.run(["git", "-C", ROOT, "archive", "--format=tar", args.before,
                              "traces"], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=tar, check=True)
        before = os.path.join(tmp, "traces")
        if args.before_gpusim:
            # the before tree's own build/gpusim, found by its converter as this tree's is
            os.mkdir(os.path.join(tmp, "build"))
            os.symlink(os.path.abspath(args.before_gpusim), os.path.join(tmp, "build", "gpusim"))
        converters = [(f"before ({args.before})", os.path.join(before, "convert.py"), None),
                      ("this tree", here, None)]
    results = {name: [] for name, _, _ in converters}
    for r in range(args.runs):
        outs = []
        for k, (name, conv, reader) in enumerate(converters):
            out = os.path.join(tmp, f"{k}-{args.out}")
            cpu, user, sys_, rss = run(conv, args.snapshot, out, reader)
            results[name].append((cpu, rss))
            print(f"run {r + 1} {name}: {cpu:.2f} s CPU (user {user:.2f}, sys {sys_:.2f}), "
                  f"peak RSS {rss:.0f} MiB", flush=True)
            outs.append(out)
        if r == 0 and subprocess.run(["cmp", "-s", outs[0], outs[1]]).returncode != 0:
            sys.exit("convert_speed.py: the two converters' outputs differ")
    for name, rs in results.items():
        cpu = [c for c, _ in rs]
        rss = [m for _, m in rs]
        print(f"{name}: CPU median {statistics.median(cpu):.2f} s (range {min(cpu):.2f} - "
              f"{max(cpu):.2f}), peak RSS median {statistics.median(rss):.0f} MiB "
              f"({len(rs)} runs)")
    try:
        load = open("/proc/loadavg").read().split()[:3]
        print("load average after: " + " ".join(load))
    except OSError:
        pass


if __name__ == "__main__":
    main()
