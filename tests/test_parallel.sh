#!/bin/sh
# test_parallel.sh GPUSIM SRCDIR - docs/cluster.md's GNU parallel recipe for a sweep on several
# processes: four shards run by Debian's `parallel`, merged, equal the single-machine CSV byte for
# byte (but the host-time column). Skips (77) where `parallel` is not installed (.ci/setup
# installs it).
set -u
gpusim=$1
src=$2
. "$src/tests/clitest.sh"
case $gpusim in /*) ;; *) gpusim=$(pwd)/$gpusim ;; esac # the shards run in $tmp
command -v parallel >/dev/null 2>&1 || { echo "GNU parallel is not installed: skipped"; exit 77; }
# Debian's moreutils has a `parallel` of its own, which takes other arguments
parallel --version 2>/dev/null | grep -q "GNU parallel" || { echo "this parallel is not GNU parallel: skipped"; exit 77; }

trace=$src/traces/data/batch-alternate.gstrace.gz
"$gpusim" sweep "$trace" -p 'pytorch:max_split_size_mb:{64,128,256}' --capacity '{5.75,6.25}GiB' \
    -j 1 -q -o "$tmp/whole.csv" || fail "the single-machine sweep: exit"
# the recipe, as docs/cluster.md writes it (the quotes inside the quotes: parallel hands the line
# to a shell); --will-cite: no citation notice
(cd "$tmp" && parallel --will-cite -j 2 "$gpusim" sweep "$trace" \
    -p "'pytorch:max_split_size_mb:{64,128,256}'" --capacity "'{5.75,6.25}GiB'" \
    -j 1 -q --shard {}/4 -o shard-{}.csv ::: 0 1 2 3) || fail "parallel: exit $?"
(cd "$tmp" && "$gpusim" sweep --merge shard-*.csv -p 'pytorch:max_split_size_mb:{64,128,256}' \
    --capacity '{5.75,6.25}GiB' -o merged.csv) || fail "merge: exit $?"
mask_host_time "$tmp/whole.csv" >"$tmp/whole.m"
mask_host_time "$tmp/merged.csv" >"$tmp/merged.m"
cmp -s "$tmp/whole.m" "$tmp/merged.m" ||
    fail "merged CSV differs from the single-machine one: $(diff "$tmp/whole.m" "$tmp/merged.m" | head -5)"
[ "$(wc -l <"$tmp/merged.csv")" -eq 7 ] || fail "merged CSV: want a header and 6 cells"

[ "$fails" -eq 0 ] && echo "GNU parallel recipe: merged CSV identical"
[ "$fails" -eq 0 ]
