#!/usr/bin/env python3
"""stitch_time_table.py OUTDIR - stitch's device time over the default's, measured and modelled.

Reads the gpusim validate JSON files lab/device_stitch_time.sh left in OUTDIR (one a trace, each
under pytorch, stitch and expandable segments) and prints a Markdown table: each policy's
device time (the median of the timed runs on the GPU, in ms), stitch's and expandable
segments' over the default's as measured and as modelled, and whether stitch is within the
target's 1.1 x on the GPU. Standard library only.
"""
import glob
import json
import os
import sys

POLICIES = ("pytorch", "stitch", "pytorch:expandable_segments:True")
TARGET = 1.1


def device_ms(entry):
    """(modelled, measured) device time in ms of one validate entry."""
    for c in entry["checks"]:
        if c["what"] == "device time ms":
            return c["sim"], c["real"]
    raise ValueError(f"{entry['trace']}: no 'device time ms' check")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[0])
    rows, within, n = [], 0, 0
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
        try:
            doc = json.load(open(path))
        except (OSError, ValueError) as e:
            print(f"{path}: {e}", file=sys.stderr)
            continue
        by = {e["policy"]: e for e in doc}
        if not all(p in by for p in POLICIES):
            print(f"{path}: not all of {', '.join(POLICIES)}", file=sys.stderr)
            continue
        (ds, dr), (ss, sr), (es, er) = (device_ms(by[p]) for p in POLICIES)
        ok = sr <= TARGET * dr
        within += ok
        n += 1
        agree = all(c["ok"] for p in POLICIES for c in by[p]["checks"]
                    if c["judged"] and not c["what"].endswith(" ms"))
        rows.append(f"| {os.path.basename(path)[:-5]} | {dr:.2f} | {sr:.2f} | {er:.2f} | "
                    f"{sr / dr:.2f} ({ss / ds:.2f}) | {er / dr:.2f} ({es / ds:.2f}) | "
                    f"{'yes' if ok else 'no'} | {'yes' if agree else 'no'} |")
    print("| trace | default ms | stitch ms | expandable ms | stitch / default, measured "
          "(modelled) | expandable / default, measured (modelled) | stitch within 1.1 x | "
          "calls and peaks as modelled |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\nstitch within {TARGET} x the default's measured device time on {within} of {n}")


if __name__ == "__main__":
    main()
