#!/usr/bin/env python3
"""Measure what the real CUDA driver does with plain cudaMalloc/cudaFree: where it places each
allocation, whether a freed range is handed out again, and how much device memory small
allocations really take. No PyTorch allocator is involved: every call goes straight to the
CUDA runtime through cupy.cuda.runtime (cudaMalloc, cudaFree, cudaMemGetInfo).

Every experiment runs in a fresh process (a fresh CUDA context), so one experiment's leftovers
cannot move the next one's addresses; some run twice to show whether placement repeats from
process to process. Each call is recorded as one CSV row:

    exp,run,step,op,label,size,addr,addr_hex,free_before,free_after,used,ns,error

where used = free_before - free_after (what cudaMemGetInfo says the call took; negative for a
free that gave memory back) and ns is the call's host time. Files written to --out:

    EXP-rN.csv         every call of experiment EXP in process N (the repo keeps big ones gzipped)
    summary.json       per experiment: address deltas, alignment, memory taken per allocation
    env.json           device, driver and runtime versions, total and free memory at start

Experiments (--list prints them):
  seq       mixed sizes (2 MiB, 20 MiB, ~1 GiB, 2 MiB + 512, 7 MiB, 512 B, 1 MiB), frees in
            between, the same sizes again (is a freed range reused? lowest address first? the
            same address?), then everything freed and the first sequence repeated. Twice.
  reuse     ten 20 MiB; free the 3rd, 6th and 9th; three 20 MiB again (which hole first?);
            two 2 MiB into what is left; free all; ten 20 MiB again.
  pattern   what PyTorch's allocator asks for: 2 MiB and 20 MiB segments interleaved, then
            twenty 20 MiB, then thirty 2 MiB (do 2 MiB segments fill the 32 MiB chunks that
            20 MiB segments leave?). Twice.
  sizes     four allocations of each of 512 B ... 1 GiB + 1 (odd sizes included), freed
            before the next size: address spacing and memory taken by each size.
  small512  50,000 x cudaMalloc(512), cudaMemGetInfo after each; then all freed.
  small1m   2,000 x cudaMalloc(1 MiB), likewise.
  small2m   1,000 x cudaMalloc(2 MiB + 512), likewise.
  fill      1 GiB until cudaMalloc fails, then 20 MiB, then 2 MiB, then 512 B (at most
            100,000): how much of what cudaMemGetInfo calls free can really be allocated.
  holes     ten 20 MiB; free the 3rd, 6th, 9th; 20 MiB at once, after 0.5 s, after a
            cudaDeviceSynchronize (is a freed chunk in the middle ever reused, and when?);
            eight 2 MiB; free the lowest chunk and ask for 20 MiB and 40 MiB. Twice.
  holes1g   three 1 GiB and a 20 MiB; free the middle 1 GiB; 1 GiB at once, after 0.5 s,
            after a synchronize; 512 MiB; free the top 1 GiB; 1 GiB after 0.5 s. Twice.

Example:
  python3 lab/measure_driver.py --out tests/data/driver-h100-2026-11-22
  python3 lab/measure_driver.py --analyze tests/data/driver-h100-2026-11-22 \\
      tests/data/driver-h200-2026-11-22        # offsets, and H100 vs H200 (no GPU needed)
  python3 lab/measure_driver.py --only seq --only sizes --out /tmp/d
Needs CuPy built for the machine's CUDA (cupy-cuda13x) and a GPU.
"""

import argparse
import collections
import csv
import json
import os
import subprocess
import sys
import time

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
EXPERIMENTS = collections.OrderedDict([
    ("seq", 2), ("reuse", 1), ("pattern", 2), ("sizes", 1),
    ("small512", 1), ("small1m", 1), ("small2m", 1), ("fill", 1),
    ("holes", 2), ("holes1g", 2),
])
FIELDS = ["exp", "run", "step", "op", "label", "size", "addr", "addr_hex", "free_before",
          "free_after", "used", "ns", "error"]


class Driver:
    """cudaMalloc/cudaFree with cudaMemGetInfo around each call, every call one row."""

    def __init__(self, exp, run, meminfo_every=1):
        from cupy.cuda import runtime
        self.rt = runtime
        self.exp, self.run = exp, run
        self.rows = []
        self.meminfo_every = meminfo_every
        self.rt.setDevice(0)
        self.rt.free(0)            # cudaFree(NULL): creates the context
        self.free_now = self.rt.memGetInfo()[0]

    def _info(self, force):
        if force or len(self.rows) % self.meminfo_every == 0:
            self.free_now = self.rt.memGetInfo()[0]
            return self.free_now
        return None

    def malloc(self, size, label=""):
        fb = self.free_now
        t0 = time.perf_counter_ns()
        err, ptr = "", 0
        try:
            ptr = self.rt.malloc(size)
        except self.rt.CUDARuntimeError as e:
            err = str(e)
        ns = time.perf_counter_ns() - t0
        fa = self._info(bool(err))
        self._row("malloc", label, size, ptr, fb, fa, ns, err)
        return ptr if not err else None

    def free(self, ptr, size=0, label=""):
        fb = self.free_now
        t0 = time.perf_counter_ns()
        err = ""
        try:
            self.rt.free(ptr)
        except self.rt.CUDARuntimeError as e:
            err = str(e)
        ns = time.perf_counter_ns() - t0
        fa = self._info(False)
        self._row("free", label, size, ptr, fb, fa, ns, err)

    def pause(self, seconds):
        time.sleep(seconds)
        self.note(f"slept {seconds} s")

    def sync(self):
        self.rt.deviceSynchronize()
        self.note("cudaDeviceSynchronize")

    def note(self, label):
        """A row with cudaMemGetInfo alone (before/after a batch)."""
        fb = self.free_now
        fa = self._info(True)
        self._row("meminfo", label, 0, 0, fb, fa, 0, "")

    def _row(self, op, label, size, ptr, fb, fa, ns, err):
        used = (fb - fa) if (fa is not None and fb is not None) else ""
        self.rows.append({"exp": self.exp, "run": self.run, "step": len(self.rows), "op": op,
                          "label": label, "size": size, "addr": ptr,
                          "addr_hex": f"{ptr:#x}" if ptr else "", "free_before": fb,
                          "free_after": "" if fa is None else fa, "used": used, "ns": ns,
                          "error": err})


# --- experiments (each runs in its own process) ------------------------------------------------

def ex_seq(d):
    sizes = [("2M", 2 * MiB), ("20M", 20 * MiB), ("2M", 2 * MiB), ("1G", GiB),
             ("2M+512", 2 * MiB + 512), ("7M", 7 * MiB), ("2M", 2 * MiB), ("20M", 20 * MiB),
             ("512", 512), ("1M", MiB), ("1G+2M", GiB + 2 * MiB), ("7M", 7 * MiB),
             ("20M", 20 * MiB), ("2M", 2 * MiB)]
    live = []
    for i, (name, s) in enumerate(sizes):
        live.append((f"a{i}:{name}", s, d.malloc(s, f"a{i}:{name}")))
    # free some in the middle: the 2nd 2M (a2), the first 20M (a1), the 1G (a3), a 7M (a5)
    for idx in (2, 1, 3, 5):
        lbl, s, p = live[idx]
        d.free(p, s, "free " + lbl)
    freed = {idx: live[idx] for idx in (2, 1, 3, 5)}
    live = [x for i, x in enumerate(live) if i not in freed]
    # the same sizes again, and smaller ones that would fit the holes
    again = [("b0:2M", 2 * MiB), ("b1:20M", 20 * MiB), ("b2:1G", GiB), ("b3:7M", 7 * MiB),
             ("b4:2M", 2 * MiB), ("b5:4M", 4 * MiB), ("b6:512M", 512 * MiB)]
    for lbl, s in again:
        live.append((lbl, s, d.malloc(s, lbl)))
    for lbl, s, p in reversed(live):
        d.free(p, s, "free " + lbl)
    d.note("all freed")
    for i, (name, s) in enumerate(sizes):
        live.append((f"c{i}:{name}", s, d.malloc(s, f"c{i}:{name}")))


def ex_reuse(d):
    a = [d.malloc(20 * MiB, f"a{i}:20M") for i in range(10)]
    for i in (2, 5, 8):
        d.free(a[i], 20 * MiB, f"free a{i}")
    b = [d.malloc(20 * MiB, f"b{i}:20M") for i in range(3)]
    c = [d.malloc(2 * MiB, f"c{i}:2M") for i in range(2)]
    e = [d.malloc(40 * MiB, "e0:40M")]
    for p, s in [(p, 20 * MiB) for i, p in enumerate(a) if i not in (2, 5, 8)] + \
            [(p, 20 * MiB) for p in b] + [(p, 2 * MiB) for p in c] + [(e[0], 40 * MiB)]:
        d.free(p, s, "free")
    d.note("all freed")
    [d.malloc(20 * MiB, f"f{i}:20M") for i in range(10)]


def ex_pattern(d):
    seq = [2, 20, 2, 2, 20, 2, 20, 20, 2, 2, 2, 2, 2, 2, 20, 2]
    for i, m in enumerate(seq):
        d.malloc(m * MiB, f"p{i}:{m}M")
    for i in range(20):
        d.malloc(20 * MiB, f"q{i}:20M")
    for i in range(30):
        d.malloc(2 * MiB, f"r{i}:2M")
    for i in range(4):
        d.malloc(100 * MiB, f"s{i}:100M")
    for i in range(8):
        d.malloc(2 * MiB, f"t{i}:2M")


def ex_sizes(d):
    sizes = [512, 1 * KiB, 4 * KiB, 64 * KiB, 256 * KiB, 1 * MiB, MiB + 1, 2 * MiB - 512,
             2 * MiB, 2 * MiB + 1, 2 * MiB + 512, 3 * MiB, 4 * MiB, 7 * MiB, 10 * MiB, 20 * MiB,
             20 * MiB + 512, 31 * MiB, 32 * MiB, 33 * MiB, 64 * MiB, 100 * MiB, 256 * MiB,
             GiB - 2 * MiB, GiB, GiB + 1, GiB + 2 * MiB]
    for s in sizes:
        ps = [d.malloc(s, f"{s}#{k}") for k in range(4)]
        for k, p in enumerate(ps):
            if p:
                d.free(p, s, f"free {s}#{k}")


def _many(d, size, n, name):
    d.note(f"before {n} x {name}")
    ps = [d.malloc(size, f"{name}#{k}") for k in range(n)]
    d.note(f"after {n} x {name}")
    for k, p in enumerate(ps):
        if p:
            d.free(p, size, f"free {name}#{k}")
    d.note(f"after freeing {n} x {name}")


def ex_small512(d):
    _many(d, 512, 50_000, "512")


def ex_small1m(d):
    _many(d, MiB, 2_000, "1M")


def ex_small2m(d):
    _many(d, 2 * MiB + 512, 1_000, "2M+512")


def ex_fill(d):
    d.note("start")
    live = []
    for size, name, limit in ((GiB, "1G", 1000), (20 * MiB, "20M", 10000),
                              (2 * MiB, "2M", 10000), (512, "512", 100_000)):
        for k in range(limit):
            p = d.malloc(size, f"{name}#{k}")
            if p is None:
                break
            live.append((p, size))
        d.note(f"after {name}")
    for p, s in live:
        d.free(p, s, "free")
    d.note("all freed")


def ex_holes(d):
    a = [d.malloc(20 * MiB, f"a{i}:20M") for i in range(10)]
    for i in (2, 5, 8):
        d.free(a[i], 20 * MiB, f"free a{i}")
    d.malloc(20 * MiB, "b0:20M at once")
    d.pause(0.5)
    d.malloc(20 * MiB, "b1:20M after 0.5 s")
    d.sync()
    d.malloc(20 * MiB, "b2:20M after sync")
    d.malloc(20 * MiB, "b3:20M")
    for i in range(8):
        d.malloc(2 * MiB, f"c{i}:2M")
    # free the lowest live chunk (the bottom of the carved range) and ask again at once
    d.free(a[9], 20 * MiB, "free a9 (lowest of the a's)")
    d.malloc(20 * MiB, "e0:20M at once")
    d.malloc(40 * MiB, "e1:40M")


def ex_holes1g(d):
    g = [d.malloc(GiB, f"g{i}:1G") for i in range(3)]
    s = d.malloc(20 * MiB, "s0:20M")
    d.free(g[1], GiB, "free g1 (middle)")
    d.malloc(GiB, "h0:1G at once")
    d.pause(0.5)
    d.malloc(GiB, "h1:1G after 0.5 s")
    d.sync()
    d.malloc(GiB, "h2:1G after sync")
    d.malloc(512 * MiB, "h3:512M")
    d.free(g[0], GiB, "free g0 (top)")
    d.pause(0.5)
    d.malloc(GiB, "k0:1G after 0.5 s")
    d.malloc(20 * MiB, "k1:20M")
    del s


EXPERIMENT_FUNCS = {"seq": ex_seq, "reuse": ex_reuse, "pattern": ex_pattern, "sizes": ex_sizes,
                    "small512": ex_small512, "small1m": ex_small1m, "small2m": ex_small2m,
                    "fill": ex_fill, "holes": ex_holes, "holes1g": ex_holes1g}


def child(exp, run, out):
    d = Driver(exp, run)
    EXPERIMENT_FUNCS[exp](d)
    path = os.path.join(out, f"{exp}-r{run}.csv")
    with open(path + ".tmp", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(d.rows)
    os.replace(path + ".tmp", path)
    print(f"{exp} run {run}: {len(d.rows)} calls -> {path}", flush=True)
    return 0


# --- summary (parent, standard library only) ----------------------------------------------------

def summarize(out, runs):
    summary = {}
    for exp, run in runs:
        path = os.path.join(out, f"{exp}-r{run}.csv")
        if not os.path.exists(path):
            summary[f"{exp}-r{run}"] = {"missing": True}
            continue
        with open(path) as f:
            rows = list(csv.DictReader(f))
        mallocs = [r for r in rows if r["op"] == "malloc" and not r["error"]]
        fails = [r for r in rows if r["op"] == "malloc" and r["error"]]
        s = {"calls": len(rows), "mallocs": len(mallocs), "failed_mallocs": len(fails)}
        if mallocs:
            addrs = [int(r["addr"]) for r in mallocs]
            deltas = [b - a for a, b in zip(addrs, addrs[1:])]
            s["first_addr"] = hex(addrs[0])
            s["delta_counts_top"] = collections.Counter(deltas).most_common(12)
            s["align_2MiB"] = sum(1 for a in addrs if a % (2 * MiB) == 0)
            s["align_512"] = sum(1 for a in addrs if a % 512 == 0)
            by_size = collections.defaultdict(list)
            for r in mallocs:
                if r["used"] != "":
                    by_size[int(r["size"])].append(int(r["used"]))
            s["used_by_size"] = {str(k): {"n": len(v), "total": sum(v),
                                          "distinct": sorted(set(v))[:8]}
                                 for k, v in sorted(by_size.items())}
            ns = sorted(int(r["ns"]) for r in mallocs)
            s["malloc_ns_median"] = ns[len(ns) // 2]
        frees = sorted(int(r["ns"]) for r in rows if r["op"] == "free")
        if frees:
            s["free_ns_median"] = frees[len(frees) // 2]
        notes = [(r["label"], r["free_after"]) for r in rows if r["op"] == "meminfo"]
        if notes:
            s["meminfo_notes"] = notes
        if fails:
            s["first_failure"] = {k: fails[0][k] for k in ("label", "size", "error")}
        summary[f"{exp}-r{run}"] = s
    return summary


def _load(path):
    import gzip
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return list(csv.DictReader(f))


def _rel_rows(rows):
    """(op, label, size, offset from the process's first allocation in MiB, used MiB)."""
    base = next((int(r["addr"]) for r in rows if r["op"] == "malloc" and not r["error"]), 0)
    out = []
    for r in rows:
        a = int(r["addr"] or 0)
        rel = (a - base) / MiB if a else None
        used = int(r["used"]) / MiB if r["used"] not in ("", None) else None
        out.append((r["op"], r["label"], int(r["size"]), rel, used, a, r["error"]))
    return out


def analyze(dirs, out=sys.stdout):
    """Print every call with its address relative to the process's first allocation (MiB),
    its offset in a 32 MiB-aligned chunk and the memory cudaMemGetInfo says it took; then
    whether runs (and folders, e.g. two GPUs) placed everything at the same offsets."""
    p = lambda *a: print(*a, file=out)
    rels, _raw = {}, {}
    for d in dirs:
        for exp, n in EXPERIMENTS.items():
            for run in range(1, n + 1):
                path = os.path.join(d, f"{exp}-r{run}.csv")
                if not os.path.exists(path) and os.path.exists(path + ".gz"):
                    path += ".gz"           # the large CSVs are kept gzipped in the repo
                if os.path.exists(path):
                    _raw[(d, exp, run)] = _load(path)
                    rels[(d, exp, run)] = _rel_rows(_raw[(d, exp, run)])
    for (d, exp, run), rows in rels.items():
        if d != dirs[0]:
            continue
        p(f"\n== {exp} run {run} ({d}): op label size offset_MiB chunk32_MiB used_MiB")
        if exp.startswith("small"):
            mal = [r for r in rows if r[0] == "malloc" and not r[6]]
            pages = collections.Counter(r[5] // (2 * MiB) for r in mal)
            notes = [(r[1], r[4]) for r in rows if r[0] == "meminfo"]
            offs = [r[3] for r in mal]
            step = collections.Counter(b - a for a, b in zip(offs, offs[1:])).most_common(1)[0][0]
            runs, start = [], 0
            for i in range(1, len(offs) + 1):
                if i == len(offs) or offs[i] - offs[i - 1] != step:
                    runs.append((offs[start], i - start))
                    start = i
            used = sum(r[4] for r in mal if r[4] is not None)
            p(f"{len(mal)} allocations of {mal[0][2]} B: cudaMemGetInfo fell by {used:.0f} MiB "
              f"({used * MiB / len(mal):.1f} B each); {len(pages)} distinct 2 MiB pages, "
              f"allocations per page {dict(collections.Counter(pages.values()))}")
            p(f"usual step {step:g} MiB; runs of steps (start offset MiB, length): {runs[:12]}"
              f"{' ...' if len(runs) > 12 else ''} ({len(runs)} runs)")
            p("free memory at each note (MiB): " + ", ".join(
                f"{r[1]}: {int(rw['free_after']) / MiB:.0f}"
                for r, rw in zip(rows, _raw[(d, exp, run)]) if r[0] == "meminfo"))
            continue
        for op, label, size, rel, used, a, err in rows:
            if exp == "fill" and op == "free":
                continue
            where = f"{rel:10.3f} {((a % (32 * MiB)) / MiB):7.3f}" if rel is not None else \
                f"{'-':>10s} {'-':>7s}"
            u = f"{used:9.3f}" if used is not None else f"{'-':>9s}"
            if op == "meminfo":
                raw = _raw[(d, exp, run)][rows.index((op, label, size, rel, used, a, err))]
                u = f"free {int(raw['free_after']) / MiB:.1f} MiB"
            p(f"{op:7s} {label:16s} {size:11d} {where} {u} {err[:40]}")
    p("\n== same offsets from the first allocation?")
    keys = sorted({(e, r) for (_, e, r) in rels})
    for exp, run in keys:
        for d in dirs:
            if (d, exp, run) not in rels:
                continue
            ref_d, ref_r = dirs[0], 1
            if (ref_d, exp, ref_r) not in rels or (d, run) == (ref_d, ref_r):
                continue
            a = [(r[0], r[2], r[3]) for r in rels[(ref_d, exp, ref_r)] if r[0] == "malloc"]
            b = [(r[0], r[2], r[3]) for r in rels[(d, exp, run)] if r[0] == "malloc"]
            diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
            verdict = "identical" if not diff and len(a) == len(b) else \
                f"{len(diff)} of {min(len(a), len(b))} allocations differ (first at #{diff[0] if diff else '-'})"
            p(f"{exp} run {run} in {d} vs run 1 in {ref_d}: {verdict}")


def env_info(out):
    code = ("import json,cupy;from cupy.cuda import runtime as r;r.setDevice(0);r.free(0);"
            "p=r.getDeviceProperties(0);f,t=r.memGetInfo();"
            "print(json.dumps({'name':p['name'].decode() if isinstance(p['name'],bytes) "
            "else p['name'],'totalGlobalMem':p['totalGlobalMem'],'free_at_start':f,'total':t,"
            "'driver':r.driverGetVersion(),'runtime':r.runtimeGetVersion(),"
            "'cupy':cupy.__version__}))")
    try:
        info = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                         text=True, timeout=60).stdout)
    except (ValueError, subprocess.TimeoutExpired) as e:
        info = {"error": str(e)}
    try:
        info["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,memory.used",
             "--format=csv,noheader"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        info["nvidia_smi"] = str(e)
    with open(os.path.join(out, "env.json"), "w") as f:
        json.dump(info, f, indent=1)
    return info


def main(argv=None):
    p = argparse.ArgumentParser(prog="measure_driver.py", description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="driver", help="output folder (default: driver)")
    p.add_argument("--only", action="append", choices=list(EXPERIMENTS), metavar="EXP",
                   help="run only these experiments (repeatable): " + ", ".join(EXPERIMENTS))
    p.add_argument("--list", action="store_true", help="list the experiments")
    p.add_argument("--analyze", nargs="+", metavar="DIR",
                   help="print the recorded calls of DIR as offsets from each process's first "
                        "allocation and compare runs (and further DIRs) with DIR's run 1; "
                        "needs no GPU")
    p.add_argument("--timeout", type=int, default=120, help="seconds per experiment process")
    p.add_argument("--child", choices=list(EXPERIMENTS), help=argparse.SUPPRESS)
    p.add_argument("--run", type=int, default=1, help=argparse.SUPPRESS)
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    if a.analyze:
        analyze(a.analyze)
        return 0
    if a.list:
        for e, n in EXPERIMENTS.items():
            print(f"{e:9s} {n} process(es)")
        return 0
    os.makedirs(a.out, exist_ok=True)
    if a.child:
        return child(a.child, a.run, a.out)
    info = env_info(a.out)
    print("device:", json.dumps(info), flush=True)
    runs = [(e, r) for e, n in EXPERIMENTS.items() if not a.only or e in a.only
            for r in range(1, n + 1)]
    failed = 0
    for exp, run in runs:
        t0 = time.perf_counter()
        cmd = [sys.executable, os.path.abspath(__file__), "--child", exp, "--run", str(run),
               "--out", a.out]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
            rc, text = r.returncode, (r.stdout + r.stderr).strip()
        except subprocess.TimeoutExpired:
            rc, text = "timeout", ""
        failed += rc != 0
        print(f"{exp} r{run}: rc {rc} {time.perf_counter() - t0:.1f}s | "
              f"{text.splitlines()[-1][:300] if text else ''}", flush=True)
        if rc != 0 and text:
            print(text[-3000:], flush=True)
    summary = summarize(a.out, runs)
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps({k: {kk: v.get(kk) for kk in ("mallocs", "failed_mallocs",
                                                    "delta_counts_top", "malloc_ns_median")}
                      for k, v in summary.items()}, indent=None)[:6000], flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
