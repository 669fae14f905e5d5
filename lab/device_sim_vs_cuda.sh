#!/bin/sh
# lab/device_sim_vs_cuda.sh OUTDIR - run on the device machine (the project's `device` tool,
# from the repository root): the CUDA backend's tests, then gpt2 and resnet50 replayed under
# pytorch and pytorch:expandable_segments:True on real memory (--backend cuda) and on the
# simulator, JSON reports into OUTDIR, to compare their segments and driver-call counts.
#
# The device machine has no GLib: carry a folder build-dev/ (ignored, as build*/ is) holding
# build/gpusim, build/tests/test_cuda and lib/ with the shared libraries they need
# (libglib-2.0.so.0, libpcre2-8.so.0, libsubunit.so.0, libz.so.1), made on the development VM:
#   mkdir -p build-dev/lib && cp build/tests/test_cuda build/gpusim build-dev/ &&
#   for l in libglib-2.0.so.0 libsubunit.so.0 libpcre2-8.so.0 libz.so.1; do
#       cp -L /lib/x86_64-linux-gnu/$l build-dev/lib/; done
set -u
out=${1:?usage: device_sim_vs_cuda.sh OUTDIR}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build-dev/lib"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$out/env.txt" 2>&1
build-dev/test_cuda traces/data >"$out/test_cuda.log" 2>&1
echo "test_cuda exit status: $?" >>"$out/test_cuda.log"
for t in gpt2 resnet50; do
    for b in cuda sim; do
        build-dev/gpusim replay -q "traces/data/$t.gstrace.gz" -p pytorch:expandable_segments:True \
            -p pytorch --backend "$b" --format json >"$out/$t-$b.json" 2>&1
        echo "$t $b rc=$?" >>"$out/test_cuda.log"
    done
done
cat "$out/env.txt" "$out/test_cuda.log"
