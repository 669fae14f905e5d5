#!/usr/bin/env python3
"""async_probe.py - the driver's cudaMallocAsync pool, request by request.

  async_probe.py device OUTDIR TRACE...   on the GPU machine (CuPy there)

lab/device_pools.py measures the driver's pool by its peaks and the sizes of its growth steps;
those fit more than one rule. This logs every request instead, so a rule can be checked step by
step: for each trace (single stream, release threshold UINT64_MAX as PyTorch's
backend:cudaMallocAsync sets it) and for a few designed sequences that tell the candidate rules
apart, OUTDIR/NAME.csv.gz holds one row per alloc or free:

  i,op,id,size,ptr,reserved,used

ptr the address the pool gave (its offset from the lowest address the run saw), reserved and
used the pool's ReservedMemCurrent and UsedMemCurrent after the call. The designed sequences
(MiB; each on a pool trimmed to zero first):

  tail     alloc 20, alloc 40: one 64 MiB growth (the second block spans the first chunk's free
           tail and a new chunk) or two (32 + 64, a chunk a block);
  remap    alloc 32 x3, free the first and the third, alloc 64: served from the two free chunks
           remapped (96 reserved), from the free tail extended (128) or new memory (160);
  hole     alloc 32 x3, free the middle one, alloc 48: what a free chunk between live ones gives;
  small    alloc 16, 100 x alloc 64 KiB, alloc 8: do small requests share chunks with large ones
           (32 reserved) or have their own (64)?
  classes  for sizes 512 B .. 4 MiB, 64 requests each, interleaved: where small blocks go.

Standard library only, except CuPy on the device.
"""
import csv
import gzip
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from device_pools import attr, frees_at, read_trace  # noqa: E402

MiB = 1 << 20


def designed():
    """The designed sequences as (name, events) with events as read_trace gives them."""
    seqs = {}

    def seq(name, ops):
        ev, n = [], 0
        for op in ops:
            if op[0] == "a":
                n += 1
                ev.append(("alloc", 0, n if len(op) < 3 else op[2], op[1]))
            else:
                ev.append(("free", 0, op[1], 0))
        seqs[name] = ev

    seq("tail", [("a", 20 * MiB), ("a", 40 * MiB)])
    seq("remap", [("a", 32 * MiB), ("a", 32 * MiB), ("a", 32 * MiB), ("f", 1), ("f", 3),
                  ("a", 64 * MiB, 4)])
    seq("hole", [("a", 32 * MiB), ("a", 32 * MiB), ("a", 32 * MiB), ("f", 2), ("a", 48 * MiB, 4)])
    seq("small", [("a", 16 * MiB)] + [("a", 64 << 10, 2 + k) for k in range(100)]
        + [("a", 8 * MiB, 102)])
    ops, k = [], 0
    for _ in range(64):
        for size in (512, 4096, 65536, 262144, MiB, 2 * MiB, 4 * MiB):
            k += 1
            ops.append(("a", size, k))
    seq("classes", ops)
    return seqs


def run(events, deferred, out_csv):
    rows, base = drive(events, deferred)
    write_log(out_csv, rows, base)
    return rows[-1][5] if rows else 0


def drive(events, deferred, before=None, after_free=None):
    """events through the device's default pool, trimmed to zero and its release threshold at
    UINT64_MAX, on the default stream: a row per request ([i, op, id, size, ptr, reserved,
    used]) and the lowest address. before(cupy) runs first, after_free(rt) after each free."""
    import cupy

    rt = cupy.cuda.runtime
    dev = cupy.cuda.Device().id
    pool = rt.deviceGetDefaultMemPool(dev)
    a_thresh = attr(rt, "cudaMemPoolAttrReleaseThreshold", 4)
    a_rcur = attr(rt, "cudaMemPoolAttrReservedMemCurrent", 5)
    a_ucur = attr(rt, "cudaMemPoolAttrUsedMemCurrent", 7)
    cupy.cuda.Device().synchronize()
    rt.memPoolTrimTo(pool, 0)
    rt.memPoolSetAttribute(pool, a_thresh, (1 << 64) - 1)
    if before:
        before(cupy)
    live, rows, base = {}, [], None
    for i, (op, _s, ident, size) in enumerate(events):
        if op == "alloc":
            ptr = rt.mallocAsync(max(size, 1), 0)
            live[ident] = ptr
        elif op == "empty_cache":
            cupy.cuda.Device().synchronize()
            rt.memPoolTrimTo(pool, 0)
            ptr = 0
        elif frees_at(op, ident, deferred) and ident in live:
            ptr = live.pop(ident)
            rt.freeAsync(ptr, 0)
            if after_free:
                after_free(rt)
        else:
            continue
        base = ptr if base is None or (ptr and ptr < base) else base
        rows.append([i, op, ident, size, ptr, rt.memPoolGetAttribute(pool, a_rcur),
                     rt.memPoolGetAttribute(pool, a_ucur)])
    for ptr in live.values():
        rt.freeAsync(ptr, 0)
    cupy.cuda.Device().synchronize()
    rt.memPoolTrimTo(pool, 0)
    return rows, base


def write_log(out_csv, rows, base):
    """rows ([i, op, id, size, ptr, reserved, used]) as a log, each ptr from base (the run's
    lowest; none for a row without one)."""
    with gzip.open(out_csv, "wt", newline="") as f:
        w = csv.writer(f)
        w.writerow(["i", "op", "id", "size", "ptr", "reserved", "used"])
        for r in rows:
            r[4] = r[4] - base if r[4] else ""
            w.writerow(r)


def main(argv):
    if len(argv) < 2 or argv[0] != "device":
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    for name, ev in designed().items():
        run(ev, set(), os.path.join(out, name + ".csv.gz"))
        print(f"{name}: {len(ev)} requests", flush=True)
    for t in argv[2:]:
        ev, deferred = read_trace(t)
        name = os.path.basename(t).split(".")[0]
        run(ev, deferred, os.path.join(out, name + ".csv.gz"))
        print(f"{name}: {len(ev)} events", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
