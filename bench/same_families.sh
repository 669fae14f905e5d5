#!/bin/sh
# same_families.sh OLD NEW - two gpusim binaries give the same JSON reports on the bundled traces
# under every registered policy family (pytorch with five settings, cupy, stitch, preallocate (best and first fit),
# tlsf, bfc, rmm-pool, rmm-arena, cuda-async), without a cap and at 5.75 GiB, with
# --continue-on-oom. same_reports.sh covers the reference runs under the six policies of
# tests/test_outputs.sh; this covers the families that it does not (a change to the core or to
# the policy seam must change no family's answer). replay_events_per_s is masked, the exit
# status compared. Prints each difference and "N compared, M differ"; exit 0 when none differ.
#
#   bench/same_families.sh /tmp/gs-main/build/gpusim build/gpusim
set -u
[ $# -eq 2 ] || { echo "usage: same_families.sh OLD NEW" >&2; exit 2; }
old=$1 new=$2
root=$(cd "$(dirname "$0")/.." && pwd)
n=0 d=0
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
run() {
    "$@" --continue-on-oom --format json -q >"$tmp" 2>&1
    rc=$?
    sed -E 's/"replay_events_per_s": [0-9.e+-]+/"replay_events_per_s": X/g' "$tmp"
    echo "exit $rc"
}
for t in "$root"/traces/data/*.gstrace.gz; do
    for p in pytorch cupy stitch preallocate preallocate:fit:first tlsf bfc rmm-pool rmm-arena cuda-async \
        pytorch:expandable_segments:True pytorch:max_split_size_mb:128 \
        pytorch:max_split_size_mb:256,max_non_split_rounding_mb:64 \
        pytorch:garbage_collection_threshold:0.6 pytorch:roundup_power2_divisions:4; do
        for cap in "" 5.75GiB; do
            a=$(run "$old" replay "$t" --policy "$p" ${cap:+--capacity "$cap"})
            b=$(run "$new" replay "$t" --policy "$p" ${cap:+--capacity "$cap"})
            n=$((n + 1))
            [ "$a" = "$b" ] || { d=$((d + 1)); echo "differ: $(basename "$t") $p ${cap:-nocap}"; }
        done
    done
done
echo "$n compared, $d differ"
[ "$d" -eq 0 ]
