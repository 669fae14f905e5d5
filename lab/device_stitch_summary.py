#!/usr/bin/env python3
"""Summarise lab/device_stitch.sh OUTDIR: one row per workload and allocator, as a Markdown table.

    python3 lab/device_stitch_summary.py lab/results/h100-2026-11-23-stitch

Per workload and allocator (native, expandable, stitch):
  outputs     'same' when every round of every allocator gave the same outputs as native's first
              round (losses, or generated tokens' hashes, compared exactly), else 'DIFFER'
  peak        peak reserved bytes: torch.cuda.max_memory_reserved() for native and expandable,
              peak_reserved_bytes of the GPUSIM_STATS file for stitch; one number when every round
              agrees, else min-max
  step ms     median of the timed steps (after the warm-up) of all rounds together, and in
              brackets each round's median and the 10th-90th percentiles of all timed steps
  vs native   step median over native's; targets: stitch's peak below native's
              and expandable's, its step time within 1% of native's
Standard library only; exit status 2 with one line for a folder without results.
"""
import glob
import json
import os
import statistics
import sys

KINDS = ("native", "expandable", "stitch")


def load(path):
    with open(path) as f:
        return json.load(f)


def gib(n):
    return f"{n / 2**30:.2f} GiB"


def main(argv):
    if len(argv) != 2 or argv[1].startswith("-"):
        print(__doc__.strip(), file=sys.stderr if len(argv) != 2 else sys.stdout)
        return 0 if len(argv) == 2 else 2
    d = argv[1]
    files = sorted(glob.glob(os.path.join(d, "*-native-*.json")))
    if not files:
        print(f"{d}: no *-native-N.json results", file=sys.stderr)
        return 2
    workloads = []
    for f in files:
        w = os.path.basename(f).rsplit("-native-", 1)[0]
        if w not in workloads:
            workloads.append(w)
    print("| workload | allocator | outputs | peak reserved | step ms, median (per round; spread) | vs native |")
    print("|---|---|---|---|---|---|")
    verdicts = []
    for w in workloads:
        runs, peaks, ref = {}, {}, None
        for k in KINDS:
            runs[k], peaks[k] = [], []
            for r in range(1, 100):
                p = os.path.join(d, f"{w}-{k}-{r}.json")
                if not os.path.exists(p):
                    break
                j = load(p)
                runs[k].append(j)
                if k == "stitch":
                    sp = os.path.join(d, f"{w}-stitch-stats-{r}.json")
                    if os.path.exists(sp):
                        st = load(sp)      # gpusim's JSON: an array of one trace
                        st = st[0] if isinstance(st, list) else st
                        peaks[k].append(st["results"][0]["peak_reserved_bytes"])
                else:
                    peaks[k].append(j["max_memory_reserved"])
                if ref is None:
                    ref = j["outputs"]
        med = {}
        for k in KINDS:
            if not runs[k]:
                continue
            steps = [t for j in runs[k] for t in j["step_seconds"][j["warmup"]:]]
            med[k] = statistics.median(steps)
            same = all(j["outputs"] == ref for j in runs[k])
            pk = peaks[k]
            peak = "?" if not pk else (f"{pk[0]} ({gib(pk[0])})" if min(pk) == max(pk)
                                       else f"{min(pk)}-{max(pk)}")
            per = ", ".join(f"{j['median_step_seconds'] * 1e3:.2f}" for j in runs[k])
            q = statistics.quantiles(steps, n=10) if len(steps) > 1 else steps * 9
            per += f"; p10-p90 {q[0] * 1e3:.2f}-{q[-1] * 1e3:.2f}"
            vs = f"{(med[k] / med['native'] - 1) * 100:+.1f}%" if "native" in med else "?"
            print(f"| {w} | {k} | {'same' if same else 'DIFFER'} | {peak} | "
                  f"{med[k] * 1e3:.2f} ({per}) | {vs} |")
        if peaks.get("stitch") and peaks.get("native") and peaks.get("expandable"):
            lower = max(peaks["stitch"]) < min(min(peaks["native"]), min(peaks["expandable"]))
            fast = "stitch" in med and med["stitch"] <= med["native"] * 1.01
            verdicts.append(f"{w}: peak below both {'met' if lower else 'MISSED'}; "
                            f"step within 1% {'met' if fast else 'MISSED'}")
    print()
    for v in verdicts:
        print(v)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
