#!/bin/sh
# lab/device_backend.sh OUTDIR - run on a machine with an NVIDIA GPU (the project's `device`
# tool): the CUDA backend's tests, then the example traces replayed on real memory under the
# three PyTorch settings, with and without --touch. Everything it prints goes to OUTDIR.
#
# Needs a built tree (meson setup build && meson compile -C build, with the CUDA Toolkit found).
# On the device machine, which has no GLib or Check, the build made here is carried together
# with its shared libraries (DEVLIB, default ./.devlib; see BENCHMARKS.md for how it was made).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: device_backend.sh OUTDIR}
mkdir -p "$out"
[ -d "${DEVLIB:-$root/.devlib}" ] && export LD_LIBRARY_PATH="${DEVLIB:-$root/.devlib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cd "$root"
{
    head -2 /etc/os-release
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
} >"$out/env.txt" 2>&1
build/tests/test_cuda traces/data >"$out/test_cuda.log" 2>&1
echo "test_cuda exit status: $?" >>"$out/test_cuda.log"
policies="-p pytorch -p pytorch:max_split_size_mb:128 -p pytorch:expandable_segments:True"
for t in resnet50 gpt2; do
    # shellcheck disable=SC2086
    build/gpusim replay -q "traces/data/$t.gstrace.gz" $policies --backend cuda --touch >"$out/$t-cuda-touch.txt" 2>&1
    # shellcheck disable=SC2086
    build/gpusim replay -q "traces/data/$t.gstrace.gz" $policies --backend cuda >"$out/$t-cuda.txt" 2>&1
done
cat "$out"/env.txt "$out"/test_cuda.log
