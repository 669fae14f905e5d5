#!/bin/sh
# lean_ir.sh BENCH_LEAN TRACE [PASSES] - instructions an event, by callgrind, of gpusim's replay
# under `pytorch` and of the lean exact emulation in bench/lean_pytorch.c, on the same events: the
# Ir of `bench_lean TRACE --only WHICH --repeat 1+PASSES` minus that of `--repeat 1`, over the
# events of PASSES passes (20 by default), as bench/ir_per_event.sh counts the replay's. Prints
# "TRACE gpusim IR lean IR ratio IR_GPUSIM/IR_LEAN". Needs valgrind.
set -eu
bin=$1 trace=$2 passes=${3:-20}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir() { # WHICH REPEAT
    valgrind --tool=callgrind --callgrind-out-file="$tmp/out" "$bin" "$trace" --only "$1" \
        --repeat "$2" >"$tmp/stdout" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
    awk '/^summary:/ { print $2 }' "$tmp/out"
}
n=
per() { # WHICH
    one=$(ir "$1" 1)
    many=$(ir "$1" $((passes + 1)))
    n=$(sed -n 's/.* events=\([0-9]*\) .*/\1/p' "$tmp/stdout")
    [ -n "$n" ] || { cat "$tmp/stdout" >&2; exit 1; }
    awk -v a="$one" -v b="$many" -v n="$n" -v p="$passes" 'BEGIN { printf "%.1f", (b - a) / (n * p) }'
}
g=$(per gpusim)
l=$(per lean)
awk -v t="$trace" -v g="$g" -v l="$l" 'BEGIN { printf "%s gpusim %s lean %s ratio %.2f\n", t, g, l, g / l }'
