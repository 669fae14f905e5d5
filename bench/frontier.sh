#!/bin/sh
# frontier.sh [GPUSIM [OUTDIR]] - gpusim frontier on every trace we have: where gpusim's own
# policy stands against the Pareto front of memory and device time (BENCHMARKS.md, "The
# frontier").
#
# The traces: the bundled ones (traces/data/*), the shared PyTorch 2.11 recordings
# ($GPUSIM_SHARED/traces/pytorch-2.11-h100/*__default__nocap.pickle.gz; the other settings'
# recordings hold the same requests) and traces/references/*/ (each workload's default-setting
# recording), converted with traces/convert.py into OUTDIR; the real programs' traces kept
# with lab/results (each program once: its default setting's recording); and the synthetic
# adversaries of bench/adversaries.py, a set for each seed of $ADV_SEEDS (default 1). Writes
# OUTDIR/frontier.csv and OUTDIR/plots/NAME-frontier.png, and prints a line per trace: the
# front, and stitch against expandable segments (memory over the bound, time over the
# default's), stitch as it is by default (the lazy setting: no move until memory is near the
# limit, PyTorch-sized growths until then, one-page handles after; docs/stitch.md) and in its
# eager setting (EAGER below, the default until 2026-12-05), with whether each meets the target
# (memory at most expandable segments', time at most 1.1 x the default's), and stitch's peak
# reserved with no cap over expandable segments' (the target on the GPU: at most theirs).
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
for p in "$here"/lab/results/h100-2026-12-05-predict/*.default.gstrace.gz \
         "$here"/lab/results/h100-2026-11-22-validate/train-resnet50.gstrace.gz \
         "$here"/lab/results/h200-2026-12-06-stitch/*-stitch.gstrace.gz; do
    [ -f "$p" ] && set -- "$@" "$p"
done
# the synthetic adversaries (bench/adversaries.py), one set a seed of ADV_SEEDS (default 1)
for seed in ${ADV_SEEDS:-1}; do
    python3 "$here/bench/adversaries.py" "$out" --seed "$seed" >/dev/null
    for t in "$out"/adv-s"$seed"-*.gstrace; do set -- "$@" "$t"; done
done
EAGER=stitch:headroom:0,grow:0,ahead:0,fine:0,max_handle_frac:0
"$gpusim" frontier "$@" -p "$EAGER" -q -f csv -o "$out/frontier.csv" --plot "$out/plots"

python3 - "$out/frontier.csv" "$EAGER" <<'PY'
import csv, os, sys
rows = list(csv.DictReader(open(sys.argv[1])))
eager = sys.argv[2]
def fig(r):
    if r["uncapped_outcome"] not in ("ok", "survived"):  # survived: past a dying trace's end
        return "fails"
    if not r["min_capacity_bytes"]:
        return "no minimum"
    return "%.4f %5.2f%s" % (float(r["memory_over_bound"]), float(r["time_over_default"] or 0),
                             " *" if r["pareto"] == "1" else "")
def peak(r, ex):
    """r's peak reserved with no cap over expandable segments' (both complete uncapped)."""
    if r["uncapped_outcome"] not in ("ok", "survived") or ex["uncapped_outcome"] != r["uncapped_outcome"]:
        return "-"
    return "%.4f" % (int(r["uncapped_peak_reserved_bytes"]) / int(ex["uncapped_peak_reserved_bytes"]))
def meets(r, ex):
    if not (r["min_capacity_bytes"] and ex["min_capacity_bytes"]):
        return "-"
    m = int(r["min_capacity_bytes"]) <= int(ex["min_capacity_bytes"])
    t = float(r["time_over_default"] or "inf") <= 1.1
    return ("M" if m else "m") + ("T" if t else "t")
print("%-27s %-18s %-7s %-18s %-15s %s" % ("trace", "stitch", "peak", "stitch eager",
                                           "expandable", "the front, by device time"))
n = {"stitch": 0, eager: 0}
under = 0
for t in dict.fromkeys(r["trace"] for r in rows):
    pts = [r for r in rows if r["trace"] == t]
    front = sorted((r for r in pts if r["pareto"] == "1"), key=lambda r: float(r["device_time_us"]))
    st = [r for r in pts if r["policy"] == "stitch"][0]
    se = [r for r in pts if r["policy"] == eager][0]
    ex = [r for r in pts if r["policy"] == "pytorch:expandable_segments:True"][0]
    for k, r in (("stitch", st), (eager, se)):
        n[k] += meets(r, ex) == "MT"
    pk = peak(st, ex)
    under += pk != "-" and float(pk) <= 1
    name = os.path.basename(t).split(".gs")[0]
    print("%-27s %-18s %-7s %-18s %-15s %s" % (name[:27], fig(st) + " " + meets(st, ex),
                                               pk, fig(se) + " " + meets(se, ex), fig(ex),
                                          ", ".join("eager" if r["policy"] == eager else r["policy"]
                                                    for r in front) or "-"))
print("M/m: memory at most / above expandable segments'; T/t: time at most / above 1.1 x the "
      "default's; both met: stitch %d, eager %d of %d traces" % (n["stitch"], n[eager],
                                                              len(dict.fromkeys(r["trace"] for r in rows))))
print("peak: stitch's peak reserved with no cap over expandable segments'; at most theirs on %d"
      % under)
PY
