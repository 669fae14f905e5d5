#!/usr/bin/env python3
"""driver_pool.py - where the CUDA driver's stream-ordered pool (cudaMallocAsync, driver 580,
one stream, release threshold UINT64_MAX) places each request, as a model checked request by
request against lab/async_probe.py's logs (lab/results/h100-2026-12-06-fidelity/refs/async/;
BENCHMARKS.md, "The driver's pool: the placement rule"). policies/cuda_async.c does not follow
this rule yet (its header says why): this is the reference it is to be held to.

  python3 lab/driver_pool.py [LOG ...]   (names like ref-cut, or paths to *.csv.gz; default: all)

For each log it replays the alloc/free sequence through the model twice:
  forced    - each decision is made on the state the real placements produced (the model is
              told where the driver put every request after predicting it): decisions right;
  free-run  - the model's own placements are kept (errors would cascade): addresses right,
              compared as the log's offsets (from the lowest address of the run);
and checks the model's reserved bytes (mapped 32 MiB chunks) against ReservedMemCurrent after
every call.

The rule (everything in bytes; "seq" is a global counter bumped at every insertion):
  * requests round up to a multiple of 512 (at least 512); blocks are split from their start;
  * the pool is one virtual range, mapped in 32 MiB chunks;
  * a free block is YOUNG (freed since the last retirement) or OLD. A freed block merges at
    once with adjacent young blocks only (never with old ones); every insertion - a free, the
    block a merge makes, the remainder of a split - gets a new seq;
  * alloc(n):
      1. best fit among young blocks: the smallest that holds n, ties to the lowest seq (the
         one inserted first);
      2. else best fit among old blocks, same ties; the TAIL (the free block that ends at the
         top of the range used so far) is not a candidate;
      (in 1 and 2 a block that contains an unmapped chunk - a hole left by a remap - is not a
       candidate either)
      3. else RETIRE: every young block becomes old, newest (highest seq) first, each merging
         with adjacent old blocks (new seq); then step 2 again;
      4. else GROW: best fit among blocks with holes (ties lowest seq), else the start of the
         tail (or the top of the range if no free block ends there);
  * mapping: every 32 MiB chunk under a live block must be mapped. A missing chunk takes the
    physical chunk of a wholly free mapped chunk (its virtual chunk becomes a hole) if one
    exists, else new memory (ReservedMemCurrent += 32 MiB). Which free chunk moves is not
    determined by these logs (lowest and highest both fit); this takes the lowest.
Modes (lab/async_modes.py's logs; a log's name says its mode): idle, the rule above, as the
logs of async_probe.py were made (no synchronisation, an idle GPU); sync, a synchronisation
after every free, which retires every young block at once (a free is old as soon as it is
made); busy, a GPU busy for the whole run, so that no free completes: no retirement, a miss goes
straight to the growth.
Standard library only.
"""
import bisect
import csv
import gzip
import os
import sys

DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                   "h100-2026-12-06-fidelity", "refs", "async")
LOGS = ["tail", "remap", "hole", "small", "classes", "ref-cut", "resnet50", "gpt2",
        "batch-alternate", "ref-llmgen"]
CHUNK = 32 << 20
GRAN = 512


def load(name):
    path = name if name.endswith(".gz") else os.path.join(DIR, name + ".csv.gz")
    with gzip.open(path, "rt") as f:
        return [(int(r["i"]), r["op"], int(r["id"]), int(r["size"]),
                 int(r["ptr"]) if r["ptr"] != "" else None, int(r["reserved"]))
                for r in csv.DictReader(f)]


def rounded(size):
    return max(GRAN, -(-size // GRAN) * GRAN)


class DriverPool:
    def __init__(self, mode="idle"):
        self.mode = mode        # idle, sync (after every free), busy (no free completes)
        self.starts = []        # sorted starts of free blocks
        self.blk = {}           # start -> [end, young(bool), seq]
        self.by_end = {}        # end -> start
        self.seq = 0
        self.top = 0            # highest end ever allocated
        self.mapped = set()     # mapped chunk indices
        self.cover = {}         # chunk -> number of live blocks on it

    # ---- free-block bookkeeping
    def _add(self, st, end, young):
        self.seq += 1
        bisect.insort(self.starts, st)
        self.blk[st] = [end, young, self.seq]
        self.by_end[end] = st

    def _del(self, st):
        end, _, _ = self.blk.pop(st)
        del self.starts[bisect.bisect_left(self.starts, st)]
        del self.by_end[end]
        return end

    def _insert_merging(self, st, end, young):
        left = self.by_end.get(st)
        if left is not None and self.blk[left][1] == young:
            self._del(left)
            st = left
        if end in self.blk and self.blk[end][1] == young:
            end = self._del(end)
        self._add(st, end, young)

    def _has_hole(self, st, end):
        return any(c not in self.mapped for c in range(st // CHUNK, (end - 1) // CHUNK + 1))

    def _best(self, young, n, holes=False):
        best = None
        for st, (end, y, seq) in self.blk.items():
            if y != young or end - st < n:
                continue
            if not young and end == self.top:
                continue                            # the tail
            if self._has_hole(st, end) != holes:
                continue
            key = (end - st, seq)
            if best is None or key < best[0]:
                best = (key, st)
        return None if best is None else best[1]

    def retire(self):
        young = sorted(((v[2], st) for st, v in self.blk.items() if v[1]), reverse=True)
        for _, st in young:
            end = self._del(st)
            self._insert_merging(st, end, False)

    # ---- the allocator
    def choose(self, n):
        for young in (True, False):
            p = self._best(young, n)
            if p is not None:
                return p
        if self.mode != "busy":                     # pending frees cannot be retired
            self.retire()
        p = self._best(False, n)
        if p is not None:
            return p
        cands = [(end - st, seq, st) for st, (end, y, seq) in self.blk.items()
                 if end - st >= n and end != self.top and self._has_hole(st, end)]
        if cands:
            return min(cands)[2]
        tail = self.by_end.get(self.top)
        return self.top if tail is None else tail

    def take(self, ptr, n):
        end = ptr + n
        if ptr > self.top:                          # only if forced to a place the model lacks
            self._add(self.top, ptr, False)
        self.top = max(self.top, end)
        i = bisect.bisect_right(self.starts, ptr) - 1
        over = []
        i = max(i, 0)
        while i < len(self.starts) and self.starts[i] < end:
            st = self.starts[i]
            if self.blk[st][0] > ptr:
                over.append(st)
            i += 1
        for st in over:
            bend, young, seq = self.blk[st]
            self._del(st)
            if st < ptr:                            # front part keeps its place and seq
                bisect.insort(self.starts, st)
                self.blk[st] = [ptr, young, seq]
                self.by_end[ptr] = st
            if bend > end:
                self._add(end, bend, young)
        chunks = range(ptr // CHUNK, (end - 1) // CHUNK + 1)
        for c in chunks:
            self.cover[c] = self.cover.get(c, 0) + 1
        for c in chunks:
            if c in self.mapped:
                continue
            free = [x for x in self.mapped if self.cover.get(x, 0) == 0]
            if free:
                self.mapped.discard(min(free))
            self.mapped.add(c)

    def release(self, ptr, n):
        for c in range(ptr // CHUNK, (ptr + n - 1) // CHUNK + 1):
            self.cover[c] -= 1
        self._insert_merging(ptr, ptr + n, True)
        if self.mode == "sync":                     # the wait completes it: old at once
            self.retire()

    def reserved(self):
        return len(self.mapped) * CHUNK


def replay(rows, forced, mode="idle"):
    pool, live = DriverPool(mode), {}
    n = hits = res_ok = ops = 0
    misses = []
    for (i, op, ident, size, ptr, reserved) in rows:
        if op == "alloc":
            sz = rounded(size)
            got = pool.choose(sz)
            n += 1
            if got == ptr:
                hits += 1
            elif len(misses) < 5:
                misses.append((i, sz, ptr, got))
            at = ptr if forced else got
            pool.take(at, sz)
            live[ident] = (at, sz)
        elif ident in live:
            at, sz = live.pop(ident)
            pool.release(at, sz)
        else:
            continue
        ops += 1
        res_ok += pool.reserved() == reserved
    return n, hits, ops, res_ok, misses


def mode_of(name):
    """A log's mode by its name (lab/async_modes.py's NAME-sync, NAME-busy), else idle."""
    base = os.path.basename(name).split(".")[0]
    return next((m for m in ("sync", "busy") if base.endswith("-" + m)), "idle")


def main(argv):
    for name in argv or LOGS:
        rows = load(name)
        n, h, ops, rok, miss = replay(rows, True, mode_of(name))
        n2, h2, ops2, rok2, miss2 = replay(rows, False, mode_of(name))
        print("%-16s allocs %6d  forced %6d  free-run %6d  reserved right after %d/%d calls%s"
              % (os.path.basename(name).split(".")[0], n, h, h2, rok2, ops2,
                 ("  first misses (i, size, real, model): %s" % (miss2 or miss)) if miss or miss2
                 else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
