#!/bin/sh
# lab/device_at_minima.sh PROG OUTDIR - on the GPU machine: a program of lab/predict recorded
# natively, each setting's least capacity found by gpusim whatif from that recording, and the
# program run under `gpusim run` at that capacity and 2 MiB below it, the verdict a user would
# check. Here, afterwards:
#   python3 lab/run_vs_replay.py build/gpusim OUTDIR/runs OUTDIR/PROG.default.gstrace.gz
# compares each run (outcome, retries, OOMs, device calls, peak reserved) with what the replay of
# the native recording predicted at its cap, and with the replay of its own requests.
# SETTINGS: the policies (default: the default, expandable segments, max_split_size_mb:128).
# Needs build/gpusim, build/libgpusim_torch.so and GLib in .devlib carried, as the other scripts.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
prog=${1:?usage: device_at_minima.sh PROG OUTDIR}
out=${2:?usage: device_at_minima.sh PROG OUTDIR}
case $prog in *[!A-Za-z0-9_]* | "") echo "PROG: not a program of lab/predict: $prog" >&2; exit 2 ;; esac
mkdir -p "$out"
[ -d "${DEVLIB:-$root/.devlib}" ] &&
    export LD_LIBRARY_PATH="${DEVLIB:-$root/.devlib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
settings=${SETTINGS:-pytorch pytorch:expandable_segments:True pytorch:max_split_size_mb:128}
# the native recording (no cap), as lab/device_predict.sh makes it
OUT=$out PROGS=$prog PHASES=real NOTAR=1 JOBS=2 sh "$root/lab/device_predict.sh" >"$out/record.log" 2>&1
snap=$out/predict/$prog.default.pickle.gz
trace=$out/$prog.default.gstrace.gz
python3 "$root/traces/convert.py" -q "$snap" -o "$trace" || { echo "no recording: $snap" >&2; exit 1; }
set --
for s in $settings; do set -- "$@" -p "$s"; done
"$root/build/gpusim" whatif "$trace" -q "$@" --format json -o "$out/minima.json" ||
    { echo "whatif failed" >&2; exit 1; }
caps=$(python3 - "$out/minima.json" $settings <<'PY'
import json, sys
caps = set()
for r in json.load(open(sys.argv[1]))["results"]:  # whatif's standard settings too: only ours
    m = r.get("min_capacity_bytes")
    if r["policy"] in sys.argv[2:] and isinstance(m, int):
        caps.update((m, m - (2 << 20)))
print(" ".join(str(c) for c in sorted(caps)))
PY
)
echo "caps: $caps" >&2
PROG=$prog POLICIES="$settings" CAPS="$caps" sh "$root/lab/device_stitch_streams.sh" "$out/runs"
