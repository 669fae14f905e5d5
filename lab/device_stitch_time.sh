#!/bin/sh
# lab/device_stitch_time.sh OUTDIR TRACE... - stitch's device time against the default's and
# expandable segments', measured on the real GPU.
#
# The target (docs/stitch.md, "The target, and how far it is met") asks stitch's modelled device
# time with no cap to be at most 1.1 x the default's; the model prices each call from a latency
# table measured call by call (docs/fidelity.md §4), within 25% of the real total. This runs
# `gpusim validate` (the same core and policy on cudaMalloc and the driver's virtual-memory
# calls, each allocation written once: --touch) on each TRACE under the default, stitch and
# expandable segments, RUNS timed runs each (default 5), and keeps its JSON as OUTDIR/NAME.json
# (NAME: the file's name up to its first ".gs"). lab/stitch_time_table.py OUTDIR makes the
# table: the measured ratios beside the modelled ones. A trace of several devices is skipped
# (one GPU here). Needs a built tree; on the device machine, which has no GLib, the build's
# shared libraries in DEVLIB (default ./.devlib) as the other device scripts carry them.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: device_stitch_time.sh OUTDIR TRACE...}
shift
mkdir -p "$out"
[ -d "${DEVLIB:-$root/.devlib}" ] &&
    export LD_LIBRARY_PATH="${DEVLIB:-$root/.devlib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    git -C "$root" rev-parse HEAD 2>/dev/null
} >"$out/env.txt" 2>&1
for t in "$@"; do
    name=$(basename "$t")
    name=${name%%.gs*}
    case $name in
        *[!A-Za-z0-9_.+-]* | "" | .*) echo "skipped (its name): $t" >&2; continue ;;
    esac
    "$root/build/gpusim" validate "$t" -p pytorch -p stitch -p pytorch:expandable_segments:True \
        --touch --runs "${RUNS:-5}" --format json -q -o "$out/$name.json" 2>"$out/$name.err"
    echo "$name: exit $?" >&2
done
