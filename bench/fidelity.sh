#!/bin/sh
# bench/fidelity.sh [TRACES_DIR] - real PyTorch vs gpusim, run by run.
#
# For every reference run in TRACES_DIR (default ../shared/traces/pytorch-2.11-h100: real
# PyTorch 2.11 snapshots with what the allocator did under a policy and a cap), replay the
# workload's default/nocap trace under that run's policy and truncated cap, once with segments
# at the real run's addresses and once with the driver placement model, and print
# real/simulated pairs. Needs a built tree (meson setup build && meson compile -C build).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/../shared/traces/pytorch-2.11-h100}
gpusim=$root/build/gpusim
[ -x "$gpusim" ] || { echo "fidelity.sh: build first: meson setup build && meson compile -C build" >&2; exit 2; }
[ -d "$dir" ] || { echo "fidelity.sh: no reference traces at $dir" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for f in "$dir"/*.pickle.gz; do
    n=$(basename "$f" .pickle.gz)
    python3 "$root/traces/convert.py" "$f" -o "$work/$n.gstrace.gz" --reference "$work/$n.ref.json" ||
        { echo "fidelity.sh: could not convert $f" >&2; exit 2; }
done
ls "$work"/*.ref.json >/dev/null 2>&1 || { echo "fidelity.sh: no *.pickle.gz in $dir" >&2; exit 2; }
printf '%-36s %-9s %-9s %-25s %-9s %-11s %-7s %-6s\n' run addresses outcome "peak reserved (bytes)" segments "dev allocs" retries match
for ref in "$work"/*.ref.json; do
    n=$(basename "$ref" .ref.json)
    input=$work/${n%%__*}__default__nocap.gstrace.gz
    for mode in reference model; do
        flag=""
        [ $mode = model ] && flag=--no-reference-addresses
        "$gpusim" replay "$input" --reference "$ref" $flag --format csv |
        awk -F, -v run="$n" -v mode="$mode" '
            # columns by their header names (the policies here hold no commas, so no field is
            # quoted)
            NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
            {
                printf "%-36s %-9s %-9s %-25s %-9s %-11s %-7s %-6s\n", run, mode,
                       $c["ref_outcome"] "/" $c["outcome"],
                       $c["ref_peak_reserved_bytes"] "/" $c["peak_reserved_bytes"],
                       $c["ref_segments_allocated"] "/" $c["segments_allocated"],
                       $c["ref_num_device_alloc"] "/" $c["num_device_alloc"],
                       $c["ref_num_alloc_retries"] "/" $c["num_alloc_retries"],
                       ($c["ref_match"] == "true" ? "exact" : "DIFFERS")
            }'
    done
done
echo "(pairs are real/simulated; 'exact' = outcome, peak reserved, segments, device allocs and retries all equal)"
