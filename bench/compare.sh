#!/bin/sh
# compare.sh OLD NEW ROUNDS TRACE... -- BENCH_REPLAY_ARGS...
#
# Two bench_replay binaries (say, one built from main's HEAD, one from this tree) compared in
# one run: for each trace, ROUNDS rounds, each running OLD then NEW with the same arguments
# (--raw added), so both see the same machine, load and heat. Prints, per trace and policy,
# the median of all CPU-time rates of each binary (M events/s), their min-max, and new/old.
# On a shared machine this is the comparison to trust; a single run of each is not.
#
#   bench/compare.sh /tmp/old/build/bench/bench_replay build/bench/bench_replay 5 \
#       traces/data/*.gstrace.gz -- --runs 3 --policy pytorch --policy cupy
set -eu
old=$1 new=$2 rounds=$3
shift 3
traces=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do traces="$traces $1"; shift; done
[ $# -gt 0 ] && shift
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for t in $traces; do
    r=0
    while [ $r -lt "$rounds" ]; do
        "$old" "$t" --raw "$@" | awk '$1 == "raw" { print "old", $2, $3, $4 }' >>"$tmp"
        "$new" "$t" --raw "$@" | awk '$1 == "raw" { print "new", $2, $3, $4 }' >>"$tmp"
        r=$((r + 1))
    done
done
# median, min, max of the CPU rates per (binary, trace, policy)
sort -k2,2 -k3,3 -k1,1 -k4,4g "$tmp" | awk '
    function flush() {
        if (n == 0) return
        med = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
        key = tr " " po
        if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
        stat[key, bin] = sprintf("%7.2f (%.2f-%.2f, n=%d)", med / 1e6, v[1] / 1e6, v[n] / 1e6, n)
        medv[key, bin] = med
        n = 0
    }
    { if ($1 != bin || $2 != tr || $3 != po) { flush(); bin = $1; tr = $2; po = $3 } v[++n] = $4 }
    END {
        flush()
        printf "%-48s %-40s %-30s %-30s %s\n", "trace", "policy", "old M ev/s CPU", "new M ev/s CPU", "new/old"
        for (i = 1; i <= nk; i++) {
            split(order[i], kp, " ")
            printf "%-48s %-40s %-30s %-30s %.2f\n", kp[1], kp[2], stat[order[i], "old"], stat[order[i], "new"], medv[order[i], "new"] / medv[order[i], "old"]
        }
    }'
