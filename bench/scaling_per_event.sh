#!/bin/sh
# scaling_per_event.sh BENCH_REPLAY N [STEADY [BENCH_REPLAY_ARGS...]]
#
# The scaling benchmark's steady cost by figures the machine's load does not move: instructions,
# D1 and LL data-cache misses per churn event at N live allocations, by callgrind's cache
# simulation, counted inside gs_replay_run only (not the trace's generation or its bound). Runs
# `BENCH_REPLAY --scaling --live N --runs 1 --steady S` for S = STEADY (default 1000000) and
# S = 4; both generate and replay the same ramp (bench_replay.c, scaling_trace), so the
# difference, divided by the difference of their events, is the churn's cost per event. Caches simulated: D1 32 KiB
# 8-way, LL 8 MiB 16-way (set CACHES to change: cachegrind's --D1=... --LL=... options).
# Arguments after STEADY go to bench_replay as they are (a policy: --policy rmm-arena).
# Prints one line: "live N Ir/event ... D1miss/event ... LLmiss/event ...".
#
#   bench/scaling_per_event.sh build/bench/bench_replay 1000000
#   bench/scaling_per_event.sh build/bench/bench_replay 100000 1000000 --policy rmm-arena
set -eu
bin=$1 n=$2 steady=${3:-1000000}
shift $(($# < 3 ? $# : 3))
caches=${CACHES:---D1=32768,8,64 --LL=8388608,16,64}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for s in 4 "$steady"; do
    # shellcheck disable=SC2086 # caches is a list of options
    valgrind --tool=callgrind --cache-sim=yes $caches --toggle-collect=gs_replay_run \
        --callgrind-out-file="$tmp/$s" \
        "$bin" --scaling --live "$n" --runs 1 --steady "$s" "$@" >"$tmp/$s.out" 2>"$tmp/$s.log"
done
# the events of each trace (the table's second column), so the divisor is exact
events() { awk -v n="$n" '$1 == n { print $2 }' "$1"; }
ev=$(($(events "$tmp/$steady.out") - $(events "$tmp/4.out")))
# the totals line: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw (callgrind's order, "events:")
sum() { awk '$1 == "totals:" { print $2, $6, $9, $7, $10 }' "$1"; }
paste -d' ' "$(sum "$tmp/4" >"$tmp/a"; echo "$tmp/a")" "$(sum "$tmp/$steady" >"$tmp/b"; echo "$tmp/b")" |
    awk -v n="$n" -v ev="$ev" '{
        printf "live %s Ir/event %.1f D1miss/event %.3f LLmiss/event %.3f\n", n,
            ($6 - $1) / ev, ($7 + $9 - $2 - $4) / ev, ($8 + $10 - $3 - $5) / ev }'
