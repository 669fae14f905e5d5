#!/usr/bin/env python3
"""alloc_overhead.py - an allocator's own time on the GPU, for one program's requests.

A program's step time moves by more from run to run than the allocator can add to it (LLM
generation on an H100: native PyTorch against itself, up to 18% between rounds; BENCHMARKS.md,
"LLM generation's step time in rounds"), so the target "step time within 1% of native" cannot
be read from step times there. This measures what the allocator adds instead: a recorded
program's requests (a gpusim trace, text or gzip text) made again, in order and with nothing
else running, through torch.cuda.caching_allocator_alloc and caching_allocator_delete, under
native PyTorch's allocator or gpusim's (build/libgpusim_torch.so through
CUDAPluggableAllocator, GPUSIM_POLICY choosing the policy). The loop's Python costs the same
under each, so the difference of two allocators' times is the difference of their own costs
(device calls included) for those requests: over the program's steps, what one can add to a
step against the other.

    python3 lab/alloc_overhead.py run --allocator native TRACE -o native.json      # on the GPU
    GPUSIM_POLICY=stitch python3 lab/alloc_overhead.py run --allocator gpusim TRACE -o s.json
    python3 lab/alloc_overhead.py table DIR [--steps N]       # here: the JSON files of DIR

`run` makes --passes passes over the requests (the first warms the caches and the allocator,
as a program's first steps do) and records each pass's wall time; every request of a pass is
freed by its end. Frees are immediate (a trace's deferred completions are not waited for), and
a trace of several streams is refused: the loop has no kernels to order. `table` prints, per
allocator, the median pass time after the first and its time per request, and against the
native allocator the difference per pass and, with --steps (the program's steps in one pass of
its trace), per step. PyTorch is needed on the GPU side only; `table` uses the standard library.
"""
import argparse
import glob
import gzip
import json
import os
import statistics
import sys
import time


def read_requests(path):
    """The trace's allocs and frees as [(is_alloc, id, size)], in order."""
    opener = gzip.open if path.endswith(".gz") else open
    out, streams = [], set()
    with opener(path, "rt") as f:
        for line in f:
            if line.startswith("#") or line.startswith("seq,"):
                continue
            seq, t, op, client, dev, stream, ident, size = line.rstrip("\n").split(",")[:8]
            if op == "alloc":
                out.append((True, int(ident), int(size)))
                streams.add(stream)
            elif op == "free":
                out.append((False, int(ident), 0))
    if len(streams) > 1:
        sys.exit(f"{path}: {len(streams)} streams: the loop has no kernels to order them")
    return out


def run(a):
    import torch
    if a.allocator == "gpusim":
        alloc = torch.cuda.memory.CUDAPluggableAllocator(a.lib, "gpusim_malloc", "gpusim_free")
        torch.cuda.memory.change_current_allocator(alloc)
    reqs = read_requests(a.trace)
    torch.cuda.init()
    stream = torch.cuda.current_stream().cuda_stream
    take, give = torch.cuda.caching_allocator_alloc, torch.cuda.caching_allocator_delete
    passes = []
    for _ in range(a.passes):
        live = {}
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for is_alloc, ident, size in reqs:
            if is_alloc:
                live[ident] = take(max(size, 1), 0, stream)
            else:
                p = live.pop(ident, None)
                if p is not None:
                    give(p)
        for p in live.values():
            give(p)
        torch.cuda.synchronize()
        passes.append(time.perf_counter() - t0)
    doc = {"allocator": a.allocator, "gpusim_policy": os.environ.get("GPUSIM_POLICY"),
           "pytorch_cuda_alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
           "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
           "trace": os.path.basename(a.trace), "requests": len(reqs), "pass_seconds": passes}
    with open(a.output, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def label(d):
    if d["allocator"] == "gpusim":
        return "gpusim " + (d["gpusim_policy"] or "stitch")
    return "native" + (" " + d["pytorch_cuda_alloc_conf"] if d["pytorch_cuda_alloc_conf"] else "")


def table(a):
    runs = {}
    for path in sorted(glob.glob(os.path.join(a.dir, "*.json"))):
        d = json.load(open(path))
        if "pass_seconds" in d:
            runs.setdefault(label(d), []).append(d)
    if "native" not in runs:
        sys.exit(f"{a.dir}: no run of the native allocator to compare with")

    def median_pass(ds):
        return statistics.median(s for d in ds for s in d["pass_seconds"][1:])

    base = median_pass(runs["native"])
    n = runs["native"][0]["requests"]
    print("| allocator | runs | median pass (ms) | us a request | against native, per pass (ms) |"
          + (" per step (ms, %d steps) |" % a.steps if a.steps else ""))
    print("|---|---|---|---|---|" + ("---|" if a.steps else ""))
    for name, ds in sorted(runs.items(), key=lambda kv: kv[0] != "native"):
        m = median_pass(ds)
        row = f"| {name} | {len(ds)} | {m * 1e3:.1f} | {m / n * 1e6:.3f} | {(m - base) * 1e3:+.1f} |"
        if a.steps:
            row += f" {(m - base) * 1e3 / a.steps:+.3f} |"
        print(row)
    print(f"\n{n} requests a pass; medians of every pass after the first of every run")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("trace")
    r.add_argument("--allocator", choices=("native", "gpusim"), required=True)
    r.add_argument("--lib", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "..", "build", "libgpusim_torch.so"))
    r.add_argument("--passes", type=int, default=6)
    r.add_argument("-o", "--output", required=True)
    t = sub.add_parser("table")
    t.add_argument("dir")
    t.add_argument("--steps", type=int, default=0)
    a = ap.parse_args()
    run(a) if a.cmd == "run" else table(a)


if __name__ == "__main__":
    main()
