#!/usr/bin/env python3
"""async_verify_table.py DIR [GPUSIM] - the table of lab/device_async_verify.sh's runs: for each
program, PyTorch's backend:cudaMallocAsync and its native default on the GPU (peak reserved,
from gpusim verify's JSON) against gpusim's replays of the program's native recording: the
cuda-async policy as it is (the prediction verify printed) and, replayed here, with its fixed
chunks (cuda-async:vmm:0, the default before 2026-12-06). Standard library only."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REC = os.path.join(ROOT, "lab", "results", "h100-2026-12-05-predict")


def replay_peak(gpusim, trace, spec):
    out = subprocess.run([gpusim, "replay", trace, "-q", "-f", "json", "-p", spec],
                         check=True, capture_output=True, text=True).stdout
    return int(json.loads(out)[0]["results"][0]["peak_reserved_bytes"])


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    folder = argv[0]
    gpusim = argv[1] if len(argv) > 1 else os.path.join(ROOT, "build", "gpusim")
    gib = 2.0 ** 30
    print("| program | cudaMallocAsync real GiB | cuda-async predicted (x real) | vmm:0 (x real) "
          "| native real GiB | pytorch predicted (x real) |")
    print("|---|---|---|---|---|---|")
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json"):
            continue
        prog = name[:-5]
        runs = {r["policy"]: r for r in json.load(open(os.path.join(folder, name)))["runs"]}
        a, n = runs["cuda-async"], runs["pytorch"]
        trace = os.path.join(REC, prog + ".default.gstrace.gz")
        old = replay_peak(gpusim, trace, "cuda-async:vmm:0")
        ar, ap = a["peak_reserved_bytes"], a["predicted_peak_reserved_bytes"]
        nr, np_ = n["peak_reserved_bytes"], n["predicted_peak_reserved_bytes"]
        print("| %s | %.3f | %.3f (%.3f) | %.3f (%.3f) | %.3f | %.3f (%.3f) |"
              % (prog, ar / gib, ap / gib, ap / ar, old / gib, old / ar, nr / gib, np_ / gib,
                 np_ / nr))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
