#!/bin/sh
# lab/device_replay_speed.sh OUTDIR - the speed work's replay-speed table on the device machine's
# CPU (the project's `device` tool, from the repository root): a host with cores of its own,
# where the development VM's are shared with other sessions (BENCHMARKS.md, "Replay
# throughput"). Nothing here uses the GPU.
#
# Two bench_replay binaries built on the development VM, compared in one run by
# bench/compare.sh (CPU time, median and spread):
#   OLD  build-dev/bench_replay      the plain build (meson setup build: -O2 -g)
#   NEW  build-dev/bench_replay_pgo  bench/build_pgo.sh's build (the same code, laid out by a
#                                    profile)
# over the bundled traces under every policy family (OUTDIR/bundled.txt, bundled-clients.txt)
# and every reference run under its own setting and cap (OUTDIR/reference.txt, through
# bench/replay_speed.sh's reference part). The device machine has no GLib: carry build-dev/
# (ignored, as build*/ is), made on the development VM as:
#   bench/build_pgo.sh build-pgo
#   mkdir -p build-dev/lib build-dev/shared/traces
#   cp build/bench/bench_replay build/bench/bench_clock_probe build-dev/
#   cp build-pgo/bench/bench_replay build-dev/bench_replay_pgo
#   for l in libglib-2.0.so.0 libpcre2-8.so.0 libz.so.1; do cp -L /lib/x86_64-linux-gnu/$l build-dev/lib/; done
#   cp -r ../shared/traces/pytorch-2.11-h100 build-dev/shared/traces/
set -eu
out=${1:?usage: device_replay_speed.sh OUTDIR}
mkdir -p "$out"
here=$(dirname "$0")
export LD_LIBRARY_PATH="$PWD/build-dev/lib"
old=build-dev/bench_replay new=build-dev/bench_replay_pgo
{ uname -a; grep -m1 'model name' /proc/cpuinfo; nproc; uptime
  if [ -x build-dev/bench_clock_probe ]; then build-dev/bench_clock_probe 9; fi; } >"$out/machine.txt"
families="--policy pytorch --policy pytorch:max_split_size_mb:128
    --policy pytorch:expandable_segments:True --policy pytorch:roundup_power2_divisions:4
    --policy pytorch:garbage_collection_threshold:0.6 --policy cupy --policy tlsf
    --policy cuda-async --policy rmm-arena --policy rmm-pool --policy bfc --policy preallocate
    --policy stitch"
# shellcheck disable=SC2086
"$here/../bench/compare.sh" "$old" "$new" 3 traces/data/gpt2.gstrace.gz traces/data/resnet50.gstrace.gz \
    traces/data/batch-alternate.gstrace.gz -- --runs 3 $families >"$out/bundled.txt"
# shellcheck disable=SC2086
"$here/../bench/compare.sh" "$old" "$new" 3 traces/data/dataframe-then-torch.gstrace.gz \
    traces/data/producer-consumer.gstrace.gz -- --runs 3 --continue-on-oom $families \
    >"$out/bundled-clients.txt"
GPUSIM_SHARED=build-dev/shared REPLAY_SPEED_PARTS=reference \
    "$here/../bench/replay_speed.sh" "$old" "$new" "$out/ref" 3
mv "$out/ref/reference.txt" "$out/reference.txt"
rm -rf "$out/ref"
cat "$out/machine.txt"
