#!/bin/sh
# scaling_compare.sh OLD NEW [ROUNDS] [BENCH_REPLAY_ARGS...]
#
# The scaling benchmark (bench_replay --scaling: steady CPU ns per event at 10^3 to 10^6 live
# allocations) for two bench_replay binaries in one run: ROUNDS rounds (default 5), each
# running OLD then NEW once (--runs 1), so both see the same machine and load, instead of one
# binary's runs all before the other's. Prints per live count the median of each binary's
# steady ns/event, its min-max, and its ratio to its own median at the smallest live count
# (the target: at most 3x at 10^6 against 10^3), then new/old.
#
#   bench/scaling_compare.sh /tmp/gs-main/build/bench/bench_replay build/bench/bench_replay 5
set -eu
old=$1 new=$2
shift 2
rounds=5
if [ $# -gt 0 ]; then rounds=$1; shift; fi
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
r=0
while [ $r -lt "$rounds" ]; do
    for b in old new; do
        if [ $b = old ]; then bin=$old; else bin=$new; fi
        # the table's rows: live, events, ramp events, then three "median (min-max)" columns,
        # two fields each (whole, ramp, steady): the steady median is the 8th field (the 6th,
        # read here until 2026-11-23, is the ramp's: the short 10^3 ramp made that row noisy)
        "$bin" --scaling --runs 1 "$@" | awk -v b=$b '$1 ~ /^[0-9]+$/ && NF >= 9 { print b, $1, $8 }' >>"$tmp"
    done
    r=$((r + 1))
done
sort -k2,2n -k1,1 -k3,3g "$tmp" | awk '
    function flush() {
        if (n == 0) return
        med = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
        m[bin, live] = med
        txt[bin, live] = sprintf("%.1f (%.1f-%.1f)", med, v[1], v[n])
        if (!(live in seen)) { seen[live] = 1; order[++nl] = live }
        n = 0
    }
    { if ($1 != bin || $2 != live) { flush(); bin = $1; live = $2 } v[++n] = $3 }
    END {
        flush()
        printf "%10s  %-26s %-8s %-26s %-8s %s\n", "live", "old steady ns/event", "vs first", "new steady ns/event", "vs first", "new/old"
        f = order[1]
        for (i = 1; i <= nl; i++) {
            l = order[i]
            printf "%10s  %-26s %-8s %-26s %-8s %.2f\n", l, txt["old", l], sprintf("%.2fx", m["old", l] / m["old", f]), txt["new", l], sprintf("%.2fx", m["new", l] / m["new", f]), m["new", l] / m["old", l]
        }
    }'
