#!/bin/sh
# build_pgo.sh [DIR] - gpusim built with GCC's profile-guided optimisation, trained on its own
# replays: the fastest build of the replay, for long traces and large sweeps.
#
# Three steps, each plain meson:
#   1. a release build that records where it spends (meson's -Db_pgo=generate);
#   2. that build replays the bundled traces (traces/data) under every policy family, through
#      bench_replay (the replay loop) and through `gpusim replay` (a text and a gzip trace read,
#      a report written), which leaves a profile beside each object file;
#   3. the same build recompiled with the profile (-Db_pgo=use): the compiler lays out the hot
#      path (the core's malloc and free, the index, the readers) from the counts.
# What it computes is unchanged (bench/same_reports.sh against a plain build: 0 differ); only
# the code's layout and inlining move. BENCHMARKS.md ("Replay throughput") has the gain and
# its command. DIR (relative to the repository root) defaults to build-pgo, which .gitignore
# covers; an existing DIR is wiped and rebuilt. Needs GCC (or a
# compiler meson drives the same way) and nothing beyond the plain build's packages.
#
#   bench/build_pgo.sh && build-pgo/bench/bench_replay traces/data/gpt2.gstrace.gz --runs 7
set -eu
dir=${1:-build-pgo}
case $dir in
-*) echo "usage: bench/build_pgo.sh [DIR]" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
policies="pytorch pytorch:expandable_segments:True pytorch:max_split_size_mb:128 cupy stitch
preallocate tlsf bfc rmm-pool rmm-arena cuda-async"

echo "build_pgo: 1/3 instrumented build in $dir" >&2
if [ -d "$dir" ]; then
    meson setup --wipe "$dir" --buildtype=release -Db_pgo=generate -Dtests=disabled >/dev/null
else
    meson setup "$dir" --buildtype=release -Db_pgo=generate -Dtests=disabled >/dev/null
fi
meson compile -C "$dir" >/dev/null

echo "build_pgo: 2/3 training on traces/data under every family" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in traces/data/*.gstrace.gz; do
    args=""
    for p in $policies; do args="$args --policy $p"; done
    # shellcheck disable=SC2086 # the policy list is this script's own words
    "$dir/bench/bench_replay" "$t" --runs 1 --repeat 5 --continue-on-oom $args >/dev/null
    gzip -dc "$t" >"$tmp/t.gstrace"
    for p in pytorch cupy; do
        "$dir/gpusim" replay "$tmp/t.gstrace" --policy "$p" --format json >/dev/null
        "$dir/gpusim" replay "$t" --policy "$p" --format json >/dev/null
    done
done

echo "build_pgo: 3/3 rebuilt with the profile" >&2
# Files the training never ran (the CLI's other commands, the CUDA backend) have no profile:
# GCC says so for each, which is expected here.
meson configure "$dir" -Db_pgo=use -Dc_args=-Wno-missing-profile
meson compile -C "$dir" >/dev/null
echo "build_pgo: done: $dir/gpusim, $dir/bench/bench_replay" >&2
