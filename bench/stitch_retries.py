"""stitch_retries.py GPUSIM FRONTIER_CSV [POLICY] [--factors F,...] [--no-wait] - the retries a
setting makes at caps just above each trace's bound: for every trace of bench/frontier.sh's CSV,
replays at F x its lower bound (rounded to 2 MiB, plus a page) and prints outcome/retries at
each, with the trace's bound when deferred frees (record_stream) count live until their
completion, the least any allocator needs to serve it without synchronising (BENCHMARKS.md,
"Retries above the bound"); --no-wait makes that bound the one the factors multiply. POLICY
defaults to stitch.

    python3 bench/stitch_retries.py build/gpusim /tmp/gpusim-frontier/frontier.csv
"""

import argparse
import csv
import gzip
import json
import os
import subprocess

PAGE = 2 << 20


def rows(path):
    """(op, (device, id), size) of each event of a text trace."""
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        cols = None
        for line in f:
            if line.startswith("#"):
                continue
            fields = line.rstrip("\n").split(",")
            if cols is None:
                cols = {name: k for k, name in enumerate(fields)}
                continue
            yield (fields[cols["op"]], (fields[cols["device"]], fields[cols["id"]]),
                   int(fields[cols["size"]]))


def bound_without_waiting(path):
    """The largest over devices of each one's peak live bytes (rounded up to 2 MiB), each
    deferred free live until its free_done: the lower bound's rule (sim/bound.c) but for that,
    per device as the frontier's minimum of a trace of several devices is."""
    done = {ident for op, ident, _ in rows(path) if op == "free_done"}
    size, live, peak = {}, {}, {}
    for op, ident, n in rows(path):
        dev = ident[0]
        if op == "alloc":
            size[ident] = n
            live[dev] = live.get(dev, 0) + n
            peak[dev] = max(peak.get(dev, 0), live[dev])
        elif (op == "free" and ident not in done) or op == "free_done":
            live[dev] -= size.get(ident, 0)
    return max((-(-p // PAGE) * PAGE for p in peak.values()), default=0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gpusim")
    ap.add_argument("csv")
    ap.add_argument("policy", nargs="?", default="stitch")
    ap.add_argument("--factors", default="1.02,1.05,1.1,1.2,1.5")
    ap.add_argument("--no-wait", action="store_true",
                    help="caps of F x the bound with deferred frees live, not the bound")
    a = ap.parse_args()
    factors = [float(f) for f in a.factors.split(",")]
    seen = set()
    with open(a.csv) as f:
        for r in csv.DictReader(f):
            t = r["trace"]
            if t in seen or not r["lower_bound_bytes"]:
                continue
            seen.add(t)
            lb = int(r["lower_bound_bytes"])
            wait = bound_without_waiting(t) if not t.endswith(".gsbin") else 0
            base = max(lb, wait) if a.no_wait else lb
            cells = []
            for x in factors:
                cap = int(base * x) // PAGE * PAGE + PAGE
                p = subprocess.run([a.gpusim, "replay", t, "-p", a.policy, "--capacity", str(cap),
                                    "--format", "json", "-q"], capture_output=True, text=True)
                try:
                    res = json.loads(p.stdout)[0]["results"][0]
                    cells.append("%.2f:%s/%s" % (x, res["outcome"], res["num_alloc_retries"]))
                except (ValueError, KeyError, IndexError):
                    cells.append("%.2f:error" % x)
            print("%-40s %s  no-wait bound %.4f x" % (os.path.basename(t)[:40], " ".join(cells),
                                                     wait / lb if wait else float("nan")))


if __name__ == "__main__":
    main()
