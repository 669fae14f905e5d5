#!/usr/bin/env python3
"""device_pools.py - drive the real pools that gpusim models with a trace's requests.

  device_pools.py device OUTDIR TRACE...   on the GPU machine (CuPy 14 there)
  device_pools.py compare OUTDIR GPUSIM    here: the same traces through gpusim, side by side

`device` replays each trace's alloc/free/empty_cache events in order, on the trace's streams,
through two real allocators and writes OUTDIR/pools-device.csv, one row per trace and pool:
  cupy       cupy.cuda.MemoryPool (CuPy's own pool, the `cupy` policy's original), over an
             allocator that counts the cudaMallocs it makes: peak total_bytes() (reserved),
             peak used_bytes(), device allocations;
  async-max  the device's default cudaMallocAsync pool (mallocAsync/freeAsync on the trace's
             streams) with cudaMemPoolAttrReleaseThreshold at UINT64_MAX, as PyTorch's
             backend:cudaMallocAsync sets it: ReservedMemHigh, UsedMemHigh, ReservedMemCurrent
             at the end (before the final frees), and how the pool grew (every change of
             ReservedMemCurrent after a request: the step sizes, to fit the model's chunks);
  async-0    the same with the driver's default threshold 0 and no synchronisation until the
             end: whether the pool gives memory back without one.
A free whose trace has a free_done is made at the free_done (the block was in use on another
stream until then), as gpusim's replay completes it. empty_cache: CuPy's free_all_blocks(), and
for the driver's pool a device synchronisation and cudaMemPoolTrimTo(0) (what PyTorch does).

`compare` reads that CSV, replays each trace (the same file names, found in OUTDIR or
traces/data) with `gpusim replay --format json` under `cupy` and the cuda-async model, and
writes OUTDIR/pools-compare.txt: measured vs modelled peak reserved and device allocations.
Standard library only, except CuPy on the device.
"""
import csv
import gzip
import json
import os
import subprocess
import sys

FIELDS = ["trace", "pool", "events", "allocs", "peak_reserved", "peak_used", "device_allocs",
          "reserved_end", "steps"]


def read_trace(path):
    """The trace's events as (op, stream, id, size), and the ids freed by a free_done."""
    opener = gzip.open if path.endswith(".gz") else open
    events, deferred = [], set()
    with opener(path, "rt") as f:
        for line in f:
            if line.startswith("#") or line.startswith("seq,") or not line.strip():
                continue
            seq, _t, op, _client, _dev, stream, ident, size = line.rstrip("\n").split(",")
            if op == "free_done":
                deferred.add(int(ident))
            if op in ("alloc", "free", "free_done", "empty_cache"):
                events.append((op, int(stream), int(ident), int(size)))
    return events, deferred


def frees_at(op, ident, deferred):
    """Whether this event releases allocation ident in the real pools."""
    return (op == "free" and ident not in deferred) or op == "free_done"


def run_cupy(events, deferred):
    import cupy

    counts = {"n": 0}

    def allocator(size):
        counts["n"] += 1
        return cupy.cuda.MemoryPointer(cupy.cuda.Memory(size), 0)

    pool = cupy.cuda.MemoryPool(allocator)
    streams, live = {}, {}
    peak_total = peak_used = 0

    def stream_of(s):
        if s == 0:
            return cupy.cuda.Stream.null
        if s not in streams:
            streams[s] = cupy.cuda.Stream(non_blocking=True)
        return streams[s]

    for op, s, ident, size in events:
        if op == "alloc":
            with stream_of(s):
                live[ident] = pool.malloc(size)
            peak_total = max(peak_total, pool.total_bytes())
            peak_used = max(peak_used, pool.used_bytes())
        elif op == "empty_cache":
            pool.free_all_blocks()
        elif frees_at(op, ident, deferred):
            live.pop(ident, None)  # the pointer's last reference: back to the pool
    end = pool.total_bytes()
    live.clear()
    pool.free_all_blocks()
    cupy.cuda.Device().synchronize()
    return {"peak_reserved": peak_total, "peak_used": peak_used, "device_allocs": counts["n"],
            "reserved_end": end, "steps": ""}


def attr(rt, name, number):
    return getattr(rt, name, number)


def run_async(events, deferred, threshold):
    import cupy

    rt = cupy.cuda.runtime
    dev = cupy.cuda.Device().id
    pool = rt.deviceGetDefaultMemPool(dev)
    A_THRESH = attr(rt, "cudaMemPoolAttrReleaseThreshold", 4)
    A_RCUR = attr(rt, "cudaMemPoolAttrReservedMemCurrent", 5)
    A_RHIGH = attr(rt, "cudaMemPoolAttrReservedMemHigh", 6)
    A_UHIGH = attr(rt, "cudaMemPoolAttrUsedMemHigh", 8)
    cupy.cuda.Device().synchronize()
    rt.memPoolTrimTo(pool, 0)
    rt.memPoolSetAttribute(pool, A_THRESH, threshold)
    rt.memPoolSetAttribute(pool, A_RHIGH, 0)
    rt.memPoolSetAttribute(pool, A_UHIGH, 0)
    streams, live, steps = {}, {}, {}
    grows = 0

    def stream_of(s):
        if s == 0:
            return 0
        if s not in streams:
            streams[s] = cupy.cuda.Stream(non_blocking=True)
        return streams[s].ptr

    reserved = rt.memPoolGetAttribute(pool, A_RCUR)
    for op, s, ident, size in events:
        if op == "alloc":
            st = stream_of(s)
            live[ident] = (rt.mallocAsync(max(size, 1), st), st)
            now = rt.memPoolGetAttribute(pool, A_RCUR)
            if now != reserved:
                if now > reserved:
                    grows += 1
                    key = now - reserved
                    steps[key] = steps.get(key, 0) + 1
                reserved = now
        elif op == "empty_cache":
            cupy.cuda.Device().synchronize()
            rt.memPoolTrimTo(pool, 0)
            reserved = rt.memPoolGetAttribute(pool, A_RCUR)
        elif frees_at(op, ident, deferred) and ident in live:
            ptr, st = live.pop(ident)
            rt.freeAsync(ptr, st)
    end = rt.memPoolGetAttribute(pool, A_RCUR)
    row = {"peak_reserved": rt.memPoolGetAttribute(pool, A_RHIGH),
           "peak_used": rt.memPoolGetAttribute(pool, A_UHIGH), "device_allocs": grows,
           "reserved_end": end,
           "steps": " ".join("%d*%d" % (n, b) for b, n in sorted(steps.items()))}
    for ptr, st in live.values():
        rt.freeAsync(ptr, st)
    cupy.cuda.Device().synchronize()
    rt.memPoolTrimTo(pool, 0)
    return row


def device(out, traces):
    os.makedirs(out, exist_ok=True)
    rows = []
    for path in traces:
        events, deferred = read_trace(path)
        base = {"trace": os.path.basename(path), "events": len(events),
                "allocs": sum(1 for e in events if e[0] == "alloc")}
        for name, fn in (("cupy", lambda: run_cupy(events, deferred)),
                         ("async-max", lambda: run_async(events, deferred, 2**64 - 1)),
                         ("async-0", lambda: run_async(events, deferred, 0))):
            try:
                r = fn()
            except Exception as e:  # an OOM of the real pool is a result, not a crash
                r = {"peak_reserved": -1, "peak_used": -1, "device_allocs": -1,
                     "reserved_end": -1, "steps": "error: %s" % str(e).replace(",", ";")[:200]}
            rows.append(dict(base, pool=name, **r))
            print(rows[-1], file=sys.stderr, flush=True)
    with open(os.path.join(out, "pools-device.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, FIELDS)
        w.writeheader()
        w.writerows(rows)


def gpusim_replay(gpusim, trace, policy):
    r = subprocess.run([gpusim, "replay", "--format", "json", "--policy", policy, trace],
                       check=True, capture_output=True, text=True)
    res = json.loads(r.stdout)[0]["results"][0]
    return res["peak_reserved_bytes"], res["num_device_alloc"]


def gib(n):
    return "%.3f" % (n / 2**30)


def compare(out, gpusim, root):
    with open(os.path.join(out, "pools-device.csv")) as f:
        rows = list(csv.DictReader(f))
    models = {"cupy": "cupy", "async-max": "cuda-async:cudaMemPoolAttrReleaseThreshold:max",
              "async-0": "cuda-async"}
    lines = ["%-50s %-9s %12s %12s %7s %10s %10s %6s" % (
        "trace", "pool", "real GiB", "gpusim GiB", "ratio", "real allocs", "gpusim", "")]
    for r in rows:
        trace = os.path.join(out, r["trace"])
        if not os.path.exists(trace):
            trace = os.path.join(root, "traces", "data", r["trace"])
        real = int(r["peak_reserved"])
        if real < 0:
            lines.append("%-50s %-9s %s" % (r["trace"], r["pool"], r["steps"]))
            continue
        sim, allocs = gpusim_replay(gpusim, trace, models[r["pool"]])
        lines.append("%-50s %-9s %12s %12s %7.3f %10s %10d" % (
            r["trace"], r["pool"], gib(real), gib(sim), sim / real if real else 0.0,
            r["device_allocs"], allocs))
    lines.append("")
    lines.append("gpusim policies: " + ", ".join("%s = %s" % kv for kv in models.items()))
    lines.append("real allocs: cudaMalloc calls made by CuPy's pool; for the driver's pool, the "
                 "requests after which ReservedMemCurrent grew")
    lines.append("")
    lines.append("driver pool growth steps (count*bytes), from the device:")
    for r in rows:
        if r["pool"] == "async-max":
            lines.append("  %s: %s" % (r["trace"], r["steps"]))
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "pools-compare.txt"), "w") as f:
        f.write(text)
    sys.stdout.write(text)


def main(argv):
    if len(argv) >= 3 and argv[1] == "device":
        device(argv[2], argv[3:])
    elif len(argv) == 4 and argv[1] == "compare":
        compare(argv[2], argv[3], os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
