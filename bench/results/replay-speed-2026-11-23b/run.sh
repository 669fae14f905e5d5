#!/bin/sh
# The fourth session's measurements on a quiet machine (2026-11-23), from the repository root:
#   OLD = main at ab80f5b (the session's start) built in /tmp/gs-main-me (meson setup build),
#   NEW = this tree's build/, PGO = bench/build_pgo.sh /tmp/gs-pgo.
set -eu
O=bench/results/replay-speed-2026-11-23b
OLD=/tmp/gs-main-me/build/bench/bench_replay NEW=build/bench/bench_replay PGO=/tmp/gs-pgo/bench/bench_replay
T="traces/data/gpt2.gstrace.gz traces/data/resnet50.gstrace.gz /tmp/llm431.gstrace"
uptime >$O/load.txt
bench/compare.sh $OLD $NEW 3 $T -- --runs 3 --policy pytorch --policy cupy >$O/pytorch.txt
uptime >>$O/load.txt
bench/compare.sh $NEW $PGO 3 $T -- --runs 3 --policy pytorch --policy cupy >$O/pgo.txt
uptime >>$O/load.txt
bench/compare.sh $OLD $NEW 2 traces/data/gpt2.gstrace.gz traces/data/resnet50.gstrace.gz -- --runs 3 \
    --policy tlsf --policy cuda-async --policy rmm-arena --policy bfc --policy rmm-pool \
    --policy preallocate --policy stitch >$O/families.txt
uptime >>$O/load.txt
bench/scaling_compare.sh $OLD $NEW 3 --runs 3 >$O/scaling.txt
uptime >>$O/load.txt
