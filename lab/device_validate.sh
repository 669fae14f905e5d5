#!/bin/sh
# lab/device_validate.sh OUTDIR - the real-GPU validation's evidence in one run, on a machine with
# an
# NVIDIA GPU and PyTorch (the project's `device` tool):
#   1. the CUDA and pluggable-allocator tests;
#   2. gpusim validate on both example traces under the three PyTorch settings (--touch, 5 timed
#      runs), keeping a latency table made from each trace's real calls, then each trace again
#      with the other trace's table (held-out check of a recalibrated model);
#   3. bench_alloc: an alloc+free pair from gpusim's cache vs cudaMallocAsync's pool vs cudaMalloc;
#   4. ResNet-50, 6 seeded steps: native PyTorch, gpusim's pluggable allocator under `pytorch`
#      and under `pytorch:expandable_segments:True`, three rounds in turn (so drift in the machine
#      hits all three alike); the first gpusim round also records a trace with GPUSIM_TRACE, which
#      is then replayed by gpusim.
# Everything goes to OUTDIR, and OUTDIR/results.tar.gz holds it all.
#
# Needs a built tree (meson setup build && meson compile -C build, with the CUDA Toolkit found).
# On the device machine, which has no GLib or Check, the build made here is carried together with
# its shared libraries (DEVLIB, default ./.devlib; see BENCHMARKS.md).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: device_validate.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -d "${DEVLIB:-$root/.devlib}" ] && export LD_LIBRARY_PATH="${DEVLIB:-$root/.devlib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cd "$root"
{
    head -2 /etc/os-release
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} >"$out/env.txt" 2>&1

echo "== tests" >&2
{ build/tests/test_cuda traces/data; echo "test_cuda exit status: $?"; } >"$out/tests.log" 2>&1
{ build/tests/test_pluggable build/libgpusim_torch.so; echo "test_pluggable exit status: $?"; } >>"$out/tests.log" 2>&1

echo "== validate" >&2
policies="-p pytorch -p pytorch:max_split_size_mb:128 -p pytorch:expandable_segments:True"
for t in resnet50 gpt2; do
    # shellcheck disable=SC2086
    build/gpusim validate "traces/data/$t.gstrace.gz" $policies --touch --runs 5 \
        --save-calibration "$out/calibration-$t.csv" >"$out/validate-$t.txt" 2>&1
    echo "exit status: $?" >>"$out/validate-$t.txt"
done
for t in resnet50:gpt2 gpt2:resnet50; do
    trace=${t%%:*} cal=${t##*:}
    # shellcheck disable=SC2086
    build/gpusim validate "traces/data/$trace.gstrace.gz" $policies --touch --runs 5 \
        --calibration "$out/calibration-$cal.csv" >"$out/validate-$trace-with-$cal-calibration.txt" 2>&1
    echo "exit status: $?" >>"$out/validate-$trace-with-$cal-calibration.txt"
done

echo "== bench_alloc" >&2
build/bench/bench_alloc build/libgpusim_torch.so >"$out/bench_alloc.csv" 2>&1

echo "== training" >&2
train=lab/train_resnet50.py
for round in 1 2 3; do
    python3 $train --allocator native -o "$out/train-native-$round.json" >>"$out/train.log" 2>&1
    if [ "$round" = 1 ]; then
        GPUSIM_TRACE="$out/train-resnet50.gstrace.gz" GPUSIM_POLICY=pytorch \
            GPUSIM_STATS="$out/train-gpusim-pytorch-stats-$round.json" \
            python3 $train --allocator gpusim -o "$out/train-gpusim-pytorch-$round.json" >>"$out/train.log" 2>&1
    else
        GPUSIM_POLICY=pytorch GPUSIM_STATS="$out/train-gpusim-pytorch-stats-$round.json" \
            python3 $train --allocator gpusim -o "$out/train-gpusim-pytorch-$round.json" >>"$out/train.log" 2>&1
    fi
    GPUSIM_POLICY=pytorch:expandable_segments:True \
        GPUSIM_STATS="$out/train-gpusim-expandable-stats-$round.json" \
        python3 $train --allocator gpusim -o "$out/train-gpusim-expandable-$round.json" >>"$out/train.log" 2>&1
done
build/gpusim replay "$out/train-resnet50.gstrace.gz" -p pytorch -p pytorch:expandable_segments:True \
    --format json -o "$out/train-trace-replay.json" >>"$out/train.log" 2>&1
echo "trace replay exit status: $?" >>"$out/train.log"

(cd "$out" && tar czf results.tar.gz --exclude=results.tar.gz .)
cat "$out/env.txt" "$out/tests.log" | tail -20
