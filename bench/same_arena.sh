#!/bin/sh
# same_arena.sh OLD NEW [DIR] - two gpusim binaries give byte-identical JSON reports under
# the policies that keep the core's address order (gs_policy_ops.addr_order: rmm-arena and
# preallocate's fit:first) on every converted reference trace of DIR (NAME.gstrace.gz with
# NAME.ref.json beside, traces/convert.py's outputs; default /tmp/ref). same_reports.sh covers
# six policies, none with the address order.
#
# Each trace is replayed by both binaries with --continue-on-oom under rmm-arena,
# rmm-arena:arena_size:25% and preallocate:fit:first, each without a cap and at its run's cap (the ref.json's cap_bytes,
# as --capacity; skipped when the run had none). replay_events_per_s is masked, the exit
# status and stderr compared. Prints one line per difference and a summary; exit 0 when none
# differ, 1 when some do, 2 on bad arguments.
#
#   bench/same_arena.sh /tmp/arena-old/build/gpusim build/gpusim /tmp/ref
set -u
[ $# -ge 2 ] && [ $# -le 3 ] || { echo "usage: same_arena.sh OLD NEW [DIR]" >&2; exit 2; }
old=$1 new=$2 dir=${3:-/tmp/ref}
for b in "$old" "$new"; do
    [ -x "$b" ] || { echo "same_arena.sh: $b: not an executable" >&2; exit 2; }
done
[ -d "$dir" ] || { echo "same_arena.sh: no folder $dir" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# report BIN OUT ARGS...: BIN's JSON report of ARGS, the host rate masked, and its exit status
report() {
    bin=$1 out=$2
    shift 2
    "$bin" replay "$@" --continue-on-oom --format json -q >"$work/raw" 2>"$work/err"
    rc=$?
    { echo "exit $rc"; sed -E 's/"replay_events_per_s": [0-9.e+-]+/"replay_events_per_s": X/g' "$work/raw"
      cat "$work/err"; } >"$out"
}

n=0 ndiff=0
for t in "$dir"/*.gstrace.gz; do
    [ -e "$t" ] || continue
    name=$(basename "$t" .gstrace.gz)
    ref=$dir/$name.ref.json
    cap=""
    [ -e "$ref" ] &&
        cap=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("cap_bytes") or "")' "$ref")
    for p in rmm-arena rmm-arena:arena_size:25% preallocate:fit:first; do
        for c in "" $cap; do
            report "$old" "$work/old" "$t" -p "$p" ${c:+--capacity "$c"}
            report "$new" "$work/new" "$t" -p "$p" ${c:+--capacity "$c"}
            n=$((n + 1))
            if ! cmp -s "$work/old" "$work/new"; then
                ndiff=$((ndiff + 1))
                echo "DIFFERS: $name under $p ${c:+at $c}"
                diff "$work/old" "$work/new" | head -n 10
            fi
        done
    done
done
echo "same_arena.sh: $n reports compared, $ndiff differ"
[ "$ndiff" -eq 0 ]
