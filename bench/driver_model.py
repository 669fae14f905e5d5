#!/usr/bin/env python3
"""A model of where the CUDA driver puts cudaMalloc allocations, checked against the recorded
calls of bench/measure_driver.py.

The rules (bench/results/h100-2026-11-22-driver/README.md says what shows each of them):

1. Sizes above 1 MiB are rounded up to 2 MiB (S). Sizes up to 1 MiB are rounded up to 512 B and
   packed into 2 MiB pages; a page is itself placed like a 2 MiB allocation, is filled from its
   low end, and is given back when its last allocation is freed.
2. Memory is handed out from VA ranges. An allocation goes to the lowest-addressed free gap of
   at least S inside a range that is still in use (first fit from the low end).
3. If none fits, a new range of V = max(32 MiB, S rounded up to 32 MiB) is made: at the top of a
   free VA hole, if it then starts strictly above the hole's low end (so an exactly fitting hole
   is not used; the highest such hole), else directly below the lowest range so far (the first
   one at T = X - 414 MiB, X the first allocation of a fresh context). The allocation sits at the
   bottom of its new range; the rest of the range is a gap (rule 2).
4. When the last allocation in a range is freed, the range is given back and becomes a free VA
   hole (merged with its neighbours); a hole that reaches the bottom of the carved space shrinks
   it instead.
5. A fresh context already has one range above T that never goes away, with free gaps at X
   (2 MiB) and X + 74 MiB (24 MiB); everything else in it is the context's own.
6. (H200 only, --h200) A new range for a whole multiple of 512 MiB starts on a 512 MiB boundary
   of the absolute address (placed at the top of a hole or below the lowest range, then moved
   down to the boundary); the VA it skips becomes a free hole.

    python3 bench/driver_model.py bench/results/h100-2026-11-22-driver
    python3 bench/driver_model.py --h200 bench/results/h200-2026-11-22-driver

prints, for every experiment file, how many allocations the model puts at the recorded offset
from the process's first allocation, and the first few it misses. With --snapshot, it feeds the
segment_alloc/segment_free events of PyTorch memory snapshots through the model instead:

    python3 bench/driver_model.py --snapshot traces/references/pytorch-2.11-h100/*.pickle.gz

(in a PyTorch process other device allocations that the snapshot does not show, such as CUDA
module loading and library workspaces, come between the segments: see the results README).
Standard library only.
"""

import csv
import gzip
import io
import os
import pickle
import sys

KiB, MiB = 1 << 10, 1 << 20
PAGE, CHUNK = 2 * MiB, 32 * MiB
TOP = -414 * MiB                      # rule 3: T relative to X
INIT_RANGE = (-2 * MiB, 100 * MiB)    # rule 5: covers X and X+74..X+98 (exact ends unknown)
INIT_GAPS = [(0, 2 * MiB), (74 * MiB, 98 * MiB)]


def up(n, m):
    return -(-n // m) * m


class Range:
    def __init__(self, base, size, permanent=False, gaps=None):
        self.base, self.size, self.permanent = base, size, permanent
        self.used = {}                      # start -> length
        self.gaps = gaps                    # for the initial range: its usable gaps only

    def free_gaps(self):
        spans = self.gaps if self.gaps is not None else [(self.base, self.base + self.size)]
        out = []
        for lo, hi in spans:
            cur = lo
            for s in sorted(self.used):
                e = s + self.used[s]
                if e <= lo or s >= hi:
                    continue
                if s > cur:
                    out.append((cur, s))
                cur = max(cur, e)
            if cur < hi:
                out.append((cur, hi))
        return out


class Model:
    def __init__(self, align_512m=False, x_abs=0):
        self.align_512m, self.x_abs = align_512m, x_abs
        self.ranges = [Range(INIT_RANGE[0], INIT_RANGE[1] - INIT_RANGE[0], True, INIT_GAPS)]
        self.bottom = TOP                   # lowest carved address so far
        self.holes = []                     # freed VA ranges (lo, hi), below TOP
        self.pages = {}                     # page start -> {offset: length} of small allocs
        self.where = {}                     # allocation addr -> ("big", range) | ("small", page)

    def align(self, S):
        # H200: ranges for whole multiples of 512 MiB start on a 512 MiB boundary.
        return 512 * MiB if self.align_512m and S % (512 * MiB) == 0 else PAGE

    def _align_down(self, rel, A):
        """Move an offset from X down to an A-aligned absolute address."""
        return (self.x_abs + rel) // A * A - self.x_abs

    # -- big (page-granular) allocations --
    def _place(self, S):
        for r in sorted(self.ranges, key=lambda r: r.base):
            for lo, hi in r.free_gaps():
                if hi - lo >= S:
                    r.used[lo] = S
                    return lo, r
        V = max(CHUNK, up(S, CHUNK))
        A = self.align(S)
        best = None
        for lo, hi in self.holes:
            base = self._align_down(hi - V, A)
            if base > lo and (best is None or hi > best[1]):
                best = (lo, hi, base)
        if best is not None:
            lo, hi, base = best
            self.holes.remove((lo, hi))
            if base > lo:
                self.holes.append((lo, base))
            if base + V < hi:
                self.holes.append((base + V, hi))
        else:
            base = self._align_down(self.bottom - V, A)
            if base + V < self.bottom:
                self.holes.append((base + V, self.bottom))    # skipped for the alignment
            self.bottom = base
        r = Range(base, V)
        self.ranges.append(r)
        r.used[base] = S
        return base, r

    def _release(self, addr, r):
        del r.used[addr]
        if r.used or r.permanent:
            return
        self.ranges.remove(r)
        lo, hi = r.base, r.base + r.size
        merged = True
        while merged:
            merged = False
            for h in list(self.holes):
                if h[1] == lo or h[0] == hi:
                    self.holes.remove(h)
                    lo, hi = min(lo, h[0]), max(hi, h[1])
                    merged = True
        if lo == self.bottom:
            self.bottom = hi                # the carved space shrinks
            # a hole that now touches the bottom goes too
            for h in list(self.holes):
                if h[0] == self.bottom:
                    self.holes.remove(h)
                    self.bottom = h[1]
        else:
            self.holes.append((lo, hi))

    def malloc(self, size):
        if size <= MiB:
            n = up(size, 512)
            for p in sorted(self.pages):
                used = self.pages[p]
                end = max((o + l for o, l in used.items()), default=0)
                if end + n <= PAGE:
                    used[end] = n
                    self.where[p + end] = ("small", p)
                    return p + end
            p, r = self._place(PAGE)
            self.pages[p] = {0: n}
            self.where[p] = ("small", p)
            self.where[("page", p)] = r
            return p
        a, r = self._place(up(size, PAGE))
        self.where[a] = ("big", r)
        return a

    def free(self, addr):
        kind, obj = self.where.pop(addr)
        if kind == "big":
            self._release(addr, obj)
            return
        page = self.pages[obj]
        del page[addr - obj]
        if not page:
            del self.pages[obj]
            self._release(obj, self.where.pop(("page", obj)))


def replay(rows, align_512m, x_abs):
    """Run the recorded calls through the model; (allocations, hits, first misses)."""
    m = Model(align_512m, x_abs)
    sim_of = {}
    total = hits = 0
    misses = []
    for r in rows:
        if r["op"] == "malloc" and not r["error"]:
            real = int(r["addr"])
            got = m.malloc(int(r["size"]))
            sim_of[real] = got
            total += 1
            if got == real - x_abs:
                hits += 1
            elif len(misses) < 4:
                misses.append(f"{r['label']}: real {(real - x_abs) / MiB:+.3f} MiB, "
                              f"model {got / MiB:+.3f} MiB")
        elif r["op"] == "free" and not r["error"]:
            real = int(r["addr"])
            if real in sim_of:
                m.free(sim_of.pop(real))
    return total, hits, misses


def check(path, align_512m=False):
    """Offsets are from X, the address a fresh context gives its first 2 MiB allocation. X is
    found from the first allocation (the model says where it lands relative to X), except when
    that one was moved to a 512 MiB boundary (--h200, 'fill' starts with 1 GiB): then X is the
    2 MiB step, within 512 MiB, that places the most allocations right (one fitted number)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        rows = list(csv.DictReader(f))
    first = next(r for r in rows if r["op"] == "malloc" and not r["error"])
    size = int(first["size"])
    x_abs = int(first["addr"]) - Model().malloc(size)
    if align_512m and size > MiB and up(size, PAGE) % (512 * MiB) == 0:
        best = max((replay(rows, True, x_abs + k * PAGE) + (k,) for k in range(256)),
                   key=lambda t: t[1])
        total, hits, misses, k = best
        return total, hits, misses + [f"X fitted: {k * 2} MiB above the unaligned guess"]
    return replay(rows, align_512m, x_abs)


class _PlainUnpickler(pickle.Unpickler):
    """A memory snapshot is plain data; refuse any class, so a hostile pickle cannot run code."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing class {module}.{name}: not a plain snapshot")


def check_snapshot(path, align_512m=False):
    """Feed a PyTorch snapshot's segment_alloc/segment_free (per device) through the model,
    offsets from the first segment. Lines: 'devN: hits/segments [first misses]'."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    snap = _PlainUnpickler(io.BytesIO(data)).load()
    out = []
    for dev, trace in enumerate(snap["device_traces"]):
        ev = [(e["action"], e["addr"], e["size"]) for e in trace
              if e["action"] in ("segment_alloc", "segment_free")]
        if not ev:
            continue
        x_abs = ev[0][1] - Model().malloc(ev[0][2])
        m, sim, total, hits, misses = Model(align_512m, x_abs), {}, 0, 0, []
        for action, addr, size in ev:
            if action == "segment_alloc":
                got = m.malloc(size)
                sim[addr] = got
                total += 1
                if got == addr - x_abs:
                    hits += 1
                elif len(misses) < 3:
                    misses.append(f"segment #{total - 1} ({size / MiB:g} MiB): real "
                                  f"{(addr - x_abs) / MiB:+.0f} MiB, model {got / MiB:+.0f} MiB")
            elif addr in sim:
                m.free(sim.pop(addr))
        out.append(f"dev{dev}: {hits} of {total} segments at the recorded offset"
                   + (f"; first misses: {'; '.join(misses)}" if misses else ""))
    return out


def main(argv):
    align_512m = "--h200" in argv
    argv = [a for a in argv if a != "--h200"]
    if not argv:
        print(__doc__)
        return 2
    if argv[0] == "--snapshot":
        for path in argv[1:]:
            for line in check_snapshot(path, align_512m):
                print(f"{os.path.basename(path)} {line}")
        return 0
    for d in argv:
        for name in sorted(os.listdir(d)):
            if not (name.endswith(".csv") or name.endswith(".csv.gz")):
                continue
            total, hits, misses = check(os.path.join(d, name), align_512m)
            print(f"{d}/{name}: {hits} of {total} allocations at the recorded offset"
                  + ("" if not misses else "; first misses or notes: " + "; ".join(misses)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
