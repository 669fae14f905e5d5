#!/bin/sh
# lab/fidelity.sh [DIR...] - real PyTorch vs gpusim, run by run, device by device.
#
# For every reference run in each DIR (default: ../shared/traces/pytorch-2.11-h100 when it is
# there, every folder of traces/references/, and the folders of lab/results that hold such runs:
# real PyTorch 2.11 snapshots, NAME.pickle.gz,
# with what the allocator did under a policy and a cap in NAME.json), convert the run's own
# snapshot (traces/convert.py, which writes the reference too), replay it under that run's
# policy and truncated cap (each device its own), once with segments at the real run's
# addresses and once with the driver placement model alone, and print real/simulated pairs:
# outcome (with the event of a fatal OOM), peak reserved, device allocs and frees, retries,
# OOMs. 'exact' means all of them, and the segments, are equal on every device; a run that is
# not says why (tests/data/fidelity-known.tsv). Needs a built tree (meson setup build && meson
# compile -C build).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
gpusim=$root/build/gpusim
[ -x "$gpusim" ] || gpusim=$root/build/cli/gpusim
[ -x "$gpusim" ] || { echo "fidelity.sh: build first: meson setup build && meson compile -C build" >&2; exit 2; }
known=$root/tests/data/fidelity-known.tsv
if [ $# -eq 0 ]; then
    [ -d "$root/../shared/traces/pytorch-2.11-h100" ] && set -- "$root/../shared/traces/pytorch-2.11-h100"
    for d in "$root"/traces/references/*/; do set -- "$@" "${d%/}"; done
    # and the snapshots the device scripts left in lab/results with their statistics beside
    for d in "$root"/lab/results/*/; do
        for p in "$d"*.pickle.gz; do
            if [ -f "${p%.pickle.gz}.json" ]; then
                set -- "$@" "${d%/}"
                break
            fi
        done
    done
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# why RUN MODE: the line of tests/data/fidelity-known.tsv that explains RUN in MODE (model: 'model'
# or 'both'; reference: 'both'), else nothing. Scope entries explain both.
why() {
    awk -F'\t' -v run="$1" -v mode="$2" '
        /^#/ || NF < 3 { next }
        {
            pat = $1; hit = (pat == run)
            if (!hit && pat ~ /\*$/) { p = substr(pat, 1, length(pat) - 1); hit = substr(run, 1, length(p)) == p }
            if (!hit) next
            if ($2 == "scope" || $2 == "both" || ($2 == "model" && mode == "model")) { print $2 ": " $3; exit }
        }' "$known"
}

printf '%-38s %-4s %-9s %-20s %-25s %-9s %-9s %-7s %-5s %s\n' run dev addresses outcome \
    "peak reserved (bytes)" "dev allocs" "dev frees" retries OOMs match
n=0; n_scope=0; n_ref=0; n_model=0
for dir in "$@"; do
    [ -d "$dir" ] || { echo "fidelity.sh: no reference traces at $dir" >&2; exit 2; }
    for f in "$dir"/*.pickle.gz; do
        [ -e "$f" ] || continue
        name=$(basename "$f" .pickle.gz)
        python3 "$root/traces/convert.py" "$f" -o "$work/$name.gstrace.gz" \
            --reference "$work/$name.ref.json" 2>/dev/null ||
            { echo "fidelity.sh: could not convert $f" >&2; exit 2; }
        n=$((n + 1))
        case $(why "$name" model) in scope:*) n_scope=$((n_scope + 1)); continue_scope=1 ;; *) continue_scope=0 ;; esac
        for mode in reference model; do
            flag=""
            [ $mode = model ] && flag=--no-reference-addresses
            out=$("$gpusim" replay "$work/$name.gstrace.gz" --reference "$work/$name.ref.json" \
                  $flag --format csv -q |
            awk -F, -v run="$name" -v mode="$mode" '
                # columns by their header names (the policies here hold no commas, so no field
                # is quoted); with several devices the totals row is followed by a row per
                # device, and each device is compared on its own
                NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
                function oc(o, e) { return (o == "oom" && e != "") ? o "@" e : o }
                function col(k) { return (k in c) ? $c[k] : "" }
                col("pool") != "" { next } # a private pool'"'"'s row (docs/cli.md): not compared
                {
                    dev = col("device")
                    # one device: its row; several: every device row (the totals row has no
                    # reference of its own, so its ref_match is false)
                    if (NR == 2) total = ($c["ref_match"] == "true") || ("device" in c)
                    if (NR == 2 && "device" in c) next
                    if (NR > 2) total = total && ($c["ref_match"] == "true")
                    printf "%-38s %-4s %-9s %-20s %-25s %-9s %-9s %-7s %-5s %s\n", run,
                           (dev == "" ? "-" : dev), mode,
                           oc($c["ref_outcome"], $c["ref_outcome_event"]) "/" oc($c["outcome"], $c["first_oom_event"]),
                           $c["ref_peak_reserved_bytes"] "/" $c["peak_reserved_bytes"],
                           $c["ref_num_device_alloc"] "/" $c["num_device_alloc"],
                           $c["ref_num_device_free"] "/" $c["num_device_free"],
                           $c["ref_num_alloc_retries"] "/" $c["num_alloc_retries"],
                           $c["ref_num_ooms"] "/" $c["num_ooms"],
                           ($c["ref_match"] == "true" ? "exact" : "DIFFERS")
                }
                END { print (total ? "EXACT" : "DIFFERENT") }')
            echo "$out" | sed '$d' | while IFS= read -r line; do
                case $line in
                    *DIFFERS) w=$(why "$name" "$mode"); echo "$line${w:+ ($w)}" ;;
                    *) echo "$line" ;;
                esac
            done
            if [ $continue_scope = 0 ] && [ "$(echo "$out" | tail -n 1)" = EXACT ]; then
                [ $mode = reference ] && n_ref=$((n_ref + 1)) || n_model=$((n_model + 1))
            fi
        done
    done
done
echo "(pairs are real/simulated; 'exact': outcome (with the event of a fatal OOM), peak reserved,"
echo " segments, device allocs and frees, retries and OOMs all equal, on every device)"
echo "$n runs, $n_scope of them another issue's (scope); of the other $((n - n_scope)): $n_ref exact with"
echo "reference addresses, $n_model with the driver placement model alone"
