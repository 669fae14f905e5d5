#!/usr/bin/env python3
"""placement_runs.py - do two real runs that ask the driver for the same segments get the same
addresses? docs/fidelity.md, "What the placement model cannot know", quotes it.

  placement_runs.py [SNAPSHOT...]     default: every PyTorch recording the repository and
                                      ../shared hold (cudaMalloc segments; expandable ones skipped)

For each pair of recordings of one program (the name before the first "__"), under any setting
or the same one twice, it walks their segment_alloc and segment_free entries together while they
are the same (action, size, and the index of the request that caused them) and compares the
addresses, each as an offset from its run's first segment. Where the sequences agree and the
addresses do not, nothing the allocator did tells the runs apart: the driver's placement there
depends on something outside the snapshot (memory the process took otherwise, and when), so no
rule applied to a trace can give both runs' addresses.

Standard library only.
"""
import glob
import gzip
import itertools
import os
import pickle
import sys

MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def default_inputs():
    shared = os.environ.get("GPUSIM_SHARED", os.path.join(ROOT, "..", "shared"))
    return sorted(glob.glob(os.path.join(shared, "traces", "pytorch-2.11-h100", "*.pickle.gz")) +
                  glob.glob(os.path.join(ROOT, "traces", "references", "*", "*.pickle.gz")) +
                  glob.glob(os.path.join(ROOT, "lab", "results", "*", "*.pickle.gz")))


def segment_calls(path):
    """{device: [(action, size, request index, address - first segment's)]} of a snapshot's
    cudaMalloc segments; devices with expandable segments (segment_map) left out."""
    with gzip.open(path) as f:
        snap = pickle.load(f)  # our own recordings: trusted input
    out = {}
    for dev, entries in enumerate(snap.get("device_traces", [])):
        rows, requests, first = [], 0, None
        for e in entries:
            action = e.get("action")
            if action == "alloc":
                requests += 1
            elif action in ("segment_map", "segment_unmap"):
                rows = None
                break
            elif action in ("segment_alloc", "segment_free"):
                first = e["addr"] if first is None else first
                rows.append((action, e["size"], requests, e["addr"] - first))
        if rows:
            out[dev] = rows
    return out


def compare(a, b):
    """(calls alike, segments alike, of them at the same place, first differing segment)."""
    n = 0
    while n < min(len(a), len(b)) and a[n][:3] == b[n][:3]:
        n += 1
    allocs = [i for i in range(n) if a[i][0] == "segment_alloc"]
    same = [i for i in allocs if a[i][3] == b[i][3]]
    first = next((i for i in allocs if a[i][3] != b[i][3]), None)
    return n, len(allocs), len(same), first


def main(argv):
    paths = argv or default_inputs()
    runs = {}
    for p in paths:
        label = os.path.join(os.path.basename(os.path.dirname(p)), os.path.basename(p))
        for dev, rows in segment_calls(p).items():
            runs[label + ("" if dev == 0 else f"#{dev}")] = rows
    by_program = {}
    for label in runs:
        by_program.setdefault(os.path.basename(label).split("__")[0], []).append(label)
    print("program\trun A\trun B\tcalls alike\tsegments alike\tat the same offset\t"
          "first differing segment (MiB from the first: A, B)")
    for program, labels in sorted(by_program.items()):
        for x, y in itertools.combinations(sorted(labels), 2):
            if x.split("#")[0] == y.split("#")[0]:
                continue  # two devices of one run: not two runs
            n, segs, same, first = compare(runs[x], runs[y])
            where = "" if first is None else (f"#{first} at request {runs[x][first][2]}, "
                                              f"{runs[x][first][3] // MiB:+d} vs "
                                              f"{runs[y][first][3] // MiB:+d}")
            print(f"{program}\t{x}\t{y}\t{n}\t{segs}\t{same}\t{where}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
