#!/bin/sh
# placement_cost.sh OLD NEW [ENTRIES [ROUNDS]] - the simulated device's placement on a trace
# that makes thousands of segments, for two bench_replay binaries.
#
#   OLD, NEW  bench_replay binaries (build/bench/bench_replay of two trees)
#   ENTRIES   the synthetic snapshot's entries (default 1000000: 694,872 events, 14,122
#             segments on a 512 GiB device)
#   ROUNDS    CPU-time comparisons, old then new (default 4)
#
# The snapshot is bench/big_snapshot.py's, converted by traces/convert.py and given a device of
# 512 GiB in its header (its peak of live requests is 329 GiB: on the default 80 GiB it dies of
# OOM early), kept in $PLACEMENT_TRACE when that names a file (made there when it does not
# exist: generating and converting a million entries takes about 2.5 minutes). Prints, per
# binary, the instructions of one replay (callgrind, in gs_replay_run: the bound, computed
# outside it, drops out) and those of the placement's functions in it (the old file's place
# and unplace, the new simplace.c's gs_simplace_*), then ROUNDS lines of bench_replay's rates
# (M events/s of CPU time, median of 3 runs), old and new in one run. Needs valgrind.
#
#   bench/placement_cost.sh /tmp/gs-main/build/bench/bench_replay build/bench/bench_replay
set -eu
[ $# -ge 2 ] || { echo "usage: placement_cost.sh OLD NEW [ENTRIES [ROUNDS]]" >&2; exit 2; }
old=$1 new=$2 entries=${3:-1000000} rounds=${4:-4}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trace=${PLACEMENT_TRACE:-$tmp/big.gstrace.gz}
if [ ! -s "$trace" ]; then
    python3 "$root/bench/big_snapshot.py" "$entries" "$tmp/big.pickle.gz"
    python3 "$root/traces/convert.py" "$tmp/big.pickle.gz" -o "$tmp/conv.gstrace.gz"
    gzip -dc "$tmp/conv.gstrace.gz" | sed '2a # device_total_bytes: 549755813888' | gzip -n >"$trace"
fi
for which in old new; do
    [ $which = old ] && bin=$old || bin=$new
    valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" --toggle-collect=gs_replay_run \
        "$bin" "$trace" --runs 1 --repeat 1 >/dev/null 2>&1
    callgrind_annotate --inclusive=yes "$tmp/cg" 2>/dev/null | awk -v w=$which '
        /PROGRAM TOTALS/ { gsub(",", "", $1); total = $1 }
        /simdevice\.c:(place|unplace) \[|simplace\.c:gs_simplace_[a-z]* \[/ {
            gsub(",", "", $1); place += $1 }
        END { printf "%s: %.0f instructions in the replay, %.0f in placement (%.1f%%)\n",
                     w, total, place, total ? 100 * place / total : 0 }'
done
i=0
while [ $i -lt "$rounds" ]; do
    for which in old new; do
        [ $which = old ] && bin=$old || bin=$new
        printf '%s: %s\n' $which "$("$bin" "$trace" --runs 3 --repeat 1 | tail -1)"
    done
    i=$((i + 1))
done
