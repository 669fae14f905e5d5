#!/bin/sh
# ir_per_event.sh BENCH_REPLAY TRACE POLICY [PASSES [BENCH_REPLAY_ARGS...]]
#
# Instructions per replayed event, by callgrind: a load-independent measure of the replay's hot
# path (the CPU-time rates of bench/compare.sh move with the machine's load). The Ir of
# `bench_replay TRACE --runs 1 --repeat 1+PASSES` minus that of `--repeat 1`, divided by the
# events of PASSES passes (20 by default), so parsing and setup drop out. Prints
# "TRACE POLICY IR_PER_EVENT". Arguments after PASSES go to bench_replay as they are (a reference
# run's --capacity, say). Needs valgrind.
set -eu
bin=$1 trace=$2 policy=$3 passes=${4:-20}
shift $(($# < 4 ? $# : 4))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir() { # REPEAT BENCH_REPLAY_ARGS...
    r=$1
    shift
    valgrind --tool=callgrind --callgrind-out-file="$tmp/out" "$bin" "$trace" --runs 1 \
        --repeat "$r" --policy "$policy" --continue-on-oom "$@" >"$tmp/stdout" 2>"$tmp/err"
    awk '/^summary:/ { print $2 }' "$tmp/out"
}
one=$(ir 1 "$@")
many=$(ir $((passes + 1)) "$@")
n=$(sed -n 's/^trace .*: \([0-9]*\) events;.*/\1/p' "$tmp/stdout")
awk -v a="$one" -v b="$many" -v n="$n" -v p="$passes" -v t="$trace" -v po="$policy" \
    'BEGIN { printf "%s %s %.1f\n", t, po, (b - a) / (n * p) }'
