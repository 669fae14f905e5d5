#!/bin/sh
# scaling_lean.sh BENCH_REPLAY BENCH_LEAN [ROUNDS] - the random-free scaling of gpusim's replay
# beside that of the lean exact emulation (bench/lean_pytorch.c), in the same runs: whether the
# cost per event at 10^6 live blocks over that at 10^3 is the core's or any exact emulation's.
#
# The traces are bench_replay's scaling traces with --random-free (each churn event frees a
# random live block), 2,000,000 churn events after a ramp to N live blocks, written to a
# temporary folder; the ramp alone is the full trace's first events (the generator's ramp makes
# the same events either way). Each round runs bench_lean (gpusim's replay and the emulation
# alternated, 3 runs, medians) on the 10^3 trace, the 10^6 trace and the 10^6 ramp, and prints
# steady ns/event = (ns/event x events of the whole - of the ramp) / churn events, as
# bench_replay --scaling computes it (the 10^3 ramp is 0.1% of its trace and left in), for
# both, and each one's ratio 10^6 over 10^3. About 4 minutes a round on a 2-core VM.
set -eu
replay=$1 lean=$2 rounds=${3:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
steady=2000000
for n in 1000 1000000; do
    "$replay" --scaling-trace $n --random-free --steady $steady -o "$tmp/s$n.gstrace" >/dev/null
done
total=$(grep -vc '^#' "$tmp/s1000000.gstrace")
total=$((total - 1)) # the column names
ramp=$((total - steady))
head -n $(($(grep -c '^#' "$tmp/s1000000.gstrace") + 1 + ramp)) "$tmp/s1000000.gstrace" >"$tmp/r1000000.gstrace"
ns() { # TRACE REPEAT: "GPUSIM_NS LEAN_NS"
    "$lean" "$1" --runs 3 --repeat "$2" | tail -1 |
        sed -n 's/.* gpusim_ns=\([0-9.]*\) lean_ns=\([0-9.]*\) .*/\1 \2/p'
}
printf '%-6s %-10s %-10s %-10s %-10s %-10s %-10s\n' round gpusim_1e3 gpusim_1e6 ratio lean_1e3 lean_1e6 ratio
r=1
while [ $r -le "$rounds" ]; do
    small=$(ns "$tmp/s1000.gstrace" 2)
    whole=$(ns "$tmp/s1000000.gstrace" 1)
    part=$(ns "$tmp/r1000000.gstrace" 1)
    echo "$small $whole $part" | awk -v r=$r -v t=$total -v p=$ramp -v s=$steady '{
        g = ($3 * t - $5 * p) / s; l = ($4 * t - $6 * p) / s
        printf "%-6d %-10.1f %-10.1f %-10.2f %-10.1f %-10.1f %-10.2f\n", r, $1, g, g / $1, $2, l, l / $2 }'
    r=$((r + 1))
done
