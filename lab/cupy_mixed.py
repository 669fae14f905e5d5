#!/usr/bin/env python3
"""cupy_mixed.py - CuPy's own memory pool under programs of many small arrays beside large
ones, every request logged, so that gpusim's `cupy` policy can be checked against the real
pool (docs/cupy-pool.md).

    python3 lab/cupy_mixed.py record OUT [WORKLOAD...]   # on the device: CuPy and a GPU
    python3 lab/cupy_mixed.py compare OUT [--gpusim G]   # here: each log replayed, compared

record runs each workload (default: all) in a process of its own, on a fresh default
MemoryPool, under a cupy.cuda.MemoryHook that logs every request the pool serves (its size as
asked, the pointer it got, the stream it was made on), every free, and every cudaMalloc the pool
made; and the pool's total_bytes() after each request. OUT/NAME.csv is the log
(op,size,ptr,stream: op alloc, free or cudaMalloc), OUT/NAME.json what the real pool did:
its peak total_bytes, its cudaMallocs, its requests.

compare turns each log into a gpusim trace (OUT/NAME.gstrace: the requests by pointer, client
cupy, the streams as logged) and replays it under `-p cupy`; it prints real against simulated
peak reserved and cudaMallocs. Then the ties: the pool is followed request by request as the
log says it went (the free chunks of each stream, split and merged as CuPy does), and at each
request that found two or more free chunks of the best-fitting size, it counts whether the
chunk the real pool took is the one at the lowest device address (gpusim's rule), at the
highest, the one freed last, the one freed first; and it emulates the whole program under each
of those rules (peak bytes and cudaMallocs: the real pool's addresses replaced by its own).

The workloads (each deterministic, seeded):
  mixed    arrays of 1 KiB to 256 KiB beside arrays of 16 to 128 MiB, made and dropped at
           random, with the temporaries of elementwise ops, reductions and small matmuls
  frame    a data frame's work: columns of 10^4 to 10^6 values of four dtypes, sorted,
           cumulated, made unique, filtered and concatenated (many temporaries of many sizes)
  streams  the mixed workload split over the null stream and a second one (each its arena)
"""
import argparse
import csv
import json
import os
import subprocess
import sys

WORKLOADS = ("mixed", "frame", "streams")


def run_workload(name, cp, rng):
    live = []

    def small():
        return cp.arange(int(rng.integers(256, 65536)), dtype=cp.float32)

    def large():
        return cp.zeros(int(rng.integers(4, 33)) << 22, dtype=cp.float32)

    def mixed_step():
        r = rng.random()
        if r < 0.55:
            live.append(small())
        elif r < 0.62:
            live.append(large())
        elif live and r < 0.9:
            live.pop(int(rng.integers(0, len(live))))
        elif live:
            x = live[int(rng.integers(0, len(live)))]
            y = (x * 2 + 1).sum()          # temporaries of the elementwise ops and the sum
            if x.size <= 65536:
                m = int(x.size ** 0.5)
                z = x[:m * m].reshape(m, m)
                live.append(z @ z)
            del y

    if name == "mixed":
        for _ in range(3000):
            mixed_step()
    elif name == "streams":
        side = cp.cuda.Stream(non_blocking=True)
        for k in range(3000):
            if k % 200 < 100:
                mixed_step()
            else:
                with side:
                    mixed_step()
                side.synchronize()
    elif name == "frame":
        dtypes = (cp.float32, cp.float64, cp.int32, cp.int64)
        for _ in range(40):
            n = int(rng.integers(10_000, 1_000_000))
            cols = [cp.asarray(rng.integers(0, 1000, n)).astype(dtypes[k % 4]) for k in range(6)]
            key = cols[0]
            order = cp.argsort(key)
            cols = [c[order] for c in cols]
            cum = [cp.cumsum(c) for c in cols[1:3]]
            uniq = cp.unique(cols[3])
            keep = cols[4] > 500
            picked = [c[keep] for c in cols]
            live.append(cp.concatenate(picked[:2]))
            del order, cum, uniq, keep, picked, cols, key
            if len(live) > 8:
                live.pop(0)
    cp.cuda.Device().synchronize()


def record_one(name, out):
    import cupy as cp
    import numpy as np
    pool = cp.get_default_memory_pool()
    rows, state = [], {"peak": 0, "mallocs": 0, "requests": 0}

    class Log(cp.cuda.MemoryHook):
        name = "gpusim_log"

        def malloc_postprocess(self, device_id, size, mem_size, mem_ptr, pmem_id):
            if mem_ptr:
                rows.append(("alloc", size, mem_ptr, cp.cuda.get_current_stream().ptr))
                state["requests"] += 1
                state["peak"] = max(state["peak"], pool.total_bytes())

        def free_postprocess(self, device_id, mem_size, mem_ptr, pmem_id):
            rows.append(("free", mem_size, mem_ptr, 0))

        def alloc_postprocess(self, device_id, mem_size, mem_ptr):
            if mem_ptr:
                rows.append(("cudaMalloc", mem_size, mem_ptr, 0))
                state["mallocs"] += 1

    rng = np.random.default_rng(WORKLOADS.index(name) + 7)
    with Log():
        run_workload(name, cp, rng)
    with open(os.path.join(out, f"{name}.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(("op", "size", "ptr", "stream"))
        w.writerows(rows)
    state.update(total_at_end=pool.total_bytes(), cupy=cp.__version__)
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump(state, f, indent=1)
    print(f"{name}: {state}")


def to_trace(log, path):
    """The log as a gpusim trace; the cudaMallocs the real pool made, in order."""
    ids, nid, lines, mallocs = {}, 0, [], []
    streams = {}
    with open(log) as f:
        for r in csv.DictReader(f):
            ptr, size = int(r["ptr"]), int(r["size"])
            if r["op"] == "cudaMalloc":
                mallocs.append((ptr, size))
            elif r["op"] == "alloc":
                nid += 1
                s = streams.setdefault(int(r["stream"]), len(streams))
                ids[ptr] = (nid, s)
                lines.append(f"alloc,cupy,0,{s},{nid},{size}")
            else:
                ident, s = ids.pop(ptr)
                lines.append(f"free,cupy,0,{s},{ident},0")
    with open(path, "w") as f:
        f.write("# gpusim-trace 1\n# source: lab/cupy_mixed.py\n"
                "# device_total_bytes: 85899345920\nseq,time_us,op,client,device,stream,id,size\n")
        for k, line in enumerate(lines):
            op, rest = line.split(",", 1)
            f.write(f"{k},{k},{op},{rest}\n")
    return mallocs


class _Chunk:
    __slots__ = ("ptr", "size", "prev", "next", "free", "stream", "freed_at")


RULES = {"lowest address": lambda t: min(t, key=lambda c: c.ptr),
         "highest address": lambda t: max(t, key=lambda c: c.ptr),
         "freed last": lambda t: max(t, key=lambda c: c.freed_at),
         "freed first": lambda t: min(t, key=lambda c: c.freed_at)}


def follow(log, rule=None):
    """The pool, request by request, its free chunks per stream split and merged as CuPy's
    _Arena does. rule None: each request takes the chunk at its logged pointer (the real
    pool's), and the result is (ties, {rule: ties where it names that chunk}); else rule picks
    among tied chunks, a miss makes a cudaMalloc of its own (at an address above the last), and
    the result is (peak of the cudaMallocs' bytes, cudaMallocs)."""
    free, live, clock = {}, {}, [0]
    hits, n, total, peak, mallocs, top = dict.fromkeys(RULES, 0), 0, 0, 0, 0, 0

    def insert(c):
        clock[0] += 1
        c.free, c.freed_at = True, clock[0]
        free.setdefault(c.stream, []).append(c)

    def remove(c):
        free[c.stream].remove(c)
        c.free = False

    with open(log) as f:
        for r in csv.DictReader(f):
            op, size, ptr, stream = r["op"], int(r["size"]), int(r["ptr"]), int(r["stream"])
            if op == "alloc":
                rs = (size + 511) // 512 * 512
                fits = [c for c in free.get(stream, []) if c.size >= rs]
                if fits:
                    best = min(c.size for c in fits)
                    tied = [c for c in fits if c.size == best]
                    if rule is None:
                        c = next(c for c in tied if c.ptr == ptr)
                        if len(tied) > 1:
                            n += 1
                            for name, pick in RULES.items():
                                hits[name] += pick(tied) is c
                    else:
                        c = rule(tied)
                    remove(c)
                    if c.size > rs:
                        rest = _Chunk()
                        rest.ptr, rest.size, rest.prev, rest.next = c.ptr + rs, c.size - rs, c, c.next
                        rest.stream = stream
                        if c.next:
                            c.next.prev = rest
                        c.next, c.size = rest, rs
                        insert(rest)
                else:
                    c = _Chunk()
                    c.size, c.prev, c.next, c.stream, c.free = rs, None, None, stream, False
                    c.ptr = ptr if rule is None else top
                    top += rs
                    total += rs
                    mallocs += 1
                    peak = max(peak, total)
                live[ptr] = c
            elif op == "free":
                c = live.pop(ptr)
                while c.next is not None and c.next.free:
                    nx = c.next
                    remove(nx)
                    c.size, c.next = c.size + nx.size, nx.next
                    if nx.next:
                        nx.next.prev = c
                while c.prev is not None and c.prev.free:
                    pv = c.prev
                    remove(pv)
                    pv.size, pv.next = pv.size + c.size, c.next
                    if c.next:
                        c.next.prev = pv
                    c = pv
                insert(c)
    return (n, hits) if rule is None else (peak, mallocs)


def compare(out, gpusim):
    print(f"{'workload':10} {'requests':>9} {'real peak':>12} {'gpusim peak':>12} "
          f"{'real mallocs':>13} {'gpusim mallocs':>15}")
    for name in WORKLOADS:
        log = os.path.join(out, f"{name}.csv")
        if not os.path.exists(log):
            continue
        with open(os.path.join(out, f"{name}.json")) as f:
            real = json.load(f)
        trace = os.path.join(out, f"{name}.gstrace")
        to_trace(log, trace)
        rep = json.loads(subprocess.run([gpusim, "replay", trace, "-p", "cupy", "-q", "-f",
                                         "json"], capture_output=True, text=True,
                                        check=True).stdout)
        m = rep[0]["results"][0]
        print(f"{name:10} {real['requests']:>9} {real['peak']:>12} "
              f"{m['peak_reserved_bytes']:>12} {real['mallocs']:>13} "
              f"{m['num_device_alloc']:>15}")
        n, hits = follow(log)
        print(f"{'':10} {n} ties; the real pool's chunk was the "
              + ", ".join(f"{rule} in {k}" for rule, k in hits.items()))
        print(f"{'':10} emulated with each rule, peak / cudaMallocs: "
              + ", ".join("{} {} / {}".format(rule, *follow(log, RULES[rule]))
                          for rule in RULES))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=("record", "compare", "one"))
    ap.add_argument("out")
    ap.add_argument("workloads", nargs="*")
    ap.add_argument("--gpusim", default="build/gpusim")
    a = ap.parse_args()
    if a.mode == "one":
        record_one(a.workloads[0], a.out)
    elif a.mode == "record":
        os.makedirs(a.out, exist_ok=True)
        for name in a.workloads or WORKLOADS:
            # each its own process: a fresh pool
            subprocess.run([sys.executable, __file__, "one", a.out, name], check=True)
    else:
        compare(a.out, a.gpusim)


if __name__ == "__main__":
    main()
