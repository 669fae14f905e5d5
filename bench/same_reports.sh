#!/bin/sh
# same_reports.sh OLD NEW [DIR...] - two gpusim binaries give byte-identical JSON reports on
# every reference trace under every policy (a faster replay must change no answer).
#
#   OLD, NEW  gpusim binaries (say, one built from main's HEAD in /tmp, and this tree's)
#   DIR       folders of reference runs, NAME.pickle.gz with NAME.json beside it (default:
#             ${GPUSIM_SHARED:-../shared}/traces/pytorch-2.11-h100 and traces/references/*/)
#
# Each snapshot is converted once (traces/convert.py, with its reference) into a temporary
# folder, or read from $SAME_REPORTS_TRACES when that folder already holds NAME.gstrace.gz and
# NAME.ref.json (convert.py's outputs). Each trace is then replayed by both binaries under the
# six policies of tests/test_outputs.sh and the three that keep the core's address order
# (gs_policy_ops.addr_order: rmm-arena, at its default arena and at 25%, and preallocate's
# fit:first; core/addr_index.c), at the cap of its run (as --capacity; none when the
# run had none) and with --continue-on-oom, and once more against its reference (--reference:
# its run's own policy and cap, the comparison with the real allocator included). The JSON
# reports must be equal byte for byte once the one host-timed figure, replay_events_per_s, is
# masked. tests/test_outputs.sh does the same for the bundled traces against golden files.
#
# Prints one line per difference and a summary; exit 0 when all are equal, 1 when some differ,
# 2 on bad arguments or a failed conversion.
#
#   bench/same_reports.sh /tmp/gs-main/build/gpusim build/gpusim
set -u
[ $# -ge 2 ] || { echo "usage: same_reports.sh OLD NEW [DIR...]" >&2; exit 2; }
old=$1 new=$2
shift 2
for b in "$old" "$new"; do
    [ -x "$b" ] || { echo "same_reports.sh: $b: not an executable" >&2; exit 2; }
done
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -eq 0 ]; then
    shared=${GPUSIM_SHARED:-$root/../shared}/traces/pytorch-2.11-h100
    [ -d "$shared" ] && set -- "$shared"
    for d in "$root"/traces/references/*/; do [ -d "$d" ] && set -- "$@" "${d%/}"; done
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
conv=${SAME_REPORTS_TRACES:-$work}

policies="pytorch pytorch:max_split_size_mb:128 pytorch:expandable_segments:True
    pytorch:roundup_power2_divisions:4 pytorch:garbage_collection_threshold:0.6 cupy
    rmm-arena rmm-arena:arena_size:25% preallocate:fit:first"

# report BIN OUT ARGS...: BIN's JSON report of ARGS, the host rate masked, and its exit status
report() {
    bin=$1 out=$2
    shift 2
    "$bin" replay "$@" --format json -q >"$work/raw" 2>"$work/err"
    rc=$?
    { echo "exit $rc"; sed -E 's/"replay_events_per_s": [0-9.e+-]+/"replay_events_per_s": X/g' "$work/raw"
      cat "$work/err"; } >"$out"
}

n=0 ndiff=0
for dir in "$@"; do
    [ -d "$dir" ] || { echo "same_reports.sh: no reference runs at $dir" >&2; exit 2; }
    for f in "$dir"/*.pickle.gz; do
        [ -e "$f" ] || continue
        name=$(basename "$f" .pickle.gz)
        t=$conv/$name.gstrace.gz ref=$conv/$name.ref.json
        if [ ! -e "$t" ] || [ ! -e "$ref" ]; then
            t=$work/$name.gstrace.gz ref=$work/$name.ref.json
            python3 "$root/traces/convert.py" "$f" -o "$t" --reference "$ref" 2>/dev/null ||
                { echo "same_reports.sh: could not convert $f" >&2; exit 2; }
        fi
        cap=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("cap_bytes") or "")' "$ref")
        capflag=""
        [ -n "$cap" ] && capflag="--capacity $cap"
        for p in $policies ref; do
            if [ "$p" = ref ]; then
                set -- "$t" --reference "$ref"
            else
                # shellcheck disable=SC2086
                set -- "$t" -p "$p" $capflag --continue-on-oom
            fi
            report "$old" "$work/old" "$@"
            report "$new" "$work/new" "$@"
            n=$((n + 1))
            if ! cmp -s "$work/old" "$work/new"; then
                ndiff=$((ndiff + 1))
                echo "DIFFERS: $name under $p"
                diff "$work/old" "$work/new" | head -n 10
            fi
        done
    done
done
echo "same_reports.sh: $n reports compared, $ndiff differ"
[ "$ndiff" -eq 0 ]
