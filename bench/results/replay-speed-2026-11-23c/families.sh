#!/bin/sh
# families.sh OLD_BENCH_REPLAY NEW_BENCH_REPLAY OUT - every policy family of bench/policies.sh on
# the bundled traces, CPU-time rates of OLD and NEW in one run (bench/compare.sh, 3 rounds of
# --runs 3: 9 runs of each binary). The multi-client traces with --continue-on-oom (they meet
# an OOM under most policies). Run from the repository root, nothing else running.
set -eu
old=$1 new=$2 out=$3
pols=""
for p in pytorch pytorch:expandable_segments:True cupy preallocate preallocate:fit:first tlsf bfc \
    bfc:XLA_PYTHON_CLIENT_PREALLOCATE:false rmm-pool rmm-pool:initial_pool_size:0 rmm-arena \
    cuda-async:cudaMemPoolAttrReleaseThreshold:max stitch; do
    pols="$pols --policy $p"
done
{ uname -a; grep -m1 'model name' /proc/cpuinfo; nproc; uptime; } >"$out.machine"
# shellcheck disable=SC2086
bench/compare.sh "$old" "$new" 3 traces/data/gpt2.gstrace.gz traces/data/resnet50.gstrace.gz \
    traces/data/batch-alternate.gstrace.gz -- --runs 3 $pols >"$out"
# shellcheck disable=SC2086
bench/compare.sh "$old" "$new" 3 traces/data/dataframe-then-torch.gstrace.gz \
    traces/data/producer-consumer.gstrace.gz -- --runs 3 --continue-on-oom $pols >>"$out"
uptime >>"$out.machine"
