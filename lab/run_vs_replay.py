#!/usr/bin/env python3
"""Runs under `gpusim run` beside what gpusim predicted for them, from a recording of the program.

    python3 lab/run_vs_replay.py [--no-outcome] GPUSIM OUTDIR RECORDING

OUTDIR is lab/device_stitch_streams.sh's: for each run SETTING-CAP.json (the run's statistics,
SETTING the policy with other characters made '_') and SETTING-CAP.gstrace.gz (its requests as
the library saw them). RECORDING is a trace of the same program recorded natively (its
snapshot converted). For each run, one row: the setting and cap, then the outcome, retries,
OOMs, device allocations, device frees and peak reserved bytes three times: as the run reported them, as
`GPUSIM replay RECORDING` at that cap predicts them, and as the replay of the run's own trace
gives them; `agree` when all three are equal. The last line counts the rows that agree; exit
status 1 when some do not, 2 on a missing folder or file.

--no-outcome leaves the outcome out, for runs made before gpusim run's hook told the library
of a death (07c4548): the library called an OOM caught when a free came after it, and a
program that dies of one frees its tensors as it unwinds.
"""
import glob
import json
import os
import subprocess
import sys

FIELDS = ("outcome", "num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free",
          "peak_reserved_bytes")


FIELDS_SHOWN = FIELDS


def figures(doc):
    r = doc[0]["results"][0]
    return tuple(r[k] for k in FIELDS_SHOWN), r["policy"]


def replay(gpusim, trace, policy, cap):
    out = subprocess.run([gpusim, "replay", trace, "-q", "-f", "json", "-p", policy,
                          "--capacity", str(cap)], check=True, capture_output=True, text=True)
    return figures(json.loads(out.stdout))[0]


def main():
    global FIELDS_SHOWN
    args = sys.argv[1:]
    if args and args[0] == "--no-outcome":
        FIELDS_SHOWN = FIELDS[1:]
        args = args[1:]
    if len(args) != 3:
        sys.exit(__doc__.split("\n\n")[1].strip())
    gpusim, outdir, recording = args
    runs = sorted(glob.glob(os.path.join(outdir, "*-*.json")))
    if not runs or not os.path.isfile(recording):
        print(f"run_vs_replay.py: no runs in {outdir}, or no {recording}", file=sys.stderr)
        sys.exit(2)
    agree = 0
    print("setting cap | run: " + " ".join(FIELDS_SHOWN) + " | predicted | own trace")
    for path in runs:
        stem = path[:-len(".json")]
        cap = int(stem.rsplit("-", 1)[1])
        with open(path, encoding="utf-8") as f:
            run, policy = figures(json.load(f))
        pred = replay(gpusim, recording, policy, cap)
        own = replay(gpusim, stem + ".gstrace.gz", policy, cap)
        same = run == pred == own
        agree += same
        print(f"{policy} {cap} | {' '.join(map(str, run))} | {' '.join(map(str, pred))} | "
              f"{' '.join(map(str, own))} | {'agree' if same else 'DIFFER'}")
    print(f"{agree} of {len(runs)} runs agree")
    sys.exit(0 if agree == len(runs) else 1)


if __name__ == "__main__":
    main()
