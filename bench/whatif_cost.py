#!/usr/bin/env python3
"""whatif's cost with checkpoints (the default) against --full-replays, in one run.

    python3 bench/whatif_cost.py GPUSIM TRACE [--rounds N] [--jobs J ...]

For each jobs value, runs `GPUSIM whatif TRACE --format json -q -j J` and the same with
--full-replays, alternating, ROUNDS times each. Prints, per form: the CPU seconds of the whole
process tree (user+sys from the kernel's accounting of the waited-for children), the wall
seconds, and the trace-equivalents its replays made (the rows' replayed_events over
trace_events). Checks that both forms give the same answers (every row's figures but the
replays' counts): exit 1 if not. Standard library only; runs on the device machine too.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

COST_KEYS = {"replays", "replayed_events"}


def run(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE).stdout
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    sys_s = after.ru_stime - before.ru_stime
    return json.loads(out), cpu, sys_s, wall


def answers(doc):
    return [{k: v for k, v in r.items() if k not in COST_KEYS} for r in doc["results"]]


def trace_equivalents(doc):
    n = doc["trace_events"] or 1
    return sum(r["replayed_events"] for r in doc["results"]) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gpusim")
    ap.add_argument("trace")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, action="append", help="default: 1 and the processors")
    a = ap.parse_args()
    jobs = a.jobs or [1, os.cpu_count() or 1]
    same = True
    print("jobs\tform\tcpu_s_median\tsys_s_median\twall_s_median\ttrace_equivalents")
    for j in jobs:
        forms = {"checkpoints": [], "full": []}
        docs = {}
        for _ in range(a.rounds):
            for form, extra in (("checkpoints", []), ("full", ["--full-replays"])):
                cmd = [a.gpusim, "whatif", a.trace, "--format", "json", "-q", "-j", str(j)] + extra
                doc, cpu, sys_s, wall = run(cmd)
                forms[form].append((cpu, sys_s, wall))
                docs[form] = doc
        same &= answers(docs["checkpoints"]) == answers(docs["full"])
        for form, runs in forms.items():
            med = [statistics.median(x[k] for x in runs) for k in range(3)]
            print(f"{j}\t{form}\t{med[0]:.3f}\t{med[1]:.3f}\t{med[2]:.3f}\t"
                  f"{trace_equivalents(docs[form]):.1f}")
    print("answers", "identical" if same else "DIFFER")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
