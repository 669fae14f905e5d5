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
  vs native   step median over native's, and the median of the per-step ratios (step i of
              every round against native's step i of the same round: the workloads with varying
              shapes repeat the same steps in every run, so a ratio of like with like); targets:
              stitch's peak at most expandable's, its paired step ratio within 1% of native's
Then, for the capped runs (NAME-KIND-capF.json), one row per workload and cap: each allocator's
outcome (ok, or oom at step N) and, for a run that completed, whether its outputs are native's
uncapped ones; the target: where expandable segments completes, stitch completes.
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


def paired(runs, ref_runs):
    """Median over steps of a run's step time over the reference's same step (same round)."""
    ratios = []
    for j, r in zip(runs, ref_runs):
        w = j["warmup"]
        ratios += [t / u for t, u in zip(j["step_seconds"][w:], r["step_seconds"][w:]) if u > 0]
    return statistics.median(ratios) if ratios else None


def outcome(j):
    return "ok" if j.get("outcome", "ok") == "ok" else f"oom at step {j.get('oom_step', '?')}"


def capped(d, workloads, refs):
    """The capped table's lines and verdicts; refs: each workload's uncapped native outputs."""
    rows, verdicts = [], []
    for w in workloads:
        for p in sorted(glob.glob(os.path.join(d, f"{w}-expandable-cap*.json"))):
            f = os.path.basename(p)[len(w) + len("-expandable-cap"):-len(".json")]
            got = {}
            for k in KINDS:
                q = os.path.join(d, f"{w}-{k}-cap{f}.json")
                if os.path.exists(q):
                    got[k] = load(q)
            cap = got["expandable"].get("cap_bytes") or 0
            cells = [("no result" if k not in got else outcome(got[k]) if got[k].get("outcome") != "ok"
                      else "ok, " + ("same outputs" if got[k]["outputs"] == refs.get(w) else "outputs DIFFER"))
                     for k in KINDS]
            rows.append(f"| {w} | {f} x expandable's peak = {cap} ({gib(cap)}) | " + " | ".join(cells) + " |")
            if "stitch" in got:
                ok = got["expandable"].get("outcome", "ok") != "ok" or got["stitch"].get("outcome", "ok") == "ok"
                verdicts.append(f"{w} at {f}x: stitch completes where expandable does "
                                f"{'met' if ok else 'MISSED'}")
    return rows, verdicts


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
    print("| workload | allocator | outputs | peak reserved | step ms, median (per round; spread) "
          "| vs native | paired |")
    print("|---|---|---|---|---|---|---|")
    verdicts, refs = [], {}
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
                    ref = refs[w] = j["outputs"]
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
            pr = paired(runs[k], runs["native"]) if runs["native"] else None
            prs = "?" if pr is None else f"{(pr - 1) * 100:+.1f}%"
            print(f"| {w} | {k} | {'same' if same else 'DIFFER'} | {peak} | "
                  f"{med[k] * 1e3:.2f} ({per}) | {vs} | {prs} |")
        if peaks.get("stitch") and peaks.get("expandable"):
            lower = max(peaks["stitch"]) <= min(peaks["expandable"])
            pr = paired(runs["stitch"], runs["native"])
            fast = pr is not None and pr <= 1.01
            verdicts.append(f"{w}: peak at most expandable's {'met' if lower else 'MISSED'}; "
                            f"paired step within 1% {'met' if fast else 'MISSED'}")
    rows, cv = capped(d, workloads, refs)
    if rows:
        print()
        print("| workload | cap | native | expandable | stitch |")
        print("|---|---|---|---|---|")
        print("\n".join(rows))
    print()
    for v in verdicts + cv:
        print(v)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
