#!/bin/sh
# frontier.sh [GPUSIM [OUTDIR]] - gpusim frontier on every trace we have: where gpusim's own
# policy stands against the Pareto front of memory and device time (BENCHMARKS.md, "The
# frontier").
#
# The traces: the bundled ones (traces/data/*), the shared PyTorch 2.11 recordings
# ($GPUSIM_SHARED/traces/pytorch-2.11-h100/*__default__nocap.pickle.gz; the other settings'
# recordings hold the same requests) and traces/references/*/ (each workload's default-setting
# recording), converted with traces/convert.py into OUTDIR. Writes OUTDIR/frontier.csv and
# OUTDIR/plots/NAME-frontier.png, and prints a line per trace: the front, and stitch (also with
# ahead:1, which grows ahead while memory is plentiful) against expandable segments (memory over
# the bound, time over the default's).
#
#   bench/frontier.sh                       # build/gpusim, into /tmp/gpusim-frontier
set -eu
gpusim=${1:-build/gpusim}
out=${2:-/tmp/gpusim-frontier}
here=$(cd "$(dirname "$0")/.." && pwd)
shared=${GPUSIM_SHARED:-$here/../shared}
mkdir -p "$out"

set -- "$here"/traces/data/*.gstrace.gz
for p in "$shared"/traces/pytorch-2.11-h100/*__default__nocap.pickle.gz \
         "$here"/traces/references/*/*__default__*.pickle.gz; do
    [ -f "$p" ] || continue
    t="$out/$(basename "$p" .pickle.gz).gstrace.gz"
    [ -f "$t" ] || python3 "$here/traces/convert.py" -q "$p" -o "$t"
    set -- "$@" "$t"
done
"$gpusim" frontier "$@" -p stitch:ahead:1 -q -f csv -o "$out/frontier.csv" --plot "$out/plots"

python3 - "$out/frontier.csv" <<'PY'
import csv, os, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def fig(r):
    if r["uncapped_outcome"] not in ("ok", "survived"):  # survived: past a dying trace's end
        return "fails"
    if not r["min_capacity_bytes"]:
        return "no minimum"
    return "%.4f %5.2f%s" % (float(r["memory_over_bound"]), float(r["time_over_default"] or 0),
                             " *" if r["pareto"] == "1" else "")
print("%-27s %-15s %-15s %-15s %-10s %s" % ("trace", "stitch", "stitch:ahead:1", "expandable",
                                            "stitch<=ex", "the front, by device time"))
for t in dict.fromkeys(r["trace"] for r in rows):
    pts = [r for r in rows if r["trace"] == t]
    front = sorted((r for r in pts if r["pareto"] == "1"), key=lambda r: float(r["device_time_us"]))
    st = [r for r in pts if r["policy"] == "stitch"][0]
    sa = [r for r in pts if r["policy"] == "stitch:ahead:1"][0]
    ex = [r for r in pts if r["policy"] == "pytorch:expandable_segments:True"][0]
    le = "-" if not (st["min_capacity_bytes"] and ex["min_capacity_bytes"]) else \
        "yes" if int(st["min_capacity_bytes"]) <= int(ex["min_capacity_bytes"]) else "no"
    name = os.path.basename(t).split(".gs")[0]
    print("%-27s %-15s %-15s %-15s %-10s %s" % (name[:27], fig(st), fig(sa), fig(ex), le,
                                          ", ".join(r["policy"] for r in front) or "-"))
PY
